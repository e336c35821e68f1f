//! What the operators of one chain share: which operator is running (to name it when
//! something fails), the failure slot, and the job's cancel flag.

use super::async_work::AsyncWork;
use crate::channel::{CheckpointBarrier, CheckpointEvent};
use crate::error::TaskError;
use eddy_checkpoint::acknowledgement::TaskAcknowledgement;
use eddy_checkpoint::storage::TaskStateWriter;
use eddy_checkpoint::{CheckpointError, CheckpointId, CheckpointingMode, OperatorSnapshot, SnapshotKind};
use eddy_types::{Clock, KeyGroupRange, MaxParallelism, SystemClock, WallClock};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Shared by the operators of one subtask's chain; lives on the subtask's thread only.
pub struct TaskShared {
    operator_names: RefCell<Vec<String>>,
    current_operator: Cell<usize>,
    failure: RefCell<Option<TaskError>>,
    cancel: Arc<AtomicBool>,
    clock: Arc<dyn Clock>,
    checkpointing: RefCell<Option<TaskCheckpointing>>,
    accumulators: RefCell<std::collections::BTreeMap<String, Arc<std::sync::atomic::AtomicU64>>>,
    counters: RefCell<Arc<super::TaskCounters>>,
    buffer_timeout_ms: Cell<u64>,
    buffer_debloat: Cell<Option<crate::debloat::BufferDebloat>>,
    /// Records a source emits per step (between two looks at its mailbox): a full batch,
    /// or with buffer debloating what its writers' channels take in about one batch's
    /// drain time, so that a checkpoint trigger does not wait behind seconds of records.
    source_step_records: Cell<usize>,
    /// Per debloating writer of the chain, the records it would have a source step emit;
    /// the step is the smallest.
    source_step_limits: RefCell<Vec<usize>>,
    /// The newest checkpoint or savepoint this task snapshotted.
    last_snapshot: Cell<Option<CheckpointId>>,
    /// The task finished its input: its snapshots from now on are its final state.
    input_finished: Cell<bool>,
    /// The checkpoint this task restores recorded its source as finished on every
    /// subtask: it reads nothing more, and is not run again.
    finished_on_restore: Cell<bool>,
    mode: Cell<CheckpointingMode>,
    /// Processing time: the wall clock (epoch ms), or the simulated clock.
    processing_clock: RefCell<Arc<dyn Clock>>,
    /// The earliest processing time an operator of the chain asked to hear about.
    processing_deadline: Cell<i64>,
    /// The chain's source waits (watermark alignment: it is too far ahead of its group).
    source_paused: Cell<bool>,
    /// Whether exactly-once checkpoints go unaligned, and after what alignment time.
    unaligned: Cell<super::alignment::UnalignedPolicy>,
    /// The task's inputs as unaligned checkpoints see them, until its driver takes them.
    channel_layout: RefCell<Option<super::in_flight::ChannelLayout>>,
    /// Per writer of the chain, whether each of its queues has room for what processing
    /// one batch may send (with unaligned checkpoints a task takes no input otherwise, so
    /// that it is never stuck in a full queue while a barrier wants to overtake it).
    output_room: RefCell<Vec<Box<dyn Fn() -> bool>>>,
}

/// What a task tells the checkpoint coordinator, once the asynchronous part of its
/// snapshot is written.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum TaskReport {
    /// Its part of checkpoint `checkpoint` is written; the handle says where.
    Acknowledge { task: usize, checkpoint: CheckpointId, ack: TaskAcknowledgement },
    /// The task finished its input, having taken `records_in` and sent `records_out`. No
    /// barrier reaches it any more: it snapshots its final state for each later checkpoint
    /// when asked directly.
    Finished { task: usize, records_in: u64, records_out: u64 },
    /// Its part of `checkpoint` (of `kind`) could not be written, or the task could not
    /// take part; `cause` says which.
    Declined { task: usize, checkpoint: CheckpointId, kind: SnapshotKind, reason: String, cause: DeclineCause },
    /// Its counters, as it ended well.
    Accumulators { values: Vec<(String, u64)> },
    /// Its head operator (a source) sent an event to the operator's coordinator.
    OperatorEvent { task: usize, event: Vec<u8> },
    /// Its operators are open, their state restored: it processes records from now on.
    Running { task: usize },
}

