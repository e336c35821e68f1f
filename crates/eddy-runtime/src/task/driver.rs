//! The mailbox loop of a subtask, one [`TaskDriver::step`] at a time: take control
//! messages if there are any, else one batch of input (or, for a source, produce one
//! batch), then check the failure slot. A step never waits for input: with nothing to do
//! it says so ([`StepResult::Idle`]), and whoever drives the task decides how to wait — a
//! thread of its own blocks in [`TaskDriver::wait_for_input`], the simulator steps another
//! task. It does wait for room downstream: a writer whose bounded queue is full blocks in
//! `RecordWriter::send` (that is backpressure) until there is room or the task is
//! cancelled; under simulation the queues are unbounded, so a step there never blocks.
//! A test can drive a task by calling `step` itself.
//!
//! Barriers travel in band. A task with inputs aligns them ([`BarrierAligner`]): a channel
//! that delivered the barrier is not read until the snapshot is taken ([`InputGate`]), so
//! what waits meanwhile stays in that channel, bounded, and its producer waits. What the
//! barriers, announcements and triggers mean is decided in `checkpointing`, which every
//! driver lends its parts. What happens after the input ended (the final snapshot,
//! waiting for the job's end) is the same for every driver and lives in [`super::Task`].

use super::alignment::{Alignment, BarrierAligner, UnalignedPolicy};
use super::checkpointing::{snapshot_and_acknowledge, wait_for_room, BothGates, Checkpointing};
use super::context::TaskShared;
use super::gate::{InputChannel, InputGate};
use super::mailbox::{Control, MailboxReceiver};
use super::metrics::{AlignmentTimer, TaskCounters};
use super::unaligned::{decode_replay, replay, ReplayQueue, Replayed, UnalignedInputs};
use super::watermarks::{ValveOutput, WatermarkValve};
use crate::channel::{BatchReceiver, CheckpointBarrier, CheckpointEvent, StreamMessage};
use crate::error::TaskError;
use crate::output::{each_record, Lifecycle, Output};
use crossbeam_channel::{Select, TryRecvError};
use eddy_types::KeyHash;
use eddy_types::Watermark;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::convert::Infallible;
use std::rc::Rc;
use std::sync::Arc;
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

/// A subtask's loop, as the executor sees it. No method waits for input but
/// `wait_for_input`; `step` may wait for room downstream (backpressure).
pub trait TaskDriver {
    fn open(&mut self) -> Result<(), TaskError>;
    /// Takes control messages, then one batch of input; never waits for input (it may
    /// wait for room in a full output queue).
    fn step(&mut self) -> Result<StepResult, TaskError>;
    /// Blocks until an input channel or the mailbox has something, or `timeout` passed.
    /// Takes nothing: the next `step` does.
    fn wait_for_input(&self, timeout: Duration);
    /// The chain's head, its mailbox and what its operators share, for the task's end.
    fn parts(&mut self) -> (&mut dyn Lifecycle, &MailboxReceiver, &TaskShared);
    fn close(&mut self);
}

/// When an idle task steps again at the latest: a look at the cancel flag, or a
/// processing-time timer, is due.
fn idle(shared: &TaskShared) -> StepResult {
    StepResult::Idle { until_ms: shared.wake_up_by(shared.clock().now_ms() + IDLE_WAIT_MS) }
}

/// Tells the chain processing time moved on, when one of its operators asked.
fn processing_time(head: &mut dyn Lifecycle, shared: &TaskShared) -> Result<(), TaskError> {
    if let Some(now_ms) = shared.take_due_processing_time() {
        head.on_processing_time(now_ms)?;
        shared.check()?;
    }
    Ok(())
}

