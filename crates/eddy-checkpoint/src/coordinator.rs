//! The checkpoint protocol as pure decisions (Arroyo's habit): the coordinator is told
//! what happened (time passed, a task acknowledged, a task finished) and answers what to
//! do (trigger, complete, subsume, abort, delete). It does no I/O and starts no thread,
//! so it moves into a JobManager unchanged and is tested without a runtime.
//!
//! `P` is what a task acknowledges with (its state handle, or state bytes).

use crate::config::CheckpointConfig;
use crate::snapshot::{CheckpointId, SnapshotKind};
use std::collections::BTreeMap;

struct Pending<P> {
    kind: SnapshotKind,
    triggered_ms: u64,
    acks: Vec<Option<P>>,
}

/// A checkpoint every task acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed<P> {
    pub id: CheckpointId,
    pub kind: SnapshotKind,
    /// One state per task, in task order.
    pub task_states: Vec<P>,
    /// Older pending checkpoints dropped because this one completed.
    pub subsumed: Vec<CheckpointId>,
}

/// More checkpoints failed in a row than the configuration tolerates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyFailures {
    pub consecutive: u32,
    pub tolerable: u32,
}

pub struct CheckpointCoordinator<P> {
    config: CheckpointConfig,
    next_id: u64,
    pending: BTreeMap<u64, Pending<P>>,
    /// Tasks that finished their input: barriers no longer reach them, so they are asked
    /// for their (final) state directly.
    finished: Vec<bool>,
    last_trigger_ms: Option<u64>,
    last_completion_ms: Option<u64>,
    consecutive_failures: u32,
}

impl<P> CheckpointCoordinator<P> {
    /// A coordinator for `task_count` tasks whose next checkpoint gets `next_id` (after
    /// a restore, one past the restored checkpoint, so ids never repeat).
    pub fn new(config: CheckpointConfig, task_count: usize, next_id: u64) -> Self {
        Self {
            config,
            next_id: next_id.max(1),
            pending: BTreeMap::new(),
            finished: vec![false; task_count],
            // As in Flink, the first checkpoint comes one interval after the start.
            last_trigger_ms: Some(0),
            last_completion_ms: None,
            consecutive_failures: 0,
        }
    }

    pub fn config(&self) -> &CheckpointConfig {
        &self.config
    }

    /// Whether a periodic checkpoint is due: interval passed since the last trigger, min
    /// pause passed since the last completion, fewer than max concurrent pending, and
    /// some task still running.
    pub fn should_trigger(&self, now_ms: u64) -> bool {
        if self.config.interval_ms == 0 || self.all_finished() || self.pending.len() >= self.config.max_concurrent {
            return false;
        }
        let interval_passed = self.last_trigger_ms.is_none_or(|t| now_ms >= t + self.config.interval_ms);
        let pause_passed = self.last_completion_ms.is_none_or(|t| now_ms >= t + self.config.min_pause_ms);
        interval_passed && pause_passed
    }

    /// Starts a checkpoint (or savepoint): sources get it, and finished tasks are asked
    /// directly ([`CheckpointCoordinator::is_finished`]).
    pub fn trigger(&mut self, kind: SnapshotKind, now_ms: u64) -> CheckpointId {
        let id = CheckpointId(self.next_id);
        self.next_id += 1;
        self.last_trigger_ms = Some(now_ms);
        let acks = self.finished.iter().map(|_| None).collect();
        self.pending.insert(id.0, Pending { kind, triggered_ms: now_ms, acks });
        id
    }

    /// A task's acknowledgement; completes the checkpoint when it is the last one missing.
    pub fn acknowledge(&mut self, id: CheckpointId, task: usize, state: P, now_ms: u64) -> Option<Completed<P>> {
        let pending = self.pending.get_mut(&id.0)?;
        pending.acks[task] = Some(state);
        self.try_complete(id, now_ms)
    }

    /// A task finished its input. Returns the pending checkpoints it has not acknowledged:
    /// no barrier will reach it, so it must be asked for them directly.
    pub fn task_finished(&mut self, task: usize) -> Vec<(CheckpointId, SnapshotKind)> {
        self.finished[task] = true;
        let waiting = self.pending.iter().filter(|(_, p)| p.acks[task].is_none());
        waiting.map(|(id, p)| (CheckpointId(*id), p.kind)).collect()
    }

