//! One attempt of a job: its subtask threads, and the coordinator's part for it (the
//! JobManager's role): checkpoint triggers, acknowledgements and timeouts, storing and
//! retaining checkpoints, savepoints, the first failure.

use crate::channel::{ChannelCapacity, CheckpointBarrier, CheckpointEvent, CHANNEL_BATCHES_MAX};
use crate::error::{JobError, TaskError};
use crate::graph::{ChainPlan, OperatorFactory, StreamGraph};
use crate::task::{
    AsyncWork, AsyncWorkers, Control, DeclineCause, MailboxSender, Mailboxes, QueuedWork, TaskCheckpointing, TaskReport,
};
use crossbeam_channel::{select, Receiver};
use eddy_checkpoint::acknowledgement::TaskAcknowledgement;
use eddy_checkpoint::coordinator::{CheckpointCoordinator, Completed};
use eddy_checkpoint::metadata::{CheckpointMetadata, StateHandle};
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{CheckpointStorage, SavepointTargets, TaskStateWriter};
use eddy_checkpoint::{CheckpointError, CheckpointId, SnapshotKind};
use eddy_types::{Clock, NodeId, RunSeed, WallClock};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::restore::RestorePlan;
use super::wiring::{run_task, wire, TaskContext, TaskSetup};
use super::{CheckpointStats, JobResult, LocalExecutor};

/// How often the coordinator looks at the time (checkpoint triggers, timeouts).
const COORDINATOR_TICK_MS: u64 = 5;

/// How one attempt ended.
pub(crate) enum AttemptEnd {
    Finished,
    /// Stopped after a stop-with-savepoint.
    Stopped,
    Failed(JobError),
}

/// Where an attempt starts: the state it restores, the number of its first checkpoint,
/// and the seed it names what it creates by.
pub(crate) struct AttemptStart {
    pub(crate) restore: Option<Arc<RestorePlan>>,
    pub(crate) next_checkpoint_id: u64,
    pub(crate) seed: RunSeed,
    /// The job directory its checkpoints go to (`None`: the JobManager's memory), for task
    /// executors in other processes.
    pub(crate) job_dir: Option<String>,
}

/// What a subtask thread hands back: its task index and how it ended.
pub(crate) type TaskExit = (usize, Result<(), TaskError>);

/// A subtask about to start: what it is wired to, and what it gets from the attempt.
pub(crate) type PendingTask = (TaskSetup, TaskContext);

/// What the coordinator holds per task for a checkpoint: its handle.
type Acknowledged = TaskAcknowledgement;

impl LocalExecutor {
    /// One run of the job from `restore`, until it finished, stopped or failed.
    pub(crate) fn attempt(
        &self,
        graph: &Arc<StreamGraph>,
        plan: &Arc<ChainPlan>,
        AttemptStart { restore, next_checkpoint_id, seed, job_dir }: AttemptStart,
        (storage, retained): (&Arc<dyn CheckpointStorage>, &RefCell<RetainedCheckpoints>),
        result: &mut JobResult,
    ) -> AttemptEnd {
        let config = &graph.config;
        let job = graph.job_name.clone();
        // Tasks write savepoints themselves: the directory must open before they start.
        let savepoint_storage: Option<Arc<dyn CheckpointStorage>> = match &config.savepoint {
            None => None,
            Some(request) => match config.storage_opener.open(&request.dir.to_string_lossy()) {
                Ok(storage) => Some(storage),
                Err(e) => return AttemptEnd::Failed(JobError::Checkpoint { job, message: format!("savepoint: {e}") }),
            },
        };
        if let Some(client) = &self.cluster {
            let source = restore.as_ref().map(|plan| plan.source().clone());
            let start = AttemptStart { restore, next_checkpoint_id, seed, job_dir };
            return self.remote_attempt(
                client,
                graph,
                plan,
                start,
                (storage, retained),
                savepoint_storage,
                source.as_ref(),
                result,
            );
        }
        // Where the asynchronous part of snapshots runs: worker threads, or the
        // simulator's turns.
        let queued = Arc::new(QueuedWork::default());
        let workers = match &self.simulator {
            Some(_) => None,
            None => {
                let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
                match AsyncWorkers::start(threads.min(plan.heads.len().max(1) * 2)) {
                    Ok(workers) => Some(workers),
                    Err(e) => {
                        let message = format!("cannot start the threads that write snapshots: {e}");
                        return AttemptEnd::Failed(JobError::Internal { job, message });
                    }
                }
            }
        };
        let work: Arc<dyn AsyncWork> = match &workers {
            Some(workers) => workers.queue(),
            None => queued.clone(),
        };
        let capacity = match self.simulator {
            Some(_) => ChannelCapacity::Unbounded,
            None => ChannelCapacity::Bounded(CHANNEL_BATCHES_MAX),
        };
        let setups = wire(graph, plan, capacity);
        let targets = SavepointTargets::default();
        let cancel = Arc::new(AtomicBool::new(false));
        let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
        let mut mailboxes: Vec<MailboxSender> = Vec::new();
        let mut tasks: Vec<(NodeId, u32)> = Vec::new();
        let mut pending: Vec<PendingTask> = Vec::new();
        for (index, (setup, mailbox_tx)) in setups.into_iter().enumerate() {
            tasks.push((setup.head, setup.subtask));
            mailboxes.push(mailbox_tx);
            let writer = TaskStateWriter::new(
                storage.clone(),
                savepoint_storage.clone(),
                self.clock.clone(),
                plan.chain_name(graph, setup.head),
                setup.subtask,
                &graph.node(setup.head).effective_uid(),
            )
            .with_savepoint_targets(targets.clone());
            let checkpointing = TaskCheckpointing {
                task: index,
                reports: reports_tx.clone(),
                writer: Arc::new(writer),
                work: work.clone(),
            };
            let context = TaskContext {
                counters: Arc::default(),
                cancel: cancel.clone(),
                clock: self.clock.clone(),
                checkpointing,
                restore: restore.clone(),
                seed,
                ttl_clock: self.simulator.as_ref().map(|_| self.clock.clone()),
            };
            pending.push((setup, context));
        }
        drop(reports_tx);
        drop(work);

        let mut run = AttemptRun::new(
            (graph, plan),
            (storage, retained, savepoint_storage),
            (Mailboxes::new(mailboxes), tasks, cancel),
            self.clock.clone(),
            next_checkpoint_id,
            self.simulator.is_some(),
        );
        run.savepoint_targets = targets;
        match &self.simulator {
            Some(simulator) => simulator.run_attempt(&mut run, pending, &queued, &reports_rx, result),
            None => run.run_on_threads(pending, &reports_rx, result),
        }
        // Snapshots still being written belong to checkpoints this attempt will never
        // complete: they finish (or are dropped, simulated), and what they and the
        // checkpoints still pending wrote goes.
        queued.clear();
        if let Some(workers) = workers {
            workers.stop();
        }
        run.end(&reports_rx, result)
    }
}

