//! The embedded local executor: runs a job graph in this process, one thread per subtask,
//! and plays the JobManager's part for it: the checkpoint coordinator, checkpoint
//! storage, restarts from the latest completed checkpoint, savepoints.
//!
//! It wires one bounded channel per input gate and subtask, hands every subtask its
//! receivers and its writers' senders, builds each chain on its own thread (operators
//! never cross threads), and then loops: task reports (acknowledgements, finished tasks),
//! task exits, and a tick that triggers checkpoints. The first failure cancels the
//! attempt; the restart strategy decides whether another attempt follows.

use crate::channel::{CheckpointBarrier, CheckpointEvent};
use crate::error::{JobError, TaskError};
use crate::graph::{
    plan_chains, validate, ChainPlan, ErasedOutput, ErasedSend, OperatorFactory, Partitioning, PortType, RestoreFrom,
    RestoreMode, StorageChoice, StreamGraph, StreamNode,
};
use crate::task::{
    catch_task_panic, install_panic_capture, mailbox, Control, MailboxReceiver, MailboxSender, Mailboxes, OperatorInfo,
    SourceDriver, StepResult, TaskDriver, TaskReport, TaskShared,
};
use crossbeam_channel::{select, Receiver};
use eddy_checkpoint::coordinator::{CheckpointCoordinator, Completed};
use eddy_checkpoint::metadata::{encode_task_state, CheckpointMetadata, OperatorEntry, StateHandle, TaskStateEntry};
use eddy_checkpoint::rescale::rescale;
use eddy_checkpoint::restart::RestartBackoff;
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{
    directory_name, file_safe, load_checkpoint_dir, upload_native_files, CheckpointStorage, CompletedCheckpoint,
    MemoryCheckpointStorage, ObjectCheckpointStorage,
};
use eddy_checkpoint::{CheckpointError, CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_types::{key_group_range_for_subtask, Clock, NodeId, SystemClock};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the coordinator looks at the time (checkpoint triggers, timeouts).
const COORDINATOR_TICK_MS: u64 = 5;

/// Size and duration of a completed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStats {
    pub id: CheckpointId,
    /// Full size: every file the checkpoint needs, shared ones included.
    pub bytes: u64,
    /// Bytes written for this checkpoint (less than `bytes` when it is incremental).
    pub incremental_bytes: u64,
    /// The longest synchronous part of an operator (on its task thread, while its input
    /// waits).
    pub sync_ms: u64,
    /// The asynchronous part: writing (and uploading) the state, off the task threads.
    pub async_ms: u64,
    /// From trigger to stored metadata.
    pub duration_ms: u64,
    /// The longest time an operator's task waited for its state backend's snapshots
    /// since the previous checkpoint, outside synchronous parts (RocksDB writes held
    /// while a checkpoint is being made off the task thread).
    pub wait_ms: u64,
    pub location: String,
}

/// What a finished job reports.
#[derive(Debug, Clone)]
pub struct JobResult {
    pub job_name: String,
    /// From the first subtask's start to the last subtask's end, over all attempts.
    pub duration: Duration,
    pub checkpoints_completed: u64,
    /// The last periodic checkpoint (the final one of a finished job if there was none).
    pub last_checkpoint: Option<CheckpointStats>,
    /// Every completed periodic checkpoint, oldest first (Flink's checkpoint history);
    /// the final checkpoint of a finished job is not one.
    pub checkpoint_history: Vec<CheckpointStats>,
    pub restarts: u32,
    /// Where the savepoint of a stop-with-savepoint went.
    pub savepoint: Option<String>,
    /// Things that went wrong without failing the job (a corrupt checkpoint skipped…).
    pub warnings: Vec<String>,
}

/// Runs jobs in this process.
pub struct LocalExecutor {
    clock: Arc<dyn Clock>,
}

impl Default for LocalExecutor {
    fn default() -> Self {
        Self::new()
    }
}

/// The senders and channel ids a subtask's writer for one edge gets.
type WriterTargets = (Vec<ErasedSend>, Vec<u32>);

/// Everything one subtask needs from the executor, moved to its thread.
struct TaskSetup {
    head: NodeId,
    subtask: u32,
    /// Per input gate: the receiver and how many producer channels feed it.
    inputs: Vec<(ErasedSend, usize)>,
    writers: HashMap<usize, WriterTargets>,
    mailbox: MailboxReceiver,
}

/// The channels into one input gate of a node, one per subtask.
struct Gate {
    port_type: Arc<dyn PortType>,
    senders: Vec<ErasedSend>,
    receivers: Vec<Option<ErasedSend>>,
    /// Per consumer subtask: producer channels so far (also the next channel id).
    channels: Vec<usize>,
}

/// How one attempt ended.
enum AttemptEnd {
    Finished,
    /// Stopped after a stop-with-savepoint.
    Stopped,
    Failed(JobError),
}

/// What a subtask thread hands back: its task index and how it ended.
type TaskExit = (usize, Result<(), TaskError>);