    /// Whether task `task` finished its input.
    pub fn is_finished(&self, task: usize) -> bool {
        self.finished[task]
    }

    fn try_complete(&mut self, id: CheckpointId, now_ms: u64) -> Option<Completed<P>> {
        if self.pending.get(&id.0)?.acks.iter().any(Option::is_none) {
            return None;
        }
        let pending = self.pending.remove(&id.0)?;
        // A completed checkpoint makes older pending checkpoints pointless; savepoints are
        // the user's, never subsumed, and subsume nothing.
        let subsumed: Vec<CheckpointId> = match pending.kind {
            SnapshotKind::Checkpoint => self
                .pending
                .range(..id.0)
                .filter(|(_, p)| p.kind == SnapshotKind::Checkpoint)
                .map(|(k, _)| CheckpointId(*k))
                .collect(),
            SnapshotKind::Savepoint => Vec::new(),
        };
        for old in &subsumed {
            self.pending.remove(&old.0);
        }
        self.last_completion_ms = Some(now_ms);
        self.consecutive_failures = 0;
        let task_states = pending.acks.into_iter().map(|a| a.expect("all acknowledged")).collect();
        Some(Completed { id, kind: pending.kind, task_states, subsumed })
    }

    /// Whether every task finished.
    pub fn all_finished(&self) -> bool {
        self.finished.iter().all(|f| *f)
    }

    /// Once every task finished: triggers the job's last checkpoint, of their final states.
    pub fn final_checkpoint(&mut self, now_ms: u64) -> Option<CheckpointId> {
        self.all_finished().then(|| self.trigger(SnapshotKind::Checkpoint, now_ms))
    }

    /// Aborts checkpoints pending longer than the timeout, and returns them all. Each
    /// counts as a failure; the result says whether that made too many.
    pub fn expire(&mut self, now_ms: u64) -> (Vec<(CheckpointId, SnapshotKind)>, Result<(), TooManyFailures>) {
        let timeout = self.config.timeout_ms;
        let expired: Vec<(CheckpointId, SnapshotKind)> = self
            .pending
            .iter()
            .filter(|(_, p)| now_ms >= p.triggered_ms + timeout)
            .map(|(k, p)| (CheckpointId(*k), p.kind))
            .collect();
        let mut counted = Ok(());
        for (id, _) in &expired {
            self.pending.remove(&id.0);
            counted = counted.and(self.count_failure());
        }
        (expired, counted)
    }

    /// The checkpoints pending, oldest first.
    pub fn pending(&self) -> Vec<(CheckpointId, SnapshotKind)> {
        self.pending.iter().map(|(id, p)| (CheckpointId(*id), p.kind)).collect()
    }

    /// The kind of checkpoint `id` while it is pending; `None` once it completed, was
    /// aborted or subsumed, or if it never was.
    pub fn pending_kind(&self, id: CheckpointId) -> Option<SnapshotKind> {
        self.pending.get(&id.0).map(|p| p.kind)
    }

    /// A checkpoint that could not be completed (a task declined, storage failed).
    pub fn abort(&mut self, id: CheckpointId) -> Result<(), TooManyFailures> {
        if self.pending.remove(&id.0).is_some() {
            self.count_failure()?;
        }
        Ok(())
    }

    /// A checkpoint a task was not ready for: aborted, not counted as a failure.
    pub fn abort_not_counted(&mut self, id: CheckpointId) {
        self.pending.remove(&id.0);
    }

    /// A checkpoint that completed but could not be stored counts as failed too.
    pub fn record_failure(&mut self) -> Result<(), TooManyFailures> {
        self.count_failure()
    }

    fn count_failure(&mut self) -> Result<(), TooManyFailures> {
        self.consecutive_failures += 1;
        if self.consecutive_failures > self.config.tolerable_failures {
            return Err(TooManyFailures {
                consecutive: self.consecutive_failures,
                tolerable: self.config.tolerable_failures,
            });
        }
        Ok(())
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coordinator(tasks: usize) -> CheckpointCoordinator<&'static str> {
        CheckpointCoordinator::new(
            CheckpointConfig { interval_ms: 100, min_pause_ms: 30, max_concurrent: 2, ..CheckpointConfig::default() },
            tasks,
            1,
        )
    }