/// The coordinator side of one attempt.
pub(crate) struct AttemptRun<'a> {
    pub(crate) graph: &'a Arc<StreamGraph>,
    pub(crate) plan: &'a Arc<ChainPlan>,
    storage: &'a Arc<dyn CheckpointStorage>,
    retained: &'a RefCell<RetainedCheckpoints>,
    mailboxes: Mailboxes,
    tasks: Vec<(NodeId, u32)>,
    cancel: Arc<AtomicBool>,
    /// The executor's clock: every time the coordinator reads or waits for.
    clock: Arc<dyn Clock>,
    started_ms: u64,
    coordinator: CheckpointCoordinator<Acknowledged>,
    /// Per pending checkpoint: when it was triggered (clock ms, wall-clock ms for the
    /// metadata).
    triggered_at: HashMap<u64, (u64, u64)>,
    failure: Option<JobError>,
    stopping: bool,
    savepoint_triggered: bool,
    job_finished_sent: bool,
    /// The job's last checkpoint, once every task finished.
    final_checkpoint: Option<CheckpointId>,
    savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
    /// Source tasks still running: checkpoints are triggered at sources only.
    sources_running: usize,
    /// What happened, for [`JobResult::trace`]; `None` unless simulating.
    pub(crate) trace: Option<Vec<String>>,
    /// The counters of the tasks that ended well, summed.
    accumulators: BTreeMap<String, u64>,
    /// The savepoint to take next (by the job's configuration, or asked for).
    savepoint_order: Option<SavepointOrder>,
    /// The savepoint triggered and not complete yet.
    savepoint_pending: Option<(CheckpointId, SavepointOrder)>,
    /// Where savepoints go, for the task writers of this process.
    pub(crate) savepoint_targets: SavepointTargets,
    /// On a cluster: how the task executors hear where a savepoint goes, and how the
    /// CLI hears of its savepoint.
    pub(crate) hooks: Option<RemoteHooks<'a>>,
}

/// A savepoint to take: where it goes, whether the job stops after it, and the CLI
/// request waiting for it.
pub(crate) struct SavepointOrder {
    storage: Arc<dyn CheckpointStorage>,
    dir: String,
    stop: bool,
    request: Option<u64>,
}

/// Tells every task executor where a savepoint goes.
pub(crate) type AnnounceSavepoint<'a> = Box<dyn Fn(CheckpointId, &str) + 'a>;

/// What a cluster attempt's coordinator tells beyond its tasks' mailboxes.
pub(crate) struct RemoteHooks<'a> {
    /// Savepoint `id` goes to directory `dir`: told to every task executor before the
    /// savepoint is triggered.
    pub(crate) announce_savepoint: AnnounceSavepoint<'a>,
    /// The answer to a CLI request.
    pub(crate) reply: Box<dyn Fn(u64, Result<String, String>) + 'a>,
}