impl TaskReport {
    /// The task it is about (counters are about none in particular).
    pub fn task(&self) -> Option<usize> {
        match self {
            TaskReport::Acknowledge { task, .. }
            | TaskReport::Finished { task, .. }
            | TaskReport::Declined { task, .. }
            | TaskReport::OperatorEvent { task, .. }
            | TaskReport::Running { task } => Some(*task),
            TaskReport::Accumulators { .. } => None,
        }
    }
}

/// Why a task declined a checkpoint, and so what the coordinator does about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DeclineCause {
    /// The task was not ready to take part: the checkpoint is aborted without counting
    /// against the tolerable failures (as Flink's such declines).
    NotReady,
    /// Writing its part failed (storage I/O, a snapshot that could not be made): a
    /// failed checkpoint, within the tolerable failures; a later one may succeed.
    WriteFailed,
    /// Its part can never fit the checkpoint storage (above the JobManager memory
    /// storage's cap): no restart mends that, so the job fails at once, saying so.
    CannotFit,
}

/// How a task's snapshots reach checkpoint storage and the coordinator.
pub struct TaskCheckpointing {
    /// The task's index among the job's tasks.
    pub task: usize,
    pub reports: crossbeam_channel::Sender<TaskReport>,
    pub writer: Arc<TaskStateWriter>,
    /// Where the asynchronous part runs.
    pub work: Arc<dyn AsyncWork>,
}

impl TaskShared {
    /// Shared state of a subtask reading the machine's clock.
    pub fn new(cancel: Arc<AtomicBool>) -> Rc<Self> {
        Self::with_clock(cancel, Arc::new(SystemClock::new()))
    }

    /// Shared state of a subtask reading time from `clock` (tests drive it by hand).
    pub fn with_clock(cancel: Arc<AtomicBool>, clock: Arc<dyn Clock>) -> Rc<Self> {
        Rc::new(Self {
            operator_names: RefCell::new(vec!["<task>".to_string()]),
            current_operator: Cell::new(0),
            failure: RefCell::new(None),
            cancel,
            clock,
            checkpointing: RefCell::new(None),
            accumulators: RefCell::default(),
            buffer_timeout_ms: Cell::new(crate::channel::DEFAULT_BUFFER_TIMEOUT_MS),
            buffer_debloat: Cell::new(None),
            source_step_records: Cell::new(crate::channel::BATCH_RECORDS_MAX),
            source_step_limits: RefCell::new(Vec::new()),
            counters: RefCell::default(),
            last_snapshot: Cell::new(None),
            input_finished: Cell::new(false),
            finished_on_restore: Cell::new(false),
            mode: Cell::new(CheckpointingMode::ExactlyOnce),
            processing_clock: RefCell::new(Arc::new(WallClock)),
            processing_deadline: Cell::new(i64::MAX),
            source_paused: Cell::new(false),
            unaligned: Cell::new(Default::default()),
            channel_layout: RefCell::new(None),
            output_room: RefCell::new(Vec::new()),
        })
    }

    /// Whether exactly-once checkpoints go unaligned here.
    pub fn set_unaligned(&self, policy: super::alignment::UnalignedPolicy) {
        self.unaligned.set(policy);
    }

    pub fn unaligned(&self) -> super::alignment::UnalignedPolicy {
        self.unaligned.get()
    }

    /// Whether a writer announces `barrier` ahead of its queued records: an exactly-once
    /// checkpoint with unaligned checkpoints on.
    pub fn announces(&self, barrier: &CheckpointBarrier) -> bool {
        super::alignment::goes_unaligned(self.unaligned.get(), self.mode.get(), barrier)
    }

    /// Where the task's inputs come from, for its driver.
    pub fn set_channel_layout(&self, layout: super::in_flight::ChannelLayout) {
        *self.channel_layout.borrow_mut() = Some(layout);
    }

    /// The driver takes the layout (none in tests that build a driver by hand).
    pub fn take_channel_layout(&self) -> Option<super::in_flight::ChannelLayout> {
        self.channel_layout.borrow_mut().take()
    }

    /// A writer of the chain says whether its queues have room for one batch's output.
    pub fn add_output_room(&self, has_room: Box<dyn Fn() -> bool>) {
        self.output_room.borrow_mut().push(has_room);
    }

    /// Whether every writer of the chain has room for one batch's output.
    pub fn has_output_room(&self) -> bool {
        self.output_room.borrow().iter().all(|has_room| has_room())
    }

