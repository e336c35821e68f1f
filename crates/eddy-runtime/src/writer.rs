//! Record writers: the `Output` at the end of a chain that batches records per target
//! subtask and sends full batches into the targets' bounded channels.

use crate::channel::{BatchSender, CheckpointBarrier, CheckpointEvent, StreamMessage, BATCH_RECORDS_MAX};
use crate::debloat::BatchSizer;
use crate::error::TaskError;
use crate::output::{Lifecycle, Output};
use crate::task::in_flight::{Announcement, AnnouncementTarget};
use crate::task::TaskCounters;
use crate::task::TaskShared;
use crossbeam_channel::{SendTimeoutError, TrySendError};
use eddy_checkpoint::OperatorSnapshot;
use eddy_types::{assign_to_key_group, operator_index_for_key_group, KeyHash, MaxParallelism};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a writer blocked on a full channel waits at most before it looks at the cancel
/// flag (and at its channel again, if the consumer stopped reading above where it wakes it).
const SEND_WAIT_MS: u64 = 100;

/// Extracts a record's key and returns its stable hash (built by `key_by`).
pub trait KeySelector<T> {
    fn key_hash(&mut self, record: &T) -> KeyHash;
}

/// Makes a fresh [`KeySelector`] per writer (selectors keep a scratch buffer).
pub type KeySelectorFactory<T> = Arc<dyn Fn() -> Box<dyn KeySelector<T>> + Send + Sync>;

/// How records are spread over the target subtasks of an edge.
pub enum Partitioner<T> {
    /// Subtask i sends to subtask i (equal parallelism).
    Forward,
    /// Round robin.
    Rebalance { next: usize },
    /// Uniformly random (xorshift, seeded by the subtask index).
    Shuffle { state: u64 },
    /// Every record to every subtask.
    Broadcast,
    /// To the subtask that owns the record's key group.
    KeyGroups { selector: Box<dyn KeySelector<T>>, max_parallelism: MaxParallelism },
}

impl<T> Partitioner<T> {
    /// Index into the writer's targets, for every partitioner but broadcast, and on a
    /// key-partitioned edge the hash of the record's key that picked it.
    #[inline]
    fn target(&mut self, record: &T, targets: usize) -> (usize, Option<KeyHash>) {
        match self {
            Partitioner::Forward | Partitioner::Broadcast => (0, None),
            Partitioner::Rebalance { next } => {
                let target = *next;
                *next = if target + 1 == targets { 0 } else { target + 1 };
                (target, None)
            }
            Partitioner::Shuffle { state } => {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                ((*state % targets as u64) as usize, None)
            }
            Partitioner::KeyGroups { selector, max_parallelism } => {
                let hash = selector.key_hash(record);
                let key_group = assign_to_key_group(hash, *max_parallelism);
                (operator_index_for_key_group(*max_parallelism, targets as u32, key_group) as usize, Some(hash))
            }
        }
    }
}

/// Batches records per target and sends them on.
pub struct RecordWriter<T> {
    /// This producer's channel into each target subtask.
    targets: Vec<BatchSender<T>>,
    buffers: Vec<Vec<T>>,
    /// On a key-partitioned edge, the hashes of the buffered records' keys, per target
    /// (sent with them: see [`StreamMessage::HashedRecords`]); else empty.
    hashes: Vec<Vec<KeyHash>>,
    partitioner: Partitioner<T>,
    shared: Rc<TaskShared>,
    /// End of input was sent: nothing more goes downstream, not even barriers.
    ended: bool,
    counters: Arc<TaskCounters>,
    /// Records per batch, per target: [`BATCH_RECORDS_MAX`], 1 with a buffer timeout of
    /// 0, or what buffer debloating makes of it.
    batch_records: Vec<usize>,
    /// With buffer debloating, on bounded queues: each target's drain rate and the batch
    /// size that keeps its queue within the target time.
    sizer: Option<BatchSizer>,
    /// With a sizer: this writer's slot among the limits of the chain's source step.
    step_limit: Option<usize>,
    /// Per target, where an unaligned checkpoint's barrier is announced ahead of the
    /// queued records (the consumer in this process, or the network connection to it;
    /// empty when not announcing).
    announce: Vec<Option<AnnouncementTarget>>,
}

/// Free batches a queue must have for a task with unaligned checkpoints to take one more
/// batch of input: what one input batch can make a writer send, so that the task does not
/// get stuck in a full queue while a barrier is to overtake it.
const ROOM_BATCHES: usize = 2;

