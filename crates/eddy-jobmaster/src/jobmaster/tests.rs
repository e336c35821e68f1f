//! The JobMaster's decisions for one attempt, driven step by step without threads: a
//! manual clock, in-memory checkpoint storage, and mailboxes read back here. Each test
//! plays the tasks' part by hand (acknowledgements, declines, exits) and checks what the
//! coordinator told the tasks, what it stored, and how the attempt ended.

use super::coordinator::AttemptCoordinator;
use super::{AttemptEnd, JobResult};
use crossbeam_channel::{Receiver, Sender};
use eddy_checkpoint::metadata::{CheckpointMetadata, StateHandle, TaskStateEntry};
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{
    CheckpointStorage, CompletedCheckpoint, MemoryCheckpointStorage, SavepointTargets, TaskStateWriter,
};
use eddy_checkpoint::{CheckpointConfig, CheckpointError, CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::error::{FailureKind, JobError, TaskError};
use eddy_runtime::graph::{
    plan_chains, ChainPlan, JobConfig, JobServices, OperatorFactory, OutputPort, Partitioning, SavepointRequest,
    StreamEdge, StreamGraph, StreamNode, TypedPort,
};
use eddy_runtime::task::{mailbox, Control, DeclineCause, MailboxReceiver, Mailboxes, TaskReport};
use eddy_types::{ManualClock, MaxParallelism, NodeId};
use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// In-memory checkpoint storage that also records which checkpoints were discarded: the
/// memory storage keeps nothing of a checkpoint before its metadata, so what the
/// coordinator deletes is seen here.
struct RecordingStorage {
    inner: MemoryCheckpointStorage,
    discarded: Mutex<Vec<u64>>,
}

impl Default for RecordingStorage {
    fn default() -> Self {
        RecordingStorage { inner: MemoryCheckpointStorage::new(1 << 20), discarded: Mutex::default() }
    }
}

impl RecordingStorage {
    fn discarded(&self) -> Vec<u64> {
        let mut ids = self.discarded.lock().unwrap().clone();
        ids.sort();
        ids.dedup();
        ids
    }
}

impl CheckpointStorage for RecordingStorage {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn write_task_state(
        &self,
        id: CheckpointId,
        kind: SnapshotKind,
        file_stem: &str,
        framed: Vec<u8>,
    ) -> Result<StateHandle, CheckpointError> {
        self.inner.write_task_state(id, kind, file_stem, framed)
    }
    fn commit(&self, metadata: &CheckpointMetadata) -> Result<String, CheckpointError> {
        self.inner.commit(metadata)
    }
    fn discard(&self, id: CheckpointId, kind: SnapshotKind) -> Result<(), CheckpointError> {
        self.discarded.lock().unwrap().push(id.0);
        self.inner.discard(id, kind)
    }
    fn completed(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner.completed()
    }
    fn load(&self, location: &str) -> Result<CompletedCheckpoint, CheckpointError> {
        self.inner.load(location)
    }
    fn verify(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        self.inner.verify(location)
    }
    fn load_task_state(
        &self,
        location: &str,
        entry: &TaskStateEntry,
    ) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
        self.inner.load_task_state(location, entry)
    }
    fn upload_file(&self, relative: &str, source: &Path) -> Result<(u64, u32), CheckpointError> {
        self.inner.upload_file(relative, source)
    }
    fn download_file(&self, relative: &str, target: &Path, bytes: u64, crc32: u32) -> Result<(), CheckpointError> {
        self.inner.download_file(relative, target, bytes, crc32)
    }
    fn delete_file(&self, relative: &str) -> Result<(), CheckpointError> {
        self.inner.delete_file(relative)
    }
}

const INTERVAL_MS: u64 = 100;
const TIMEOUT_MS: u64 = 1_000;

/// The job: `src` (a source, parallelism 2) → `sink` (parallelism 1), so tasks 0 and 1
/// are the source's subtasks and task 2 the sink; its checkpoint storage in memory.
struct Job {
    graph: Arc<StreamGraph>,
    plan: Arc<ChainPlan>,
    recording: Arc<RecordingStorage>,
    storage: Arc<dyn CheckpointStorage>,
    retained: RefCell<RetainedCheckpoints>,
    savepoints: Option<Arc<dyn CheckpointStorage>>,
}