impl<'a> AttemptRun<'a> {
    /// The coordinator of an attempt whose tasks (head, subtask) are reached through
    /// `mailboxes` and stop when `cancel` is set.
    #[allow(clippy::type_complexity)]
    pub(crate) fn new(
        (graph, plan): (&'a Arc<StreamGraph>, &'a Arc<ChainPlan>),
        (storage, retained, savepoint_storage): (
            &'a Arc<dyn CheckpointStorage>,
            &'a RefCell<RetainedCheckpoints>,
            Option<Arc<dyn CheckpointStorage>>,
        ),
        (mailboxes, tasks, cancel): (Mailboxes, Vec<(NodeId, u32)>, Arc<AtomicBool>),
        clock: Arc<dyn Clock>,
        next_checkpoint_id: u64,
        traced: bool,
    ) -> Self {
        let mut run = AttemptRun {
            graph,
            plan,
            storage,
            retained,
            mailboxes,
            cancel,
            started_ms: clock.now_ms(),
            clock,
            coordinator: CheckpointCoordinator::new(graph.config.checkpoint.clone(), tasks.len(), next_checkpoint_id),
            tasks,
            triggered_at: HashMap::new(),
            failure: None,
            stopping: false,
            savepoint_triggered: false,
            job_finished_sent: false,
            final_checkpoint: None,
            savepoint_storage,
            sources_running: 0,
            trace: traced.then(Vec::new),
            accumulators: BTreeMap::new(),
            savepoint_order: None,
            savepoint_pending: None,
            savepoint_targets: SavepointTargets::default(),
            hooks: None,
        };
        run.sources_running = run.tasks.iter().filter(|(head, _)| run.is_source(*head)).count();
        run
    }

    /// How the attempt ended, once its tasks exited; what it left pending is cleaned up.
    /// Counters count only from the attempt that ended the job (Flink drops a failed
    /// attempt's accumulators too).
    pub(crate) fn end(mut self, reports: &Receiver<TaskReport>, result: &mut JobResult) -> AttemptEnd {
        self.clean_up(reports);
        result.trace.extend(self.trace.take().into_iter().flatten());
        match self.failure.take() {
            Some(error) => AttemptEnd::Failed(error),
            None => {
                result.accumulators = std::mem::take(&mut self.accumulators);
                if self.stopping {
                    AttemptEnd::Stopped
                } else {
                    AttemptEnd::Finished
                }
            }
        }
    }

    fn accumulate(&mut self, values: Vec<(String, u64)>) {
        for (name, value) in values {
            let sum = self.accumulators.entry(name).or_default();
            *sum = sum.wrapping_add(value);
        }
    }

    fn is_source(&self, head: NodeId) -> bool {
        matches!(self.graph.node(head).factory, OperatorFactory::Source(_))
    }

    /// Records an event of the run's trace, when there is one.
    pub(crate) fn note(&mut self, event: impl FnOnce() -> String) {
        if let Some(trace) = self.trace.as_mut() {
            trace.push(event());
        }
    }

    /// The chain a task runs, for messages.
    /// Set once the attempt is being cancelled.
    pub(crate) fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    pub(crate) fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// A subtask as Flink names it: `chain (2/4)`.
    pub(crate) fn subtask_name(&self, index: usize) -> String {
        let (head, subtask) = self.tasks[index];
        format!("{} ({}/{})", self.task_name(index), subtask + 1, self.graph.node(head).parallelism)
    }

    pub(crate) fn task_name(&self, index: usize) -> String {
        self.plan.chain_name(self.graph, self.tasks[index].0)
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_ms().saturating_sub(self.started_ms)
    }

    fn broadcast(&mut self, control: Control) {
        self.mailboxes.broadcast(&control);
    }

    pub(crate) fn cancel_all(&mut self) {
        if !self.cancel.swap(true, Ordering::SeqCst) {
            self.mailboxes.cancel_all();
        }
    }

    pub(crate) fn fail(&mut self, error: JobError) {
        if self.failure.is_none() && !self.stopping {
            self.failure = Some(error);
        }
        self.cancel_all();
    }

