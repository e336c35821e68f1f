//! One attempt of a job: its subtask threads, and the coordinator's part for it (the
//! JobManager's role): checkpoint triggers, acknowledgements and timeouts, storing and
//! retaining checkpoints, savepoints, the first failure.

use crate::channel::{ChannelCapacity, CheckpointBarrier, CheckpointEvent, CHANNEL_BATCHES_MAX};
use crate::error::{JobError, TaskError};
use crate::graph::{ChainPlan, OperatorFactory, StreamGraph};
use crate::task::{Control, MailboxSender, Mailboxes, TaskReport};
use crossbeam_channel::{select, Receiver};
use eddy_checkpoint::coordinator::{CheckpointCoordinator, Completed};
use eddy_checkpoint::metadata::{encode_task_state, CheckpointMetadata, OperatorEntry, StateHandle, TaskStateEntry};
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{file_safe, upload_native_files, CheckpointStorage, ObjectCheckpointStorage};
use eddy_checkpoint::{CheckpointError, CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_types::{Clock, NodeId, RunSeed, WallClock};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::restore::RestorePlan;
use super::wiring::{run_task, wire, TaskContext, TaskSetup};
use super::{CheckpointStats, JobResult, LocalExecutor};

/// How often the coordinator looks at the time (checkpoint triggers, timeouts).
const COORDINATOR_TICK_MS: u64 = 5;

/// How one attempt ended.
pub(super) enum AttemptEnd {
    Finished,
    /// Stopped after a stop-with-savepoint.
    Stopped,
    Failed(JobError),
}

/// Where an attempt starts: the state it restores, the number of its first checkpoint,
/// and the seed it names what it creates by.
pub(super) struct AttemptStart {
    pub(super) restore: Option<(CheckpointId, Arc<RestorePlan>)>,
    pub(super) next_checkpoint_id: u64,
    pub(super) seed: RunSeed,
}

/// What a subtask thread hands back: its task index and how it ended.
type TaskExit = (usize, Result<(), TaskError>);

/// A subtask about to start: what it is wired to, and what it gets from the attempt.
pub(super) type PendingTask = (TaskSetup, TaskContext);

impl LocalExecutor {
    /// One run of the job from `restore`, until it finished, stopped or failed.
    pub(super) fn attempt(
        &self,
        graph: &Arc<StreamGraph>,
        plan: &Arc<ChainPlan>,
        AttemptStart { restore, next_checkpoint_id, seed }: AttemptStart,
        (storage, retained): (&Arc<dyn CheckpointStorage>, &RefCell<RetainedCheckpoints>),
        result: &mut JobResult,
    ) -> AttemptEnd {
        let config = &graph.config;
        let capacity = match self.simulator {
            Some(_) => ChannelCapacity::Unbounded,
            None => ChannelCapacity::Bounded(CHANNEL_BATCHES_MAX),
        };
        let setups = wire(graph, plan, capacity);
        let cancel = Arc::new(AtomicBool::new(false));
        let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
        let mut mailboxes: Vec<MailboxSender> = Vec::new();
        let mut tasks: Vec<(NodeId, u32)> = Vec::new();
        let mut pending: Vec<PendingTask> = Vec::new();
        for (index, (setup, mailbox_tx)) in setups.into_iter().enumerate() {
            tasks.push((setup.head, setup.subtask));
            mailboxes.push(mailbox_tx);
            let context = TaskContext {
                index,
                cancel: cancel.clone(),
                clock: self.clock.clone(),
                reports: reports_tx.clone(),
                restore: restore.as_ref().map(|(_, plan)| plan.clone()),
                seed,
            };
            pending.push((setup, context));
        }
        drop(reports_tx);

        let mut run = AttemptRun {
            graph,
            plan,
            storage,
            retained,
            mailboxes: Mailboxes::new(mailboxes),
            tasks,
            cancel,
            started_ms: self.clock.now_ms(),
            clock: self.clock.clone(),
            coordinator: CheckpointCoordinator::new(config.checkpoint.clone(), pending.len(), next_checkpoint_id),
            triggered_at: HashMap::new(),
            failure: None,
            stopping: false,
            savepoint_triggered: false,
            job_finished_sent: false,
            savepoint_storage: None,
            sources_running: 0,
            trace: self.simulator.as_ref().map(|_| Vec::new()),
        };
        run.sources_running = run.tasks.iter().filter(|(head, _)| run.is_source(*head)).count();
        match &self.simulator {
            Some(simulator) => simulator.run_attempt(&mut run, pending, &reports_rx, result),
            None => run.run_on_threads(pending, &reports_rx, result),
        }
        result.trace.extend(run.trace.take().into_iter().flatten());
        match run.failure.take() {
            Some(error) => AttemptEnd::Failed(error),
            None if run.stopping => AttemptEnd::Stopped,
            None => AttemptEnd::Finished,
        }
    }
}

/// The coordinator side of one attempt.
pub(super) struct AttemptRun<'a> {
    pub(super) graph: &'a Arc<StreamGraph>,
    pub(super) plan: &'a Arc<ChainPlan>,
    storage: &'a Arc<dyn CheckpointStorage>,
    retained: &'a RefCell<RetainedCheckpoints>,
    mailboxes: Mailboxes,
    tasks: Vec<(NodeId, u32)>,
    cancel: Arc<AtomicBool>,
    /// The executor's clock: every time the coordinator reads or waits for.
    clock: Arc<dyn Clock>,
    started_ms: u64,
    coordinator: CheckpointCoordinator<Vec<OperatorSnapshot>>,
    /// Per pending checkpoint: when it was triggered (clock ms, wall-clock ms for the
    /// metadata).
    triggered_at: HashMap<u64, (u64, u64)>,
    failure: Option<JobError>,
    stopping: bool,
    savepoint_triggered: bool,
    job_finished_sent: bool,
    savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
    /// Source tasks still running: checkpoints are triggered at sources only.
    sources_running: usize,
    /// What happened, for [`JobResult::trace`]; `None` unless simulating.
    pub(super) trace: Option<Vec<String>>,
}

