//! The mailbox loop of a subtask, one [`TaskDriver::step`] at a time: take control
//! messages if there are any, else one batch of input (or, for a source, produce one
//! batch), then check the failure slot. A step never blocks: with nothing to do it says
//! so ([`StepResult::Idle`]), and whoever drives the task decides how to wait — a thread
//! of its own blocks in [`TaskDriver::wait_for_input`], the simulator steps another task.
//! A test can drive a task by calling `step` itself.
//!
//! Barriers travel in band. A task with inputs aligns them ([`BarrierAligner`]), holding
//! back envelopes of blocked channels in a queue until the snapshot is taken, then replays
//! them. What happens after the input ended (the final snapshot, waiting for the job's
//! end) is the same for every driver and lives in [`super::Task`].

use super::alignment::{Alignment, BarrierAligner};
use super::context::TaskShared;
use super::mailbox::{Control, MailboxReceiver};
use crate::channel::{BatchReceiver, CheckpointBarrier, CheckpointEvent, Envelope, StreamMessage, FLUSH_INTERVAL_MS};
use crate::error::TaskError;
use crate::output::Output;
use crossbeam_channel::{never, select, Receiver, Select, TryRecvError};
use eddy_checkpoint::OperatorSnapshot;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// How long a subtask with nothing to do waits before it looks at the cancel flag again.
pub const IDLE_WAIT_MS: u64 = 50;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepResult {
    /// Did some work; step again.
    Continue,
    /// Nothing to do until input or a control message arrives, or at the latest until
    /// `until_ms` on the task's clock (a flush or a look at the cancel flag is due).
    Idle { until_ms: u64 },
    /// All input ended and the chain finished.
    Finished,
}

/// A subtask's loop, as the executor sees it. No method blocks but `wait_for_input`.
pub trait TaskDriver {
    fn open(&mut self) -> Result<(), TaskError>;
    /// Takes control messages, then one batch of input; never blocks.
    fn step(&mut self) -> Result<StepResult, TaskError>;
    /// Blocks until an input channel or the mailbox has something, or `timeout` passed.
    /// Takes nothing: the next `step` does.
    fn wait_for_input(&self, timeout: Duration);
    /// The chain's head, its mailbox and what its operators share, for the task's end.
    fn parts(&mut self) -> (&mut dyn ChainHead, &MailboxReceiver, &TaskShared);
    fn close(&mut self);
}

/// Waits until one of `receivers` or the mailbox has a message (or it disconnected).
fn wait_on(mailbox: &MailboxReceiver, receivers: &[&dyn ReadyWatch], timeout: Duration) {
    let mut select = Select::new();
    select.recv(mailbox);
    for receiver in receivers {
        receiver.register(&mut select);
    }
    let _ = select.ready_timeout(timeout);
}

/// A receiver of any message type that a [`Select`] can watch.
trait ReadyWatch {
    fn register<'a>(&'a self, select: &mut Select<'a>);
}

impl<T> ReadyWatch for Receiver<T> {
    fn register<'a>(&'a self, select: &mut Select<'a>) {
        select.recv(self);
    }
}

/// When an idle task steps again at the latest.
fn idle(shared: &TaskShared) -> StepResult {
    StepResult::Idle { until_ms: shared.clock().now_ms() + IDLE_WAIT_MS }
}

/// What the control messages need of a chain's head, whatever its shape.
pub trait ChainHead {
    fn snapshot(&mut self, barrier: &CheckpointBarrier, snapshots: &mut Vec<OperatorSnapshot>)
        -> Result<(), TaskError>;
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError>;
}

impl<T> ChainHead for Box<dyn Output<T>> {
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        Output::snapshot(&mut **self, barrier, snapshots)
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        Output::notify_checkpoint(&mut **self, event)
    }
}

/// Snapshots the chain for `barrier` and acknowledges it to the coordinator.
pub(super) fn snapshot_and_acknowledge(
    head: &mut dyn ChainHead,
    shared: &TaskShared,
    barrier: &CheckpointBarrier,
) -> Result<(), TaskError> {
    let mut snapshots = Vec::new();
    head.snapshot(barrier, &mut snapshots)?;
    shared.check()?;
    shared.acknowledge(barrier, snapshots);
    Ok(())
}

