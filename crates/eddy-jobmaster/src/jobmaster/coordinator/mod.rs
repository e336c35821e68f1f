//! The JobMaster's coordinator of one attempt (Flink's `CheckpointCoordinator`, with the
//! scheduler's handling of task failures): checkpoint triggers (at the sources, at tasks
//! whose producers all finished, and finished tasks asked for their final state: Flink's
//! checkpoints after tasks finished, FLIP-147), acknowledgements, declines and timeouts,
//! the final checkpoint of a finished job, the first failure, and the end of the attempt.
//! The pure decisions (which checkpoint is due, complete, subsumed or expired) are
//! `eddy_checkpoint::coordinator`'s; this type carries them out on the attempt's mailboxes
//! and storage.
//!
//! - [`savepoints`]: savepoints, by the job's configuration or asked for by the CLI;
//! - [`storing`]: completing a checkpoint (its metadata), retention, and deleting what an
//!   incomplete checkpoint left;
//! - [`operators`]: the operators' own coordinators (split enumerators), their events and
//!   their state in each checkpoint;
//! - [`rescale`]: rescaling the running job from a checkpoint taken for it.
//!
//! How the attempt's subtasks run is not its business: the local executor's threads, the
//! simulator's single thread, or task executors on a cluster ([`super::remote`]) drive it
//! through [`AttemptCoordinator::coordinate`] or [`AttemptCoordinator::poll`].

mod operators;
mod rescale;
mod savepoints;
mod storing;

pub(crate) use rescale::Rescaling;
pub(crate) use savepoints::{CommandOutcome, RemoteHooks, SavepointOrder};
pub(crate) use storing::discard_checkpoint;
#[cfg(test)]
pub(crate) use storing::failed_stop;

use super::{AttemptEnd, JobResult, TaskExit};
use crossbeam_channel::{select, Receiver};
use eddy_checkpoint::acknowledgement::TaskAcknowledgement;
use eddy_checkpoint::coordinator::CheckpointCoordinator;
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{CheckpointStorage, SavepointTargets};
use eddy_checkpoint::{CheckpointId, SnapshotKind};
use eddy_rpc::view::SubtaskCounters;
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::deployment::restore::RestorePlan;
use eddy_runtime::deployment::subtasks::subtask_name;
use eddy_runtime::error::{FailureKind, JobError, TaskError};
use eddy_runtime::graph::{ChainPlan, OperatorFactory, StreamGraph};
use eddy_runtime::task::{Control, DeclineCause, Mailboxes, TaskReport};
use eddy_types::{Clock, NodeId, WallClock};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the coordinator looks at the time (checkpoint triggers, timeouts).
const COORDINATOR_TICK_MS: u64 = 5;

/// Reads every subtask's counters, by task index.
pub(crate) type Sampler<'a> = Box<dyn Fn() -> Vec<(usize, SubtaskCounters)> + 'a>;

/// What the coordinator holds per task for a checkpoint: its handle.
type Acknowledged = TaskAcknowledgement;

/// The JobMaster's coordinator of one attempt: its subtasks are reached through their
/// mailboxes (in this process, or forwarded to task executors), their reports and exits
/// come back through channels, and every decision is a step that a test can drive.
pub(crate) struct AttemptCoordinator<'a> {
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
    /// A task that failed once the stop's savepoint was stored, said in the job's result.
    failed_while_stopping: Option<String>,
    /// A user cancelled the job: whatever tasks report while they stop (a peer's
    /// connection closing under them, most often) is a consequence, not a cause, and
    /// the attempt ends cancelled rather than restarting.
    pub(super) cancelled_by_user: bool,
    savepoint_triggered: bool,
    job_finished_sent: bool,
    /// The job's last checkpoint, once every task finished.
    final_checkpoint: Option<CheckpointId>,
    savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
    /// Per task, the tasks it reads from (every subtask of each chain feeding it): once
    /// they all finished, checkpoints are triggered at the task itself.
    producers: Vec<Vec<usize>>,
    /// What happened, for [`JobResult::trace`]; `None` unless simulating.
    pub(crate) trace: Option<Vec<String>>,
    /// The counters of the tasks that ended well, summed.
    accumulators: BTreeMap<String, u64>,
    /// The savepoint to take next (by the job's configuration, or asked for).
    savepoint_order: Option<SavepointOrder>,
    /// The savepoint triggered and not complete yet.
    savepoint_pending: Option<(CheckpointId, SavepointOrder)>,
    /// A rescale asked for, waiting for its checkpoint.
    rescale: Option<rescale::RescaleOrder>,
    /// The attempt stopped for a rescale.
    rescaling: Option<Rescaling>,
    /// The rescale this attempt follows, until all its tasks run.
    pub(crate) after_rescale: Option<Rescaling>,
    /// The job's autoscaler (over its attempts), if it has one.
    pub(crate) autoscaler: Option<Arc<std::sync::Mutex<crate::jobmaster::autoscaler::Autoscaler>>>,
    /// Tasks whose operators are open (state restored).
    tasks_running: usize,
    /// Where savepoints go, for the task writers of this process.
    pub(crate) savepoint_targets: SavepointTargets,
    /// On a cluster: how the task executors hear where a savepoint goes, and how the
    /// CLI hears of its savepoint.
    pub(crate) hooks: Option<RemoteHooks<'a>>,
    /// The operators' coordinators (sources' split enumerators).
    operators: operators::OperatorCoordinators,
    /// Reads the subtasks' counters, by task index, for the job's board; `None` under
    /// simulation (whose clock is not the board's).
    pub(crate) sampler: Option<Sampler<'a>>,
    /// When the board was last refreshed.
    last_view: std::time::Instant,
}