/// Takes every waiting control message. A source snapshots at a trigger (`is_source`);
/// any other task hands back the newest trigger it got, sent to it because every producer
/// of it finished ([`Checkpointing::on_trigger`]). A checkpoint aborted elsewhere is no
/// longer aligned here (`aligner`): its barrier may never come on the channels still
/// waiting for it, and the channels it holds are read again.
fn take_controls(
    mailbox: &MailboxReceiver,
    shared: &TaskShared,
    head: &mut dyn Lifecycle,
    is_source: bool,
    mut aligner: Option<&mut BarrierAligner>,
) -> Result<Option<CheckpointBarrier>, TaskError> {
    let mut triggered: Option<CheckpointBarrier> = None;
    loop {
        match mailbox.try_recv() {
            Ok(Control::Cancel) | Err(TryRecvError::Disconnected) => return Err(TaskError::Cancelled),
            Ok(Control::TriggerCheckpoint(barrier)) if is_source => snapshot_and_acknowledge(head, shared, &barrier)?,
            Ok(Control::TriggerCheckpoint(barrier)) => {
                // Only the newest is taken; an older one is declined, so that the
                // coordinator aborts it rather than waiting for its timeout.
                let (newer, older) = match triggered {
                    Some(newest) if newest.id > barrier.id => (newest, barrier),
                    Some(newest) => (barrier, newest),
                    None => {
                        triggered = Some(barrier);
                        continue;
                    }
                };
                if newer.id != older.id {
                    shared.decline(&older, "a newer checkpoint was triggered before this one was taken");
                }
                triggered = Some(newer);
            }
            Ok(Control::JobFinished) => {}
            Ok(Control::OperatorEvent(event)) => {
                head.handle_operator_event(event)?;
                shared.check()?;
            }
            Ok(Control::Checkpoint(event)) => {
                if let (CheckpointEvent::Aborted(id), Some(aligner)) = (event, aligner.as_deref_mut()) {
                    aligner.decline(id);
                }
                shared.checkpoint_event(event);
                head.notify_checkpoint(event)?;
                shared.check()?;
            }
            Err(TryRecvError::Empty) if shared.is_cancelled() => return Err(TaskError::Cancelled),
            Err(TryRecvError::Empty) => return Ok(triggered),
        }
    }
}

/// Flushes partial batches at least every buffer timeout
/// ([`crate::channel::DEFAULT_BUFFER_TIMEOUT_MS`] by default) while input keeps coming.
struct FlushTimer {
    last_ms: u64,
}

impl FlushTimer {
    fn new(shared: &TaskShared) -> Self {
        Self { last_ms: shared.clock().now_ms() }
    }

    fn due(&mut self, shared: &TaskShared) -> bool {
        let now_ms = shared.clock().now_ms();
        if now_ms.saturating_sub(self.last_ms) >= shared.buffer_timeout_ms() {
            self.last_ms = now_ms;
            true
        } else {
            false
        }
    }
}

/// Drives a chain whose head has one input (one gate, possibly fed by several edges).
pub struct OneInputDriver<T> {
    gate: InputGate<T>,
    aligner: BarrierAligner,
    /// Unaligned checkpoints and the replay of their in-flight records (none for drivers
    /// built by hand).
    unaligned: Option<UnalignedInputs>,
    watermarks: WatermarkValve,
    head: Box<dyn Output<T>>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
    counters: Arc<TaskCounters>,
    alignment_timer: AlignmentTimer,
}