impl Job {
    fn new(checkpoint: CheckpointConfig, savepoint: Option<SavepointRequest>) -> Self {
        let port = Arc::new(TypedPort::<u64>::new());
        let source = StreamNode {
            id: NodeId(0),
            name: "src".into(),
            uid: Some("src".into()),
            parallelism: 2,
            follows_default: true,
            keyed: false,
            factory: OperatorFactory::Source(Arc::new(|_, _| panic!("no task is built in these tests"))),
            outputs: vec![OutputPort { tag: None, port_type: port.clone() }],
            chainable: true,
            coordinator: None,
            exclusive_resources: Vec::new(),
        };
        let sink = StreamNode {
            id: NodeId(1),
            name: "sink".into(),
            uid: Some("sink".into()),
            parallelism: 1,
            follows_default: false,
            keyed: false,
            factory: OperatorFactory::OneInput {
                operator: Arc::new(|_, _| panic!("no task is built in these tests")),
                input: port,
            },
            outputs: Vec::new(),
            chainable: true,
            coordinator: None,
            exclusive_resources: Vec::new(),
        };
        let savepoints: Option<Arc<dyn CheckpointStorage>> =
            savepoint.as_ref().map(|_| Arc::new(MemoryCheckpointStorage::new(1 << 20)) as _);
        let retained = RefCell::new(RetainedCheckpoints::new(checkpoint.retained));
        let graph = StreamGraph {
            job_name: "decisions".into(),
            max_parallelism: MaxParallelism::new(128).unwrap(),
            config: JobConfig { checkpoint, savepoint, ..JobConfig::default() },
            services: JobServices::default(),
            nodes: vec![source, sink],
            edges: vec![StreamEdge {
                from: NodeId(0),
                from_port: 0,
                to: NodeId(1),
                to_input: 0,
                partitioning: Partitioning::Rebalance,
            }],
        };
        let plan = plan_chains(&graph);
        let recording = Arc::new(RecordingStorage::default());
        Job {
            graph: Arc::new(graph),
            plan: Arc::new(plan),
            storage: recording.clone(),
            recording,
            retained,
            savepoints,
        }
    }

    /// An attempt's coordinator, its first checkpoint numbered `next_id`, and the tasks'
    /// side of it.
    fn attempt(&self, next_id: u64) -> (AttemptCoordinator<'_>, Tasks) {
        let tasks = self.plan.tasks(&self.graph);
        let (senders, inboxes): (Vec<_>, Vec<_>) = tasks.iter().map(|_| mailbox()).unzip();
        let clock = ManualClock::new(0);
        let mut coordinator = AttemptCoordinator::new(
            (&self.graph, &self.plan),
            (&self.storage, &self.retained, self.savepoints.clone()),
            (Mailboxes::new(senders), tasks.clone(), Arc::new(AtomicBool::new(false))),
            Arc::new(clock.clone()),
            next_id,
            true,
        );
        // Where savepoints go, shared with the tasks' writers, as in a local attempt.
        let targets = SavepointTargets::default();
        coordinator.savepoint_targets = targets.clone();
        let (reports, reports_rx) = crossbeam_channel::unbounded();
        let result = JobResult::new(self.graph.job_name.clone());
        let (storage, savepoints) = (self.storage.clone(), self.savepoints.clone());
        (
            coordinator,
            Tasks {
                graph: self.graph.clone(),
                storage,
                savepoints,
                targets,
                tasks,
                inboxes,
                reports,
                reports_rx,
                clock,
                result,
            },
        )
    }

    /// The checkpoints stored, by id.
    fn stored(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .storage
            .completed()
            .unwrap()
            .iter()
            .map(|location| self.storage.load(location).unwrap().metadata.checkpoint_id.0)
            .collect();
        ids.sort();
        ids
    }
}