impl<'a> AttemptCoordinator<'a> {
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
        let operators = operators::OperatorCoordinators::new(graph, &tasks);
        let mut run = AttemptCoordinator {
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
            failed_while_stopping: None,
            cancelled_by_user: false,
            savepoint_triggered: false,
            job_finished_sent: false,
            final_checkpoint: None,
            savepoint_storage,
            producers: Vec::new(),
            trace: traced.then(Vec::new),
            accumulators: BTreeMap::new(),
            savepoint_order: None,
            savepoint_pending: None,
            rescale: None,
            rescaling: None,
            after_rescale: None,
            autoscaler: None,
            tasks_running: 0,
            savepoint_targets: SavepointTargets::default(),
            hooks: None,
            operators,
            sampler: None,
            last_view: std::time::Instant::now(),
        };
        run.producers = producers(graph, plan, &run.tasks);
        run
    }

    /// How the attempt ended, once its tasks exited; what it left pending is cleaned up.
    /// Counters count only from the attempt that ended the job (Flink drops a failed
    /// attempt's accumulators too).
    pub(crate) fn end(mut self, reports: &Receiver<TaskReport>, result: &mut JobResult) -> AttemptEnd {
        self.clean_up(reports);
        self.abandon_rescale();
        if self.sampler.is_some() {
            // The attempt's last counts; no command is taken by an attempt that is over.
            self.refresh_view(false);
        }
        self.operators.close();
        result.trace.extend(self.trace.take().into_iter().flatten());
        result.warnings.extend(self.failed_while_stopping.take());
        match self.failure.take() {
            Some(error) => AttemptEnd::Failed(error),
            None => {
                result.accumulators = std::mem::take(&mut self.accumulators);
                if let Some(rescaling) = self.rescaling {
                    AttemptEnd::Rescaled(rescaling)
                } else if self.stopping {
                    AttemptEnd::Stopped
                } else {
                    AttemptEnd::Finished
                }
            }
        }
    }

    /// Starts the operators' coordinators, restored from `restore`'s checkpoint; before any
    /// task runs, so that what they send waits in the mailboxes.
    pub(crate) fn start_operator_coordinators(&mut self, restore: Option<&RestorePlan>) {
        if self.operators.is_empty() {
            return;
        }
        let restored = restore.map(|plan| &plan.source().metadata);
        if let Err(failure) = self.operators.start(restored, &mut self.mailboxes) {
            self.coordinator_failed(failure);
        }
    }

    /// The attempt shows on the job's board: its number on the cluster (`None`: the next
    /// here), every task, each on the TaskManager `task_manager_of` says (0: this
    /// process); `restored`: the checkpoint it restores.
    pub(crate) fn observe_attempt(
        &self,
        number: Option<u32>,
        task_manager_of: &dyn Fn(usize) -> u32,
        restored: Option<&RestorePlan>,
    ) {
        let restored_from = restored.map(|plan| plan.source().location.clone());
        self.graph.services.board.start_attempt(number, &self.tasks, &|_| true, task_manager_of, restored_from);
    }

    /// Samples the subtasks' counters and the coordinators' status onto the job's board,
    /// and publishes the view (on a cluster, to the JobManager); `commands`: then carries
    /// out the commands asked of the board (a local job's REST API; on a cluster the
    /// JobManager relays them).
    fn refresh_view(&mut self, commands: bool) {
        self.last_view = std::time::Instant::now();
        let board = &self.graph.services.board;
        if let Some(sampler) = &self.sampler {
            board.sample(&sampler());
        }
        board.set_coordinators(self.operators.status_lines(), self.operators.gauges());
        if let Some(hooks) = &self.hooks {
            (hooks.publish_view)(board.view());
        }
        if !commands || self.hooks.is_some() {
            return;
        }
        for (request, command) in self.graph.services.board.take_commands() {
            let status = |_: &Self| "a local job shows its status in its REST API (/jobs)".to_string();
            if let CommandOutcome::Answer(answer) = self.command(request, command, &status) {
                self.graph.services.board.answer(request, answer);
            }
        }
    }

    /// The answer to a user's command `request`: to the JobManager on a cluster, else to
    /// the job's board (its REST API).
    pub(crate) fn reply(&self, request: u64, answer: Result<String, String>) {
        match &self.hooks {
            Some(hooks) => (hooks.reply)(request, answer),
            None => self.graph.services.board.answer(request, answer),
        }
    }

    /// A checkpoint that will never complete, on the board.
    fn board_checkpoint_failed(&self, id: CheckpointId, reason: &str) {
        self.graph.services.board.checkpoint_failed(id.0, reason);
    }

    /// What the operators' coordinators show in `eddy status`.
    pub(crate) fn coordinator_status(&self) -> Vec<String> {
        self.operators.status_lines()
    }

    fn coordinator_failed(&mut self, failure: operators::CoordinatorFailure) {
        let (operator, error) = (failure.operator, failure.error);
        tracing::warn!(operator = %operator, cause = %error.message, restartable = error.restartable, "operator \
            coordinator failed; cancelling the attempt");
        self.note(|| format!("coordinator of {operator} failed"));
        let job = self.graph.job_name.clone();
        let (message, restartable) = (error.message, error.restartable);
        self.fail(JobError::CoordinatorFailed { job, operator, message, restartable });
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

    /// Whether any source task still runs.
    fn sources_running(&self) -> bool {
        (0..self.tasks.len()).any(|index| self.is_source(self.tasks[index].0) && !self.coordinator.is_finished(index))
    }

    /// Whether a checkpoint starts at task `index` rather than reaching it as a barrier:
    /// a source starts it; a task that finished is asked for its final state; a task whose
    /// producers all finished snapshots and keeps what it has not processed yet as
    /// in-flight data (no barrier can come from a finished task).
    fn is_triggered(&self, index: usize) -> bool {
        self.is_source(self.tasks[index].0)
            || self.coordinator.is_finished(index)
            || self.producers[index].iter().all(|&producer| self.coordinator.is_finished(producer))
    }

    /// Records an event of the run's trace, when there is one.
    pub(crate) fn note(&mut self, event: impl FnOnce() -> String) {
        if let Some(trace) = self.trace.as_mut() {
            trace.push(event());
        }
    }

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
        subtask_name(self.graph, self.plan, head, subtask)
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
        if self.cancelled_by_user {
            tracing::info!(operator = %operator, subtask = subtask + 1, kind = ?kind, cause = %message, "task failed \
                while the job was being cancelled; the job ends cancelled");
            return;
        }
        // A root cause replaces a cancellation recorded first.
        if matches!(self.failure, Some(JobError::Cancelled { .. })) {
            self.failure = None;
        }
        // Subtasks count from 1 in what people read, as Flink's `(2/4)` and the job's error do.
        let numbered = format!("{}/{parallelism}", subtask + 1);
        tracing::warn!(operator = %operator, subtask = %numbered, kind = ?kind, cause = %message, "task failed; \
            cancelling the attempt");
        self.note(|| format!("task {index} ({operator} {subtask}) failed: {kind:?}"));
        // A peer that stopped first is no failure of this task's own (its connections
        // close); on a rescale, `stopping` is no stop with a savepoint.
        if self.stopping && self.rescaling.is_none() && kind != FailureKind::Cluster {
            // The stop's savepoint is stored and every task was sent its news: the job
            // still ends stopped, since a failover would restore an older checkpoint
            // behind what the other sinks committed. This task may not have committed its
            // part; a job restored from the savepoint does.
            let warning = format!(
                "operator '{operator}' (subtask {numbered}) failed while the job stopped with its savepoint: \
                 {message}; what it had to commit for the savepoint is committed when a job restores from it"
            );
            tracing::warn!(job = %job, "{warning}");
            self.failed_while_stopping.get_or_insert(warning);
            return;
        }
        self.fail(JobError::TaskFailed { job, operator, subtask, parallelism, kind, message });
    }

    fn tick(&mut self) {
        if self.sampler.is_some()
            && self.last_view.elapsed() >= Duration::from_millis(eddy_runtime::observe::VIEW_INTERVAL_MS)
        {
            self.refresh_view(true);
            self.autoscale();
        }
        if self.cancel.load(Ordering::SeqCst) {
            return;
        }
        if let Err(failure) = self.operators.poll(&mut self.mailboxes) {
            return self.coordinator_failed(failure);
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
        // While any task runs (Flink's checkpoints after tasks finished, FLIP-147).
        if self.coordinator.should_trigger(now) {
            self.trigger(SnapshotKind::Checkpoint, now);
        }
        let (expired, counted) = self.coordinator.expire(now);
        for (id, kind) in expired {
            self.note(|| format!("checkpoint {id} expired"));
            self.board_checkpoint_failed(id, "expired before every task acknowledged it");
            self.discard_pending(id, kind);
            tracing::warn!(checkpoint = %id, timeout_ms = self.graph.config.checkpoint.timeout_ms, "checkpoint expired \
                before every task acknowledged it");
            self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(id)));
        }
        if let Err(e) = counted {
            self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!(
                    "{} checkpoints in a row timed out or failed (tolerable: {})",
                    e.consecutive, e.tolerable
                ),
                source: None,
            });
        }
    }

    /// Triggers a checkpoint (or savepoint) of `kind` now; its id.
    fn trigger(&mut self, kind: SnapshotKind, now: u64) -> CheckpointId {
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
        // The coordinators' state first: what they sent before is ahead of the trigger in
        // every mailbox, what they send after is behind it.
        if let Err(failure) = self.operators.checkpoint(id) {
            self.coordinator_failed(failure);
            return id;
        }
        self.note(|| format!("{kind:?} {id} triggered"));
        self.graph.services.board.checkpoint_triggered(id.0, kind == SnapshotKind::Savepoint);
        tracing::debug!(checkpoint = %id, kind = ?kind, "checkpoint triggered");
        self.triggered_at.insert(id.0, (self.clock.now_ms(), WallClock.now_ms()));
        let barrier = CheckpointBarrier { id, kind };
        for index in 0..self.tasks.len() {
            if self.is_triggered(index) {
                self.mailboxes.post(index, Control::TriggerCheckpoint(barrier));
            }
        }
        id
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
            TaskReport::Running { .. } => {
                self.tasks_running += 1;
                if self.tasks_running == self.tasks.len() {
                    self.all_running();
                }
                return;
            }
            TaskReport::OperatorEvent { task, event } => {
                if !self.cancel.load(Ordering::SeqCst) {
                    if let Err(failure) = self.operators.event(task, &event, &mut self.mailboxes) {
                        self.coordinator_failed(failure);
                    }
                }
                return;
            }
            TaskReport::Finished { task, records_in, records_out } => {
                tracing::info!(
                    task = %self.subtask_name(task),
                    records_in,
                    records_out,
                    "task finished its input; checkpoints go on, with its final state"
                );
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
                        self.fail(JobError::Checkpoint { job: self.graph.job_name.clone(), message, source: None });
                        self.abort_checkpoint(checkpoint, kind, &reason, result);
                    }
                    Some(kind) if cause == DeclineCause::WriteFailed => {
                        let reason = format!("{} could not write its part: {reason}", self.task_name(task));
                        self.abort_checkpoint(checkpoint, kind, &reason, result);
                    }
                    Some(kind) => {
                        tracing::info!(checkpoint = %checkpoint, task = %self.task_name(task), reason, "checkpoint \
                            declined by a task not ready for it");
                        self.note(|| format!("{kind:?} {checkpoint} declined"));
                        self.board_checkpoint_failed(
                            checkpoint,
                            &format!("declined by a task not ready for it: {reason}"),
                        );
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
                self.board_checkpoint_failed(*old, "subsumed by a newer checkpoint");
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
                if let Err(failure) = self.operators.checkpoint(id) {
                    return self.coordinator_failed(failure);
                }
                self.final_checkpoint = Some(id);
                self.note(|| format!("final checkpoint {id} triggered"));
                self.triggered_at.insert(id.0, (self.clock.now_ms(), WallClock.now_ms()));
                let barrier = CheckpointBarrier { id, kind: SnapshotKind::Checkpoint };
                self.broadcast(Control::TriggerCheckpoint(barrier));
            }
        }
    }
}

/// Per task of `tasks`, the tasks it reads from: for each edge into its chain's head (an
/// edge into a chain always enters at its head), the same subtask of the chain upstream
/// over a forward edge, every subtask of it over any other.
fn producers(graph: &StreamGraph, plan: &ChainPlan, tasks: &[(NodeId, u32)]) -> Vec<Vec<usize>> {
    tasks
        .iter()
        .map(|&(head, subtask)| {
            let mut producers: Vec<usize> = Vec::new();
            for (_, edge) in graph.edges_into(head) {
                let upstream = plan.head_of[edge.from.0 as usize];
                let one_to_one = matches!(edge.partitioning, eddy_runtime::graph::Partitioning::Forward);
                let reads = |&(h, s): &(NodeId, u32)| h == upstream && (!one_to_one || s == subtask);
                producers.extend((0..tasks.len()).filter(|&index| reads(&tasks[index])));
            }
            producers.sort_unstable();
            producers.dedup();
            producers
        })
        .collect()
}