impl<T: Clone + Send + Serialize + DeserializeOwned + 'static> OneInputDriver<T> {
    /// `channels`: one per producer subtask of every edge into this input.
    pub fn new(
        channels: Vec<BatchReceiver<T>>,
        head: Box<dyn Output<T>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
    ) -> Self {
        let channels = channels.into_iter().map(|c| Box::new(c) as Box<dyn InputChannel<T>>).collect();
        Self::from_channels(channels, head, mailbox, shared)
    }

    /// [`OneInputDriver::new`] over any channels: in-process and network ones.
    pub fn from_channels(
        channels: Vec<Box<dyn InputChannel<T>>>,
        head: Box<dyn Output<T>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
    ) -> Self {
        let mut gate = InputGate::new(channels);
        let mut unaligned = UnalignedInputs::new(&shared, vec![0]);
        if let Some(unaligned) = unaligned.as_mut() {
            gate.share_backlogs(unaligned.take_backlogs(0));
        }
        Self {
            aligner: aligner(&shared, unaligned.as_ref(), gate.len()),
            unaligned,
            watermarks: WatermarkValve::new(gate.len()),
            gate,
            head,
            mailbox,
            flush: FlushTimer::new(&shared),
            counters: shared.counters(),
            alignment_timer: AlignmentTimer::default(),
            shared,
        }
    }
}

impl<T: 'static> OneInputDriver<T> {
    /// The checkpoint machinery, lent this driver's parts.
    fn checkpointing(&mut self) -> Checkpointing<'_, &mut InputGate<T>> {
        Checkpointing {
            aligner: &mut self.aligner,
            gates: &mut self.gate,
            head: &mut self.head,
            shared: &self.shared,
            mailbox: &self.mailbox,
            timer: &mut self.alignment_timer,
            counters: &self.counters,
            unaligned: self.unaligned.as_mut(),
            watermarks: &self.watermarks,
        }
    }

    /// A batch of `channel`'s records, with their keys' `hashes` if the writer sent them.
    fn handle_records(
        &mut self,
        channel: usize,
        mut batch: Vec<T>,
        hashes: &[KeyHash],
    ) -> Result<StepResult, TaskError> {
        match self.unaligned.as_ref().filter(|u| u.listening()) {
            None => {
                let mut records = batch.drain(..);
                let before = records.len();
                let mailbox = &self.mailbox;
                self.head.collect_batch(&mut records, hashes, &mut |processed| control_waits(processed, mailbox));
                self.counters.add_in(before - records.len());
                // What a stop (or a failure: the task fails at the check below) left over
                // goes back to the front of its channel (without hashes: they are
                // computed again).
                self.gate.put_back(channel, records.by_ref().collect());
            }
            Some(_) => {
                // An announced barrier is taken between two records, not after a whole
                // batch of a slow operator: the rest waits in the gate. While a checkpoint
                // records, the channels are read ahead between records too, so that it
                // completes as soon as the barriers are queued.
                let mut records = batch.drain(..);
                let mut processed = 0;
                while let Some(record) = records.next() {
                    self.head.collect(record);
                    processed += 1;
                    if self.checkpointing().between_records()? || control_waits(processed, &self.mailbox) {
                        self.gate.put_back(channel, records.by_ref().collect());
                        break;
                    }
                }
                self.counters.add_in(processed);
            }
        }
        self.gate.recycle(channel, batch);
        self.shared.check()?;
        if self.flush.due(&self.shared) {
            self.head.flush()?;
        }
        Ok(StepResult::Continue)
    }

    fn handle(&mut self, channel: usize, message: StreamMessage<T>) -> Result<StepResult, TaskError> {
        match message {
            StreamMessage::Records(batch) => self.handle_records(channel, batch, &[]),
            StreamMessage::HashedRecords(batch, hashes) => self.handle_records(channel, batch, &hashes),
            StreamMessage::Barrier(barrier) => {
                self.checkpointing().on_barrier(channel, barrier)?;
                Ok(StepResult::Continue)
            }
            StreamMessage::Watermark(watermark) => {
                if let Some(watermark) = self.watermarks.on_watermark(channel, watermark) {
                    self.counters.input_watermark(watermark.0);
                    self.head.on_watermark(watermark)?;
                    self.shared.check()?;
                }
                Ok(StepResult::Continue)
            }
            StreamMessage::WatermarkStatus(status) => {
                let output = self.watermarks.on_status(channel, status);
                pass_valve_output(&mut self.head, &self.counters, output)?;
                self.shared.check()?;
                Ok(StepResult::Continue)
            }
            StreamMessage::EndOfInput => {
                let alignment = self.aligner.on_end_of_input(channel);
                self.checkpointing().on_alignment(alignment)?;
                let output = self.watermarks.on_end_of_input(channel);
                pass_valve_output(&mut self.head, &self.counters, output)?;
                self.shared.check()?;
                if self.gate.ended() {
                    self.head.end_input()?;
                    self.shared.check()?;
                    return Ok(StepResult::Finished);
                }
                Ok(StepResult::Continue)
            }
        }
    }
}

