//! What travels between subtasks of one process: batches of records through bounded
//! crossbeam channels, never single records and never serialized.

use crossbeam_channel::{bounded, Receiver, SendError, SendTimeoutError, Sender, TryRecvError, TrySendError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
///
/// A producer that finds its channel full waits until the consumer has read it down to
/// half ([`BatchSender::wait_for_room`]), not for the first free slot: a channel's
/// blocking send is woken at every receive, so a producer faster than its consumer was
/// woken, with a futex call on the consumer's thread, once per batch (W1: 4.9 % of the
/// consumer's samples, and the producer's switches 3.5 % of its own). Every receive
/// goes through [`BatchReceiver::try_recv`], which wakes a waiting producer when it is
/// time.
pub struct BatchSender<T> {
    queue: Sender<StreamMessage<T>>,
    room: Arc<Room>,
}

/// The consumer's end of a [`BatchSender`]'s channel.
pub struct BatchReceiver<T> {
    queue: Receiver<StreamMessage<T>>,
    room: Arc<Room>,
}

/// Whether a producer waits for room in a channel, and where to wake it.
#[derive(Default)]
struct Room {
    waiting: AtomicBool,
    producer: Mutex<Option<std::thread::Thread>>,
}

/// A second handle on the same channel (to look at its length); one producer sends.
impl<T> Clone for BatchSender<T> {
    fn clone(&self) -> Self {
        Self { queue: self.queue.clone(), room: self.room.clone() }
    }
}

impl<T> BatchSender<T> {
    /// Sends without waiting: gives the message back when the channel is full.
    #[inline]
    pub fn try_send(&self, message: StreamMessage<T>) -> Result<(), TrySendError<StreamMessage<T>>> {
        self.queue.try_send(message)
    }

    /// Sends, waiting for the first free slot (for producers that are not tasks).
    pub fn send(&self, message: StreamMessage<T>) -> Result<(), SendError<StreamMessage<T>>> {
        self.queue.send(message)
    }

    /// Sends, waiting until the channel is half empty if it is full, or at most `timeout`
    /// (then the message comes back).
    pub fn send_waiting(
        &self,
        mut message: StreamMessage<T>,
        timeout: Duration,
    ) -> Result<(), SendTimeoutError<StreamMessage<T>>> {
        let deadline = Instant::now() + timeout;
        loop {
            // Said before the last look, so that a receive after it sees it (see `Room`).
            *self.room.producer.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::thread::current());
            self.room.waiting.store(true, Ordering::SeqCst);
            match self.queue.try_send(message) {
                Ok(()) => {
                    self.room.waiting.store(false, Ordering::Relaxed);
                    return Ok(());
                }
                Err(TrySendError::Full(back)) => message = back,
                Err(TrySendError::Disconnected(back)) => return Err(SendTimeoutError::Disconnected(back)),
            }
            let now = Instant::now();
            if now >= deadline {
                self.room.waiting.store(false, Ordering::Relaxed);
                return Err(SendTimeoutError::Timeout(message));
            }
            std::thread::park_timeout(deadline - now);
        }
    }

    /// Batches waiting in the channel.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// How many batches it holds (`None`: unbounded).
    pub fn capacity(&self) -> Option<usize> {
        self.queue.capacity()
    }
}

impl<T> BatchReceiver<T> {
    /// The next message, if one is waiting; wakes a producer waiting for room once the
    /// channel is half empty.
    #[inline]
    pub fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError> {
        let message = self.queue.try_recv()?;
        if self.room.waiting.load(Ordering::SeqCst) {
            self.room_made();
        }
        Ok(message)
    }

    #[cold]
    fn room_made(&self) {
        let half = self.queue.capacity().unwrap_or(0) / 2;
        if self.queue.len() <= half && self.room.waiting.swap(false, Ordering::SeqCst) {
            if let Some(producer) = self.room.producer.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                producer.unpark();
            }
        }
    }

    /// For `Select`, to wait until a message is waiting (then read it with
    /// [`Self::try_recv`], never through this).
    pub fn watched(&self) -> &Receiver<StreamMessage<T>> {
        &self.queue
    }

    /// Batches waiting in the channel.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// A consumer gone wakes its waiting producer, which then finds the channel closed.
impl<T> Drop for BatchReceiver<T> {
    fn drop(&mut self) {
        if let Some(producer) = self.room.producer.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            producer.unpark();
        }
    }
}

fn batch_pair<T>(queue: (Sender<StreamMessage<T>>, Receiver<StreamMessage<T>>)) -> (BatchSender<T>, BatchReceiver<T>) {
    let room = Arc::new(Room::default());
    (BatchSender { queue: queue.0, room: room.clone() }, BatchReceiver { queue: queue.1, room })
}

/// A bounded channel of `capacity_batches`.
pub fn batch_channel<T>(capacity_batches: usize) -> (BatchSender<T>, BatchReceiver<T>) {
    batch_pair(bounded(capacity_batches))
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
            ChannelCapacity::Bounded(batches) => batch_channel(batches),
            ChannelCapacity::Unbounded => batch_pair(crossbeam_channel::unbounded()),
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