impl AttemptRun<'_> {
    fn is_source(&self, head: NodeId) -> bool {
        matches!(self.graph.node(head).factory, OperatorFactory::Source(_))
    }

    /// Records an event of the run's trace, when there is one.
    pub(super) fn note(&mut self, event: impl FnOnce() -> String) {
        if let Some(trace) = self.trace.as_mut() {
            trace.push(event());
        }
    }

    /// The chain a task runs, for messages.
    pub(super) fn task_name(&self, index: usize) -> String {
        self.plan.chain_name(self.graph, self.tasks[index].0)
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_ms().saturating_sub(self.started_ms)
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
            let index = context.index;
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
        let mut exited = 0;
        while exited < handles.len() {
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
                default(Duration::from_millis(COORDINATOR_TICK_MS)) => self.tick(),
            }
        }
        // Reports that raced with the exits (a last acknowledgement) change nothing now.
        for handle in handles {
            let _ = handle.join();
        }
    }

    /// One coordinator turn without waiting: every report that arrived, then the time.
    pub(super) fn poll(&mut self, reports: &Receiver<TaskReport>, result: &mut JobResult) {
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
    pub(super) fn task_exited(&mut self, index: usize, outcome: Result<(), TaskError>) {
        if let Err(error) = outcome {
            self.task_failed(index, error);
        }
    }

    fn task_failed(&mut self, index: usize, error: TaskError) {
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
            TaskError::Operator { operator, message } | TaskError::StateBackend { operator, message } => {
                (operator, message)
            }
            TaskError::Internal(message) => (self.plan.chain_name(self.graph, head), message),
            TaskError::Cancelled => (self.plan.chain_name(self.graph, head), "cancelled".to_string()),
        };
        // A root cause replaces a cancellation recorded first.
        if matches!(self.failure, Some(JobError::Cancelled { .. })) {
            self.failure = None;
        }
        tracing::warn!(operator = %operator, subtask, parallelism, kind = ?kind, cause = %message, "task failed; cancelling the attempt");
        self.note(|| format!("task {index} ({operator} {subtask}) failed: {kind:?}"));
        self.fail(JobError::TaskFailed { job, operator, subtask, parallelism, kind, message });
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
                    self.note(|| format!("checkpoint {id} expired"));
                    tracing::warn!(checkpoint = %id, timeout_ms = self.graph.config.checkpoint.timeout_ms, "checkpoint expired before every task acknowledged it");
                    self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(id)));
                }
            }
            Err(e) => self.fail(JobError::CheckpointFailover {
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
        self.note(|| format!("{kind:?} {id} triggered"));
        tracing::debug!(checkpoint = %id, kind = ?kind, "checkpoint triggered");
        self.triggered_at.insert(id.0, (self.clock.now_ms(), WallClock.now_ms()));
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
                self.note(|| format!("checkpoint {old} subsumed"));
                self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(*old)));
            }
            self.complete(checkpoint, result);
        }
        if self.coordinator.all_finished() && !self.job_finished_sent && !self.cancel.load(Ordering::SeqCst) {
            self.job_finished_sent = true;
            if self.graph.config.checkpointing_enabled() {
                if let Some(last) = self.coordinator.final_checkpoint(now) {
                    let id = last.id;
                    self.triggered_at.insert(id.0, (self.clock.now_ms(), WallClock.now_ms()));
                    // Sinks commit their end-of-input transactions when told the job
                    // finished: only once the checkpoint that holds them is stored.
                    if !self.store(last, result, false) {
                        self.fail(JobError::CheckpointFailover {
                            job: self.graph.job_name.clone(),
                            message: format!(
                                "the final checkpoint {id} could not be stored; nothing of it was committed"
                            ),
                        });
                    }
                }
            }
            if !self.cancel.load(Ordering::SeqCst) {
                self.broadcast(Control::JobFinished);
            }
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
                    tracing::info!(savepoint = %stats.id, bytes = stats.bytes, location = %stats.location, "savepoint completed");
                    self.note(|| format!("savepoint {} completed", stats.id));
                    result.savepoint = Some(stats.location);
                    self.broadcast(Control::Checkpoint(CheckpointEvent::Completed(checkpoint.id)));
                    if request.stop {
                        // Every task hears of the savepoint before it stops (its sinks
                        // commit): the stop goes through the mailboxes behind that news,
                        // and the cancel flag follows once everything is delivered.
                        self.stopping = true;
                        self.broadcast(Control::Cancel);
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
        let writing = self.clock.now_ms();
        let (triggered, timestamp_ms) = self.triggered_at.get(&checkpoint.id.0).copied().unwrap_or((writing, 0));
        let sync_micros = checkpoint.task_states.iter().flatten().map(|s| s.sync_micros).max().unwrap_or(0);
        let wait_micros = checkpoint.task_states.iter().flatten().map(|s| s.wait_micros).max().unwrap_or(0);
        let mut tasks = Vec::with_capacity(checkpoint.task_states.len());
        let (mut bytes, mut incremental_bytes) = (0u64, 0u64);
        let mut files = Vec::new();
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
                StateHandle::File { name, bytes, .. } => {
                    files.push(name.clone());
                    *bytes
                }
                StateHandle::Inline { payload } => {
                    files.push(format!("{stem} (inline)"));
                    payload.len() as u64
                }
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
            async_ms: self.clock.now_ms().saturating_sub(writing),
            duration_ms: self.clock.now_ms().saturating_sub(triggered),
            location,
            files,
        })
    }
}

/// Bytes of the native snapshot files the operators reference.
pub(super) fn native_bytes(snapshots: &[OperatorSnapshot]) -> u64 {
    let natives = snapshots.iter().filter_map(|s| s.keyed.as_ref()).flat_map(|k| &k.native);
    natives.map(|n| n.total_bytes()).sum()
}
/// Deletes one of the job's checkpoints and the shared files only it referenced.
pub(super) fn discard_checkpoint(
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
