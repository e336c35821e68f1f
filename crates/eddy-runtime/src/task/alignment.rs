//! Barrier alignment, as a small pure state machine over the input channels of a task.
//!
//! EXACTLY_ONCE: once barrier n arrived on a channel, that channel is *blocked* (its
//! records wait) until barrier n arrived on every channel that has not ended; then the
//! task snapshots. AT_LEAST_ONCE: nothing is blocked; the task snapshots when the last
//! channel delivered barrier n, and records that overtook it are replayed on recovery.
//!
//! UNALIGNED (exactly-once checkpoints with [`UnalignedPolicy`]): the task snapshots at the
//! first sign of checkpoint n, a producer's announcement (sent ahead of the records it
//! queued) or a barrier, and blocks nothing. Every channel whose barrier has not arrived
//! yet is *recorded* from then on: what it delivers up to its barrier was sent before the
//! checkpoint but is not in the snapshot, so it goes into the checkpoint as in-flight
//! data. When every channel delivered barrier n the checkpoint's part is complete. With an
//! aligned-checkpoint timeout the task aligns first and turns unaligned when the timeout
//! passed (Flink's `aligned-checkpoint-timeout`).
//!
//! A barrier that overtook records at its producer (the producer went unaligned) makes its
//! checkpoint unaligned here too, or, where this task takes it aligned, is declined
//! ([`BarrierAligner::on_overtaking_barrier`]).
//!
//! TRIGGERED (Flink's checkpoints after tasks finished, FLIP-147): once every producer of a
//! task finished, no barrier will come on any of its channels; the coordinator triggers the
//! task directly ([`BarrierAligner::on_trigger`]). It snapshots at once and records each
//! channel up to its end of input, which its finished producer queued already and which
//! counts as the channel's barrier ([`BarrierAligner::on_end_read_ahead`]): what it has
//! not processed yet goes into the checkpoint as in-flight data, in either mode, so that a
//! restore replays it and need not run the finished producers again.

use super::gate::Overtook;
use crate::channel::CheckpointBarrier;
use eddy_checkpoint::{CheckpointId, CheckpointingMode, SnapshotKind};
use std::time::{Duration, Instant};

/// What a barrier, an announcement, an end of input or the time means for the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    /// Wait for more barriers.
    Pending,
    /// Every live channel delivered the barrier: take the snapshot.
    Complete(CheckpointBarrier),
    /// Unaligned: `start` take the snapshot now, and record the channels that
    /// [`BarrierAligner::is_recording`]; `finish` every channel delivered its barrier since,
    /// so the recorded in-flight data is complete and the snapshot can be written.
    Unaligned { barrier: CheckpointBarrier, start: bool, finish: bool },
}

/// What to do with what a barrier overtook at its producer, before the barrier itself is
/// taken ([`BarrierAligner::on_overtaking_barrier`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overtaking {
    /// The checkpoint cannot be taken here (declined already): tell the coordinator why.
    pub decline: Option<&'static str>,
    /// What the checkpoint's alignment became (it may start unaligned now).
    pub alignment: Alignment,
    /// Keep the overtaken records and watermarks in the checkpoint (`Some(true)`), drop them
    /// (`Some(false)`), or there were none.
    pub keep: Option<bool>,
}

/// Why a task declines a checkpoint whose barrier overtook records it takes aligned.
pub const OVERTAKEN_BUT_ALIGNED: &str = "its barrier overtook records at the producer, and this task takes it \
                                         aligned (unaligned checkpoints are configured differently here)";

/// When a task takes exactly-once checkpoints unaligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnalignedPolicy {
    pub enabled: bool,
    /// Align first, and turn unaligned after this long (`None`: from the first barrier).
    pub aligned_timeout: Option<Duration>,
}

/// Whether `barrier` may go unaligned: an exactly-once checkpoint (savepoints stay
/// aligned) with unaligned checkpoints on. Writers announce exactly these barriers.
pub fn goes_unaligned(policy: UnalignedPolicy, mode: CheckpointingMode, barrier: &CheckpointBarrier) -> bool {
    policy.enabled && mode == CheckpointingMode::ExactlyOnce && barrier.kind == SnapshotKind::Checkpoint
}

#[derive(Debug, Clone, Copy, Default)]
struct Channel {
    ended: bool,
    barrier_seen: bool,
    /// Its producer announced the checkpoint's barrier: the barrier is queued in it.
    announced: bool,
}

