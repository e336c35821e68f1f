//! Barrier alignment, as a small pure state machine over the input channels of a task.
//!
//! EXACTLY_ONCE: once barrier n arrived on a channel, that channel is *blocked* (its
//! records wait) until barrier n arrived on every channel that has not ended; then the
//! task snapshots. AT_LEAST_ONCE: nothing is blocked; the task snapshots when the last
//! channel delivered barrier n, and records that overtook it are replayed on recovery.

use crate::channel::CheckpointBarrier;
use eddy_checkpoint::{CheckpointId, CheckpointingMode};

/// What a barrier or an end of input means for the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    /// Wait for more barriers.
    Pending,
    /// Every live channel delivered the barrier: take the snapshot.
    Complete(CheckpointBarrier),
}

#[derive(Debug, Clone, Copy, Default)]
struct Channel {
    ended: bool,
    barrier_seen: bool,
}

/// Tracks barriers over `channels` input channels.
#[derive(Debug)]
pub struct BarrierAligner {
    mode: CheckpointingMode,
    channels: Vec<Channel>,
    current: Option<CheckpointBarrier>,
    /// The newest checkpoint this task declined: its barriers (and older ones) are
    /// ignored.
    declined: Option<CheckpointId>,
}

impl BarrierAligner {
    pub fn new(mode: CheckpointingMode, channels: usize) -> Self {
        Self { mode, channels: vec![Channel::default(); channels], current: None, declined: None }
    }

    /// Whether records from `channel` must wait (exactly-once, barrier already seen there).
    #[inline]
    pub fn is_blocked(&self, channel: usize) -> bool {
        self.mode == CheckpointingMode::ExactlyOnce && self.current.is_some() && self.channels[channel].barrier_seen
    }

    pub fn on_barrier(&mut self, channel: usize, barrier: CheckpointBarrier) -> Alignment {
        if self.declined.is_some_and(|declined| barrier.id <= declined) {
            return Alignment::Pending;
        }
        match self.current {
            Some(current) if barrier.id < current.id => return Alignment::Pending, // stale
            Some(current) if barrier.id > current.id => self.reset(),              // the older one was abandoned
            _ => {}
        }
        self.current = Some(barrier);
        self.channels[channel].barrier_seen = true;
        self.check()
    }

    pub fn on_end_of_input(&mut self, channel: usize) -> Alignment {
        self.channels[channel].ended = true;
        self.check()
    }

    fn check(&mut self) -> Alignment {
        match self.current {
            Some(barrier) if self.channels.iter().all(|c| c.ended || c.barrier_seen) => {
                self.reset();
                Alignment::Complete(barrier)
            }
            _ => Alignment::Pending,
        }
    }

    /// Gives up the checkpoint being aligned (and every older one): its barriers are
    /// ignored from now on, and no channel waits for it.
    pub fn decline(&mut self, id: CheckpointId) {
        self.declined = Some(self.declined.map_or(id, |d| d.max(id)));
        if self.current.is_some_and(|current| current.id <= id) {
            self.reset();
        }
    }

    /// The checkpoint being aligned, if any.
    pub fn current(&self) -> Option<CheckpointBarrier> {
        self.current
    }

    fn reset(&mut self) {
        self.current = None;
        self.channels.iter_mut().for_each(|c| c.barrier_seen = false);
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
}
