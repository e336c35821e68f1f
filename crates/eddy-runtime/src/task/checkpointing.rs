//! A task's checkpoint machinery between its gates and its chain: barriers, the
//! announcements of unaligned ones, the aligned-checkpoint timeout, reading channels ahead
//! to their barriers, the trigger of a task whose producers all finished, and the snapshot
//! acknowledged when the alignment says so. The decisions are the pure
//! [`BarrierAligner`]'s; this room carries them out on the gates, the chain and the task's
//! shared parts, for one-input and two-input drivers alike.

use super::alignment::{Alignment, BarrierAligner};
use super::context::TaskShared;
use super::gate::{InputGate, Overtook, ReadAhead};
use super::in_flight::RecordedChannel;
use super::metrics::{AlignmentTimer, TaskCounters};
use super::unaligned::UnalignedInputs;
use super::watermarks::WatermarkValve;
use super::MailboxReceiver;
use crate::channel::CheckpointBarrier;
use crate::error::TaskError;
use crate::output::Lifecycle;
use crossbeam_channel::Select;
use eddy_checkpoint::CheckpointId;
use std::time::Duration;

/// How long a task with unaligned checkpoints waits at most for room downstream before it
/// looks at its mailbox and announcements again.
const ROOM_WAIT: Duration = Duration::from_millis(1);

/// Why a task built without a channel layout (by hand, in a test) declines a trigger: it
/// could not keep what its channels still hold.
const NO_LAYOUT: &str = "it has no channel layout to record its unprocessed input in";

/// Snapshots the chain for `barrier` and acknowledges it to the coordinator.
pub(super) fn snapshot_and_acknowledge(
    head: &mut dyn Lifecycle,
    shared: &TaskShared,
    barrier: &CheckpointBarrier,
) -> Result<(), TaskError> {
    let mut snapshots = Vec::new();
    head.snapshot(barrier, &mut snapshots)?;
    shared.check()?;
    shared.acknowledge(barrier, snapshots);
    Ok(())
}

/// Waits a little for room downstream (the task takes no input meanwhile), counted as
/// backpressure; returns early for a control message or an announcement.
pub(super) fn wait_for_room(shared: &TaskShared, mailbox: &MailboxReceiver, unaligned: Option<&UnalignedInputs>) {
    let since = std::time::Instant::now();
    let mut select = Select::new();
    select.recv(mailbox);
    if let Some(unaligned) = unaligned {
        unaligned.watch(&mut select);
    }
    let _ = select.ready_timeout(ROOM_WAIT);
    shared.counters().add_backpressured(since.elapsed());
}

/// A task's input gates, by the aligner's channel index: one gate, or both of a
/// two-input task.
pub(super) trait Gates {
    fn channels(&self) -> usize;
    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError>;
    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook;
    fn discard_overtaken(&self, done: CheckpointId);
    fn keep_overtaken(&mut self, channel: usize, keep: bool);
    fn stop_recording(&mut self, channel: usize);
    /// Drops what was recorded, and records the channels `recorded` names from now on,
    /// every channel from the watermark it `reached`.
    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>);
    /// Drops what was recorded (a checkpoint abandoned).
    fn clear_recorded(&mut self);
    /// What was recorded, per channel of each input.
    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String>;
}

impl<T> Gates for InputGate<T> {
    fn channels(&self) -> usize {
        self.len()
    }

    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        InputGate::read_ahead(self, channel)
    }

    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        InputGate::overtook(self, channel, barrier)
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        InputGate::discard_overtaken(self, done)
    }

    fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        InputGate::keep_overtaken(self, channel, keep)
    }

    fn stop_recording(&mut self, channel: usize) {
        InputGate::stop_recording(self, channel)
    }

    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        self.clear_recorded();
        self.start_recording(recorded, reached);
    }

    fn clear_recorded(&mut self) {
        InputGate::clear_recorded(self)
    }

    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        InputGate::take_recorded(self)
    }
}

impl<G: Gates + ?Sized> Gates for &mut G {
    fn channels(&self) -> usize {
        (**self).channels()
    }

    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        (**self).read_ahead(channel)
    }

    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        (**self).overtook(channel, barrier)
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        (**self).discard_overtaken(done)
    }

    fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        (**self).keep_overtaken(channel, keep)
    }

    fn stop_recording(&mut self, channel: usize) {
        (**self).stop_recording(channel)
    }

    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        (**self).restart_recording(recorded, reached)
    }

    fn clear_recorded(&mut self) {
        (**self).clear_recorded()
    }

    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        (**self).take_recorded()
    }
}

/// Both gates of a two-input task: input 1's channels, then input 2's.
pub(super) struct BothGates<'a, A, B> {
    pub(super) first: &'a mut InputGate<A>,
    pub(super) second: &'a mut InputGate<B>,
}