/// Tracks barriers over `channels` input channels.
#[derive(Debug)]
pub struct BarrierAligner {
    mode: CheckpointingMode,
    unaligned: UnalignedPolicy,
    channels: Vec<Channel>,
    current: Option<CheckpointBarrier>,
    /// When the current checkpoint's first barrier or announcement arrived.
    started: Option<Instant>,
    /// The current checkpoint was snapshotted unaligned: its channels are recorded.
    unaligned_now: bool,
    /// The newest checkpoint this task declined: its barriers (and older ones) are
    /// ignored.
    declined: Option<CheckpointId>,
    /// The newest checkpoint this task finished aligning: a late announcement of it (it
    /// travels beside the records, not among them) is ignored.
    finished: Option<CheckpointId>,
}

impl BarrierAligner {
    pub fn new(mode: CheckpointingMode, channels: usize) -> Self {
        Self::with_unaligned(mode, UnalignedPolicy::default(), channels)
    }

    pub fn with_unaligned(mode: CheckpointingMode, unaligned: UnalignedPolicy, channels: usize) -> Self {
        Self {
            mode,
            unaligned,
            channels: vec![Channel::default(); channels],
            current: None,
            started: None,
            unaligned_now: false,
            declined: None,
            finished: None,
        }
    }

    /// Whether records from `channel` must wait (exactly-once, aligned, barrier already
    /// seen there).
    #[inline]
    pub fn is_blocked(&self, channel: usize) -> bool {
        self.mode == CheckpointingMode::ExactlyOnce
            && self.current.is_some()
            && !self.unaligned_now
            && self.channels[channel].barrier_seen
    }

    /// Whether what `channel` delivers now is in-flight data of an unaligned checkpoint.
    #[inline]
    pub fn is_recording(&self, channel: usize) -> bool {
        let c = &self.channels[channel];
        self.unaligned_now && !c.barrier_seen && !c.ended
    }

    /// Whether the task should read `channel` ahead up to its barrier: it records it, and
    /// its producer announced the barrier, so the barrier is in the queue already (or, for a
    /// triggered checkpoint, its end of input: see [`Self::on_end_read_ahead`]).
    #[inline]
    pub fn reads_ahead(&self, channel: usize) -> bool {
        self.is_recording(channel) && self.channels[channel].announced
    }

    /// Whether checkpoints of `barrier`'s kind go unaligned here at all.
    fn may_go_unaligned(&self, barrier: &CheckpointBarrier) -> bool {
        goes_unaligned(self.unaligned, self.mode, barrier)
    }

    /// Whether `barrier` is of a checkpoint this task is done with.
    fn is_stale(&self, barrier: &CheckpointBarrier) -> bool {
        self.declined.is_some_and(|declined| barrier.id <= declined)
            || self.finished.is_some_and(|finished| barrier.id <= finished)
            || self.current.is_some_and(|current| barrier.id < current.id)
    }

    /// Makes `barrier` the current checkpoint if it is newer (an older one was abandoned).
    fn begin(&mut self, barrier: CheckpointBarrier, now: Instant) {
        if self.current.is_some_and(|current| current.id < barrier.id) {
            self.reset();
        }
        if self.current.is_none() {
            self.current = Some(barrier);
            self.started = Some(now);
        }
    }

    /// A producer announced barrier `barrier` on `channel` ahead of what it queued there.
    pub fn on_announcement(&mut self, channel: usize, barrier: CheckpointBarrier, now: Instant) -> Alignment {
        if self.is_stale(&barrier) || !self.may_go_unaligned(&barrier) {
            return Alignment::Pending;
        }
        self.begin(barrier, now);
        let c = &mut self.channels[channel];
        if c.barrier_seen || c.ended {
            return Alignment::Pending;
        }
        c.announced = true;
        self.maybe_go_unaligned(now)
    }

    pub fn on_barrier(&mut self, channel: usize, barrier: CheckpointBarrier) -> Alignment {
        self.on_barrier_at(channel, barrier, Instant::now())
    }