impl<T: Clone> RecordWriter<T> {
    /// A writer into `targets`; `credits` (per target, or empty) are the batches a network
    /// channel carries beyond its queue, which buffer debloating counts as in flight too.
    pub fn new(
        targets: Vec<BatchSender<T>>,
        credits: &[usize],
        partitioner: Partitioner<T>,
        shared: Rc<TaskShared>,
    ) -> Self {
        assert!(!targets.is_empty(), "a writer needs at least one target");
        let largest = if shared.buffer_timeout_ms() == 0 { 1 } else { BATCH_RECORDS_MAX };
        // Unbounded queues (simulation, where one thread steps every task) hold no backlog
        // a barrier waits behind for long: nothing to debloat.
        let capacities: Option<Vec<usize>> = targets
            .iter()
            .enumerate()
            .map(|(i, t)| t.gauge().capacity().map(|queue| queue + credits.get(i).copied().unwrap_or(0)))
            .collect();
        let sizer = match (shared.buffer_debloat(), capacities) {
            (Some(config), Some(capacities)) if largest > 1 => {
                Some(BatchSizer::new(config, &capacities, largest, std::time::Instant::now()))
            }
            _ => None,
        };
        let mut batch_records = vec![largest; targets.len()];
        if let Some(sizer) = &sizer {
            sizer.copy_sizes(&mut batch_records);
        }
        let buffers = batch_records.iter().map(|&records| Vec::with_capacity(records)).collect();
        let hashes = match partitioner {
            Partitioner::KeyGroups { .. } => batch_records.iter().map(|&records| Vec::with_capacity(records)).collect(),
            _ => Vec::new(),
        };
        let step_limit = sizer.as_ref().map(|_| shared.add_source_step_limit());
        let writer = Self {
            batch_records,
            targets,
            buffers,
            hashes,
            partitioner,
            counters: shared.counters(),
            shared,
            ended: false,
            sizer,
            step_limit,
            announce: Vec::new(),
        };
        writer.limit_source_step();
        writer
    }

    /// Announces unaligned checkpoints' barriers to `announce` (per target); with unaligned
    /// checkpoints on, the task takes input only while every bounded queue has room.
    pub fn announcing(mut self, announce: Vec<Option<AnnouncementTarget>>) -> Self
    where
        T: 'static,
    {
        if self.shared.unaligned().enabled {
            let queues: Vec<_> = self
                .targets
                .iter()
                .enumerate()
                .map(|(i, q)| (q.gauge(), announce.get(i).and_then(|a| a.as_ref().map(|a| a.backlog.clone()))))
                .collect();
            self.shared.add_output_room(Box::new(move || {
                queues.iter().all(|(queue, backlog)| {
                    let held = queue.len() + backlog.as_ref().map_or(0, |b| b.load(Ordering::Relaxed));
                    queue.capacity().is_none_or(|capacity| capacity.saturating_sub(held) >= ROOM_BATCHES)
                })
            }));
        }
        self.announce = announce;
        self
    }

    /// Tells a source in the chain how many records a step may emit: about one batch on
    /// every channel (on each for a broadcast, which sends every record to all).
    fn limit_source_step(&self) {
        let Some(limit) = self.step_limit else { return };
        let records = match self.partitioner {
            Partitioner::Broadcast => self.batch_records.iter().copied().min().unwrap_or(1),
            _ => self.batch_records.iter().sum(),
        };
        self.shared.set_source_step_limit(limit, records);
    }

    /// A debloating writer's period ended: the batch sizes follow the measured rates.
    fn resize_batches(&mut self) {
        let Some(sizer) = &self.sizer else { return };
        sizer.copy_sizes(&mut self.batch_records);
        self.limit_source_step();
        tracing::debug!(batch_records = ?self.batch_records, "buffer debloating: batch sizes");
    }

    #[inline]
    fn push(&mut self, target: usize, record: T) {
        let buffer = &mut self.buffers[target];
        buffer.push(record);
        if buffer.len() >= self.batch_records[target] {
            self.send_batch(target);
        }
    }

    fn send_batch(&mut self, target: usize) {
        let fresh = self.targets[target].fresh_batch(self.batch_records[target]);
        let batch = std::mem::replace(&mut self.buffers[target], fresh);
        let records = batch.len();
        self.counters.add_out(records);
        let message = match self.hashes.get_mut(target) {
            Some(hashes) => {
                debug_assert_eq!(hashes.len(), batch.len(), "a hash per record");
                let fresh = Vec::with_capacity(self.batch_records[target]);
                StreamMessage::HashedRecords(batch, std::mem::replace(hashes, fresh))
            }
            None => StreamMessage::Records(batch),
        };
        self.send(target, message);
        if let Some(sizer) = &mut self.sizer {
            if sizer.sent(target, records, std::time::Instant::now()) {
                self.resize_batches();
            }
        }
    }