impl<A, B> Gates for BothGates<'_, A, B> {
    fn channels(&self) -> usize {
        self.first.len() + self.second.len()
    }

    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        match channel.checked_sub(self.first.len()) {
            None => self.first.read_ahead(channel),
            Some(second) => self.second.read_ahead(second),
        }
    }

    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        match channel.checked_sub(self.first.len()) {
            None => self.first.overtook(channel, barrier),
            Some(second) => self.second.overtook(second, barrier),
        }
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        self.first.discard_overtaken(done);
        self.second.discard_overtaken(done);
    }

    fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        match channel.checked_sub(self.first.len()) {
            None => self.first.keep_overtaken(channel, keep),
            Some(second) => self.second.keep_overtaken(second, keep),
        }
    }

    fn stop_recording(&mut self, channel: usize) {
        match channel.checked_sub(self.first.len()) {
            None => self.first.stop_recording(channel),
            Some(second) => self.second.stop_recording(second),
        }
    }

    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        let offset = self.first.len();
        Gates::restart_recording(self.first, recorded, reached);
        Gates::restart_recording(self.second, &|c| recorded(offset + c), &|c| reached(offset + c));
    }

    fn clear_recorded(&mut self) {
        self.first.clear_recorded();
        self.second.clear_recorded();
    }

    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        let mut recorded = Gates::take_recorded(self.first)?;
        let second = Gates::take_recorded(self.second)?;
        recorded.extend(second.into_iter().map(|channel| RecordedChannel { input: 1, ..channel }));
        Ok(recorded)
    }
}

/// What a driver lends for one call of the checkpoint machinery that every multi-input
/// driver shares: barriers, announcements, the aligned timeout, reading ahead, room.
pub(super) struct Checkpointing<'a, G> {
    pub(super) aligner: &'a mut BarrierAligner,
    pub(super) gates: G,
    pub(super) head: &'a mut dyn Lifecycle,
    pub(super) shared: &'a TaskShared,
    pub(super) mailbox: &'a MailboxReceiver,
    pub(super) timer: &'a mut AlignmentTimer,
    pub(super) counters: &'a TaskCounters,
    pub(super) unaligned: Option<&'a mut UnalignedInputs>,
    /// The task's watermark valve, by the aligner's channel index: where each recorded
    /// channel's watermark starts.
    pub(super) watermarks: &'a WatermarkValve,
}