/// Records of a batch taken between two looks at the mailbox: a control message (a
/// checkpoint triggered here, a cancel) waits at most this many records, even behind a
/// slow operator, and the look costs nothing on the other records.
const RECORDS_PER_MAILBOX_LOOK: usize = 16;

/// Whether a batch stops after `processed` records (the rest put back) for a control
/// message waiting in `mailbox`.
#[inline]
fn control_waits(processed: usize, mailbox: &MailboxReceiver) -> bool {
    processed.is_multiple_of(RECORDS_PER_MAILBOX_LOOK) && !mailbox.is_empty()
}

/// Passes on what the input's watermark and status became.
fn pass_valve_output(head: &mut dyn Lifecycle, counters: &TaskCounters, output: ValveOutput) -> Result<(), TaskError> {
    if let Some(watermark) = output.watermark {
        counters.input_watermark(watermark.0);
        head.on_watermark(watermark)?;
    }
    if let Some(status) = output.status {
        head.on_watermark_status(status)?;
    }
    Ok(())
}

/// How long an idle task waits at most: `timeout`, or until an aligning checkpoint's
/// timeout turns it unaligned.
fn until_timeout(aligner: &BarrierAligner, timeout: Duration) -> Duration {
    aligner.timeout_at().map_or(timeout, |at| timeout.min(at.saturating_duration_since(std::time::Instant::now())))
}

/// The aligner of a task: unaligned checkpoints need the task's channel layout.
fn aligner(shared: &TaskShared, unaligned: Option<&UnalignedInputs>, channels: usize) -> BarrierAligner {
    let policy = if unaligned.is_some() { shared.unaligned() } else { UnalignedPolicy::default() };
    BarrierAligner::with_unaligned(shared.checkpointing_mode(), policy, channels)
}

/// A replayed in-flight watermark of channel `channel` (by the valve's index), passed on
/// as one read from the channel would be.
fn replay_watermark(
    head: &mut dyn Lifecycle,
    watermarks: &mut WatermarkValve,
    counters: &TaskCounters,
    shared: &TaskShared,
    channel: usize,
    watermark: Watermark,
) -> Result<(), TaskError> {
    if let Some(watermark) = watermarks.on_watermark(channel, watermark) {
        counters.input_watermark(watermark.0);
        head.on_watermark(watermark)?;
        shared.check()?;
    }
    Ok(())
}

fn log_replayed(records: usize) {
    if records > 0 {
        tracing::info!(records, "replayed the in-flight records of the restored unaligned checkpoint");
    }
}

