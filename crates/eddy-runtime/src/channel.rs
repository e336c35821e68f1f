//! What travels between subtasks of one process: batches of records through bounded
//! crossbeam channels, never single records and never serialized.

use crossbeam_channel::{bounded, Receiver, Sender};

/// Records per batch before a writer sends it.
pub const BATCH_RECORDS_MAX: usize = 1024;
/// Batches a channel holds before its producers wait (backpressure).
pub const CHANNEL_BATCHES_MAX: usize = 16;
/// A partial batch is sent at the latest this long after its first record.
pub const FLUSH_INTERVAL_MS: u64 = 10;

/// One element of a stream between subtasks.
#[derive(Debug)]
pub enum StreamMessage<T> {
    Records(Vec<T>),
    /// Checkpoint barrier n: every record before it belongs to checkpoint n.
    Barrier(CheckpointBarrier),
    /// The producer has no more records.
    EndOfInput,
}

/// The marker sources emit in band when checkpoint `id` is triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointBarrier {
    pub id: eddy_checkpoint::CheckpointId,
    pub kind: eddy_checkpoint::SnapshotKind,
}

/// A message with the index of the producer channel it came from, so that an input gate
/// can tell its producers apart (end of input now, barrier alignment later).
#[derive(Debug)]
pub struct Envelope<T> {
    pub channel: u32,
    pub message: StreamMessage<T>,
}

pub type BatchSender<T> = Sender<Envelope<T>>;
pub type BatchReceiver<T> = Receiver<Envelope<T>>;

/// The bounded queue into one input gate of one subtask.
pub fn batch_channel<T>(capacity_batches: usize) -> (BatchSender<T>, BatchReceiver<T>) {
    bounded(capacity_batches)
}

/// How many batches the queues between subtasks hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelCapacity {
    /// Producers wait while it is full (backpressure): subtasks on threads of their own.
    Bounded(usize),
    /// Never full: under simulation one thread steps every task, so a producer waiting for
    /// room would wait forever.
    Unbounded,
}

impl ChannelCapacity {
    pub fn channel<T>(self) -> (BatchSender<T>, BatchReceiver<T>) {
        match self {
            ChannelCapacity::Bounded(batches) => bounded(batches),
            ChannelCapacity::Unbounded => crossbeam_channel::unbounded(),
        }
    }
}

/// What became of a checkpoint, as the tasks are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointEvent {
    /// Stored: two-phase-commit sinks commit what they pre-committed up to it.
    Completed(eddy_checkpoint::CheckpointId),
    /// Timed out, failed or subsumed: it will never complete.
    Aborted(eddy_checkpoint::CheckpointId),
}