    /// Starts one thread per subtask and coordinates until every one exited.
    fn run_on_threads(&mut self, pending: Vec<PendingTask>, reports: &Receiver<TaskReport>, result: &mut JobResult) {
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<TaskExit>();
        let mut handles = Vec::new();
        for (setup, context) in pending {
            let head = self.graph.node(setup.head);
            let name = format!(
                "{} ({}/{})",
                self.plan.chain_name(self.graph, setup.head),
                setup.subtask + 1,
                head.parallelism
            );
            let index = context.checkpointing.task;
            let (graph, plan, done_tx) = (self.graph.clone(), self.plan.clone(), done_tx.clone());
            let spawned = std::thread::Builder::new().name(name).spawn(move || {
                let outcome = run_task(&graph, &plan, setup, context);
                let _ = done_tx.send((index, outcome));
            });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    self.fail(JobError::Internal {
                        job: self.graph.job_name.clone(),
                        message: format!("cannot start a subtask thread: {e}"),
                    });
                    break;
                }
            }
        }
        drop(done_tx);
        let never = crossbeam_channel::never();
        self.coordinate(&done_rx, reports, handles.len(), result, (&never, &mut |_, _: (), _| {}));
        // Reports that raced with the exits (a last acknowledgement) change nothing now.
        for handle in handles {
            let _ = handle.join();
        }
    }

    /// The coordinator's loop until `tasks` tasks exited: their exits, their reports,
    /// `events` from elsewhere (a cluster's JobManager) handed to `on_event`, and a tick
    /// that triggers checkpoints and expires them.
    #[allow(clippy::type_complexity)]
    pub(crate) fn coordinate<E>(
        &mut self,
        done_rx: &Receiver<TaskExit>,
        reports: &Receiver<TaskReport>,
        tasks: usize,
        result: &mut JobResult,
        (events, on_event): (&Receiver<E>, &mut dyn FnMut(&mut Self, E, &mut JobResult)),
    ) {
        let mut exited = 0;
        while exited < tasks {
            self.mailboxes.flush();
            if self.stopping && self.mailboxes.all_delivered() {
                self.cancel_all();
            }
            select! {
                recv(done_rx) -> exit => {
                    let Ok((index, outcome)) = exit else { break };
                    exited += 1;
                    self.task_exited(index, outcome);
                }
                recv(reports) -> report => {
                    if let Ok(report) = report {
                        self.report(report, result);
                    }
                }
                recv(events) -> event => {
                    if let Ok(event) = event {
                        on_event(self, event, result);
                    }
                }
                default(Duration::from_millis(COORDINATOR_TICK_MS)) => self.tick(),
            }
        }
    }

    /// One coordinator turn without waiting: every report that arrived, then the time.
    pub(crate) fn poll(&mut self, reports: &Receiver<TaskReport>, result: &mut JobResult) {
        self.mailboxes.flush();
        if self.stopping && self.mailboxes.all_delivered() {
            self.cancel_all();
        }
        while let Ok(report) = reports.try_recv() {
            self.report(report, result);
        }
        self.tick();
    }

    /// A subtask ended, well or not.
    pub(crate) fn task_exited(&mut self, index: usize, outcome: Result<(), TaskError>) {
        if let Err(error) = outcome {
            self.task_failed(index, error);
        }
    }

    pub(crate) fn task_failed(&mut self, index: usize, error: TaskError) {
        let job = self.graph.job_name.clone();
        if error == TaskError::Cancelled {
            // Stopping after a savepoint, tasks stop one by one as their mailboxes say;
            // the others must still hear everything before them.
            if !self.cancel.load(Ordering::SeqCst) && !self.stopping {
                self.fail(JobError::Cancelled { job });
            }
            return;
        }
        let (head, subtask) = self.tasks[index];
        let parallelism = self.graph.node(head).parallelism;
        let kind = error.kind();
        let (operator, message) = match error {
            TaskError::Operator { operator, message }
            | TaskError::StateBackend { operator, message }
            | TaskError::StateUnreadable { operator, message } => (operator, message),
            TaskError::Internal(message) | TaskError::Lost(message) | TaskError::Unsendable(message) => {
                (self.plan.chain_name(self.graph, head), message)
            }
            TaskError::Cancelled => (self.plan.chain_name(self.graph, head), "cancelled".to_string()),
        };
        // A root cause replaces a cancellation recorded first.
        if matches!(self.failure, Some(JobError::Cancelled { .. })) {
            self.failure = None;
        }
        // Subtasks count from 1 in what people read, as Flink's `(2/4)` and the job's error do.
        let numbered = format!("{}/{parallelism}", subtask + 1);
        tracing::warn!(operator = %operator, subtask = %numbered, kind = ?kind, cause = %message, "task failed; cancelling the attempt");
        self.note(|| format!("task {index} ({operator} {subtask}) failed: {kind:?}"));
        self.fail(JobError::TaskFailed { job, operator, subtask, parallelism, kind, message });
    }

    fn tick(&mut self) {
        if self.cancel.load(Ordering::SeqCst) {
            return;
        }
        let now = self.now_ms();
        if let (Some(request), Some(storage)) = (&self.graph.config.savepoint, &self.savepoint_storage) {
            let due = !self.savepoint_triggered && now >= request.after_ms && !self.coordinator.all_finished();
            if due && self.savepoint_pending.is_none() {
                self.savepoint_triggered = true;
                self.savepoint_order = Some(SavepointOrder {
                    storage: storage.clone(),
                    dir: request.dir.display().to_string(),
                    stop: request.stop,
                    request: None,
                });
                self.trigger(SnapshotKind::Savepoint, now);
                return;
            }
        }
        // Once every source finished no barrier can start; the final checkpoint follows.
        if self.sources_running > 0 && self.coordinator.should_trigger(now) {
            self.trigger(SnapshotKind::Checkpoint, now);
        }
        let (expired, counted) = self.coordinator.expire(now);
        for (id, kind) in expired {
            self.note(|| format!("checkpoint {id} expired"));
            self.discard_pending(id, kind);
            tracing::warn!(checkpoint = %id, timeout_ms = self.graph.config.checkpoint.timeout_ms, "checkpoint expired before every task acknowledged it");
            self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(id)));
        }
        if let Err(e) = counted {
            self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!(
                    "{} checkpoints in a row timed out or failed (tolerable: {})",
                    e.consecutive, e.tolerable
                ),
            });
        }
    }

    /// A savepoint into `dir` now, asked for by the CLI (request `request`); the job
    /// stops after it if `stop`. The answer comes through the reply hook when it completed
    /// or failed.
    pub(crate) fn savepoint_now(&mut self, dir: &str, stop: bool, request: u64) -> Result<String, String> {
        if self.savepoint_pending.is_some() {
            return Err("a savepoint is being taken already; try again when it completed".into());
        }
        if self.cancel.load(Ordering::SeqCst) || self.stopping || self.failure.is_some() {
            return Err("the job is stopping or restarting; try again".into());
        }
        if self.coordinator.all_finished() {
            return Err("every task finished its input: the job is ending, no savepoint can be taken".into());
        }
        let storage = self
            .graph
            .config
            .storage_opener
            .open(dir)
            .map_err(|e| format!("cannot open the savepoint directory: {e}"))?;
        self.savepoint_order = Some(SavepointOrder { storage, dir: dir.to_string(), stop, request: Some(request) });
        let now = self.now_ms();
        self.trigger(SnapshotKind::Savepoint, now);
        let id = self.savepoint_pending.as_ref().map_or(0, |(id, _)| id.0);
        Ok(format!("savepoint {id} triggered{}", if stop { "; the job stops once it completed" } else { "" }))
    }

    /// Where savepoint `id` is written.
    fn savepoint_storage_of(&self, id: CheckpointId) -> Option<Arc<dyn CheckpointStorage>> {
        match &self.savepoint_pending {
            Some((pending, order)) if *pending == id => Some(order.storage.clone()),
            _ => self.savepoint_storage.clone(),
        }
    }

    fn trigger(&mut self, kind: SnapshotKind, now: u64) {
        let id = self.coordinator.trigger(kind, now);
        if kind == SnapshotKind::Savepoint {
            if let Some(order) = self.savepoint_order.take() {
                self.savepoint_targets.set(id, order.storage.clone());
                if let Some(hooks) = &self.hooks {
                    (hooks.announce_savepoint)(id, &order.dir);
                }
                self.savepoint_pending = Some((id, order));
            }
        }
        self.note(|| format!("{kind:?} {id} triggered"));
        tracing::debug!(checkpoint = %id, kind = ?kind, "checkpoint triggered");
        self.triggered_at.insert(id.0, (self.clock.now_ms(), WallClock.now_ms()));
        let barrier = CheckpointBarrier { id, kind };
        for index in 0..self.tasks.len() {
            // Sources start the barrier; tasks that finished are asked directly.
            if self.is_source(self.tasks[index].0) || self.coordinator.is_finished(index) {
                self.mailboxes.post(index, Control::TriggerCheckpoint(barrier));
            }
        }
    }

    fn report(&mut self, report: TaskReport, result: &mut JobResult) {
        let now = self.now_ms();
        let completed = match report {
            TaskReport::Acknowledge { task, checkpoint, ack } => {
                let Some(kind) = self.coordinator.pending_kind(checkpoint) else {
                    // Late: aborted or subsumed meanwhile. What the task wrote for it goes.
                    self.discard_late(checkpoint, &ack);
                    return;
                };
                if kind == SnapshotKind::Checkpoint {
                    if let Err(reason) = self.register_shared(checkpoint, &ack) {
                        return self.abort_checkpoint(checkpoint, kind, &reason, result);
                    }
                }
                self.coordinator.acknowledge(checkpoint, task, ack, now)
            }
            TaskReport::Accumulators { values } => {
                self.accumulate(values);
                return;
            }
            TaskReport::Finished { task } => {
                if self.is_source(self.tasks[task].0) {
                    self.sources_running = self.sources_running.saturating_sub(1);
                }
                // No barrier reaches it any more: it is asked for what is pending.
                for (id, kind) in self.coordinator.task_finished(task) {
                    self.mailboxes.post(task, Control::TriggerCheckpoint(CheckpointBarrier { id, kind }));
                }
                None
            }
            TaskReport::Declined { task, checkpoint, kind, reason, cause } => {
                match self.coordinator.pending_kind(checkpoint) {
                    Some(kind) if cause == DeclineCause::CannotFit => {
                        // Every later checkpoint would fail the same way, and a restart
                        // goes back to the same state: the job fails now, naming the cap
                        // (before the abort counts it as a failure to restart after).
                        let reason = format!("{kind:?} {checkpoint} cannot be stored: {reason}");
                        let message = reason.clone();
                        self.fail(JobError::Checkpoint { job: self.graph.job_name.clone(), message });
                        self.abort_checkpoint(checkpoint, kind, &reason, result);
                    }
                    Some(kind) if cause == DeclineCause::WriteFailed => {
                        let reason = format!("{} could not write its part: {reason}", self.task_name(task));
                        self.abort_checkpoint(checkpoint, kind, &reason, result);
                    }
                    Some(kind) => {
                        tracing::info!(checkpoint = %checkpoint, task = %self.task_name(task), reason, "checkpoint declined by a task not ready for it");
                        self.note(|| format!("{kind:?} {checkpoint} declined"));
                        self.coordinator.abort_not_counted(checkpoint);
                        self.discard_pending(checkpoint, kind);
                        self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(checkpoint)));
                        if kind == SnapshotKind::Savepoint {
                            // Asked for by the user: tried again once the task is ready.
                            self.savepoint_triggered = false;
                        }
                    }
                    // Late: the checkpoint is gone, and so must be what the task wrote.
                    None => self.discard_written(checkpoint, kind),
                }
                return;
            }
        };
        if let Some(checkpoint) = completed {
            for old in &checkpoint.subsumed {
                self.note(|| format!("checkpoint {old} subsumed"));
                self.discard_pending(*old, SnapshotKind::Checkpoint);
                self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(*old)));
            }
            if Some(checkpoint.id) == self.final_checkpoint {
                self.finish_job(checkpoint, result);
                return;
            }
            self.complete(checkpoint, result);
        }
        if self.coordinator.all_finished() && self.final_checkpoint.is_none() && !self.job_finished_sent {
            if self.cancel.load(Ordering::SeqCst) {
                return;
            }
            if !self.graph.config.checkpointing_enabled() {
                self.job_finished_sent = true;
                self.broadcast(Control::JobFinished);
                return;
            }
            // The job's last checkpoint, of every task's final state: every task is asked.
            if let Some(id) = self.coordinator.final_checkpoint(now) {
                self.final_checkpoint = Some(id);
                self.note(|| format!("final checkpoint {id} triggered"));
                self.triggered_at.insert(id.0, (self.clock.now_ms(), WallClock.now_ms()));
                let barrier = CheckpointBarrier { id, kind: SnapshotKind::Checkpoint };
                self.broadcast(Control::TriggerCheckpoint(barrier));
            }
        }
    }

    /// The final checkpoint completed: store it, then let sinks commit their end-of-input
    /// transactions (only once the checkpoint that holds them is stored).
    fn finish_job(&mut self, checkpoint: Completed<Acknowledged>, result: &mut JobResult) {
        let id = checkpoint.id;
        if !self.store(checkpoint, result, false) {
            return self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!("the final checkpoint {id} could not be stored; nothing of it was committed"),
            });
        }
        if !self.cancel.load(Ordering::SeqCst) {
            self.job_finished_sent = true;
            self.broadcast(Control::JobFinished);
        }
    }

    /// Counts the shared files a task's state references under checkpoint `id`. One it
    /// took from an earlier checkpoint must still be held: the earlier one may have been
    /// dropped after the task wrote (it had not heard yet).
    fn register_shared(&mut self, id: CheckpointId, ack: &TaskAcknowledgement) -> Result<(), String> {
        let mut retained = self.retained.borrow_mut();
        if let Some(gone) =
            ack.shared_files.iter().find(|f| !f.uploaded_now && retained.shared_file(&f.location).is_none())
        {
            return Err(format!(
                "{} references the shared file {}, which no retained checkpoint holds any more",
                ack.entry.task, gone.location
            ));
        }
        for file in &ack.shared_files {
            retained.reference(id, &file.location, file.bytes, file.crc32);
        }
        Ok(())
    }

    /// A pending checkpoint that cannot complete: abort it, delete what was written for
    /// it, tell the tasks.
    fn abort_checkpoint(&mut self, id: CheckpointId, kind: SnapshotKind, reason: &str, result: &mut JobResult) {
        tracing::warn!(checkpoint = %id, kind = ?kind, reason, "checkpoint aborted");
        self.note(|| format!("{kind:?} {id} aborted"));
        result.warnings.push(format!("checkpoint {id} aborted: {reason}"));
        let counted = self.coordinator.abort(id);
        self.discard_pending(id, kind);
        self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(id)));
        if let Err(too_many) = counted {
            self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!(
                    "checkpoint {id} aborted: {reason}; {} failures in a row (tolerable: {})",
                    too_many.consecutive, too_many.tolerable
                ),
            });
        }
    }

    /// Deletes what tasks wrote for a checkpoint that will never complete. Without the
    /// final checkpoint the job cannot finish: that fails it over.
    fn discard_pending(&mut self, id: CheckpointId, kind: SnapshotKind) {
        if Some(id) == self.final_checkpoint {
            self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!("the final checkpoint {id} failed; nothing of it was committed"),
            });
        }
        match kind {
            SnapshotKind::Checkpoint => discard_checkpoint(self.storage.as_ref(), &mut self.retained.borrow_mut(), id),
            SnapshotKind::Savepoint => {
                if let Some(savepoints) = self.savepoint_storage_of(id) {
                    if let Err(e) = savepoints.discard(id, kind) {
                        tracing::warn!(savepoint = %id, error = %e, "cannot delete an incomplete savepoint; its files stay");
                    }
                }
                if matches!(&self.savepoint_pending, Some((pending, _)) if *pending == id) {
                    let (_, order) = self.savepoint_pending.take().expect("pending");
                    if let (Some(request), Some(hooks)) = (order.request, &self.hooks) {
                        let why = format!("savepoint {id} did not complete (aborted, expired, declined by a task not ready, or the job failed; the job's log says which)");
                        (hooks.reply)(request, Err(why));
                    }
                }
            }
        }
    }

    /// An acknowledgement for a checkpoint no longer pending: its files go (what it
    /// uploaded has names of its own; what it took from earlier checkpoints stays).
    fn discard_late(&mut self, id: CheckpointId, ack: &TaskAcknowledgement) {
        self.discard_written(id, ack.kind);
        if ack.kind == SnapshotKind::Checkpoint {
            let retained = self.retained.borrow();
            let unused =
                ack.shared_files.iter().filter(|f| f.uploaded_now && retained.reference_count(&f.location) == 0);
            for file in unused {
                if let Err(e) = self.storage.delete_file(&file.location) {
                    tracing::warn!(file = %file.location, error = %e, "cannot delete a shared file no checkpoint references");
                }
            }
        }
    }

    /// Deletes the directory of a checkpoint or savepoint that will never complete (what
    /// tasks wrote into it), in the storage its kind goes to.
    fn discard_written(&self, id: CheckpointId, kind: SnapshotKind) {
        let storage = match kind {
            SnapshotKind::Checkpoint => Some(self.storage.clone()),
            SnapshotKind::Savepoint => self.savepoint_storage_of(id),
        };
        if let Some(Err(e)) = storage.map(|s| s.discard(id, kind)) {
            tracing::warn!(checkpoint = %id, kind = ?kind, error = %e, "cannot delete what was written for an incomplete checkpoint");
        }
    }

    /// The attempt is over: acknowledgements that came too late, and checkpoints still
    /// pending, leave nothing behind (files, references).
    fn clean_up(&mut self, reports: &Receiver<TaskReport>) {
        while let Ok(report) = reports.try_recv() {
            match report {
                TaskReport::Acknowledge { checkpoint, ack, .. } => self.discard_late(checkpoint, &ack),
                TaskReport::Declined { checkpoint, kind, .. } => self.discard_written(checkpoint, kind),
                TaskReport::Finished { .. } => {}
                TaskReport::Accumulators { values } => self.accumulate(values),
            }
        }
        for (id, kind) in self.coordinator.pending() {
            self.discard_pending(id, kind);
        }
    }

    /// A checkpoint every task acknowledged: store it, tell the tasks, drop old ones.
    fn complete(&mut self, checkpoint: Completed<Acknowledged>, result: &mut JobResult) {
        if checkpoint.kind == SnapshotKind::Savepoint {
            let order = match self.savepoint_pending.take() {
                Some((id, order)) if id == checkpoint.id => order,
                other => {
                    self.savepoint_pending = other;
                    return;
                }
            };
            let reply = |run: &Self, answer: Result<String, String>| {
                if let (Some(request), Some(hooks)) = (order.request, &run.hooks) {
                    (hooks.reply)(request, answer);
                }
            };
            match self.commit(&checkpoint, order.storage.as_ref()) {
                Ok(stats) => {
                    tracing::info!(savepoint = %stats.id, bytes = stats.bytes, location = %stats.location, "savepoint completed");
                    self.note(|| format!("savepoint {} completed", stats.id));
                    reply(self, Ok(format!("savepoint={}", stats.location)));
                    // The job's own savepoints (its configuration's, or the one it stops
                    // with) are its result's; one the CLI took went to the CLI.
                    if order.stop || order.request.is_none() {
                        result.savepoint = Some(stats.location);
                    }
                    self.broadcast(Control::Checkpoint(CheckpointEvent::Completed(checkpoint.id)));
                    if order.stop {
                        // Every task hears of the savepoint before it stops (its sinks
                        // commit): the stop goes through the mailboxes behind that news,
                        // and the cancel flag follows once everything is delivered.
                        self.stopping = true;
                        self.broadcast(Control::Cancel);
                    }
                }
                Err(e) if order.request.is_some() => {
                    // Asked for by the CLI: the job goes on without it.
                    tracing::warn!(savepoint = %checkpoint.id, error = %e, "savepoint failed");
                    reply(self, Err(format!("savepoint {} failed: {e}", checkpoint.id)));
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

    /// Writes a checkpoint's metadata and applies retention. `periodic`: not the final
    /// checkpoint of a finished job (whose stats say little).
    fn store(&mut self, checkpoint: Completed<Acknowledged>, result: &mut JobResult, periodic: bool) -> bool {
        let storage = self.storage.clone();
        // Counted at acknowledgement already; counted again (no effect) to check them all.
        let registered = checkpoint.task_states.iter().try_for_each(|ack| self.register_shared(checkpoint.id, ack));
        let written = match registered {
            Ok(()) => self.commit(&checkpoint, storage.as_ref()),
            Err(reason) => Err(CheckpointError::InvalidLocation {
                location: format!("checkpoint {}", checkpoint.id),
                message: reason,
            }),
        };
        match written {
            Ok(stats) => {
                tracing::info!(
                    checkpoint = %stats.id,
                    bytes = stats.bytes,
                    incremental_bytes = stats.incremental_bytes,
                    duration_ms = stats.duration_ms,
                    sync_ms = stats.sync_ms,
                    async_ms = stats.async_ms,
                    location = %stats.location,
                    "checkpoint completed"
                );
                self.note(|| {
                    format!(
                        "checkpoint {} completed at {} with {}",
                        stats.id,
                        super::trace_location(&stats.location),
                        stats.files.join(" ")
                    )
                });
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
                tracing::warn!(checkpoint = %checkpoint.id, error = %e, "checkpoint could not be stored");
                self.note(|| format!("checkpoint {} could not be stored", checkpoint.id));
                result.warnings.push(format!("checkpoint {} failed: {e}", checkpoint.id));
                if let Err(too_many) = self.coordinator.record_failure() {
                    self.fail(JobError::CheckpointFailover {
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

    /// Completes a checkpoint or savepoint: its `_metadata`, from the tasks' handles.
    fn commit(
        &self,
        checkpoint: &Completed<Acknowledged>,
        storage: &dyn CheckpointStorage,
    ) -> Result<CheckpointStats, CheckpointError> {
        let (triggered, timestamp_ms) =
            self.triggered_at.get(&checkpoint.id.0).copied().unwrap_or((self.clock.now_ms(), 0));
        let acks = &checkpoint.task_states;
        let metadata = CheckpointMetadata {
            checkpoint_id: checkpoint.id,
            kind: checkpoint.kind,
            job_name: self.graph.job_name.clone(),
            max_parallelism: self.graph.max_parallelism.get(),
            timestamp_ms,
            tasks: acks.iter().map(|a| a.entry.clone()).collect(),
        };
        let location = storage.commit(&metadata)?;
        let max = |f: fn(&TaskAcknowledgement) -> u64| acks.iter().map(f).max().unwrap_or(0);
        Ok(CheckpointStats {
            id: checkpoint.id,
            bytes: acks.iter().map(|a| a.bytes).sum(),
            incremental_bytes: acks.iter().map(|a| a.written_bytes).sum(),
            sync_ms: max(|a| a.sync_micros) / 1000,
            wait_ms: max(|a| a.wait_micros) / 1000,
            async_ms: max(|a| a.async_micros) / 1000,
            duration_ms: self.clock.now_ms().saturating_sub(triggered),
            location,
            files: acks
                .iter()
                .map(|a| match &a.entry.handle {
                    StateHandle::Inline { .. } => format!("{}/{} (inline)", a.entry.task, a.entry.subtask),
                    handle => handle.describe(),
                })
                .collect(),
        })
    }
}

/// Deletes one of the job's checkpoints and the shared files only it referenced.
pub(crate) fn discard_checkpoint(
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
    id: CheckpointId,
) {
    // The checkpoint (its metadata first) before its shared files: a crash in between
    // leaves unreferenced files, never a complete-looking checkpoint missing some.
    if let Err(e) = storage.discard(id, SnapshotKind::Checkpoint) {
        tracing::warn!(checkpoint = %id, error = %e, "cannot discard a checkpoint that is no longer retained; its files stay");
        return;
    }
    for unused in retained.release(id) {
        if let Err(e) = storage.delete_file(&unused) {
            tracing::warn!(file = %unused, error = %e, "cannot delete a shared file no checkpoint references");
        }
    }
}