impl<T: 'static> TaskDriver for OneInputDriver<T> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.head.open()?;
        self.shared.check()?;
        if let Some(unaligned) = self.unaligned.as_mut() {
            let (head, watermarks, counters, shared) =
                (&mut self.head, &mut self.watermarks, &self.counters, &self.shared);
            let queues = decode_replay(&self.gate, unaligned.take_replay(0), 0, unaligned.head_name())?;
            let replayed = replay(queues, Vec::<ReplayQueue<Infallible>>::new(), |item| match item {
                Replayed::First(record) => {
                    head.collect(record);
                    Ok(())
                }
                Replayed::Second(never) => match never {},
                Replayed::Watermark { channel, watermark } => {
                    replay_watermark(&mut **head, watermarks, counters, shared, channel, watermark)
                }
            })?;
            log_replayed(replayed);
            self.shared.check()?;
        }
        if self.gate.ended() {
            self.head.end_input()?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        if self.gate.ended() {
            return Ok(StepResult::Finished);
        }
        if let Some(barrier) =
            take_controls(&self.mailbox, &self.shared, &mut self.head, false, Some(&mut self.aligner))?
        {
            self.checkpointing().on_trigger(barrier, None)?;
        }
        processing_time(&mut self.head, &self.shared)?;
        if self.checkpointing().step(None)? {
            return Ok(StepResult::Continue);
        }
        let aligner = &self.aligner;
        match self.gate.poll(&|c| aligner.is_blocked(c))? {
            Some((channel, message)) => self.handle(channel, message),
            None => {
                // Nothing waiting: send partial batches on before idling, for latency.
                self.head.flush()?;
                self.shared.check()?;
                Ok(idle(&self.shared))
            }
        }
    }

    fn wait_for_input(&self, timeout: Duration) {
        let mut select = Select::new();
        select.recv(&self.mailbox);
        self.gate.watch(&mut select, &|c| self.aligner.is_blocked(c));
        if let Some(unaligned) = &self.unaligned {
            unaligned.watch(&mut select);
        }
        let _ = select.ready_timeout(until_timeout(&self.aligner, timeout));
    }

    fn parts(&mut self) -> (&mut dyn Lifecycle, &MailboxReceiver, &TaskShared) {
        (&mut self.head, &self.mailbox, &self.shared)
    }

    fn close(&mut self) {
        self.head.close();
    }
}

/// The head of a chain with two inputs (`connect`): records of either side.
pub trait TwoInputOperator<A, B>: Lifecycle {
    fn process1(&mut self, record: A);
    fn process2(&mut self, record: B);
    /// As [`Output::collect_batch`], for a batch of input 1.
    #[inline]
    fn process_batch1(
        &mut self,
        records: &mut std::vec::Drain<'_, A>,
        _hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
    ) {
        each_record(records, stop, |record| self.process1(record))
    }
    /// As [`Output::collect_batch`], for a batch of input 2.
    #[inline]
    fn process_batch2(
        &mut self,
        records: &mut std::vec::Drain<'_, B>,
        _hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
    ) {
        each_record(records, stop, |record| self.process2(record))
    }
}

/// A two-input head's batch operation for one input's records of type `X`.
type BatchFn<A, B, X> = for<'a, 'b> fn(
    &mut Box<dyn TwoInputOperator<A, B>>,
    &mut std::vec::Drain<'a, X>,
    &[KeyHash],
    &mut dyn FnMut(usize) -> bool,
);

/// Why a task that reads its second input to the end first declines checkpoints.
const READS_SECOND_FIRST: &str = "it reads its second input to the end before its first";

/// Drives a two-input chain head, taking batches from whichever input has one.
pub struct TwoInputDriver<A, B> {
    first: InputGate<A>,
    second: InputGate<B>,
    /// Channels of input 1 first, then those of input 2.
    aligner: BarrierAligner,
    unaligned: Option<UnalignedInputs>,
    /// The same channels: the operator's watermark is the minimum over both inputs.
    watermarks: WatermarkValve,
    head: Box<dyn TwoInputOperator<A, B>>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
    counters: Arc<TaskCounters>,
    alignment_timer: AlignmentTimer,
    /// Read input 2 to its end before any of input 1 (Flink's `InputSelectable`).
    second_first: bool,
    /// Which input the next step tries first, alternating, so that neither starves.
    second_next: bool,
}