impl LocalExecutor {
    /// An executor whose subtasks read the machine's clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock::new()))
    }

    /// An executor whose subtasks read time from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self { clock }
    }

    /// Runs the job to completion (all sources exhausted), restarting from the latest
    /// completed checkpoint on failures as the restart strategy allows.
    pub fn execute(&self, graph: StreamGraph) -> Result<JobResult, JobError> {
        let job = graph.job_name.clone();
        let fail = |message: String| JobError::Checkpoint { job: job.clone(), message };
        validate(&graph).map_err(|message| JobError::InvalidJob { job: job.clone(), message })?;
        install_panic_capture();
        let config = graph.config.clone();
        let storage: Arc<dyn CheckpointStorage> = match &config.storage {
            StorageChoice::Memory => Arc::new(MemoryCheckpointStorage::new(config.checkpoint.memory_state_bytes_max)),
            StorageChoice::Directory(dir) => {
                Arc::new(ObjectCheckpointStorage::open(&dir.to_string_lossy()).map_err(|e| fail(e.to_string()))?)
            }
        };
        let mut result = JobResult {
            job_name: job.clone(),
            duration: Duration::ZERO,
            checkpoints_completed: 0,
            last_checkpoint: None,
            checkpoint_history: Vec::new(),
            restarts: 0,
            savepoint: None,
            warnings: Vec::new(),
        };
        let mut restore = match &config.restore {
            None => None,
            Some(RestoreFrom::Path(path)) => {
                Some(load_checkpoint_dir(path).map_err(|e| fail(format!("cannot restore: {e}")))?)
            }
            Some(RestoreFrom::LatestIn(dir)) => {
                let dir_storage =
                    ObjectCheckpointStorage::open(&dir.to_string_lossy()).map_err(|e| fail(e.to_string()))?;
                let latest = load_latest(&dir_storage, &mut result.warnings)
                    .map_err(|e| fail(format!("cannot restore: {e}")))?;
                Some(latest.ok_or_else(|| {
                    fail(format!("cannot restore: {}", CheckpointError::NoCheckpoint(dir.display().to_string())))
                })?)
            }
        };
        if let Some(checkpoint) = &restore {
            check_restore(&graph, checkpoint, config.allow_non_restored_state).map_err(fail)?;
        }
        let plan = plan_chains(&graph);
        // The checkpoints this run writes and keeps, over all attempts; the one it started
        // from is not among them and is never deleted (Flink's NO_CLAIM restore mode).
        let retained = RefCell::new(RetainedCheckpoints::new(config.checkpoint.retained));
        if let (Some(checkpoint), RestoreMode::Claim) = (restore.as_mut(), config.restore_mode) {
            claim(checkpoint, storage.as_ref(), &mut retained.borrow_mut()).map_err(&fail)?;
        }
        let graph = Arc::new(graph);
        let plan = Arc::new(plan);
        let mut backoff = RestartBackoff::new(config.restart_strategy());
        let started = Instant::now();
        loop {
            let restored = match &restore {
                Some(checkpoint) => Some((
                    checkpoint.metadata.checkpoint_id,
                    Arc::new(restore_plan(&graph, checkpoint).map_err(&fail)?),
                )),
                None => None,
            };
            // Numbers continue after the restored checkpoint and after every checkpoint already
            // in the storage (another run's too), so no directory is ever written twice.
            // A listing that fails stops the job: guessing could reuse an id and overwrite a
            // checkpoint.
            let stored = storage
                .completed()
                .map_err(|e| fail(format!("cannot list the checkpoints already stored, to number new ones: {e}")))?;
            let newest_stored = stored.iter().filter_map(|l| checkpoint_number(l)).max();
            let restored_id = restored.as_ref().map(|(id, _)| id.0);
            let next_id = newest_stored.max(restored_id).unwrap_or(0) + 1;
            let checkpoints = (&storage, &retained);
            let end = self.attempt(&graph, &plan, restored, next_id, checkpoints, &mut result);
            result.duration = started.elapsed();
            match end {
                AttemptEnd::Finished | AttemptEnd::Stopped => {
                    if config.savepoint.is_some() && result.savepoint.is_none() {
                        result
                            .warnings
                            .push("the job finished before its savepoint was due; no savepoint was taken".into());
                    }
                    if !config.checkpoint.retain_on_cancel {
                        let mut retained = retained.borrow_mut();
                        for id in retained.ids() {
                            discard_checkpoint(storage.as_ref(), &mut retained, id);
                        }
                    }
                    return Ok(result);
                }
                AttemptEnd::Failed(error) => {
                    let delay_ms = match error {
                        JobError::TaskFailed { .. } => backoff.on_failure(started.elapsed().as_millis() as u64),
                        _ => None,
                    };
                    let Some(delay_ms) = delay_ms else { return Err(error) };
                    result.restarts = backoff.restarts();
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    // The newest checkpoint this run owns: never another run's, even a newer
                    // one in the same directory.
                    let own = |location: &str| {
                        checkpoint_number(location).is_some_and(|n| retained.borrow().owns(CheckpointId(n)))
                    };
                    restore = load_latest_of(storage.as_ref(), &mut result.warnings, &own)
                        .map_err(|e| fail(format!("cannot restore after a failure: {e}")))?;
                    if let Some(checkpoint) = restore.as_mut() {
                        // The job's own checkpoint: its next checkpoints may reference the
                        // files instead of uploading them again.
                        mark_native_owned(checkpoint);
                    }
                    if restore.is_none() {
                        restore = match &config.restore {
                            // Nothing completed since: start again from what the job started from.
                            Some(RestoreFrom::Path(path)) => {
                                Some(load_checkpoint_dir(path).map_err(|e| fail(e.to_string()))?)
                            }
                            Some(RestoreFrom::LatestIn(dir)) => {
                                let dir_storage = ObjectCheckpointStorage::open(&dir.to_string_lossy())
                                    .map_err(|e| fail(e.to_string()))?;
                                load_latest(&dir_storage, &mut result.warnings).map_err(|e| fail(e.to_string()))?
                            }
                            None => None,
                        };
                    }
                    let from = restore.as_ref().map_or_else(|| "the beginning".to_string(), |c| c.location.clone());
                    result.warnings.push(format!("restart {} after: {error}; restoring from {from}", result.restarts));
                }
            }
        }
    }

    /// One run of the job from `restore`, until it finished, stopped or failed.
    fn attempt(
        &self,
        graph: &Arc<StreamGraph>,
        plan: &Arc<ChainPlan>,
        restore: Option<(CheckpointId, Arc<RestorePlan>)>,
        next_checkpoint_id: u64,
        (storage, retained): (&Arc<dyn CheckpointStorage>, &RefCell<RetainedCheckpoints>),
        result: &mut JobResult,
    ) -> AttemptEnd {
        let job = graph.job_name.clone();
        let config = &graph.config;
        let setups = wire(graph, plan);
        let cancel = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<TaskExit>();
        let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
        let mut mailboxes: Vec<MailboxSender> = Vec::new();
        let mut tasks: Vec<(NodeId, u32)> = Vec::new();
        let mut handles = Vec::new();
        for (index, (setup, mailbox_tx)) in setups.into_iter().enumerate() {
            let head = graph.node(setup.head);
            let name = format!("{} ({}/{})", plan.chain_name(graph, setup.head), setup.subtask + 1, head.parallelism);
            tasks.push((setup.head, setup.subtask));
            mailboxes.push(mailbox_tx);
            let context = TaskContext {
                index,
                cancel: cancel.clone(),
                clock: self.clock.clone(),
                reports: reports_tx.clone(),
                restore: restore.as_ref().map(|(_, plan)| plan.clone()),
            };
            let (graph, plan, done_tx) = (graph.clone(), plan.clone(), done_tx.clone());
            let spawned = std::thread::Builder::new().name(name).spawn(move || {
                let outcome = run_task(&graph, &plan, setup, context);
                let _ = done_tx.send((index, outcome));
            });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    cancel.store(true, Ordering::SeqCst);
                    return AttemptEnd::Failed(JobError::Internal {
                        job,
                        message: format!("cannot start a subtask thread: {e}"),
                    });
                }
            }
        }
        drop(done_tx);
        drop(reports_tx);

        let mut run = AttemptRun {
            graph,
            plan,
            storage,
            retained,
            mailboxes: Mailboxes::new(mailboxes),
            tasks,
            cancel: cancel.clone(),
            started: Instant::now(),
            coordinator: CheckpointCoordinator::new(config.checkpoint.clone(), handles.len(), next_checkpoint_id),
            triggered_at: HashMap::new(),
            failure: None,
            stopping: false,
            savepoint_triggered: false,
            job_finished_sent: false,
            savepoint_storage: None,
            sources_running: 0,
        };
        run.sources_running = run.tasks.iter().filter(|(head, _)| run.is_source(*head)).count();
        run.loop_until_exit(&done_rx, &reports_rx, handles.len(), result);
        for handle in handles {
            let _ = handle.join();
        }
        match run.failure.take() {
            Some(error) => AttemptEnd::Failed(error),
            None if run.stopping => AttemptEnd::Stopped,
            None => AttemptEnd::Finished,
        }
    }
}