impl<G: Gates> Checkpointing<'_, G> {
    /// Gives up `barrier`'s checkpoint here (and every older one) and tells the
    /// coordinator why; not a failure (Flink's "task not ready").
    pub(super) fn decline(&mut self, barrier: &CheckpointBarrier, reason: &str) {
        self.aligner.decline(barrier.id);
        self.shared.decline(barrier, reason);
    }

    /// Declines `barrier`'s checkpoint for `reason` when this task cannot take part now,
    /// unless a newer checkpoint is under way here already (which abandons it anyway).
    pub(super) fn decline_unless_older(&mut self, barrier: &CheckpointBarrier, reason: &str) {
        if self.aligner.current().is_none_or(|current| current.id <= barrier.id) {
            self.decline(barrier, reason);
        }
    }

    /// A barrier on `channel` (read in order or ahead).
    pub(super) fn on_barrier(&mut self, channel: usize, barrier: CheckpointBarrier) -> Result<(), TaskError> {
        let first = self.aligner.current().is_none_or(|current| current.id < barrier.id);
        let overtook = self.gates.overtook(channel, &barrier);
        let overtaking = self.aligner.on_overtaking_barrier(barrier, overtook, std::time::Instant::now());
        if let Some(reason) = overtaking.decline {
            // Never complete it without them: the restore would miss them.
            tracing::warn!(checkpoint = barrier.id.0, "checkpoint declined: {reason}");
            self.shared.decline(&barrier, reason);
        }
        self.on_alignment(overtaking.alignment)?;
        if let Some(keep) = overtaking.keep {
            self.gates.keep_overtaken(channel, keep);
        }
        let alignment = self.aligner.on_barrier(channel, barrier);
        let complete = matches!(alignment, Alignment::Complete(_) | Alignment::Unaligned { finish: true, .. });
        self.timer.on_barrier(first, complete, self.counters);
        if !self.aligner.is_recording(channel) {
            self.gates.stop_recording(channel);
        }
        self.on_alignment(alignment)
    }

    /// Snapshots when the alignment says so: aligned at once; unaligned when it starts,
    /// written when its in-flight records are complete.
    pub(super) fn on_alignment(&mut self, alignment: Alignment) -> Result<(), TaskError> {
        let (barrier, start, finish) = match alignment {
            Alignment::Pending => return Ok(()),
            Alignment::Complete(barrier) => return snapshot_and_acknowledge(self.head, self.shared, &barrier),
            Alignment::Unaligned { barrier, start, finish } => (barrier, start, finish),
        };
        let unaligned = self.unaligned.as_deref_mut().expect("unaligned checkpoints only with a channel layout");
        if start {
            unaligned.start(self.head, self.shared, barrier)?;
            let (aligner, watermarks) = (&*self.aligner, self.watermarks);
            self.gates.restart_recording(&|c| aligner.is_recording(c), &|c| watermarks.reached(c).map(|w| w.0));
        }
        if finish {
            let name = unaligned.head_name().to_string();
            let recorded = self.gates.take_recorded().map_err(|message| TaskError::StateBackend {
                operator: name,
                message: format!("cannot encode in-flight records: {message}"),
            })?;
            unaligned.finish(self.shared, recorded)?;
        }
        Ok(())
    }

    /// Reads the channels of an unaligned checkpoint ahead to their barriers (or, for a
    /// triggered one, to their ends).
    pub(super) fn read_ahead(&mut self) -> Result<(), TaskError> {
        for channel in 0..self.gates.channels() {
            if self.aligner.reads_ahead(channel) {
                match self.gates.read_ahead(channel)? {
                    ReadAhead::Barrier(barrier) => self.on_barrier(channel, barrier)?,
                    ReadAhead::Ended => {
                        // The end stays held for the task to take in order; nothing comes
                        // after it, so the channel's in-flight data is complete.
                        let alignment = self.aligner.on_end_read_ahead(channel);
                        self.gates.stop_recording(channel);
                        self.on_alignment(alignment)?;
                    }
                    ReadAhead::Waiting => {}
                }
            }
        }
        Ok(())
    }

    /// The coordinator triggered `barrier` at this task: every producer of it finished
    /// (sources trigger in [`super::driver`]; a finished task is asked in
    /// [`super::Task`]). `declining`: as for [`Self::step`].
    pub(super) fn on_trigger(&mut self, barrier: CheckpointBarrier, declining: Option<&str>) -> Result<(), TaskError> {
        if let Some(reason) = declining.or(self.unaligned.is_none().then_some(NO_LAYOUT)) {
            self.decline_unless_older(&barrier, reason);
            return Ok(());
        }
        let first = self.aligner.current().is_none_or(|current| current.id < barrier.id);
        let alignment = self.aligner.on_trigger(barrier, std::time::Instant::now());
        if alignment == Alignment::Pending {
            if self.aligner.current().is_some_and(|current| current.id > barrier.id) {
                // A newer checkpoint is under way here: this one cannot complete.
                self.decline(&barrier, "a newer checkpoint started here before this one was triggered");
            }
            return Ok(());
        }
        tracing::debug!(checkpoint = barrier.id.0, "checkpoint triggered here: every producer finished");
        let done = matches!(alignment, Alignment::Unaligned { finish: true, .. });
        self.timer.on_barrier(first, done, self.counters);
        self.on_alignment(alignment)?;
        self.read_ahead()
    }

    /// Unaligned checkpoints' work before the next batch: announcements, the aligned
    /// timeout, channels read ahead to their barriers, and no input without room
    /// downstream (true then: the step is over). `declining`: the task cannot take part
    /// in checkpoints now (it reads one input to its end first) and says why.
    pub(super) fn step(&mut self, declining: Option<&str>) -> Result<bool, TaskError> {
        let Some(unaligned) = self.unaligned.as_deref_mut() else { return Ok(false) };
        if unaligned.abandon_unless(self.aligner.current()) {
            self.gates.clear_recorded();
        }
        if !unaligned.listening() {
            // A triggered checkpoint records without announcements.
            if self.aligner.is_unaligned() {
                self.read_ahead()?;
            }
            return Ok(false);
        }
        let now = std::time::Instant::now();
        for (channel, barrier) in unaligned.announcements() {
            if let Some(reason) = declining {
                self.decline_unless_older(&barrier, reason);
                continue;
            }
            // An announcement starts a checkpoint's alignment as a barrier does (metrics).
            let first = self.aligner.current().is_none_or(|current| current.id < barrier.id);
            let alignment = self.aligner.on_announcement(channel, barrier, now);
            let done = matches!(alignment, Alignment::Unaligned { finish: true, .. });
            self.timer.on_barrier(first && self.aligner.current() == Some(barrier), done, self.counters);
            self.on_alignment(alignment)?;
        }
        if let Some(done) = self.aligner.done_through() {
            self.gates.discard_overtaken(done);
        }
        if self.aligner.timeout_at().is_some_and(|at| at <= now) {
            let alignment = self.aligner.on_time(now);
            self.on_alignment(alignment)?;
        }
        self.read_ahead()?;
        if !self.shared.has_output_room() {
            wait_for_room(self.shared, self.mailbox, self.unaligned.as_deref());
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether to stop between two records of a batch (putting the rest back) for an
    /// unaligned checkpoint to start: a producer announced a barrier, or an aligning
    /// checkpoint's timeout passed. While a checkpoint records, the channels are read
    /// ahead here too, so that it completes as soon as the barriers are queued.
    #[inline]
    pub(super) fn between_records(&mut self) -> Result<bool, TaskError> {
        let announced = self.unaligned.as_ref().is_some_and(|u| u.announced());
        if announced || self.aligner.timeout_at().is_some_and(|at| std::time::Instant::now() >= at) {
            return Ok(true);
        }
        if self.aligner.is_unaligned() {
            self.read_ahead()?;
        }
        Ok(false)
    }
}