impl<A, B> TwoInputDriver<A, B>
where
    A: Clone + Send + Serialize + DeserializeOwned + 'static,
    B: Clone + Send + Serialize + DeserializeOwned + 'static,
{
    pub fn new(
        first: Vec<BatchReceiver<A>>,
        second: Vec<BatchReceiver<B>>,
        head: Box<dyn TwoInputOperator<A, B>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
        second_first: bool,
    ) -> Self {
        let first = first.into_iter().map(|c| Box::new(c) as Box<dyn InputChannel<A>>).collect();
        let second = second.into_iter().map(|c| Box::new(c) as Box<dyn InputChannel<B>>).collect();
        Self::from_channels(first, second, head, mailbox, shared, second_first)
    }

    /// [`TwoInputDriver::new`] over any channels: in-process and network ones.
    pub fn from_channels(
        first: Vec<Box<dyn InputChannel<A>>>,
        second: Vec<Box<dyn InputChannel<B>>>,
        head: Box<dyn TwoInputOperator<A, B>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
        second_first: bool,
    ) -> Self {
        let mut first = InputGate::new(first);
        let mut second = InputGate::new(second);
        let mut unaligned = UnalignedInputs::new(&shared, vec![0, first.len()]);
        if let Some(unaligned) = unaligned.as_mut() {
            first.share_backlogs(unaligned.take_backlogs(0));
            second.share_backlogs(unaligned.take_backlogs(1));
        }
        Self {
            aligner: aligner(&shared, unaligned.as_ref(), first.len() + second.len()),
            unaligned,
            watermarks: WatermarkValve::new(first.len() + second.len()),
            first,
            second,
            head,
            mailbox,
            flush: FlushTimer::new(&shared),
            counters: shared.counters(),
            alignment_timer: AlignmentTimer::default(),
            shared,
            second_first,
            second_next: false,
        }
    }
}

impl<A: 'static, B: 'static> TwoInputDriver<A, B> {
    /// The checkpoint machinery, lent this driver's parts.
    fn checkpointing(&mut self) -> Checkpointing<'_, BothGates<'_, A, B>> {
        Checkpointing {
            aligner: &mut self.aligner,
            gates: BothGates { first: &mut self.first, second: &mut self.second },
            head: &mut self.head,
            shared: &self.shared,
            mailbox: &self.mailbox,
            timer: &mut self.alignment_timer,
            counters: &self.counters,
            unaligned: self.unaligned.as_mut(),
            watermarks: &self.watermarks,
        }
    }

    /// Whether input 1 is held: while input 2 is read to its end first.
    fn hold_first(&self) -> bool {
        self.second_first && !self.second.ended()
    }

    /// A batch of records of the input gate `gate` picks, its channel `local`, with their
    /// keys' `hashes` if the writer sent them.
    fn handle_records<X>(
        &mut self,
        local: usize,
        mut batch: Vec<X>,
        hashes: &[KeyHash],
        process: fn(&mut Box<dyn TwoInputOperator<A, B>>, X),
        process_batch: BatchFn<A, B, X>,
        gate: fn(&mut Self) -> &mut InputGate<X>,
    ) -> Result<Alignment, TaskError> {
        let mut records = batch.drain(..);
        let before = records.len();
        if self.unaligned.as_ref().is_some_and(|u| u.listening()) {
            // As in OneInputDriver: announcements and read-ahead between records.
            let mut processed = 0;
            for record in records.by_ref() {
                process(&mut self.head, record);
                processed += 1;
                if self.checkpointing().between_records()? || control_waits(processed, &self.mailbox) {
                    break;
                }
            }
        } else {
            let mailbox = &self.mailbox;
            process_batch(&mut self.head, &mut records, hashes, &mut |processed| control_waits(processed, mailbox));
        }
        // What a stop (or a failure: the task fails at the check below) left over goes
        // back to the front of its channel (without hashes: they are computed again).
        let processed = before - records.len();
        let rest = records.collect();
        gate(self).put_back(local, rest);
        gate(self).recycle(local, batch);
        self.counters.add_in(processed);
        Ok(Alignment::Pending)
    }