/// Takes every waiting control message. Triggers only reach sources (`is_source`).
fn take_controls(
    mailbox: &MailboxReceiver,
    shared: &TaskShared,
    head: &mut dyn ChainHead,
    is_source: bool,
) -> Result<(), TaskError> {
    loop {
        match mailbox.try_recv() {
            Ok(Control::Cancel) | Err(TryRecvError::Disconnected) => return Err(TaskError::Cancelled),
            Ok(Control::TriggerCheckpoint(barrier)) if is_source => snapshot_and_acknowledge(head, shared, &barrier)?,
            Ok(Control::TriggerCheckpoint(_)) | Ok(Control::JobFinished) => {}
            Ok(Control::Checkpoint(event)) => {
                shared.checkpoint_event(event);
                head.notify_checkpoint(event)?;
                shared.check()?;
            }
            Err(TryRecvError::Empty) if shared.is_cancelled() => return Err(TaskError::Cancelled),
            Err(TryRecvError::Empty) => return Ok(()),
        }
    }
}

/// Flushes partial batches at least every [`FLUSH_INTERVAL_MS`] while input keeps coming.
struct FlushTimer {
    last_ms: u64,
}

impl FlushTimer {
    fn new(shared: &TaskShared) -> Self {
        Self { last_ms: shared.clock().now_ms() }
    }

    fn due(&mut self, shared: &TaskShared) -> bool {
        let now_ms = shared.clock().now_ms();
        if now_ms.saturating_sub(self.last_ms) >= FLUSH_INTERVAL_MS {
            self.last_ms = now_ms;
            true
        } else {
            false
        }
    }
}

/// Counts end-of-input markers of one input gate.
struct Gate<T> {
    receiver: Receiver<Envelope<T>>,
    ends_expected: usize,
    ends_seen: usize,
    /// Envelopes of channels blocked by alignment, in arrival order.
    held: VecDeque<Envelope<T>>,
}

impl<T> Gate<T> {
    fn new(receiver: Receiver<Envelope<T>>, ends_expected: usize) -> Self {
        Self { receiver, ends_expected, ends_seen: 0, held: VecDeque::new() }
    }

    fn ended(&self) -> bool {
        self.ends_seen >= self.ends_expected
    }
}

/// Drives a chain whose head has one input (one gate, possibly fed by several edges).
pub struct OneInputDriver<T> {
    gate: Gate<T>,
    aligner: BarrierAligner,
    head: Box<dyn Output<T>>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
}

impl<T> OneInputDriver<T> {
    pub fn new(
        receiver: BatchReceiver<T>,
        ends_expected: usize,
        head: Box<dyn Output<T>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
    ) -> Self {
        Self {
            gate: Gate::new(receiver, ends_expected),
            aligner: BarrierAligner::new(shared.checkpointing_mode(), ends_expected),
            head,
            mailbox,
            flush: FlushTimer::new(&shared),
            shared,
        }
    }

    fn handle(&mut self, envelope: Envelope<T>) -> Result<StepResult, TaskError> {
        let channel = envelope.channel as usize;
        if self.aligner.is_blocked(channel) {
            self.gate.held.push_back(envelope);
            return Ok(StepResult::Continue);
        }
        match envelope.message {
            StreamMessage::Records(batch) => {
                for record in batch {
                    self.head.collect(record);
                }
                self.shared.check()?;
                if self.flush.due(&self.shared) {
                    self.head.flush()?;
                }
                Ok(StepResult::Continue)
            }
            StreamMessage::Barrier(barrier) => {
                let alignment = self.aligner.on_barrier(channel, barrier);
                self.aligned(alignment)
            }
            StreamMessage::EndOfInput => {
                self.gate.ends_seen += 1;
                let alignment = self.aligner.on_end_of_input(channel);
                if self.aligned(alignment)? == StepResult::Finished {
                    return Ok(StepResult::Finished);
                }
                if self.gate.ended() {
                    self.head.end_input()?;
                    self.shared.check()?;
                    return Ok(StepResult::Finished);
                }
                Ok(StepResult::Continue)
            }
        }
    }

    /// On a completed alignment: snapshot, acknowledge, then replay what was held back.
    fn aligned(&mut self, alignment: Alignment) -> Result<StepResult, TaskError> {
        let Alignment::Complete(barrier) = alignment else { return Ok(StepResult::Continue) };
        snapshot_and_acknowledge(&mut self.head, &self.shared, &barrier)?;
        let held = std::mem::take(&mut self.gate.held);
        for envelope in held {
            if self.handle(envelope)? == StepResult::Finished {
                return Ok(StepResult::Finished);
            }
        }
        Ok(StepResult::Continue)
    }
}