/// The tasks' side of an attempt: their mailboxes, their reports, the clock, and what the
/// job reports.
struct Tasks {
    graph: Arc<StreamGraph>,
    storage: Arc<dyn CheckpointStorage>,
    savepoints: Option<Arc<dyn CheckpointStorage>>,
    targets: SavepointTargets,
    tasks: Vec<(NodeId, u32)>,
    inboxes: Vec<MailboxReceiver>,
    reports: Sender<TaskReport>,
    reports_rx: Receiver<TaskReport>,
    clock: ManualClock,
    result: JobResult,
}

impl Tasks {
    /// Moves time on by `ms` and lets the coordinator take one turn.
    fn turn(&mut self, coordinator: &mut AttemptCoordinator<'_>, ms: u64) {
        self.clock.advance_ms(ms);
        coordinator.poll(&self.reports_rx, &mut self.result);
    }

    /// Everything posted to task `task` since the last look.
    fn posted(&self, task: usize) -> Vec<Control> {
        self.inboxes[task].try_iter().collect()
    }

    /// What every task was told since the last look, the same for each.
    fn posted_to_all(&self) -> Vec<Control> {
        let first = self.posted(0);
        for task in 1..self.inboxes.len() {
            assert_eq!(self.posted(task), first, "task {task} heard something else than task 0");
        }
        first
    }

    /// Task `task` acknowledges checkpoint `id`: its (empty) state written to the job's
    /// storage as a task writes it.
    /// The configured savepoint (due after 50 ms) triggered and acknowledged by every task,
    /// not yet completed: what `turn` makes of it comes next.
    fn acknowledge_configured_savepoint(&mut self, coordinator: &mut AttemptCoordinator<'_>) {
        self.turn(coordinator, 50);
        for task in 0..3 {
            self.acknowledge(task, 1, SnapshotKind::Savepoint);
        }
    }

    fn acknowledge(&self, task: usize, id: u64, kind: SnapshotKind) {
        let (head, subtask) = self.tasks[task];
        let node = self.graph.node(head);
        let clock = Arc::new(self.clock.clone());
        let writer = TaskStateWriter::new(
            self.storage.clone(),
            self.savepoints.clone(),
            clock,
            node.name.clone(),
            subtask,
            &node.effective_uid(),
        )
        .with_savepoint_targets(self.targets.clone());
        let ack = writer.write(CheckpointId(id), kind, Vec::new()).unwrap();
        self.reports.send(TaskReport::Acknowledge { task, checkpoint: CheckpointId(id), ack }).unwrap();
    }

    fn decline(&self, task: usize, id: u64, cause: DeclineCause) {
        let reason = format!("{cause:?} in a test");
        let report =
            TaskReport::Declined { task, checkpoint: CheckpointId(id), kind: SnapshotKind::Checkpoint, reason, cause };
        self.reports.send(report).unwrap();
    }
}

fn checkpointing() -> CheckpointConfig {
    CheckpointConfig { interval_ms: INTERVAL_MS, timeout_ms: TIMEOUT_MS, ..CheckpointConfig::default() }
}

fn trigger(id: u64, kind: SnapshotKind) -> Control {
    Control::TriggerCheckpoint(CheckpointBarrier { id: CheckpointId(id), kind })
}

fn completed(id: u64) -> Control {
    Control::Checkpoint(CheckpointEvent::Completed(CheckpointId(id)))
}

fn aborted(id: u64) -> Control {
    Control::Checkpoint(CheckpointEvent::Aborted(CheckpointId(id)))
}