    /// Handles one message of channel `channel` of the aligner (input 2's come after
    /// input 1's), channel `local` of the input gate `gate` picks.
    fn handle<X>(
        &mut self,
        (channel, local): (usize, usize),
        message: StreamMessage<X>,
        process: fn(&mut Box<dyn TwoInputOperator<A, B>>, X),
        process_batch: BatchFn<A, B, X>,
        gate: fn(&mut Self) -> &mut InputGate<X>,
    ) -> Result<StepResult, TaskError> {
        let alignment = match message {
            StreamMessage::Records(batch) => self.handle_records(local, batch, &[], process, process_batch, gate)?,
            StreamMessage::HashedRecords(batch, hashes) => {
                self.handle_records(local, batch, &hashes, process, process_batch, gate)?
            }
            StreamMessage::Barrier(barrier) if self.hold_first() => {
                // Aligning needs input 1's barrier, and input 1 is not read until input 2
                // ended: this task cannot take part in the checkpoint. It declines it, which
                // does not count as a failure (Flink's "task not ready").
                self.checkpointing().decline_unless_older(&barrier, READS_SECOND_FIRST);
                Alignment::Pending
            }
            StreamMessage::Barrier(barrier) => {
                self.checkpointing().on_barrier(channel, barrier)?;
                Alignment::Pending
            }
            StreamMessage::Watermark(watermark) => {
                if let Some(watermark) = self.watermarks.on_watermark(channel, watermark) {
                    self.counters.input_watermark(watermark.0);
                    self.head.on_watermark(watermark)?;
                }
                Alignment::Pending
            }
            StreamMessage::WatermarkStatus(status) => {
                let output = self.watermarks.on_status(channel, status);
                pass_valve_output(&mut self.head, &self.counters, output)?;
                Alignment::Pending
            }
            StreamMessage::EndOfInput => {
                let output = self.watermarks.on_end_of_input(channel);
                pass_valve_output(&mut self.head, &self.counters, output)?;
                self.aligner.on_end_of_input(channel)
            }
        };
        self.shared.check()?;
        self.checkpointing().on_alignment(alignment)?;
        if self.first.ended() && self.second.ended() {
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

impl<A: 'static, B: 'static> TaskDriver for TwoInputDriver<A, B> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.head.open()?;
        self.shared.check()?;
        if let Some(unaligned) = self.unaligned.as_mut() {
            let (head, watermarks, counters, shared) =
                (&mut self.head, &mut self.watermarks, &self.counters, &self.shared);
            let name = unaligned.head_name().to_string();
            let first = decode_replay(&self.first, unaligned.take_replay(0), 0, &name)?;
            let second = decode_replay(&self.second, unaligned.take_replay(1), self.first.len(), &name)?;
            let replayed = replay(first, second, |item| match item {
                Replayed::First(record) => {
                    head.process1(record);
                    Ok(())
                }
                Replayed::Second(record) => {
                    head.process2(record);
                    Ok(())
                }
                Replayed::Watermark { channel, watermark } => {
                    replay_watermark(&mut **head, watermarks, counters, shared, channel, watermark)
                }
            })?;
            log_replayed(replayed);
            self.shared.check()?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        if self.first.ended() && self.second.ended() {
            return Ok(StepResult::Finished);
        }
        let declining = self.hold_first().then_some(READS_SECOND_FIRST);
        if let Some(barrier) =
            take_controls(&self.mailbox, &self.shared, &mut self.head, false, Some(&mut self.aligner))?
        {
            self.checkpointing().on_trigger(barrier, declining)?;
        }
        processing_time(&mut self.head, &self.shared)?;
        if self.checkpointing().step(declining)? {
            return Ok(StepResult::Continue);
        }
        let offset = self.first.len();
        let aligner = &self.aligner;
        // Input 2 first when it is read first; else the inputs take turns, so that neither
        // starves: each step takes one batch.
        self.second_next = !self.second_next;
        let second_turn = self.second_first || self.first.ended() || self.second_next;
        let order: [bool; 2] = if second_turn { [true, false] } else { [false, true] };
        for second in order {
            if second {
                if let Some((channel, message)) = self.second.poll(&|c| aligner.is_blocked(offset + c))? {
                    return self.handle(
                        (offset + channel, channel),
                        message,
                        |head, record| head.process2(record),
                        |head, records, hashes, stop| head.process_batch2(records, hashes, stop),
                        |driver| &mut driver.second,
                    );
                }
            } else if !self.hold_first() {
                let aligner = &self.aligner;
                if let Some((channel, message)) = self.first.poll(&|c| aligner.is_blocked(c))? {
                    return self.handle(
                        (channel, channel),
                        message,
                        |head, record| head.process1(record),
                        |head, records, hashes, stop| head.process_batch1(records, hashes, stop),
                        |driver| &mut driver.first,
                    );
                }
            }
        }
        self.head.flush()?;
        self.shared.check()?;
        Ok(idle(&self.shared))
    }

    fn wait_for_input(&self, timeout: Duration) {
        let offset = self.first.len();
        let mut select = Select::new();
        select.recv(&self.mailbox);
        if !self.hold_first() {
            self.first.watch(&mut select, &|c| self.aligner.is_blocked(c));
        }
        self.second.watch(&mut select, &|c| self.aligner.is_blocked(offset + c));
        if let Some(unaligned) = &self.unaligned {
            unaligned.watch(&mut select);
        }
        let _ = select.ready_timeout(until_timeout(&self.aligner, timeout));
    }

    fn parts(&mut self) -> (&mut dyn Lifecycle, &MailboxReceiver, &TaskShared) {
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
pub trait SourceOperator: Lifecycle {
    /// Emits up to one batch of records; errors go into the task's failure slot.
    fn emit(&mut self) -> SourceStatus;

    /// Called instead of [`emit`](Self::emit) while watermark alignment holds the source
    /// back: it emits nothing, but may keep what it reports fresh (a Kafka reader's
    /// consumer lag). Errors go into the task's failure slot.
    fn paused(&mut self) {}
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
        take_controls(&self.mailbox, &self.shared, &mut self.source, true, None)?;
        processing_time(&mut self.source, &self.shared)?;
        if self.shared.unaligned().enabled && !self.shared.has_output_room() {
            // With unaligned checkpoints a source emits only with room downstream, so that
            // a trigger never waits behind a full queue (Flink's output availability).
            wait_for_room(&self.shared, &self.mailbox, None);
            return Ok(StepResult::Continue);
        }
        if self.shared.is_finished_on_restore() {
            // Its every subtask had finished when the restored checkpoint was taken (Flink's
            // FLIP-147): it is not run again; its restored state stays its final state.
            tracing::info!(
                operator = %self.shared.operator_name(0),
                "source finished before the restored checkpoint: not run again"
            );
            self.source.end_input()?;
            self.shared.check()?;
            return Ok(StepResult::Finished);
        }
        if self.shared.is_source_paused() {
            // Ahead of its alignment group: wait for the next look (a processing-time call).
            self.source.paused();
            self.shared.check()?;
            self.source.flush()?;
            return Ok(idle(&self.shared));
        }
        let since = std::time::Instant::now();
        let status = self.source.emit();
        if status == SourceStatus::Idle {
            // It found nothing and waited a little itself: idle, not busy.
            self.shared.counters().add_idle(since.elapsed());
        }
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
        let mut select = Select::new();
        select.recv(&self.mailbox);
        let _ = select.ready_timeout(timeout);
    }

    fn parts(&mut self) -> (&mut dyn Lifecycle, &MailboxReceiver, &TaskShared) {
        (&mut self.source, &self.mailbox, &self.shared)
    }

    fn close(&mut self) {
        self.source.close();
    }
}