/// The newest completed checkpoint that loads; corrupt ones are skipped with a warning.
fn load_latest(
    storage: &dyn CheckpointStorage,
    warnings: &mut Vec<String>,
) -> Result<Option<CompletedCheckpoint>, CheckpointError> {
    load_latest_of(storage, warnings, &|_| true)
}

/// [`load_latest`] among the checkpoints whose location `accept` accepts.
fn load_latest_of(
    storage: &dyn CheckpointStorage,
    warnings: &mut Vec<String>,
    accept: &dyn Fn(&str) -> bool,
) -> Result<Option<CompletedCheckpoint>, CheckpointError> {
    let mut first_error = None;
    for location in storage.completed()?.into_iter().filter(|l| accept(l)) {
        match storage.load(&location) {
            Ok(checkpoint) => return Ok(Some(checkpoint)),
            Err(e) => {
                warnings.push(format!("skipping checkpoint {location}: {e}"));
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// Checks that a checkpoint fits the job: same max parallelism, every state has an
/// operator (unless allowed), same parallelism per operator.
fn check_restore(
    graph: &StreamGraph,
    checkpoint: &CompletedCheckpoint,
    allow_non_restored: bool,
) -> Result<(), String> {
    let where_ = &checkpoint.location;
    if checkpoint.metadata.max_parallelism != graph.max_parallelism.get() {
        return Err(format!(
            "cannot restore {where_}: it was written with max parallelism {}, the job has {}; max parallelism cannot change",
            checkpoint.metadata.max_parallelism,
            graph.max_parallelism.get()
        ));
    }
    for uid in checkpoint.uids() {
        match graph.nodes.iter().find(|n| n.effective_uid() == uid) {
            None if allow_non_restored => {}
            None => {
                return Err(format!(
                    "cannot restore {where_}: it has state for operator uid '{uid}', which this job does not have; set allow-non-restored-state to drop it"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The state every operator instance of the job restores: taken as it is at the same
/// parallelism, redistributed by key groups and operator-state kind at another.
type RestorePlan = HashMap<(String, u32), OperatorSnapshot>;

fn restore_plan(graph: &StreamGraph, checkpoint: &CompletedCheckpoint) -> Result<RestorePlan, String> {
    let mut plan = HashMap::new();
    for node in &graph.nodes {
        let uid = node.effective_uid();
        let old: Vec<OperatorSnapshot> = checkpoint.operators.iter().filter(|o| o.uid == uid).cloned().collect();
        for subtask in 0..node.parallelism {
            let state = rescale(&old, node.parallelism, subtask, graph.max_parallelism)
                .map_err(|e| format!("cannot restore operator '{}' from {}: {e}", node.name, checkpoint.location))?;
            if let Some(state) = state {
                plan.insert((uid.clone(), subtask), state);
            }
        }
    }
    Ok(plan)
}

/// The coordinator side of one attempt.
struct AttemptRun<'a> {
    graph: &'a StreamGraph,
    plan: &'a ChainPlan,
    storage: &'a Arc<dyn CheckpointStorage>,
    retained: &'a RefCell<RetainedCheckpoints>,
    mailboxes: Mailboxes,
    tasks: Vec<(NodeId, u32)>,
    cancel: Arc<AtomicBool>,
    started: Instant,
    coordinator: CheckpointCoordinator<Vec<OperatorSnapshot>>,
    triggered_at: HashMap<u64, (Instant, u64)>,
    failure: Option<JobError>,
    stopping: bool,
    savepoint_triggered: bool,
    job_finished_sent: bool,
    savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
    /// Source tasks still running: checkpoints are triggered at sources only.
    sources_running: usize,
}

impl AttemptRun<'_> {
    fn is_source(&self, head: NodeId) -> bool {
        matches!(self.graph.node(head).factory, OperatorFactory::Source(_))
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn broadcast(&mut self, control: Control) {
        self.mailboxes.broadcast(&control);
    }

    fn cancel_all(&mut self) {
        if !self.cancel.swap(true, Ordering::SeqCst) {
            self.mailboxes.cancel_all();
        }
    }

    fn fail(&mut self, error: JobError) {
        if self.failure.is_none() && !self.stopping {
            self.failure = Some(error);
        }
        self.cancel_all();
    }

    fn loop_until_exit(
        &mut self,
        done: &Receiver<TaskExit>,
        reports: &Receiver<TaskReport>,
        task_count: usize,
        result: &mut JobResult,
    ) {
        let mut exited = 0;
        while exited < task_count {
            self.mailboxes.flush();
            select! {
                recv(done) -> exit => {
                    let Ok((index, outcome)) = exit else { break };
                    exited += 1;
                    if let Err(error) = outcome {
                        self.task_failed(index, error);
                    }
                }
                recv(reports) -> report => {
                    if let Ok(report) = report {
                        self.report(report, result);
                    }
                }
                default(Duration::from_millis(COORDINATOR_TICK_MS)) => self.tick(),
            }
        }
        // Reports that raced with the exits (a last acknowledgement) change nothing now.
    }

    fn task_failed(&mut self, index: usize, error: TaskError) {
        let job = self.graph.job_name.clone();
        if error == TaskError::Cancelled {
            if !self.cancel.load(Ordering::SeqCst) {
                self.fail(JobError::Cancelled { job });
            }
            return;
        }
        let (head, subtask) = self.tasks[index];
        let parallelism = self.graph.node(head).parallelism;
        let (operator, message) = match error {
            TaskError::Operator { operator, message } => (operator, message),
            other => (self.plan.chain_name(self.graph, head), other.to_string()),
        };
        // A root cause replaces a cancellation recorded first.
        if matches!(self.failure, Some(JobError::Cancelled { .. })) {
            self.failure = None;
        }
        self.fail(JobError::TaskFailed { job, operator, subtask, parallelism, message });
    }

    fn tick(&mut self) {
        if self.cancel.load(Ordering::SeqCst) {
            return;
        }
        let now = self.now_ms();
        if let Some(request) = &self.graph.config.savepoint {
            if !self.savepoint_triggered && now >= request.after_ms && !self.coordinator.all_finished() {
                self.savepoint_triggered = true;
                self.trigger(SnapshotKind::Savepoint, now);
                return;
            }
        }
        // Once every source finished no barrier can start; the final checkpoint follows.
        if self.sources_running > 0 && self.coordinator.should_trigger(now) {
            self.trigger(SnapshotKind::Checkpoint, now);
        }
        match self.coordinator.expire(now) {
            Ok(expired) => {
                for id in expired {
                    self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(id)));
                }
            }
            Err(e) => self.fail(JobError::Checkpoint {
                job: self.graph.job_name.clone(),
                message: format!(
                    "{} checkpoints in a row timed out or failed (tolerable: {})",
                    e.consecutive, e.tolerable
                ),
            }),
        }
    }

    fn trigger(&mut self, kind: SnapshotKind, now: u64) {
        let id = self.coordinator.trigger(kind, now);
        self.triggered_at.insert(id.0, (Instant::now(), wall_ms()));
        let barrier = CheckpointBarrier { id, kind };
        for index in 0..self.tasks.len() {
            if self.is_source(self.tasks[index].0) {
                self.mailboxes.post(index, Control::TriggerCheckpoint(barrier));
            }
        }
    }

    fn report(&mut self, report: TaskReport, result: &mut JobResult) {
        let now = self.now_ms();
        let completed = match report {
            TaskReport::Acknowledge { task, checkpoint, snapshots } => {
                self.coordinator.acknowledge(checkpoint, task, snapshots, now).into_iter().collect()
            }
            TaskReport::Finished { task, mut snapshots } => {
                // Taken at the end of input, not at a barrier: the task stood still for
                // no checkpoint, and this state stands in for it in every later one.
                snapshots.iter_mut().for_each(|s| (s.sync_micros, s.wait_micros) = (0, 0));
                if self.is_source(self.tasks[task].0) {
                    self.sources_running = self.sources_running.saturating_sub(1);
                }
                self.coordinator.task_finished(task, snapshots, now)
            }
        };
        for checkpoint in completed {
            for old in &checkpoint.subsumed {
                self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(*old)));
            }
            self.complete(checkpoint, result);
        }
        if self.coordinator.all_finished() && !self.job_finished_sent && !self.cancel.load(Ordering::SeqCst) {
            self.job_finished_sent = true;
            if self.graph.config.checkpointing_enabled() {
                if let Some(last) = self.coordinator.final_checkpoint(now) {
                    self.triggered_at.insert(last.id.0, (Instant::now(), wall_ms()));
                    self.store(last, result, false);
                }
            }
            self.broadcast(Control::JobFinished);
        }
    }

    /// A checkpoint every task acknowledged: store it, tell the tasks, drop old ones.
    fn complete(&mut self, checkpoint: Completed<Vec<OperatorSnapshot>>, result: &mut JobResult) {
        if checkpoint.kind == SnapshotKind::Savepoint {
            let Some(request) = self.graph.config.savepoint.clone() else { return };
            let storage = match &self.savepoint_storage {
                Some(s) => s.clone(),
                None => match ObjectCheckpointStorage::open(&request.dir.to_string_lossy()) {
                    Ok(s) => {
                        let s: Arc<dyn CheckpointStorage> = Arc::new(s);
                        self.savepoint_storage = Some(s.clone());
                        s
                    }
                    Err(e) => {
                        return self.fail(JobError::Checkpoint {
                            job: self.graph.job_name.clone(),
                            message: format!("savepoint: {e}"),
                        })
                    }
                },
            };
            let mut checkpoint = checkpoint;
            match self.write(&mut checkpoint, storage.as_ref(), None) {
                Ok(stats) => {
                    result.savepoint = Some(stats.location);
                    self.broadcast(Control::Checkpoint(CheckpointEvent::Completed(checkpoint.id)));
                    if request.stop {
                        self.stopping = true;
                        self.cancel_all();
                    }
                }
                Err(e) => self.fail(JobError::Checkpoint {
                    job: self.graph.job_name.clone(),
                    message: format!("savepoint failed: {e}"),
                }),
            }
            return;
        }
        if !self.graph.config.checkpointing_enabled() {
            return;
        }
        let id = checkpoint.id;
        if self.store(checkpoint, result, true) {
            self.broadcast(Control::Checkpoint(CheckpointEvent::Completed(id)));
        }
    }

    /// Writes a checkpoint to the checkpoint storage and applies retention. `periodic`:
    /// not the final checkpoint of a finished job (whose stats say little).
    fn store(
        &mut self,
        mut checkpoint: Completed<Vec<OperatorSnapshot>>,
        result: &mut JobResult,
        periodic: bool,
    ) -> bool {
        let storage = self.storage.clone();
        // (The borrow ends before the arms, which borrow again.)
        let written = self.write(&mut checkpoint, storage.as_ref(), Some(&mut *self.retained.borrow_mut()));
        match written {
            Ok(stats) => {
                result.checkpoints_completed += 1;
                if periodic || result.last_checkpoint.is_none() {
                    result.last_checkpoint = Some(stats.clone());
                }
                // The final checkpoint of a finished job is written the moment it is
                // triggered: its duration says nothing, so it stays out of the averages.
                if periodic {
                    result.checkpoint_history.push(stats);
                }
                let beyond = self.retained.borrow_mut().add(checkpoint.id);
                for old in beyond {
                    discard_checkpoint(storage.as_ref(), &mut self.retained.borrow_mut(), old);
                }
                true
            }
            Err(e) => {
                discard_checkpoint(storage.as_ref(), &mut self.retained.borrow_mut(), checkpoint.id);
                result.warnings.push(format!("checkpoint {} failed: {e}", checkpoint.id));
                if let Err(too_many) = self.coordinator.record_failure() {
                    self.fail(JobError::Checkpoint {
                        job: self.graph.job_name.clone(),
                        message: format!(
                            "checkpoint {} could not be stored: {e}; {} failures in a row (tolerable: {})",
                            checkpoint.id, too_many.consecutive, too_many.tolerable
                        ),
                    });
                }
                false
            }
        }
    }

    /// The asynchronous part: upload the files of native snapshots (only those no kept
    /// checkpoint holds), serialize and write every task's state, then the metadata.
    /// `retained`: the job's checkpoints, whose shared files may be referenced (savepoints
    /// are canonical and have none).
    fn write(
        &self,
        checkpoint: &mut Completed<Vec<OperatorSnapshot>>,
        storage: &dyn CheckpointStorage,
        mut retained: Option<&mut RetainedCheckpoints>,
    ) -> Result<CheckpointStats, CheckpointError> {
        let (triggered, timestamp_ms) = self.triggered_at.get(&checkpoint.id.0).copied().unwrap_or((Instant::now(), 0));
        let writing = Instant::now();
        let sync_micros = checkpoint.task_states.iter().flatten().map(|s| s.sync_micros).max().unwrap_or(0);
        let wait_micros = checkpoint.task_states.iter().flatten().map(|s| s.wait_micros).max().unwrap_or(0);
        let mut tasks = Vec::with_capacity(checkpoint.task_states.len());
        let (mut bytes, mut incremental_bytes) = (0u64, 0u64);
        for (index, snapshots) in checkpoint.task_states.iter_mut().enumerate() {
            let (head, subtask) = self.tasks[index];
            for keyed in snapshots.iter_mut().filter_map(|s| s.keyed.as_mut()) {
                keyed.complete_deferred().map_err(|e| CheckpointError::Encode(e.to_string()))?;
            }
            if let Some(retained) = retained.as_deref_mut() {
                incremental_bytes += upload_native_files(storage, retained, checkpoint.id, checkpoint.kind, snapshots)?;
            }
            bytes += native_bytes(snapshots);
            let framed = encode_task_state(snapshots)?;
            let stem = format!("{}-{}", file_safe(&self.graph.node(head).effective_uid()), subtask);
            let handle = storage.write_task_state(checkpoint.id, checkpoint.kind, &stem, framed)?;
            let task_bytes = match &handle {
                StateHandle::File { bytes, .. } => *bytes,
                StateHandle::Inline { payload } => payload.len() as u64,
            };
            bytes += task_bytes;
            incremental_bytes += task_bytes;
            tasks.push(TaskStateEntry {
                task: self.plan.chain_name(self.graph, head),
                subtask,
                operators: snapshots
                    .iter()
                    .map(|s| OperatorEntry { uid: s.uid.clone(), name: s.name.clone(), parallelism: s.parallelism })
                    .collect(),
                handle,
            });
        }
        let metadata = CheckpointMetadata {
            checkpoint_id: checkpoint.id,
            kind: checkpoint.kind,
            job_name: self.graph.job_name.clone(),
            max_parallelism: self.graph.max_parallelism.get(),
            timestamp_ms,
            tasks,
        };
        let location = storage.commit(&metadata)?;
        Ok(CheckpointStats {
            id: checkpoint.id,
            bytes,
            incremental_bytes,
            sync_ms: sync_micros / 1000,
            wait_ms: wait_micros / 1000,
            async_ms: writing.elapsed().as_millis() as u64,
            duration_ms: triggered.elapsed().as_millis() as u64,
            location,
        })
    }
}

/// Bytes of the native snapshot files the operators reference.
fn native_bytes(snapshots: &[OperatorSnapshot]) -> u64 {
    let natives = snapshots.iter().filter_map(|s| s.keyed.as_ref()).flat_map(|k| &k.native);
    natives.map(|n| n.total_bytes()).sum()
}

/// The number of a completed checkpoint from its location (`…/chk-7`, `memory:7`).
fn checkpoint_number(location: &str) -> Option<u64> {
    location.rsplit(['-', ':']).next()?.parse().ok()
}

/// Takes over a restored checkpoint (CLAIM mode): it becomes one of the job's retained
/// checkpoints, its shared files referenced, and its files usable by later checkpoints.
fn claim(
    checkpoint: &mut CompletedCheckpoint,
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
) -> Result<(), String> {
    let id = checkpoint.metadata.checkpoint_id;
    let own = format!("{}/{}", storage.describe(), directory_name(id, SnapshotKind::Checkpoint));
    let canonical = |path: &str| std::path::Path::new(path).canonicalize().ok();
    let same_place = own == checkpoint.location
        || matches!((canonical(&own), canonical(&checkpoint.location)), (Some(a), Some(b)) if a == b);
    if checkpoint.metadata.kind != SnapshotKind::Checkpoint || !same_place {
        return Err(format!(
            "cannot claim {}: restore mode CLAIM takes over a checkpoint in the job's own checkpoint directory ({}); restore other checkpoints and savepoints in NO_CLAIM mode",
            checkpoint.location,
            storage.describe()
        ));
    }
    let natives = checkpoint.operators.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
    for file in natives.flat_map(|n| &n.files).filter(|f| f.shared_name.is_some()) {
        retained.reference(id, &file.location, file.bytes, file.crc32);
    }
    retained.add(id);
    mark_native_owned(checkpoint);
    Ok(())
}

/// Lets the restored backends reference the checkpoint's native files in later
/// checkpoints (the job owns them).
fn mark_native_owned(checkpoint: &mut CompletedCheckpoint) {
    let keyed = checkpoint.operators.iter_mut().filter_map(|o| o.keyed.as_mut());
    keyed.flat_map(|k| &mut k.native).for_each(|n| n.owned = true);
}

/// Deletes one of the job's checkpoints and the shared files only it referenced.
fn discard_checkpoint(storage: &dyn CheckpointStorage, retained: &mut RetainedCheckpoints, id: CheckpointId) {
    // The checkpoint (its metadata first) before its shared files: a crash in between
    // leaves unreferenced files, never a complete-looking checkpoint missing some.
    let _ = storage.discard(id, SnapshotKind::Checkpoint);
    for unused in retained.release(id) {
        let _ = storage.delete_file(&unused);
    }
}

/// Wall-clock milliseconds since the Unix epoch, for checkpoint metadata.
fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Creates every channel and says which subtask gets which end.
fn wire(graph: &StreamGraph, plan: &ChainPlan) -> Vec<(TaskSetup, MailboxSender)> {
    let mut gates: HashMap<(NodeId, usize), Gate> = HashMap::new();
    let mut writers: HashMap<(usize, u32), WriterTargets> = HashMap::new();
    for (index, edge) in graph.edges.iter().enumerate() {
        if plan.chained_edges[index] {
            continue;
        }
        let from = graph.node(edge.from);
        let to = graph.node(edge.to);
        let gate = gates.entry((edge.to, edge.to_input)).or_insert_with(|| {
            let port_type = from.outputs[edge.from_port].port_type.clone();
            let (senders, receivers) = (0..to.parallelism).map(|_| port_type.channel()).unzip::<_, _, Vec<_>, Vec<_>>();
            Gate {
                port_type,
                senders,
                receivers: receivers.into_iter().map(Some).collect(),
                channels: vec![0; to.parallelism as usize],
            }
        });
        for producer in 0..from.parallelism {
            let targets: Vec<usize> = match edge.partitioning {
                Partitioning::Forward => vec![producer as usize],
                _ => (0..to.parallelism as usize).collect(),
            };
            let mut senders = Vec::with_capacity(targets.len());
            let mut channel_ids = Vec::with_capacity(targets.len());
            for &target in &targets {
                // Channel ids count per consumer subtask, so an aligner indexes them directly.
                channel_ids.push(gate.channels[target] as u32);
                gate.channels[target] += 1;
                senders.push(gate.port_type.clone_sender(&gate.senders[target]));
            }
            writers.insert((index, producer), (senders, channel_ids));
        }
    }

    let mut setups = Vec::new();
    for &head in &plan.heads {
        let node = graph.node(head);
        let members = plan.members(head);
        for subtask in 0..node.parallelism {
            let inputs = (0..node.input_count())
                .map(|input| {
                    let gate = gates.get_mut(&(head, input)).expect("validated: every input is connected");
                    let receiver = gate.receivers[subtask as usize].take().expect("one receiver per subtask");
                    (receiver, gate.channels[subtask as usize])
                })
                .collect();
            let mut own_writers = HashMap::new();
            for (index, edge) in graph.edges.iter().enumerate() {
                if members.contains(&edge.from) && !plan.chained_edges[index] {
                    if let Some(targets) = writers.remove(&(index, subtask)) {
                        own_writers.insert(index, targets);
                    }
                }
            }
            let (mailbox_tx, mailbox_rx) = mailbox();
            setups.push((TaskSetup { head, subtask, inputs, writers: own_writers, mailbox: mailbox_rx }, mailbox_tx));
        }
    }
    // `gates` drops its original senders here, so a gate disconnects when its producers end.
    setups
}

/// What a subtask's thread gets besides its setup.
struct TaskContext {
    index: usize,
    cancel: Arc<AtomicBool>,
    clock: Arc<dyn Clock>,
    reports: crossbeam_channel::Sender<TaskReport>,
    restore: Option<Arc<RestorePlan>>,
}

/// The body of a subtask's thread.
fn run_task(graph: &StreamGraph, plan: &ChainPlan, setup: TaskSetup, context: TaskContext) -> Result<(), TaskError> {
    let shared = TaskShared::with_clock(context.cancel, context.clock);
    shared.set_checkpointing_mode(graph.config.checkpoint.mode);
    shared.set_reporter(context.index, context.reports);
    let outcome = catch_task_panic(|| -> Result<(), TaskError> {
        let builder = ChainBuilder {
            graph,
            plan,
            subtask: setup.subtask,
            shared: shared.clone(),
            writers: setup.writers,
            restore: context.restore,
        };
        let mut driver = builder.driver(setup.head, setup.inputs, setup.mailbox);
        let result = (|| {
            driver.open()?;
            while driver.step()? == StepResult::Continue {}
            driver.finish()
        })();
        driver.close();
        result.and_then(|()| shared.check())
    });
    match outcome {
        Ok(result) => result,
        Err(panic_message) => {
            Err(TaskError::Operator { operator: shared.current_operator_name(), message: panic_message })
        }
    }
}

/// Builds one subtask's chain, tail first, on the subtask's thread.
struct ChainBuilder<'a> {
    graph: &'a StreamGraph,
    plan: &'a ChainPlan,
    subtask: u32,
    shared: Rc<TaskShared>,
    writers: HashMap<usize, WriterTargets>,
    restore: Option<Arc<RestorePlan>>,
}

impl ChainBuilder<'_> {
    fn info(&self, node: &StreamNode) -> OperatorInfo {
        let uid = node.effective_uid();
        let restored = self.restore.as_ref().and_then(|r| r.get(&(uid.clone(), self.subtask)).cloned());
        OperatorInfo {
            name: node.name.clone(),
            uid,
            subtask: self.subtask,
            parallelism: node.parallelism,
            max_parallelism: self.graph.max_parallelism,
            key_group_range: key_group_range_for_subtask(self.graph.max_parallelism, node.parallelism, self.subtask),
            index: self.shared.register_operator(&node.name),
            output_tags: node.outputs.iter().map(|o| o.tag.clone()).collect(),
            restored,
            state_backend: self.graph.config.state_backend.clone(),
            native_snapshots: matches!(self.graph.config.storage, StorageChoice::Directory(_)),
            shared: self.shared.clone(),
        }
    }

    /// The outputs of every port of `node`: chained operators, writers, or both.
    fn outputs(&mut self, node: &StreamNode) -> Vec<ErasedOutput> {
        let graph = self.graph;
        (0..node.outputs.len())
            .map(|port| {
                let port_type = &node.outputs[port].port_type;
                let mut outs: Vec<ErasedOutput> = Vec::new();
                for (index, edge) in graph.edges_from(node.id, port) {
                    if self.plan.chained_edges[index] {
                        outs.push(self.chained_operator(graph.node(edge.to)));
                    } else if let Some((targets, channel_ids)) = self.writers.remove(&index) {
                        outs.push(port_type.writer(
                            targets,
                            channel_ids,
                            &edge.partitioning,
                            self.subtask,
                            graph.max_parallelism,
                            self.shared.clone(),
                        ));
                    }
                }
                match outs.len() {
                    0 => port_type.discard(),
                    1 => outs.pop().expect("one output"),
                    _ => port_type.fan_out(outs),
                }
            })
            .collect()
    }

    fn chained_operator(&mut self, node: &StreamNode) -> ErasedOutput {
        let info = self.info(node);
        let outputs = self.outputs(node);
        match &node.factory {
            OperatorFactory::OneInput { operator, .. } => operator(info, outputs),
            _ => unreachable!("only one-input operators are chained"),
        }
    }

    fn driver(
        mut self,
        head: NodeId,
        mut inputs: Vec<(ErasedSend, usize)>,
        mailbox: MailboxReceiver,
    ) -> Box<dyn TaskDriver> {
        let node = self.graph.node(head);
        let info = self.info(node);
        let outputs = self.outputs(node);
        let shared = self.shared.clone();
        match &node.factory {
            OperatorFactory::Source(factory) => Box::new(SourceDriver::new(factory(info, outputs), mailbox, shared)),
            OperatorFactory::OneInput { operator, input } => {
                let (receiver, ends) = inputs.remove(0);
                input.one_input_driver(receiver, ends, operator(info, outputs), mailbox, shared)
            }
            OperatorFactory::TwoInput { operator, driver } => {
                let second = inputs.remove(1);
                let first = inputs.remove(0);
                driver(operator(info, outputs), first, second, mailbox, shared)
            }
        }
    }
}