#[test]
fn a_checkpoint_is_triggered_at_the_sources_after_one_interval_and_completes_when_every_task_acknowledged() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, INTERVAL_MS - 1);
    assert_eq!(tasks.posted_to_all(), vec![], "nothing before one interval");
    tasks.turn(&mut coordinator, 1);
    assert_eq!(tasks.posted(0), vec![trigger(1, SnapshotKind::Checkpoint)]);
    assert_eq!(tasks.posted(1), vec![trigger(1, SnapshotKind::Checkpoint)]);
    assert_eq!(tasks.posted(2), vec![], "barriers reach the sink; the coordinator does not");

    tasks.acknowledge(0, 1, SnapshotKind::Checkpoint);
    tasks.acknowledge(2, 1, SnapshotKind::Checkpoint);
    tasks.turn(&mut coordinator, 1);
    assert_eq!(tasks.result.checkpoints_completed, 0, "two of three tasks acknowledged");
    assert_eq!(job.stored(), Vec::<u64>::new());
    tasks.acknowledge(1, 1, SnapshotKind::Checkpoint);
    tasks.turn(&mut coordinator, 1);

    assert_eq!(tasks.result.checkpoints_completed, 1);
    assert_eq!(job.stored(), vec![1]);
    let location = &job.storage.completed().unwrap()[0];
    let metadata = job.storage.load(location).unwrap().metadata;
    let entries: Vec<(&str, u32)> = metadata.tasks.iter().map(|t| (t.task.as_str(), t.subtask)).collect();
    assert_eq!(entries, [("src", 0), ("src", 1), ("sink", 0)], "one entry per task, in task order");
    assert_eq!(tasks.posted_to_all(), vec![completed(1)], "sinks commit once it is stored");
    assert_eq!(tasks.result.last_checkpoint.as_ref().map(|c| c.id), Some(CheckpointId(1)));
}

#[test]
fn a_task_not_ready_aborts_the_checkpoint_without_counting_it_as_a_failure() {
    // No failure is tolerated: a counted one would fail the attempt.
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, INTERVAL_MS);
    let _ = (tasks.posted(0), tasks.posted(1));
    tasks.acknowledge(0, 1, SnapshotKind::Checkpoint);
    tasks.decline(1, 1, DeclineCause::NotReady);
    tasks.turn(&mut coordinator, 1);
    assert_eq!(tasks.posted_to_all(), vec![aborted(1)]);
    // The next one is triggered one interval after the last trigger, and completes.
    tasks.turn(&mut coordinator, INTERVAL_MS);
    assert_eq!(tasks.posted(0), vec![trigger(2, SnapshotKind::Checkpoint)]);
    for task in 0..3 {
        tasks.acknowledge(task, 2, SnapshotKind::Checkpoint);
    }
    tasks.turn(&mut coordinator, 1);
    assert_eq!(job.stored(), vec![2]);
    assert!(matches!(coordinator.end(&tasks.reports_rx, &mut tasks.result), AttemptEnd::Finished));
}

#[test]
fn a_part_that_cannot_fit_the_storage_fails_the_job_at_once_and_a_failed_write_counts_against_the_tolerance() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, INTERVAL_MS);
    tasks.decline(2, 1, DeclineCause::CannotFit);
    tasks.turn(&mut coordinator, 1);
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(error @ JobError::Checkpoint { .. }) => {
            assert!(!error.is_restartable(), "a restart would go back to the same state: {error}");
            assert!(error.to_string().contains("CannotFit in a test"), "{error}");
        }
        _ => panic!("a checkpoint that cannot fit must fail the job"),
    }

    let job = Job::new(CheckpointConfig { tolerable_failures: 1, ..checkpointing() }, None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    for id in 1..=2 {
        tasks.turn(&mut coordinator, INTERVAL_MS);
        tasks.decline(0, id, DeclineCause::WriteFailed);
        tasks.turn(&mut coordinator, 1);
    }
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(error @ JobError::CheckpointFailover { .. }) => {
            assert!(error.is_restartable(), "storage may come back after a restart: {error}");
            assert!(error.to_string().contains("2 failures in a row (tolerable: 1)"), "{error}");
        }
        _ => panic!("two failed checkpoints in a row, one tolerated, must fail the attempt over"),
    }
}