impl<T> TaskDriver for OneInputDriver<T> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.head.open()?;
        self.shared.check()?;
        if self.gate.ended() {
            self.head.end_input()?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        if self.gate.ended() {
            return Ok(StepResult::Finished);
        }
        take_controls(&self.mailbox, &self.shared, &mut self.head, false)?;
        match self.gate.receiver.try_recv() {
            Ok(envelope) => self.handle(envelope),
            Err(TryRecvError::Disconnected) => Err(TaskError::Cancelled),
            Err(TryRecvError::Empty) => {
                // Nothing waiting: send partial batches on before idling, for latency.
                self.head.flush()?;
                self.shared.check()?;
                Ok(idle(&self.shared))
            }
        }
    }

    fn wait_for_input(&self, timeout: Duration) {
        wait_on(&self.mailbox, &[&self.gate.receiver], timeout);
    }

    fn parts(&mut self) -> (&mut dyn ChainHead, &MailboxReceiver, &TaskShared) {
        (&mut self.head, &self.mailbox, &self.shared)
    }

    fn close(&mut self) {
        self.head.close();
    }
}

/// The head of a chain with two inputs (`connect`): records of either side.
pub trait TwoInputOperator<A, B> {
    fn process1(&mut self, record: A);
    fn process2(&mut self, record: B);
    fn open(&mut self) -> Result<(), TaskError>;
    fn flush(&mut self) -> Result<(), TaskError>;
    /// Both inputs have ended.
    fn end_input(&mut self) -> Result<(), TaskError>;
    fn close(&mut self);
    fn snapshot(&mut self, barrier: &CheckpointBarrier, snapshots: &mut Vec<OperatorSnapshot>)
        -> Result<(), TaskError>;
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError>;
}

impl<A, B> ChainHead for Box<dyn TwoInputOperator<A, B>> {
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        TwoInputOperator::snapshot(&mut **self, barrier, snapshots)
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        TwoInputOperator::notify_checkpoint(&mut **self, event)
    }
}

/// Drives a two-input chain head, taking batches from whichever input has one.
pub struct TwoInputDriver<A, B> {
    first: Gate<A>,
    second: Gate<B>,
    /// Channels of input 1 first, then those of input 2.
    aligner: BarrierAligner,
    head: Box<dyn TwoInputOperator<A, B>>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
    /// Read input 2 to its end before any of input 1 (Flink's `InputSelectable`).
    second_first: bool,
}

enum Either<A, B> {
    First(Envelope<A>),
    Second(Envelope<B>),
}

/// Takes one envelope of one input of a two-input task (`offset`: where its channels start
/// in the aligner). `None` when alignment holds it back; else whether it ended a channel,
/// and what it did to the alignment.
fn take_side<X>(
    gate: &mut Gate<X>,
    aligner: &mut BarrierAligner,
    offset: usize,
    envelope: Envelope<X>,
    process: impl FnMut(X),
) -> Option<(bool, Alignment)> {
    let channel = offset + envelope.channel as usize;
    if aligner.is_blocked(channel) {
        gate.held.push_back(envelope);
        return None;
    }
    Some(match envelope.message {
        StreamMessage::Records(batch) => {
            batch.into_iter().for_each(process);
            (false, Alignment::Pending)
        }
        StreamMessage::Barrier(barrier) => (false, aligner.on_barrier(channel, barrier)),
        StreamMessage::EndOfInput => {
            gate.ends_seen += 1;
            (true, aligner.on_end_of_input(channel))
        }
    })
}