    /// Pauses or resumes the chain's source (watermark alignment); checkpoints and
    /// processing time go on while it waits.
    pub fn set_source_paused(&self, paused: bool) {
        self.source_paused.set(paused);
    }

    pub fn is_source_paused(&self) -> bool {
        self.source_paused.get()
    }

    /// Processing time comes from `clock` (the simulation's) instead of the wall clock.
    pub fn set_processing_clock(&self, clock: Arc<dyn Clock>) {
        *self.processing_clock.borrow_mut() = clock;
    }

    /// The current processing time, epoch ms (Flink's `currentProcessingTime`).
    pub fn processing_time(&self) -> i64 {
        self.processing_clock.borrow().now_ms() as i64
    }

    /// Asks for [`crate::Lifecycle::on_processing_time`] once processing time reaches
    /// `time_ms` (the earliest request wins; an operator asks again for its next timer).
    pub fn request_processing_time(&self, time_ms: i64) {
        if time_ms < self.processing_deadline.get() {
            self.processing_deadline.set(time_ms);
        }
    }

    /// The current processing time if a requested time is reached; the request is then
    /// taken, and the chain asks again for what it still waits for.
    pub fn take_due_processing_time(&self) -> Option<i64> {
        let deadline = self.processing_deadline.get();
        if deadline == i64::MAX {
            return None;
        }
        let now = self.processing_time();
        (now >= deadline).then(|| {
            self.processing_deadline.set(i64::MAX);
            now
        })
    }

    /// When an idle task must step again at the latest, on the task's clock: `until_ms`, or
    /// earlier if a processing-time request falls due before.
    pub fn wake_up_by(&self, until_ms: u64) -> u64 {
        let deadline = self.processing_deadline.get();
        if deadline == i64::MAX {
            return until_ms;
        }
        let wait = deadline.saturating_sub(self.processing_time()).max(0) as u64;
        until_ms.min(self.clock.now_ms().saturating_add(wait))
    }

    pub fn set_checkpointing_mode(&self, mode: CheckpointingMode) {
        self.mode.set(mode);
    }

    pub fn checkpointing_mode(&self) -> CheckpointingMode {
        self.mode.get()
    }

    /// Whether a coordinator listens (false in single-task tests).
    pub fn has_coordinator(&self) -> bool {
        self.checkpointing.borrow().is_some()
    }

    /// The way from this task's head operator to its coordinator (none in single-task
    /// tests).
    pub fn operator_event_gateway(&self) -> Option<crate::coordination::OperatorEventGateway> {
        let checkpointing = self.checkpointing.borrow();
        checkpointing.as_ref().map(|c| crate::coordination::OperatorEventGateway::new(c.task, c.reports.clone()))
    }

    /// Where this task's snapshots and reports go.
    pub fn set_checkpointing(&self, checkpointing: TaskCheckpointing) {
        *self.checkpointing.borrow_mut() = Some(checkpointing);
    }