    /// A barrier arrived that `overtook` records or watermarks at its producer; decides
    /// what becomes of them before the barrier itself is taken ([`Self::on_barrier`]).
    /// Watermarks alone a task that takes the checkpoint aligned may drop: an aligned
    /// checkpoint stores no watermark. Records it must not drop: the producer's snapshot
    /// counts them as sent before the checkpoint, so the checkpoint is declined there, and
    /// goes unaligned (snapshotted now, if it was not) where it may.
    pub fn on_overtaking_barrier(
        &mut self,
        barrier: CheckpointBarrier,
        overtook: Overtook,
        now: Instant,
    ) -> Overtaking {
        let loses = self.loses_overtaken(&barrier);
        match overtook {
            Overtook::Nothing => Overtaking { decline: None, alignment: Alignment::Pending, keep: None },
            Overtook::Watermarks if loses => {
                Overtaking { decline: None, alignment: Alignment::Pending, keep: Some(false) }
            }
            Overtook::Watermarks | Overtook::Records => {
                let decline = loses.then_some(OVERTAKEN_BUT_ALIGNED);
                if decline.is_some() {
                    self.decline(barrier.id);
                }
                // What comes behind the barrier is in flight for its checkpoint, whichever
                // way the barrier was read and whatever the task heard before.
                let alignment = self.force_unaligned(barrier, now);
                let keep = self.unaligned_now && self.current == Some(barrier);
                Overtaking { decline, alignment, keep: Some(keep) }
            }
        }
    }

    /// Every producer of this task finished and the coordinator triggered `barrier` here:
    /// the task snapshots now, and every channel that has not ended is recorded up to its
    /// end of input (which counts as its barrier; see [`Self::reads_ahead`]). In either
    /// mode: what the task did not process yet would otherwise be lost, as no producer
    /// runs again to send it.
    ///
    /// A savepoint is not taken this way: a savepoint holds no in-flight data (it must
    /// restore under another chaining or record type). The task is asked for it again, for
    /// its final state, once its input ended.
    pub fn on_trigger(&mut self, barrier: CheckpointBarrier, now: Instant) -> Alignment {
        if self.is_stale(&barrier) || barrier.kind == SnapshotKind::Savepoint {
            return Alignment::Pending;
        }
        self.begin(barrier, now);
        if self.current != Some(barrier) {
            return Alignment::Pending;
        }
        let start = !self.unaligned_now;
        self.unaligned_now = true;
        for c in self.channels.iter_mut().filter(|c| !c.ended && !c.barrier_seen) {
            // Its end of input is queued (the producer finished), or read ahead already.
            c.announced = true;
        }
        let finish = self.all_aligned();
        if finish {
            self.finish(barrier);
        }
        Alignment::Unaligned { barrier, start, finish }
    }

    /// A barrier that overtook records or watermarks at its producer arrived: its
    /// checkpoint goes unaligned at once, aligning or not (they come behind it).
    pub fn force_unaligned(&mut self, barrier: CheckpointBarrier, now: Instant) -> Alignment {
        if self.is_stale(&barrier) || !self.may_go_unaligned(&barrier) {
            return Alignment::Pending;
        }
        self.begin(barrier, now);
        if self.unaligned_now || self.current != Some(barrier) {
            return Alignment::Pending;
        }
        self.unaligned_now = true;
        Alignment::Unaligned { barrier, start: true, finish: false }
    }

    /// Whether records that `barrier` overtook at its producer would be lost here: this
    /// task takes the checkpoint aligned (configured unlike its producer, or a savepoint),
    /// so what comes behind the barrier would fall into the next checkpoint, while the
    /// producer's snapshot counts it as sent before this one.
    pub fn loses_overtaken(&self, barrier: &CheckpointBarrier) -> bool {
        !self.is_stale(barrier) && !self.may_go_unaligned(barrier)
    }

    pub fn on_barrier_at(&mut self, channel: usize, barrier: CheckpointBarrier, now: Instant) -> Alignment {
        if self.is_stale(&barrier) {
            return Alignment::Pending;
        }
        self.begin(barrier, now);
        self.channels[channel].barrier_seen = true;
        if self.may_go_unaligned(&barrier) {
            if let Alignment::Unaligned { barrier, start, finish } = self.maybe_go_unaligned(now) {
                return Alignment::Unaligned { barrier, start, finish };
            }
        }
        self.check()
    }