impl<A, B> TwoInputDriver<A, B> {
    /// Which inputs may be read now: not an ended one, and not input 1 while input 2 is
    /// read first.
    fn readable(&self) -> (bool, bool) {
        let hold_first = self.first.ended() || (self.second_first && !self.second.ended());
        (!hold_first, !self.second.ended())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn new(
        first: BatchReceiver<A>,
        first_ends: usize,
        second: BatchReceiver<B>,
        second_ends: usize,
        head: Box<dyn TwoInputOperator<A, B>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
        second_first: bool,
    ) -> Self {
        Self {
            first: Gate::new(first, first_ends),
            second: Gate::new(second, second_ends),
            aligner: BarrierAligner::new(shared.checkpointing_mode(), first_ends + second_ends),
            head,
            mailbox,
            flush: FlushTimer::new(&shared),
            shared,
            second_first,
        }
    }

    fn handle(&mut self, next: Either<A, B>) -> Result<StepResult, TaskError> {
        let offset = self.first.ends_expected;
        let head = &mut self.head;
        let taken = match next {
            Either::First(envelope) => take_side(&mut self.first, &mut self.aligner, 0, envelope, |r| head.process1(r)),
            Either::Second(envelope) => {
                take_side(&mut self.second, &mut self.aligner, offset, envelope, |r| head.process2(r))
            }
        };
        let Some((message_was_end, alignment)) = taken else { return Ok(StepResult::Continue) };
        self.shared.check()?;
        if let Alignment::Complete(barrier) = alignment {
            snapshot_and_acknowledge(&mut self.head, &self.shared, &barrier)?;
            let held_first = std::mem::take(&mut self.first.held);
            let held_second = std::mem::take(&mut self.second.held);
            let replay = held_first.into_iter().map(Either::First).chain(held_second.into_iter().map(Either::Second));
            for next in replay.collect::<Vec<_>>() {
                if self.handle(next)? == StepResult::Finished {
                    return Ok(StepResult::Finished);
                }
            }
        }
        if message_was_end && self.first.ended() && self.second.ended() {
            self.head.end_input()?;
            self.shared.check()?;
            return Ok(StepResult::Finished);
        }
        if self.flush.due(&self.shared) {
            self.head.flush()?;
        }
        Ok(StepResult::Continue)
    }
}

impl<A, B> TaskDriver for TwoInputDriver<A, B> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.head.open()?;
        self.shared.check()
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        if self.first.ended() && self.second.ended() {
            return Ok(StepResult::Finished);
        }
        take_controls(&self.mailbox, &self.shared, &mut self.head, false)?;
        let (read_first, read_second) = self.readable();
        let first = if read_first { &self.first.receiver } else { &never() };
        let second = if read_second { &self.second.receiver } else { &never() };
        let next = select! {
            recv(first) -> m => m.map(Either::First),
            recv(second) -> m => m.map(Either::Second),
            default => {
                self.head.flush()?;
                self.shared.check()?;
                return Ok(idle(&self.shared));
            }
        };
        match next {
            Ok(next) => self.handle(next),
            Err(_) => Err(TaskError::Cancelled),
        }
    }

    fn wait_for_input(&self, timeout: Duration) {
        match self.readable() {
            (true, true) => wait_on(&self.mailbox, &[&self.first.receiver, &self.second.receiver], timeout),
            (true, false) => wait_on(&self.mailbox, &[&self.first.receiver], timeout),
            (false, true) => wait_on(&self.mailbox, &[&self.second.receiver], timeout),
            (false, false) => wait_on(&self.mailbox, &[], timeout),
        }
    }

    fn parts(&mut self) -> (&mut dyn ChainHead, &MailboxReceiver, &TaskShared) {
        (&mut self.head, &self.mailbox, &self.shared)
    }

    fn close(&mut self) {
        self.head.close();
    }
}

/// What a source's [`SourceOperator::emit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStatus {
    /// Emitted records; call again.
    More,
    /// Nothing available right now (it waited a little); call again.
    Idle,
    /// The source is exhausted.
    Finished,
}

/// The head of a source chain: produces records into its chain.
pub trait SourceOperator {
    fn open(&mut self) -> Result<(), TaskError>;
    /// Emits up to one batch of records; errors go into the task's failure slot.
    fn emit(&mut self) -> SourceStatus;
    fn flush(&mut self) -> Result<(), TaskError>;
    fn end_input(&mut self) -> Result<(), TaskError>;
    fn close(&mut self);
    fn snapshot(&mut self, barrier: &CheckpointBarrier, snapshots: &mut Vec<OperatorSnapshot>)
        -> Result<(), TaskError>;
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError>;
}

impl ChainHead for Box<dyn SourceOperator> {
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        SourceOperator::snapshot(&mut **self, barrier, snapshots)
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        SourceOperator::notify_checkpoint(&mut **self, event)
    }
}

/// Drives a source chain; checkpoints start here, between two batches.
pub struct SourceDriver {
    source: Box<dyn SourceOperator>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
}

impl SourceDriver {
    pub fn new(source: Box<dyn SourceOperator>, mailbox: MailboxReceiver, shared: Rc<TaskShared>) -> Self {
        Self { source, mailbox, flush: FlushTimer::new(&shared), shared }
    }
}

impl TaskDriver for SourceDriver {
    fn open(&mut self) -> Result<(), TaskError> {
        self.source.open()?;
        self.shared.check()
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        take_controls(&self.mailbox, &self.shared, &mut self.source, true)?;
        let status = self.source.emit();
        self.shared.check()?;
        match status {
            SourceStatus::More => {
                if self.flush.due(&self.shared) {
                    self.source.flush()?;
                }
                Ok(StepResult::Continue)
            }
            SourceStatus::Idle => {
                // The source waited a little itself.
                self.source.flush()?;
                Ok(StepResult::Idle { until_ms: self.shared.clock().now_ms() })
            }
            SourceStatus::Finished => {
                self.source.end_input()?;
                self.shared.check()?;
                Ok(StepResult::Finished)
            }
        }
    }

    fn wait_for_input(&self, timeout: Duration) {
        wait_on(&self.mailbox, &[], timeout);
    }

    fn parts(&mut self) -> (&mut dyn ChainHead, &MailboxReceiver, &TaskShared) {
        (&mut self.source, &self.mailbox, &self.shared)
    }

    fn close(&mut self) {
        self.source.close();
    }
}