#[test]
fn a_checkpoint_not_acknowledged_within_its_timeout_expires_and_a_late_acknowledgement_changes_nothing() {
    let job = Job::new(CheckpointConfig { tolerable_failures: 5, ..checkpointing() }, None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, INTERVAL_MS);
    let _ = (tasks.posted(0), tasks.posted(1));
    tasks.acknowledge(0, 1, SnapshotKind::Checkpoint);
    tasks.turn(&mut coordinator, TIMEOUT_MS - 1);
    assert_eq!(tasks.posted(2), vec![], "still pending one ms before its timeout");
    tasks.turn(&mut coordinator, 1);
    assert_eq!(tasks.posted(2), vec![aborted(1)], "expired at its timeout");
    assert_eq!(job.recording.discarded(), vec![1], "what was written for it goes");
    job.recording.discarded.lock().unwrap().clear();
    tasks.acknowledge(1, 1, SnapshotKind::Checkpoint);
    tasks.acknowledge(2, 1, SnapshotKind::Checkpoint);
    tasks.turn(&mut coordinator, 0);
    assert_eq!(job.stored(), Vec::<u64>::new(), "a late acknowledgement completes nothing");
    assert_eq!(job.recording.discarded(), vec![1], "and what it wrote goes too");
    assert_eq!(tasks.result.checkpoints_completed, 0);
    assert!(matches!(coordinator.end(&tasks.reports_rx, &mut tasks.result), AttemptEnd::Finished));
    assert!(tasks.result.trace.iter().any(|line| line == "checkpoint 1 expired"), "{:?}", tasks.result.trace);
}

#[test]
fn a_newer_checkpoint_completing_subsumes_an_older_pending_one() {
    let config = CheckpointConfig { max_concurrent: 2, tolerable_failures: 5, ..checkpointing() };
    let job = Job::new(config, None);
    let (mut coordinator, mut tasks) = job.attempt(7);
    tasks.turn(&mut coordinator, INTERVAL_MS);
    tasks.turn(&mut coordinator, INTERVAL_MS);
    assert_eq!(tasks.posted(0), vec![trigger(7, SnapshotKind::Checkpoint), trigger(8, SnapshotKind::Checkpoint)]);
    for task in 0..3 {
        tasks.acknowledge(task, 8, SnapshotKind::Checkpoint);
    }
    tasks.acknowledge(0, 7, SnapshotKind::Checkpoint);
    tasks.turn(&mut coordinator, 0);
    assert_eq!(job.stored(), vec![8]);
    assert_eq!(job.recording.discarded(), vec![7], "the subsumed checkpoint's parts go");
    assert_eq!(tasks.posted(2), vec![aborted(7), completed(8)], "7 is subsumed before 8 is announced");
    // Retention keeps one: a later checkpoint replaces 8.
    let _ = (tasks.posted(0), tasks.posted(1));
    tasks.turn(&mut coordinator, INTERVAL_MS);
    for task in 0..3 {
        tasks.acknowledge(task, 9, SnapshotKind::Checkpoint);
    }
    tasks.turn(&mut coordinator, 0);
    assert_eq!(job.stored(), vec![9], "one checkpoint retained");
    assert_eq!(job.recording.discarded(), vec![7, 8], "8 is deleted once 9 replaced it");
    assert!(matches!(coordinator.end(&tasks.reports_rx, &mut tasks.result), AttemptEnd::Finished));
    assert!(tasks.result.trace.iter().any(|line| line == "checkpoint 7 subsumed"), "{:?}", tasks.result.trace);
}

#[test]
fn a_configured_stop_with_savepoint_stores_it_apart_tells_every_task_and_stops_the_job() {
    let request = SavepointRequest { dir: "/unused".into(), after_ms: 50, stop: true };
    let job = Job::new(checkpointing(), Some(request));
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, 50);
    assert_eq!(tasks.posted(0), vec![trigger(1, SnapshotKind::Savepoint)], "due after 50 ms, before any checkpoint");
    for task in 0..3 {
        tasks.acknowledge(task, 1, SnapshotKind::Savepoint);
    }
    tasks.turn(&mut coordinator, 0);
    assert_eq!(job.stored(), Vec::<u64>::new(), "a savepoint is not one of the job's checkpoints");
    assert!(tasks.result.savepoint.is_some(), "the job's result says where its savepoint went");
    assert_eq!(tasks.posted(2), vec![completed(1), Control::Cancel], "every task hears of it, then stops");
    assert!(matches!(coordinator.end(&tasks.reports_rx, &mut tasks.result), AttemptEnd::Stopped));
}

