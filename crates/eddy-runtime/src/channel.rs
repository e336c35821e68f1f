//! What travels between subtasks of one process: batches of records through bounded
//! crossbeam channels, never single records and never serialized.

use crossbeam_channel::{bounded, Receiver, Sender};

/// Records per batch before a writer sends it.
pub const BATCH_RECORDS_MAX: usize = 1024;
/// Batches the channels into one input gate hold together before producers wait
/// (backpressure): each of n producers' channels holds a share, at least
/// [`CHANNEL_BATCHES_MIN`].
pub const CHANNEL_BATCHES_MAX: usize = 16;
/// Batches one channel holds at least, so that a producer can run ahead a little.
pub const CHANNEL_BATCHES_MIN: usize = 4;
/// While a task keeps receiving input, its partial batches (and so partial network
/// buffers) are sent at the latest this often (Flink's `execution.buffer-timeout`,
/// 100 ms); a task with nothing more waiting sends them at once. 0: every record at once.
pub const DEFAULT_BUFFER_TIMEOUT_MS: u64 = 100;

/// One element of a stream between subtasks.
#[derive(Debug)]
pub enum StreamMessage<T> {
    Records(Vec<T>),
    /// Checkpoint barrier n: every record before it belongs to checkpoint n.
    Barrier(CheckpointBarrier),
    /// Event time reached this point on this channel.
    Watermark(eddy_types::Watermark),
    /// The producer went idle (holds no watermark back) or active again.
    WatermarkStatus(eddy_types::WatermarkStatus),
    /// The producer has no more records.
    EndOfInput,
}

/// The marker sources emit in band when checkpoint `id` is triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointBarrier {
    pub id: eddy_checkpoint::CheckpointId,
    pub kind: eddy_checkpoint::SnapshotKind,
}

/// One producer subtask's channel into one consumer subtask's input gate: each is bounded
/// on its own, so that alignment can hold one without holding the others.
pub type BatchSender<T> = Sender<StreamMessage<T>>;
pub type BatchReceiver<T> = Receiver<StreamMessage<T>>;

/// A bounded channel of `capacity_batches`.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CheckpointEvent {
    /// Stored: two-phase-commit sinks commit what they pre-committed up to it.
    Completed(eddy_checkpoint::CheckpointId),
    /// Timed out, failed or subsumed: it will never complete.
    Aborted(eddy_checkpoint::CheckpointId),
}