    /// The synchronous part of `barrier` is taken: the asynchronous part writes the
    /// snapshots off the task thread, then acknowledges (dropped when no coordinator).
    pub fn acknowledge(&self, barrier: &CheckpointBarrier, snapshots: Vec<OperatorSnapshot>) {
        self.last_snapshot.set(Some(barrier.id));
        let checkpointing = self.checkpointing.borrow();
        let Some(c) = checkpointing.as_ref() else { return };
        let (task, reports, writer) = (c.task, c.reports.clone(), c.writer.clone());
        let (id, kind) = (barrier.id, barrier.kind);
        // A finished task's snapshot is its final state: the checkpoint records it so.
        let finished = self.input_finished.get();
        c.work.submit(Box::new(move || {
            let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.write(id, kind, snapshots)));
            let report = match written {
                Ok(Ok(mut ack)) => {
                    ack.entry.finished = finished;
                    TaskReport::Acknowledge { task, checkpoint: id, ack }
                }
                Ok(Err(e)) => {
                    let cause = match e {
                        CheckpointError::StateTooLarge { .. } => DeclineCause::CannotFit,
                        _ => DeclineCause::WriteFailed,
                    };
                    TaskReport::Declined { task, checkpoint: id, kind, reason: eddy_types::chain(&e), cause }
                }
                Err(_) => TaskReport::Declined {
                    task,
                    checkpoint: id,
                    kind,
                    cause: DeclineCause::WriteFailed,
                    reason: "writing the state panicked (internal error, please report)".into(),
                },
            };
            let _ = reports.send(report);
        }));
    }

    /// This task cannot take part in checkpoint `barrier` (it is not ready): the checkpoint
    /// is aborted without counting as a failure.
    pub fn decline(&self, barrier: &CheckpointBarrier, reason: &str) {
        if let Some(c) = self.checkpointing.borrow().as_ref() {
            let _ = c.reports.send(TaskReport::Declined {
                task: c.task,
                checkpoint: barrier.id,
                kind: barrier.kind,
                reason: reason.to_string(),
                cause: DeclineCause::NotReady,
            });
        }
    }

    /// Whether this task snapshotted checkpoint `id` already (by its barrier, before the
    /// coordinator heard it finished and asked again).
    pub fn has_snapshotted(&self, id: CheckpointId) -> bool {
        self.last_snapshot.get().is_some_and(|last| last >= id)
    }

    /// The task's counter `name` (Flink's `LongCounter` accumulator): its functions add
    /// to it, and the job's result holds the sum over every subtask once the job finished
    /// (whichever process the subtasks ran in).
    pub fn long_counter(&self, name: &str) -> Arc<std::sync::atomic::AtomicU64> {
        self.accumulators.borrow_mut().entry(name.to_string()).or_default().clone()
    }

    /// How often partial batches go out while input keeps coming; 0: after every record.
    pub fn set_buffer_timeout_ms(&self, timeout_ms: u64) {
        self.buffer_timeout_ms.set(timeout_ms);
    }

    pub fn buffer_timeout_ms(&self) -> u64 {
        self.buffer_timeout_ms.get()
    }

    /// `Some`: the task's writers size their batches by the drain rate of each channel.
    pub fn set_buffer_debloat(&self, debloat: Option<crate::debloat::BufferDebloat>) {
        self.buffer_debloat.set(debloat);
    }

    pub fn buffer_debloat(&self) -> Option<crate::debloat::BufferDebloat> {
        self.buffer_debloat.get()
    }

    /// How many records a source of this chain emits per step.
    pub fn source_step_records(&self) -> usize {
        self.source_step_records.get()
    }

    /// A debloating writer of the chain: its slot for [`Self::set_source_step_limit`].
    pub fn add_source_step_limit(&self) -> usize {
        let mut limits = self.source_step_limits.borrow_mut();
        limits.push(crate::channel::BATCH_RECORDS_MAX);
        limits.len() - 1
    }

    /// A debloating writer's batch sizes changed: a source step emits about one batch per
    /// channel of the writer that wants the fewest records.
    pub fn set_source_step_limit(&self, slot: usize, records: usize) {
        let mut limits = self.source_step_limits.borrow_mut();
        if let Some(limit) = limits.get_mut(slot) {
            *limit = records;
        }
        let step = limits.iter().copied().min().unwrap_or(crate::channel::BATCH_RECORDS_MAX);
        self.source_step_records.set(step.clamp(1, crate::channel::BATCH_RECORDS_MAX));
    }

    /// Where the task counts its records and backpressure (read elsewhere for `status`).
    pub fn set_counters(&self, counters: Arc<super::TaskCounters>) {
        *self.counters.borrow_mut() = counters;
    }

    pub fn counters(&self) -> Arc<super::TaskCounters> {
        self.counters.borrow().clone()
    }

    /// Reports the task's counters, as it ends well.
    pub fn publish_accumulators(&self) {
        let values: Vec<(String, u64)> = self
            .accumulators
            .borrow()
            .iter()
            .map(|(name, value)| (name.clone(), value.load(std::sync::atomic::Ordering::SeqCst)))
            .collect();
        if values.is_empty() {
            return;
        }
        if let Some(c) = self.checkpointing.borrow().as_ref() {
            let _ = c.reports.send(TaskReport::Accumulators { values });
        }
    }

    /// Reports that this task's operators are open, their state restored.
    pub fn running(&self) {
        if let Some(c) = self.checkpointing.borrow().as_ref() {
            let _ = c.reports.send(TaskReport::Running { task: c.task });
        }
    }

    /// The checkpoint this task restores recorded its source as finished on every
    /// subtask (see [`eddy_checkpoint::metadata::TaskStateEntry::finished`]).
    pub fn set_finished_on_restore(&self) {
        self.finished_on_restore.set(true);
    }

    pub fn is_finished_on_restore(&self) -> bool {
        self.finished_on_restore.get()
    }

    /// Reports that this task finished its input.
    pub fn finished(&self) {
        self.input_finished.set(true);
        if let Some(c) = self.checkpointing.borrow().as_ref() {
            let counted = self.counters().snapshot();
            let (records_in, records_out) = (counted.records_in, counted.records_out);
            let _ = c.reports.send(TaskReport::Finished { task: c.task, records_in, records_out });
        }
    }

    /// What became of a checkpoint, for the task's own bookkeeping (which shared files its
    /// next checkpoint may reference).
    pub fn checkpoint_event(&self, event: CheckpointEvent) {
        if let Some(c) = self.checkpointing.borrow().as_ref() {
            match event {
                CheckpointEvent::Completed(id) => c.writer.completed(id),
                CheckpointEvent::Aborted(id) => c.writer.aborted(id),
            }
        }
    }

    /// The task restores `snapshot`: its owned shared files may be referenced later.
    pub fn restored(&self, snapshot: &OperatorSnapshot) {
        if let Some(c) = self.checkpointing.borrow().as_ref() {
            c.writer.restored(snapshot);
        }
    }

    /// The task's clock.
    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// Registers an operator of the chain; the index names it in failures.
    pub fn register_operator(&self, name: &str) -> usize {
        let mut names = self.operator_names.borrow_mut();
        names.push(name.to_string());
        names.len() - 1
    }

    /// Marks operator `index` as running; returns the previous one for [`TaskShared::leave`].
    /// Cheap (two `Cell` writes per record and operator) and makes a panic nameable.
    #[inline]
    pub fn enter(&self, index: usize) -> usize {
        self.current_operator.replace(index)
    }

    #[inline]
    pub fn leave(&self, previous: usize) {
        self.current_operator.set(previous);
    }

    /// The name of the operator that was running last.
    pub fn current_operator_name(&self) -> String {
        self.operator_names.borrow()[self.current_operator.get()].clone()
    }

    pub fn operator_name(&self, index: usize) -> String {
        self.operator_names.borrow()[index].clone()
    }

    /// Records a failure of operator `index`; the first failure wins.
    pub fn fail(&self, index: usize, message: String) {
        let mut failure = self.failure.borrow_mut();
        if failure.is_none() {
            *failure = Some(TaskError::Operator { operator: self.operator_name(index), message });
        }
    }

    /// Records an error that is already a task error (e.g. cancellation seen by a writer).
    pub fn fail_with(&self, error: TaskError) {
        let mut failure = self.failure.borrow_mut();
        if failure.is_none() {
            *failure = Some(error);
        }
    }

    #[inline]
    pub fn has_failed(&self) -> bool {
        self.failure.borrow().is_some()
    }

    /// `Err` with the recorded failure, if any.
    #[inline]
    pub fn check(&self) -> Result<(), TaskError> {
        match self.failure.borrow_mut().take() {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }

    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The flag [`TaskShared::is_cancelled`] reads, for an operator that blocks in a wait
    /// of its own (async I/O with a full queue) and must notice a cancel there.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }
}