    /// Blocks while the target's queue is full (backpressure), until the consumer has made
    /// room, looking at the cancel flag at least every [`SEND_WAIT_MS`].
    fn send(&mut self, target: usize, message: StreamMessage<T>) {
        let mut message = match self.targets[target].try_send(message) {
            Ok(()) => return,
            Err(TrySendError::Full(back)) => back,
            Err(TrySendError::Disconnected(_)) => {
                self.shared.fail_with(TaskError::Cancelled);
                return;
            }
        };
        // Full: the time until there is room is backpressure, counted at every look, so
        // that a long wait shows while it lasts. Woken when the queue is half empty, or at
        // the first free slot with buffer debloating (see `BatchSender::send_waiting`).
        let to_half = self.sizer.is_none();
        let mut count = WaitCounter { counters: &self.counters, since: std::time::Instant::now() };
        loop {
            match self.targets[target].send_waiting(message, Duration::from_millis(SEND_WAIT_MS), to_half) {
                Ok(()) => return,
                Err(SendTimeoutError::Timeout(back)) if !self.shared.is_cancelled() => {
                    count.add_so_far();
                    message = back;
                    // Blocked for a whole wait: the periods go on, so that a consumer
                    // that slowed down is measured now, not once this batch is in.
                    // (The source's step follows at the next period's end.)
                    if let Some(sizer) = &mut self.sizer {
                        if sizer.elapse(std::time::Instant::now()) {
                            sizer.copy_sizes(&mut self.batch_records);
                        }
                    }
                }
                Err(_) => {
                    self.shared.fail_with(TaskError::Cancelled);
                    return;
                }
            }
        }
    }
}

impl<T: Clone> Output<T> for RecordWriter<T> {
    #[inline]
    fn collect(&mut self, record: T) {
        if let Partitioner::Broadcast = self.partitioner {
            let last = self.targets.len() - 1;
            for target in 0..last {
                self.push(target, record.clone());
            }
            self.push(last, record);
        } else {
            let (target, hash) = self.partitioner.target(&record, self.targets.len());
            if let Some(hash) = hash {
                self.hashes[target].push(hash);
            }
            self.push(target, record);
        }
    }
}

impl<T: Clone> Lifecycle for RecordWriter<T> {
    fn open(&mut self) -> Result<(), TaskError> {
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TaskError> {
        for target in 0..self.targets.len() {
            if !self.buffers[target].is_empty() {
                self.send_batch(target);
            }
        }
        self.shared.check()
    }

    fn end_input(&mut self) -> Result<(), TaskError> {
        self.flush()?;
        for target in 0..self.targets.len() {
            self.send(target, StreamMessage::EndOfInput);
        }
        self.ended = true;
        self.shared.check()
    }

    fn close(&mut self) {}

    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        _snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        if self.ended {
            return Ok(());
        }
        if self.shared.announces(barrier) {
            // Ahead of the partial batches flushed next and of everything queued: the
            // consumer snapshots now and reads the queue ahead to the barrier.
            for target in self.announce.iter().flatten() {
                let _ = target.inbox.send(Announcement { channel: target.channel, barrier: *barrier });
            }
        }
        self.flush()?;
        for target in 0..self.targets.len() {
            self.send(target, StreamMessage::Barrier(*barrier));
        }
        self.shared.check()
    }

    fn notify_checkpoint(&mut self, _event: CheckpointEvent) -> Result<(), TaskError> {
        Ok(())
    }

    /// Behind the records before it, on every channel: each consumer takes the minimum
    /// over its producers.
    fn on_watermark(&mut self, watermark: eddy_types::Watermark) -> Result<(), TaskError> {
        if self.ended {
            return Ok(());
        }
        self.flush()?;
        self.counters.output_watermark(watermark.0);
        for target in 0..self.targets.len() {
            self.send(target, StreamMessage::Watermark(watermark));
        }
        self.shared.check()
    }

    fn on_watermark_status(&mut self, status: eddy_types::WatermarkStatus) -> Result<(), TaskError> {
        if self.ended {
            return Ok(());
        }
        self.flush()?;
        for target in 0..self.targets.len() {
            self.send(target, StreamMessage::WatermarkStatus(status));
        }
        self.shared.check()
    }

    fn on_processing_time(&mut self, _now_ms: i64) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Adds the time since `since` to the backpressured time as the wait goes on and when
/// dropped (however the wait ends).
struct WaitCounter<'a> {
    counters: &'a TaskCounters,
    since: std::time::Instant,
}

impl WaitCounter<'_> {
    /// Counts the wait so far, and goes on from now.
    fn add_so_far(&mut self) {
        let now = std::time::Instant::now();
        self.counters.add_backpressured(now.duration_since(self.since));
        self.since = now;
    }
}

impl Drop for WaitCounter<'_> {
    fn drop(&mut self) {
        self.counters.add_backpressured(self.since.elapsed());
    }
}