    #[test]
    fn triggers_follow_interval_pause_and_concurrency() {
        let mut c = coordinator(2);
        assert!(!c.should_trigger(99), "the first checkpoint waits one interval");
        assert!(c.should_trigger(100));
        let first = c.trigger(SnapshotKind::Checkpoint, 100);
        assert!(!c.should_trigger(199), "interval not passed");
        assert!(c.should_trigger(200));
        c.trigger(SnapshotKind::Checkpoint, 200);
        assert!(!c.should_trigger(300), "two pending = max concurrent");
        c.acknowledge(first, 0, "a", 310);
        assert!(c.acknowledge(first, 1, "b", 310).is_some());
        assert!(!c.should_trigger(320), "min pause after completion");
        assert!(c.should_trigger(340));
    }

    #[test]
    fn completes_when_all_acknowledged_and_subsumes_older() {
        let mut c = coordinator(2);
        let one = c.trigger(SnapshotKind::Checkpoint, 0);
        let two = c.trigger(SnapshotKind::Checkpoint, 100);
        assert_eq!(c.acknowledge(two, 0, "x", 150), None);
        let done = c.acknowledge(two, 1, "y", 160).unwrap();
        assert_eq!(
            done,
            Completed { id: two, kind: SnapshotKind::Checkpoint, task_states: vec!["x", "y"], subsumed: vec![one] }
        );
        assert_eq!(c.acknowledge(one, 0, "late", 170), None, "subsumed checkpoints are gone");
        assert_eq!(c.pending_count(), 0);
    }

    #[test]
    fn finished_tasks_are_asked_for_what_they_have_not_acknowledged() {
        let mut c = coordinator(2);
        let one = c.trigger(SnapshotKind::Checkpoint, 0);
        c.acknowledge(one, 0, "s0", 5);
        assert_eq!(c.task_finished(0), vec![], "it acknowledged everything pending");
        let two = c.trigger(SnapshotKind::Savepoint, 100);
        assert!(c.is_finished(0) && !c.is_finished(1));
        assert_eq!(c.task_finished(1), vec![(one, SnapshotKind::Checkpoint), (two, SnapshotKind::Savepoint)]);
        assert!(!c.should_trigger(1_000), "nothing runs any more");
        assert_eq!(c.acknowledge(one, 1, "final-1", 110).unwrap().task_states, vec!["s0", "final-1"]);
        let last = c.final_checkpoint(1_000).unwrap();
        assert_eq!(last, CheckpointId(3));
        c.acknowledge(last, 0, "final-0", 1_010);
        let done = c.acknowledge(last, 1, "final-1", 1_020).unwrap();
        assert_eq!((done.id, done.subsumed), (last, vec![]), "a checkpoint never subsumes a savepoint");
        assert_eq!(c.pending(), vec![(two, SnapshotKind::Savepoint)]);
    }

    #[test]
    fn timeouts_count_as_failures_up_to_the_tolerance() {
        let config =
            CheckpointConfig { interval_ms: 10, timeout_ms: 50, tolerable_failures: 1, ..CheckpointConfig::default() };
        let mut c: CheckpointCoordinator<()> = CheckpointCoordinator::new(config, 1, 1);
        c.trigger(SnapshotKind::Checkpoint, 0);
        assert_eq!(c.expire(49), (vec![], Ok(())));
        assert_eq!(c.expire(50), (vec![(CheckpointId(1), SnapshotKind::Checkpoint)], Ok(())));
        c.trigger(SnapshotKind::Checkpoint, 60);
        c.trigger(SnapshotKind::Savepoint, 70);
        let (expired, counted) = c.expire(200);
        assert_eq!(expired.len(), 2, "every expired one is returned, to be cleaned up");
        assert_eq!(counted, Err(TooManyFailures { consecutive: 2, tolerable: 1 }), "the first one too many");
    }
}