#[test]
fn a_task_failing_after_the_stops_savepoint_was_stored_leaves_the_job_stopped_and_says_so() {
    let request = SavepointRequest { dir: "/unused".into(), after_ms: 50, stop: true };
    let job = Job::new(checkpointing(), Some(request));
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.acknowledge_configured_savepoint(&mut coordinator);
    tasks.turn(&mut coordinator, 0);
    assert_eq!(tasks.posted(2), vec![completed(1), Control::Cancel]);
    // The sink fails committing; the sources stop as told, one seeing its consumer's
    // connection close first (a peer's stop, no failure of its own).
    coordinator.task_exited(2, Err(TaskError::Operator { operator: "sink".into(), message: "disk full".into() }));
    coordinator.task_exited(0, Err(TaskError::Lost("the connection to task executor 1 was closed".into())));
    coordinator.task_exited(1, Err(TaskError::Cancelled));
    // A failover would restore the last checkpoint, behind what the sources' side
    // committed: the job ends stopped, and says what may not be committed.
    assert!(matches!(coordinator.end(&tasks.reports_rx, &mut tasks.result), AttemptEnd::Stopped));
    assert_eq!(tasks.result.warnings.len(), 1, "{:?}", tasks.result.warnings);
    let warning = tasks.result.warnings.iter().find(|w| w.contains("disk full"));
    assert!(
        warning.is_some_and(|w| w.starts_with("operator 'sink' (subtask 1/1) failed while the job stopped")),
        "{:?}",
        tasks.result.warnings
    );
}

#[test]
fn a_savepoint_that_does_not_stop_the_job_commits_nothing_and_the_next_checkpoint_commits_it() {
    let request = SavepointRequest { dir: "/unused".into(), after_ms: 50, stop: false };
    let job = Job::new(checkpointing(), Some(request));
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, 50);
    assert_eq!(tasks.posted(0), vec![trigger(1, SnapshotKind::Savepoint)]);
    let _ = tasks.posted(1);
    for task in 0..3 {
        tasks.acknowledge(task, 1, SnapshotKind::Savepoint);
    }
    tasks.turn(&mut coordinator, 0);
    assert!(tasks.result.savepoint.is_some(), "the savepoint is written");
    // A failover restores checkpoints, not savepoints: had the sinks committed the
    // savepoint's transactions, a failure now would have them written twice.
    assert_eq!(tasks.posted_to_all(), vec![], "no task hears of a savepoint that does not stop the job");
    tasks.turn(&mut coordinator, INTERVAL_MS);
    assert_eq!(tasks.posted(0), vec![trigger(2, SnapshotKind::Checkpoint)]);
    let _ = tasks.posted(1);
    for task in 0..3 {
        tasks.acknowledge(task, 2, SnapshotKind::Checkpoint);
    }
    tasks.turn(&mut coordinator, 0);
    assert_eq!(tasks.posted_to_all(), vec![completed(2)], "the next checkpoint commits everything up to it");
}

#[test]
fn a_stop_whose_savepoint_completes_after_a_task_failed_commits_nothing_and_fails_over() {
    let request = SavepointRequest { dir: "/unused".into(), after_ms: 50, stop: true };
    let job = Job::new(checkpointing(), Some(request));
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.acknowledge_configured_savepoint(&mut coordinator);
    // A task fails after acknowledging, before the savepoint is stored.
    coordinator.task_exited(2, Err(TaskError::Operator { operator: "sink".into(), message: "boom".into() }));
    tasks.turn(&mut coordinator, 0);
    // The failover restores the latest checkpoint: sinks that committed the savepoint's
    // transactions would write them again.
    for task in 0..3 {
        let posted = tasks.posted(task);
        assert!(!posted.contains(&completed(1)), "no task commits the savepoint: {posted:?}");
    }
    coordinator.task_exited(0, Err(TaskError::Cancelled));
    coordinator.task_exited(1, Err(TaskError::Cancelled));
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(JobError::TaskFailed { operator, .. }) => assert_eq!(operator, "sink"),
        AttemptEnd::Failed(other) => panic!("the sink's failure, to restart from: {other}"),
        _ => panic!("the attempt fails over rather than stopping"),
    }
    assert_eq!(tasks.result.savepoint, None, "no stop happened: the next attempt takes its own");
    let said = tasks.result.warnings.iter().find(|w| w.starts_with("savepoint 1 was written to"));
    assert!(said.is_some_and(|w| w.contains("boom")), "the result says where and why: {:?}", tasks.result.warnings);
}