    /// A triggered checkpoint read `channel` ahead to its end of input (held for the task
    /// to take in order): for this checkpoint that is the channel's barrier, as nothing
    /// comes after it. A later trigger records what it still holds again, up to the end.
    pub fn on_end_read_ahead(&mut self, channel: usize) -> Alignment {
        if !self.is_recording(channel) {
            return Alignment::Pending;
        }
        self.channels[channel].barrier_seen = true;
        self.check()
    }

    /// `channel` delivered its end of input (a second call for the same channel changes
    /// nothing).
    pub fn on_end_of_input(&mut self, channel: usize) -> Alignment {
        if self.channels[channel].ended {
            return Alignment::Pending;
        }
        self.channels[channel].ended = true;
        self.check()
    }

    /// The aligned-checkpoint timeout of the current checkpoint passed: it turns unaligned.
    pub fn on_time(&mut self, now: Instant) -> Alignment {
        match self.current {
            Some(barrier) if self.may_go_unaligned(&barrier) => self.maybe_go_unaligned(now),
            _ => Alignment::Pending,
        }
    }

    /// When [`Self::on_time`] should be called next, if a checkpoint is aligning toward a
    /// timeout.
    pub fn timeout_at(&self) -> Option<Instant> {
        match (self.current, self.started, self.unaligned.aligned_timeout) {
            (Some(barrier), Some(started), Some(timeout)) if !self.unaligned_now && self.may_go_unaligned(&barrier) => {
                Some(started + timeout)
            }
            _ => None,
        }
    }

    /// Turns the current checkpoint unaligned if its time has come (at once without a
    /// timeout). Once unaligned, says whether every channel delivered its barrier.
    fn maybe_go_unaligned(&mut self, now: Instant) -> Alignment {
        let Some(barrier) = self.current else { return Alignment::Pending };
        let start = !self.unaligned_now
            && match (self.unaligned.aligned_timeout, self.started) {
                (None, _) => true,
                (Some(timeout), Some(started)) => now.duration_since(started) >= timeout,
                (Some(_), None) => false,
            };
        if start {
            self.unaligned_now = true;
        }
        if !self.unaligned_now {
            return Alignment::Pending;
        }
        let finish = self.all_aligned();
        if finish {
            self.finish(barrier);
        }
        if start || finish {
            Alignment::Unaligned { barrier, start, finish }
        } else {
            Alignment::Pending
        }
    }

    fn all_aligned(&self) -> bool {
        self.channels.iter().all(|c| c.ended || c.barrier_seen)
    }

    fn check(&mut self) -> Alignment {
        match self.current {
            Some(barrier) if self.all_aligned() => {
                let unaligned = self.unaligned_now;
                self.finish(barrier);
                if unaligned {
                    Alignment::Unaligned { barrier, start: false, finish: true }
                } else {
                    Alignment::Complete(barrier)
                }
            }
            _ => Alignment::Pending,
        }
    }

    fn finish(&mut self, barrier: CheckpointBarrier) {
        self.finished = Some(self.finished.map_or(barrier.id, |f| f.max(barrier.id)));
        self.reset();
    }

    /// Gives up the checkpoint being aligned (and every older one): its barriers are
    /// ignored from now on, and no channel waits for it.
    pub fn decline(&mut self, id: CheckpointId) {
        self.declined = Some(self.declined.map_or(id, |d| d.max(id)));
        if self.current.is_some_and(|current| current.id <= id) {
            self.reset();
        }
    }

    /// The newest checkpoint this task is done with, declined or finished: nothing of it
    /// or of an older one is used any more.
    pub fn done_through(&self) -> Option<CheckpointId> {
        self.declined.max(self.finished)
    }

    /// The checkpoint being aligned, if any.
    pub fn current(&self) -> Option<CheckpointBarrier> {
        self.current
    }

    /// Whether the current checkpoint was snapshotted unaligned and is still recording.
    pub fn is_unaligned(&self) -> bool {
        self.unaligned_now
    }

