//! Operator coordinators (Flink's `OperatorCoordinator`): the part of an operator that runs
//! once per job with the JobMaster, not in its subtasks, and talks with the subtasks by
//! events of bytes. A source's split enumerator is one: it discovers splits, hands them to
//! the source's readers, and is checkpointed with the job.
//!
//! Why its checkpoints are consistent with the readers' without any extra protocol: the
//! JobMaster takes the coordinator's state when it triggers a checkpoint, and then posts
//! the trigger to the source subtasks' mailboxes, behind every event it sent them before.
//! A subtask takes its mailbox in order, so an event sent before the coordinator's
//! snapshot reaches the reader before its own snapshot, and an event sent after reaches
//! it after: a split is in exactly one of the two snapshots, never in both or neither.
//! A failure restarts the whole attempt from one checkpoint, coordinators included, so
//! what a failed reader held goes back to the coordinator's restored state.
//!
//! The other direction has no such cut: an event a subtask sent before its snapshot may
//! reach the coordinator after the coordinator's. Subtask events must therefore carry no
//! state of their own (a request, a progress report), and a subtask asks again after a
//! restore. A source may finish only once its coordinator said nothing more comes; an
//! event reaching a finished source fails the attempt.
//!
//! The same path runs in every executor: local threads, the simulator, and task
//! executors on a cluster, whose mailbox messages and reports travel over their
//! connection to the JobMaster in order.

use crate::task::TaskReport;
use eddy_checkpoint::CheckpointId;
use eddy_types::SubtaskIndex;
use std::sync::Arc;

/// Why a coordinator failed, and whether a restart may mend it: a setting that cannot work
/// or restored state that cannot be read fails the same way after every restart, so the
/// job fails at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CoordinatorError {
    pub message: String,
    pub restartable: bool,
}

impl CoordinatorError {
    /// A failure a restart may mend (a service that did not answer).
    pub fn restartable(message: impl Into<String>) -> Self {
        Self { message: message.into(), restartable: true }
    }

    /// A failure every restart would meet again (bad settings, unreadable state).
    pub fn permanent(message: impl Into<String>) -> Self {
        Self { message: message.into(), restartable: false }
    }
}

/// What a coordinator's methods return.
pub type CoordinatorResult<T = ()> = Result<T, CoordinatorError>;

/// The JobMaster's side of an operator. Every method runs on the JobMaster's coordinator
/// thread and must not block: work that waits (a broker's metadata) belongs on a thread
/// of its own, whose results [`OperatorCoordinator::poll`] takes. An error fails the
/// attempt, which restarts under the restart strategy.
pub trait OperatorCoordinator: Send {
    /// The attempt starts, from what the checkpoint it restores holds of this coordinator.
    fn start(&mut self, restored: CoordinatorRestore<'_>, ctx: &mut CoordinatorContext<'_>) -> CoordinatorResult;

    /// Subtask `subtask` sent `event`.
    fn handle_event(
        &mut self,
        subtask: SubtaskIndex,
        event: &[u8],
        ctx: &mut CoordinatorContext<'_>,
    ) -> CoordinatorResult;

    /// Called every few milliseconds: work that finished elsewhere.
    fn poll(&mut self, _ctx: &mut CoordinatorContext<'_>) -> CoordinatorResult {
        Ok(())
    }

    /// Its state for checkpoint `checkpoint`, taken before the trigger reaches any subtask.
    fn checkpoint(&mut self, checkpoint: CheckpointId) -> CoordinatorResult<Vec<u8>>;

    /// Checkpoint `checkpoint` completed everywhere.
    fn notify_checkpoint_complete(&mut self, _checkpoint: CheckpointId) {}

    /// The attempt ended; release what it holds (threads, connections).
    fn close(&mut self) {}

    /// Lines for `eddy status` (a source's consumer lag per partition); default none.
    fn status(&self) -> Vec<String> {
        Vec::new()
    }

    /// Gauges for the REST API and `/metrics` (a source's consumer lag per partition, as
    /// `kafka_consumer_lag` with `topic` and `partition` labels); the JobMaster adds the
    /// job's and the operator's labels. Default none.
    fn gauges(&self) -> Vec<GaugeView> {
        Vec::new()
    }
}

pub use eddy_rpc::view::GaugeView;

/// Where a coordinator starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorRestore<'a> {
    /// Nothing is restored for its operator: the job starts afresh, or the checkpoint
    /// does not know the operator.
    Fresh,
    /// Its state in the restored checkpoint.
    State(&'a [u8]),
    /// The checkpoint holds the operator's subtasks' state but no coordinator state (it
    /// was written before eddy checkpointed coordinators, format 2 and earlier): whatever
    /// the job had handed out is with the subtasks.
    WithoutState,
}

impl CoordinatorRestore<'_> {
    /// For logs: where it starts from, without the bytes.
    pub fn describe(&self) -> String {
        match self {
            Self::Fresh => "fresh".into(),
            Self::State(state) => format!("{} bytes of state", state.len()),
            Self::WithoutState => "a checkpoint without coordinator state".into(),
        }
    }
}

/// Makes an operator's coordinator, once per attempt (Flink's `OperatorCoordinator.Provider`).
pub type CoordinatorProvider = Arc<dyn Fn() -> Box<dyn OperatorCoordinator> + Send + Sync>;

/// What a coordinator may do during a call: know its operator's parallelism and send
/// events to its subtasks, which leave when the call returns, in order.
pub struct CoordinatorContext<'a> {
    parallelism: u32,
    outbox: &'a mut Vec<(u32, Vec<u8>)>,
}

impl<'a> CoordinatorContext<'a> {
    pub fn new(parallelism: u32, outbox: &'a mut Vec<(u32, Vec<u8>)>) -> Self {
        Self { parallelism, outbox }
    }

    /// The parallelism of the operator in this attempt.
    pub fn parallelism(&self) -> u32 {
        self.parallelism
    }

    /// Sends `event` to subtask `subtask` (`0..parallelism`; others are dropped).
    pub fn send_event(&mut self, subtask: SubtaskIndex, event: Vec<u8>) {
        if subtask.0 < self.parallelism {
            self.outbox.push((subtask.0, event));
        }
    }
}

/// A subtask's way to its operator's coordinator (Flink's `OperatorEventGateway`). It can
/// be cloned into the operator's function; events go with the task's reports.
#[derive(Clone)]
pub struct OperatorEventGateway {
    task: usize,
    reports: crossbeam_channel::Sender<TaskReport>,
}

impl OperatorEventGateway {
    pub(crate) fn new(task: usize, reports: crossbeam_channel::Sender<TaskReport>) -> Self {
        Self { task, reports }
    }

    /// Sends `event` to the coordinator. Dropped once the attempt ended.
    pub fn send(&self, event: Vec<u8>) {
        let _ = self.reports.send(TaskReport::OperatorEvent { task: self.task, event });
    }
}

impl std::fmt::Debug for OperatorEventGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OperatorEventGateway(task {})", self.task)
    }
}