#[test]
fn a_failed_stops_answer_names_the_savepoint_and_the_cause() {
    let failure = JobError::TaskFailed {
        job: "j".into(),
        operator: "sink".into(),
        subtask: 0,
        parallelism: 1,
        kind: FailureKind::UserCode,
        message: "boom".into(),
    };
    let answer = super::coordinator::failed_stop(CheckpointId(4), "/sp/savepoint-4", &failure);
    assert!(answer.starts_with("savepoint 4 was written to /sp/savepoint-4, but the job did not stop"), "{answer}");
    assert!(answer.contains("boom") && answer.contains("a job started from it commits it"), "{answer}");
}

#[test]
fn the_end_of_an_attempt_reports_the_first_real_failure_and_cleans_up_what_is_pending() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.turn(&mut coordinator, INTERVAL_MS);
    tasks.acknowledge(0, 1, SnapshotKind::Checkpoint);
    tasks.turn(&mut coordinator, 1);
    coordinator.task_exited(2, Err(TaskError::Operator { operator: "sink".into(), message: "boom".into() }));
    // The others are cancelled because of it: that is no cause of its own.
    coordinator.task_exited(0, Err(TaskError::Cancelled));
    coordinator.task_exited(1, Err(TaskError::Cancelled));
    assert!(tasks.posted(0).contains(&Control::Cancel), "the failure cancels every task");
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(JobError::TaskFailed { operator, subtask, parallelism, kind, message, .. }) => {
            assert_eq!((operator.as_str(), subtask, parallelism), ("sink", 0, 1));
            assert_eq!((kind, message.as_str()), (FailureKind::UserCode, "boom"));
        }
        _ => panic!("the sink's failure must end the attempt"),
    }
    assert_eq!(job.stored(), Vec::<u64>::new(), "the pending checkpoint left nothing");
    assert_eq!(job.recording.discarded(), vec![1], "what was written for the pending checkpoint goes");
    assert!(
        tasks.result.trace.iter().any(|line| line == "task 2 (sink 0) failed: UserCode"),
        "{:?}",
        tasks.result.trace
    );
}

#[test]
fn when_every_task_finished_the_final_checkpoint_is_asked_of_all_and_the_job_finishes_after_it() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    for task in 0..3 {
        tasks.reports.send(TaskReport::Finished { task, records_in: 0, records_out: 0 }).unwrap();
    }
    tasks.turn(&mut coordinator, 1);
    let final_trigger = tasks.posted_to_all();
    assert_eq!(final_trigger.len(), 1, "{final_trigger:?}");
    let Control::TriggerCheckpoint(CheckpointBarrier { id, kind: SnapshotKind::Checkpoint }) = final_trigger[0] else {
        panic!("the final checkpoint, asked of every task: {final_trigger:?}");
    };
    tasks.turn(&mut coordinator, INTERVAL_MS * 5);
    assert_eq!(tasks.posted_to_all(), vec![], "no periodic checkpoint once every source finished");
    for task in 0..3 {
        tasks.acknowledge(task, id.0, SnapshotKind::Checkpoint);
    }
    tasks.turn(&mut coordinator, 0);
    assert_eq!(tasks.posted_to_all(), vec![Control::JobFinished], "sinks commit only once it is stored");
    assert_eq!(job.stored(), vec![id.0]);
    for task in 0..3 {
        coordinator.task_exited(task, Ok(()));
    }
    assert!(matches!(coordinator.end(&tasks.reports_rx, &mut tasks.result), AttemptEnd::Finished));
}