    fn reset(&mut self) {
        self.current = None;
        self.started = None;
        self.unaligned_now = false;
        self.channels.iter_mut().for_each(|c| {
            c.barrier_seen = false;
            c.announced = false;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_checkpoint::{CheckpointId, SnapshotKind};

    fn barrier(id: u64) -> CheckpointBarrier {
        CheckpointBarrier { id: CheckpointId(id), kind: SnapshotKind::Checkpoint }
    }

    #[test]
    fn a_trigger_after_the_producers_finished_snapshots_now_and_records_each_channel_to_its_end() {
        for mode in [CheckpointingMode::ExactlyOnce, CheckpointingMode::AtLeastOnce] {
            let now = Instant::now();
            let mut a = BarrierAligner::new(mode, 3);
            assert_eq!(a.on_end_of_input(2), Alignment::Pending);
            let started = a.on_trigger(barrier(4), now);
            assert_eq!(started, Alignment::Unaligned { barrier: barrier(4), start: true, finish: false }, "{mode:?}");
            assert!(a.is_recording(0) && a.is_recording(1) && !a.is_recording(2), "an ended channel holds nothing");
            assert!(a.reads_ahead(0) && a.reads_ahead(1), "the ends are queued: read ahead to them");
            assert!(!a.is_blocked(0) && !a.is_blocked(1));
            assert_eq!(a.on_end_of_input(0), Alignment::Pending);
            assert!(!a.is_recording(0) && a.is_recording(1));
            let done = Alignment::Unaligned { barrier: barrier(4), start: false, finish: true };
            assert_eq!(a.on_end_read_ahead(1), done, "the end, read ahead, is the channel's barrier");
            assert_eq!(a.done_through(), Some(CheckpointId(4)));
            assert_eq!(a.on_trigger(barrier(4), now), Alignment::Pending, "a repeated trigger is stale");
            // The end is still held: the next trigger records what channel 1 holds again.
            let again = a.on_trigger(barrier(5), now);
            assert_eq!(again, Alignment::Unaligned { barrier: barrier(5), start: true, finish: false });
            assert!(a.is_recording(1) && a.reads_ahead(1));
            assert_eq!(
                a.on_end_read_ahead(1),
                Alignment::Unaligned { barrier: barrier(5), start: false, finish: true }
            );
            assert_eq!(a.on_end_of_input(1), Alignment::Pending, "taken in order at last");
            assert_eq!(
                a.on_trigger(barrier(6), now),
                Alignment::Unaligned { barrier: barrier(6), start: true, finish: true }
            );
        }
    }

    #[test]
    fn a_savepoint_is_not_taken_by_a_trigger_with_input_left() {
        let mut a = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 2);
        let savepoint = CheckpointBarrier { id: CheckpointId(3), kind: SnapshotKind::Savepoint };
        assert_eq!(a.on_trigger(savepoint, Instant::now()), Alignment::Pending);
        assert!(!a.is_recording(0) && a.current().is_none());
    }

    #[test]
    fn a_trigger_on_a_task_whose_inputs_all_ended_completes_at_once() {
        let mut a = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 1);
        a.on_end_of_input(0);
        let done = Alignment::Unaligned { barrier: barrier(2), start: true, finish: true };
        assert_eq!(a.on_trigger(barrier(2), Instant::now()), done);
        assert!(!a.is_unaligned());
    }

    #[test]
    fn a_barrier_that_overtook_records_goes_unaligned_where_it_may_and_is_declined_where_it_may_not() {
        let now = Instant::now();
        let mut aligned = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 2);
        let nothing = aligned.on_overtaking_barrier(barrier(1), Overtook::Nothing, now);
        assert_eq!(nothing, Overtaking { decline: None, alignment: Alignment::Pending, keep: None });
        let watermarks = aligned.on_overtaking_barrier(barrier(1), Overtook::Watermarks, now);
        assert_eq!(watermarks.keep, Some(false), "an aligned checkpoint stores no watermark");
        assert_eq!(watermarks.decline, None);
        let records = aligned.on_overtaking_barrier(barrier(1), Overtook::Records, now);
        assert_eq!(records.decline, Some(OVERTAKEN_BUT_ALIGNED));
        assert_eq!(records.keep, Some(false));
        assert_eq!(aligned.on_barrier(0, barrier(1)), Alignment::Pending, "declined: its barriers are ignored");

        let mut unaligned = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(None), 2);
        let records = unaligned.on_overtaking_barrier(barrier(1), Overtook::Records, now);
        assert_eq!(records.decline, None);
        assert_eq!(records.alignment, Alignment::Unaligned { barrier: barrier(1), start: true, finish: false });
        assert_eq!(records.keep, Some(true), "what came behind the barrier is in flight");
        let watermarks = unaligned.on_overtaking_barrier(barrier(1), Overtook::Watermarks, now);
        assert_eq!(watermarks, Overtaking { decline: None, alignment: Alignment::Pending, keep: Some(true) });
    }

    #[test]
    fn exactly_once_blocks_aligned_channels_until_all_arrive() {
        let mut a = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 3);
        assert_eq!(a.on_barrier(1, barrier(1)), Alignment::Pending);
        assert!(a.is_blocked(1) && !a.is_blocked(0) && !a.is_blocked(2));
        assert_eq!(a.on_barrier(0, barrier(1)), Alignment::Pending);
        assert_eq!(a.on_barrier(2, barrier(1)), Alignment::Complete(barrier(1)));
        assert!(!a.is_blocked(0) && !a.is_blocked(1), "unblocked after the snapshot");
    }

    #[test]
    fn at_least_once_never_blocks() {
        let mut a = BarrierAligner::new(CheckpointingMode::AtLeastOnce, 2);
        assert_eq!(a.on_barrier(0, barrier(4)), Alignment::Pending);
        assert!(!a.is_blocked(0));
        assert_eq!(a.on_barrier(1, barrier(4)), Alignment::Complete(barrier(4)));
    }

    #[test]
    fn ended_channels_count_as_aligned() {
        let mut a = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 3);
        assert_eq!(a.on_end_of_input(2), Alignment::Pending, "no checkpoint in progress");
        assert_eq!(a.on_barrier(0, barrier(1)), Alignment::Pending);
        assert_eq!(a.on_end_of_input(1), Alignment::Complete(barrier(1)));
        assert_eq!(a.on_barrier(0, barrier(2)), Alignment::Complete(barrier(2)), "only one live channel left");
    }

    #[test]
    fn a_declined_checkpoint_unblocks_and_its_barriers_are_ignored() {
        let mut a = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 2);
        a.on_barrier(1, barrier(3));
        assert!(a.is_blocked(1));
        a.decline(CheckpointId(3));
        assert!(!a.is_blocked(1) && a.current().is_none());
        assert_eq!(a.on_barrier(0, barrier(3)), Alignment::Pending);
        assert!(!a.is_blocked(0), "a declined checkpoint's barrier blocks nothing");
        a.on_barrier(0, barrier(4));
        assert_eq!(a.on_barrier(1, barrier(4)), Alignment::Complete(barrier(4)));
    }

    #[test]
    fn a_newer_barrier_abandons_an_older_alignment() {
        let mut a = BarrierAligner::new(CheckpointingMode::AtLeastOnce, 2);
        a.on_barrier(0, barrier(1));
        assert_eq!(a.on_barrier(0, barrier(2)), Alignment::Pending);
        assert_eq!(a.on_barrier(1, barrier(1)), Alignment::Pending, "stale barrier ignored");
        assert_eq!(a.on_barrier(1, barrier(2)), Alignment::Complete(barrier(2)));
    }

    fn unaligned(timeout: Option<Duration>) -> UnalignedPolicy {
        UnalignedPolicy { enabled: true, aligned_timeout: timeout }
    }

    #[test]
    fn unaligned_snapshots_at_the_first_announcement_and_records_until_each_barrier() {
        let now = Instant::now();
        let mut a = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(None), 3);
        let started = a.on_announcement(1, barrier(1), now);
        assert_eq!(started, Alignment::Unaligned { barrier: barrier(1), start: true, finish: false });
        assert!((0..3).all(|c| a.is_recording(c) && !a.is_blocked(c)), "nothing blocks, everything records");
        assert!(a.reads_ahead(1) && !a.reads_ahead(0), "only an announced channel has its barrier queued");
        assert_eq!(a.on_barrier_at(1, barrier(1), now), Alignment::Pending);
        assert!(!a.is_recording(1), "after its barrier a channel's records are the next checkpoint's");
        assert_eq!(a.on_end_of_input(2), Alignment::Pending);
        let done = a.on_barrier_at(0, barrier(1), now);
        assert_eq!(done, Alignment::Unaligned { barrier: barrier(1), start: false, finish: true });
        assert!(!a.is_recording(0) && a.current().is_none());
        assert_eq!(a.on_announcement(0, barrier(1), now), Alignment::Pending, "a late announcement is stale");
    }

    #[test]
    fn an_unaligned_barrier_without_announcement_starts_and_a_single_channel_finishes_at_once() {
        let now = Instant::now();
        let mut a = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(None), 1);
        let both = a.on_barrier_at(0, barrier(2), now);
        assert_eq!(both, Alignment::Unaligned { barrier: barrier(2), start: true, finish: true });
        let savepoint = CheckpointBarrier { id: CheckpointId(3), kind: SnapshotKind::Savepoint };
        assert_eq!(a.on_barrier_at(0, savepoint, now), Alignment::Complete(savepoint), "savepoints stay aligned");
    }

    #[test]
    fn a_barrier_that_overtook_records_turns_an_aligning_checkpoint_unaligned_at_once() {
        let now = Instant::now();
        let timeout = Duration::from_secs(60);
        let mut a = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(Some(timeout)), 3);
        assert_eq!(a.on_barrier_at(0, barrier(1), now), Alignment::Pending);
        assert!(a.is_blocked(0), "aligning");
        let forced = a.force_unaligned(barrier(1), now);
        assert_eq!(forced, Alignment::Unaligned { barrier: barrier(1), start: true, finish: false });
        assert!(!a.is_blocked(0) && a.is_recording(1) && a.is_recording(2), "long before the timeout");
        assert_eq!(a.force_unaligned(barrier(1), now), Alignment::Pending, "started once");
        assert_eq!(a.on_barrier_at(1, barrier(1), now), Alignment::Pending);
        let done = a.on_barrier_at(2, barrier(1), now);
        assert_eq!(done, Alignment::Unaligned { barrier: barrier(1), start: false, finish: true });
        assert_eq!(a.force_unaligned(barrier(1), now), Alignment::Pending, "a finished checkpoint stays finished");
        let savepoint = CheckpointBarrier { id: CheckpointId(2), kind: SnapshotKind::Savepoint };
        assert!(!a.loses_overtaken(&barrier(1)), "done with it: its copies are of no use");
        assert!(a.loses_overtaken(&savepoint));
        assert_eq!(a.force_unaligned(savepoint, now), Alignment::Pending, "savepoints stay aligned");
    }

    #[test]
    fn a_task_that_aligns_would_lose_what_a_barrier_overtook_until_it_is_done_with_it() {
        let mut a = BarrierAligner::new(CheckpointingMode::ExactlyOnce, 2);
        assert!(a.loses_overtaken(&barrier(1)), "unaligned checkpoints are off here");
        a.decline(CheckpointId(1));
        assert!(!a.loses_overtaken(&barrier(1)));
        assert!(a.loses_overtaken(&barrier(2)));
        let u = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(None), 2);
        assert!(!u.loses_overtaken(&barrier(1)), "it goes unaligned and keeps them");
    }

    #[test]
    fn an_aligned_checkpoint_turns_unaligned_when_its_timeout_passed() {
        let now = Instant::now();
        let timeout = Duration::from_millis(100);
        let mut a = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(Some(timeout)), 2);
        assert_eq!(a.on_announcement(1, barrier(1), now), Alignment::Pending);
        assert_eq!(a.on_barrier_at(0, barrier(1), now), Alignment::Pending);
        assert!(a.is_blocked(0) && !a.is_recording(1), "aligned until the timeout");
        assert_eq!(a.timeout_at(), Some(now + timeout));
        assert_eq!(a.on_time(now + timeout / 2), Alignment::Pending);
        let turned = a.on_time(now + timeout);
        assert_eq!(turned, Alignment::Unaligned { barrier: barrier(1), start: true, finish: false });
        assert!(!a.is_blocked(0) && a.is_recording(1) && a.reads_ahead(1) && !a.is_recording(0));
        assert_eq!(a.timeout_at(), None);
        let done = a.on_barrier_at(1, barrier(1), now + timeout);
        assert_eq!(done, Alignment::Unaligned { barrier: barrier(1), start: false, finish: true });
    }

    #[test]
    fn a_declined_unaligned_checkpoint_stops_recording() {
        let now = Instant::now();
        let mut a = BarrierAligner::with_unaligned(CheckpointingMode::ExactlyOnce, unaligned(None), 2);
        a.on_announcement(0, barrier(5), now);
        assert!(a.is_recording(1));
        a.decline(CheckpointId(5));
        assert!(!a.is_recording(1) && !a.is_unaligned());
        assert_eq!(a.on_barrier_at(0, barrier(5), now), Alignment::Pending);
    }
}