/// What an operator instance knows about itself when it is built.
#[derive(Clone)]
pub struct OperatorInfo {
    pub name: String,
    pub uid: String,
    pub subtask: u32,
    pub parallelism: u32,
    pub max_parallelism: MaxParallelism,
    /// The key groups this subtask owns (all of them for non-keyed operators).
    pub key_group_range: KeyGroupRange,
    /// This operator's index in [`TaskShared`].
    pub index: usize,
    /// The side-output tag of each output port (`None` for the main output).
    pub output_tags: Vec<Option<String>>,
    /// This instance's state in the checkpoint the job restores from.
    pub restored: Option<OperatorSnapshot>,
    /// Makes the keyed backend when the operator is keyed.
    pub state_backend: Arc<dyn eddy_state::KeyedBackendFactory>,
    /// Checkpoints may take the backend's own format (the checkpoint storage keeps files).
    pub native_snapshots: bool,
    /// Its operator has a coordinator with the JobMaster: it may send it events.
    pub coordinated: bool,
    /// The seed of this attempt of the run, for ids and file names.
    pub seed: eddy_types::RunSeed,
    /// Under simulation, the clock state time-to-live reads (else the wall clock).
    pub ttl_clock: Option<Arc<dyn Clock>>,
    pub shared: Rc<TaskShared>,
}