#[test]
fn a_root_cause_reported_after_a_cancellation_replaces_it() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    // A task saw the cancellation of another's failure before that failure arrived.
    coordinator.task_exited(0, Err(TaskError::Cancelled));
    coordinator.task_exited(1, Err(TaskError::Lost("the connection to task executor 1 failed".into())));
    coordinator.task_exited(2, Err(TaskError::Cancelled));
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(error @ JobError::TaskFailed { kind: FailureKind::Cluster, .. }) => {
            assert!(error.is_restartable(), "{error}");
            assert!(error.to_string().contains("(subtask 2/2)"), "{error}");
        }
        AttemptEnd::Failed(other) => panic!("the root cause, not the cancellation: {other}"),
        _ => panic!("the attempt failed"),
    }
}

#[test]
fn a_failure_reported_after_a_users_cancel_is_a_consequence_and_the_attempt_ends_cancelled() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    let no_status = |_: &AttemptCoordinator<'_>| String::new();
    let answer = coordinator.command(7, eddy_rpc::messages::JobCommand::Cancel, &no_status);
    assert!(matches!(answer, super::coordinator::CommandOutcome::Answer(Ok(_))));
    assert!(tasks.posted(0).contains(&Control::Cancel), "the cancel reaches every task");
    // A consumer sees its producer's connection close before its own cancel arrives.
    coordinator.task_exited(1, Err(TaskError::Lost("the connection to task executor 0 was closed".into())));
    coordinator.task_exited(0, Err(TaskError::Cancelled));
    coordinator.task_exited(2, Err(TaskError::Cancelled));
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(JobError::Cancelled { .. }) => {}
        AttemptEnd::Failed(other) => panic!("the user's cancel, not a restartable failure: {other}"),
        _ => panic!("the attempt was cancelled"),
    }
}

#[test]
fn a_users_cancel_after_a_task_failed_ends_the_attempt_cancelled_rather_than_restarting() {
    let job = Job::new(checkpointing(), None);
    let (mut coordinator, mut tasks) = job.attempt(1);
    coordinator.task_exited(2, Err(TaskError::Operator { operator: "sink".into(), message: "boom".into() }));
    let no_status = |_: &AttemptCoordinator<'_>| String::new();
    coordinator.command(7, eddy_rpc::messages::JobCommand::Cancel, &no_status);
    coordinator.task_exited(0, Err(TaskError::Cancelled));
    coordinator.task_exited(1, Err(TaskError::Cancelled));
    assert!(matches!(
        coordinator.end(&tasks.reports_rx, &mut tasks.result),
        AttemptEnd::Failed(JobError::Cancelled { .. })
    ));
}

#[test]
fn a_users_cancel_after_a_failure_and_a_completed_stop_with_savepoint_does_not_restart_the_job() {
    let request = SavepointRequest { dir: "/unused".into(), after_ms: 50, stop: true };
    let job = Job::new(checkpointing(), Some(request));
    let (mut coordinator, mut tasks) = job.attempt(1);
    tasks.acknowledge_configured_savepoint(&mut coordinator);
    // A task fails after acknowledging, before the savepoint is stored.
    coordinator.task_exited(2, Err(TaskError::Operator { operator: "sink".into(), message: "boom".into() }));
    tasks.turn(&mut coordinator, 0);
    let no_status = |_: &AttemptCoordinator<'_>| String::new();
    coordinator.command(7, eddy_rpc::messages::JobCommand::Cancel, &no_status);
    coordinator.task_exited(0, Err(TaskError::Cancelled));
    coordinator.task_exited(1, Err(TaskError::Cancelled));
    // Not a clean stop: the failed task never heard of the savepoint.
    match coordinator.end(&tasks.reports_rx, &mut tasks.result) {
        AttemptEnd::Failed(JobError::Cancelled { .. }) => {
            assert!(
                tasks.result.warnings.iter().any(|w| w.starts_with("savepoint 1 was written to")),
                "the result says where the savepoint is: {:?}",
                tasks.result.warnings
            )
        }
        AttemptEnd::Failed(other) => panic!("the user's cancel, not a restart: {other}"),
        _ => panic!("the attempt was cancelled"),
    }
}
