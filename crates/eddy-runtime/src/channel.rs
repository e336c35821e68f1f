//! What travels between subtasks of one process: batches of records through bounded
//! crossbeam channels, never single records and never serialized.

use crossbeam_channel::Select;
use crossbeam_channel::{bounded, Receiver, SendError, SendTimeoutError, Sender, TryRecvError, TrySendError};
use eddy_types::KeyHash;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
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
    /// Records with their keys' hashes (`hashes[i]` is `records[i]`'s), as the writer of a
    /// key-partitioned edge computed them to pick each record's subtask: the keyed
    /// operator that takes them does not hash the keys again. They never leave the process
    /// (the network's outbound channel drops them), and everything but the task's driver
    /// takes these as plain records.
    HashedRecords(Vec<T>, Vec<KeyHash>),
    /// Checkpoint barrier n: every record before it belongs to checkpoint n.
    Barrier(CheckpointBarrier),
    /// Event time reached this point on this channel.
    Watermark(eddy_types::Watermark),
    /// The producer went idle (holds no watermark back) or active again.
    WatermarkStatus(eddy_types::WatermarkStatus),
    /// The producer has no more records.
    EndOfInput,
}

impl<T> StreamMessage<T> {
    /// This message with any records' hashes dropped: what the network's outbound channel
    /// sends (the consumer in the other process hashes the keys again).
    #[inline]
    pub fn without_hashes(self) -> Self {
        match self {
            StreamMessage::HashedRecords(records, _) => StreamMessage::Records(records),
            message => message,
        }
    }

    /// Whether this message holds records (with their hashes or without).
    #[inline]
    pub fn is_records(&self) -> bool {
        matches!(self, StreamMessage::Records(_) | StreamMessage::HashedRecords(..))
    }
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
/// half ([`BatchSender::send_waiting`]), not for the first free slot: a channel's
/// blocking send is woken at every receive, so a producer faster than its consumer was
/// woken, with a futex call on the consumer's thread, once per batch (W1: 4.9 % of the
/// consumer's samples, and the producer's switches 3.5 % of its own). Every receive
/// goes through [`BatchReceiver::try_recv`], which wakes a waiting producer when it is
/// time. One producer sends into a channel.
///
/// A batch's buffer goes back to its producer once the consumer took its records out
/// ([`BatchReceiver::recycle`], [`BatchSender::fresh_batch`]). Freed on the consumer's
/// thread, it went back to the producer's allocator across threads; with its pages given
/// back to the system meanwhile, the producer's next batch faulted fresh ones in
/// (W2 at p=2: about 2 % of all samples, zeroing pages).
pub struct BatchSender<T> {
    queue: Sender<StreamMessage<T>>,
    room: Arc<Room>,
    returned: Receiver<Vec<T>>,
}

/// The consumer's end of a [`BatchSender`]'s channel.
pub struct BatchReceiver<T> {
    queue: Receiver<StreamMessage<T>>,
    room: Arc<Room>,
    returns: Sender<Vec<T>>,
}

/// Empty batch buffers a channel keeps for its producer: a few, as the producer takes
/// one for each batch it sends and the consumer gives one back for each it took.
const RETURNED_BATCHES_MAX: usize = 4;
/// The largest buffer a channel keeps, in bytes: a batch of [`BATCH_RECORDS_MAX`] small
/// records fits (W1's: 56 KiB). Larger ones (large records, a network frame packing many
/// batches, a replayed channel) are freed, so that a channel keeps 512 KiB at most.
const RETURNED_BATCH_BYTES_MAX: usize = 128 << 10;

/// Whether the producer waits for room in a channel, and where to wake it.
///
/// Why no wake is lost: the producer says it waits (`waiting`, a sequentially consistent
/// store, then a fence) before it looks at the channel a last time; the consumer takes a
/// message, fences, then reads `waiting`. So either the producer's look sees the room the
/// consumer made, or the consumer sees `waiting`; a wake that comes before the producer
/// parks is kept by `unpark` for its `park`.
#[derive(Default)]
struct Room {
    waiting: AtomicBool,
    /// The consumer is gone: the producer stops waiting.
    closed: AtomicBool,
    /// The channel holds at most this many batches when the producer is woken.
    wake_at: AtomicUsize,
    producer: Mutex<Option<std::thread::Thread>>,
}

impl Room {
    fn wake(&self) {
        // Cloned out, so that the producer waking does not find the lock still held.
        let producer = self.producer.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(producer) = producer {
            producer.unpark();
        }
    }
}

/// What a [`BatchSender`]'s channel holds: a handle that looks, never sends.
pub struct BatchGauge<T> {
    queue: Sender<StreamMessage<T>>,
}

impl<T> BatchGauge<T> {
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

impl<T> BatchSender<T> {
    /// An empty buffer for the next batch, of room for `records`: one the consumer gave
    /// back if there is one, else a new one.
    #[inline]
    pub fn fresh_batch(&self, records: usize) -> Vec<T> {
        match self.returned.try_recv() {
            Ok(mut batch) => {
                batch.reserve(records);
                batch
            }
            Err(_) => Vec::with_capacity(records),
        }
    }

    /// How many emptied buffers the consumer gave back that wait for the next batches.
    pub fn buffers_given_back(&self) -> usize {
        self.returned.len()
    }

    /// Sends without waiting: gives the message back when the channel is full.
    #[inline]
    pub fn try_send(&self, message: StreamMessage<T>) -> Result<(), TrySendError<StreamMessage<T>>> {
        self.queue.try_send(message)
    }

    /// Sends, waiting for the first free slot (for producers that are not tasks).
    pub fn send(&self, message: StreamMessage<T>) -> Result<(), SendError<StreamMessage<T>>> {
        self.queue.send(message)
    }

    /// Sends, waiting while the channel is full until the consumer has read it down to
    /// half (`to_half`) or to one free slot, or at most `timeout` (then the message comes
    /// back). A producer whose batches follow the consumer's pace (buffer debloating)
    /// takes every slot as it frees: its queue holds about the target time, and half of
    /// it would be a long wait.
    pub fn send_waiting(
        &self,
        mut message: StreamMessage<T>,
        timeout: Duration,
        to_half: bool,
    ) -> Result<(), SendTimeoutError<StreamMessage<T>>> {
        let deadline = Instant::now() + timeout;
        let capacity = self.queue.capacity().unwrap_or(usize::MAX);
        let wake_at = if to_half { capacity / 2 } else { capacity.saturating_sub(1) };
        self.room.wake_at.store(wake_at, Ordering::Relaxed);
        *self.room.producer.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::thread::current());
        loop {
            // Said before the last look (see `Room`).
            self.room.waiting.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            match self.queue.try_send(message) {
                Ok(()) => {
                    self.room.waiting.store(false, Ordering::Relaxed);
                    return Ok(());
                }
                Err(TrySendError::Full(back)) => message = back,
                Err(TrySendError::Disconnected(back)) => return Err(SendTimeoutError::Disconnected(back)),
            }
            if self.room.closed.load(Ordering::SeqCst) {
                return Err(SendTimeoutError::Disconnected(message));
            }
            let now = Instant::now();
            if now >= deadline {
                self.room.waiting.store(false, Ordering::Relaxed);
                return Err(SendTimeoutError::Timeout(message));
            }
            std::thread::park_timeout(deadline - now);
        }
    }

    /// A handle that looks at how full the channel is.
    pub fn gauge(&self) -> BatchGauge<T> {
        BatchGauge { queue: self.queue.clone() }
    }
}

impl<T> BatchReceiver<T> {
    /// The next message, if one is waiting; wakes a producer waiting for room once the
    /// channel is down to where it asked.
    #[inline]
    pub fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError> {
        let message = self.queue.try_recv()?;
        fence(Ordering::SeqCst);
        if self.room.waiting.load(Ordering::SeqCst) {
            self.room_made();
        }
        Ok(message)
    }

    #[cold]
    fn room_made(&self) {
        if self.queue.len() <= self.room.wake_at.load(Ordering::Relaxed)
            && self.room.waiting.swap(false, Ordering::SeqCst)
        {
            self.room.wake();
        }
    }

    /// Registers the channel with `select`, to wait until a message is waiting (then read
    /// it with [`Self::try_recv`]).
    pub fn watch<'a>(&'a self, select: &mut Select<'a>) {
        select.recv(&self.queue);
    }

    /// Gives a batch's buffer back to the producer, emptied. It is freed instead when the
    /// channel keeps [`RETURNED_BATCHES_MAX`] already, or it is larger than
    /// [`RETURNED_BATCH_BYTES_MAX`], or it has no room at all.
    #[inline]
    pub fn recycle(&self, mut batch: Vec<T>) {
        batch.clear();
        let bytes = batch.capacity().saturating_mul(std::mem::size_of::<T>().max(1));
        if batch.capacity() > 0 && bytes <= RETURNED_BATCH_BYTES_MAX {
            let _ = self.returns.try_send(batch);
        }
    }
}

/// A consumer gone wakes its waiting producer, which then stops waiting (told before the
/// wake: the channel itself is closed only after this runs).
impl<T> Drop for BatchReceiver<T> {
    fn drop(&mut self) {
        self.room.closed.store(true, Ordering::SeqCst);
        self.room.wake();
    }
}

fn batch_pair<T>(queue: (Sender<StreamMessage<T>>, Receiver<StreamMessage<T>>)) -> (BatchSender<T>, BatchReceiver<T>) {
    let room = Arc::new(Room::default());
    let (returns, returned) = bounded(RETURNED_BATCHES_MAX);
    (BatchSender { queue: queue.0, room: room.clone(), returned }, BatchReceiver { queue: queue.1, room, returns })
}

/// A bounded channel of `capacity_batches` (at least 1: a channel of none pairs a sender
/// with a waiting receiver, and receivers here never wait in it).
pub fn batch_channel<T>(capacity_batches: usize) -> (BatchSender<T>, BatchReceiver<T>) {
    assert!(capacity_batches > 0, "a batch channel holds at least one batch");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_the_consumer_gives_back_is_the_producers_next_buffer() {
        let (tx, rx) = batch_channel::<String>(4);
        let mut batch = tx.fresh_batch(8);
        assert!(batch.capacity() >= 8 && batch.is_empty());
        batch.extend(["a".to_string(), "b".to_string()]);
        let sent_at = batch.as_ptr();
        tx.try_send(StreamMessage::Records(batch)).unwrap();
        let Ok(StreamMessage::Records(mut received)) = rx.try_recv() else { panic!("a batch was sent") };
        assert_eq!(received, ["a", "b"]);
        received.clear();
        rx.recycle(received);
        let next = tx.fresh_batch(8);
        assert_eq!(next.as_ptr(), sent_at, "the buffer came back");
        assert!(next.is_empty() && next.capacity() >= 8, "empty, with room for the records asked");
        // Without one given back, a new buffer.
        assert_eq!(tx.buffers_given_back(), 0);
        let other = tx.fresh_batch(8);
        assert!(other.is_empty() && other.capacity() >= 8);
    }

    #[test]
    fn a_channel_keeps_a_few_buffers_given_back_and_drops_the_rest() {
        let (tx, rx) = batch_channel::<u64>(4);
        let mut given = Vec::new();
        for i in 0..RETURNED_BATCHES_MAX + 3 {
            let batch = vec![i as u64; 4];
            given.push(batch.as_ptr());
            rx.recycle(batch);
        }
        assert_eq!(tx.buffers_given_back(), RETURNED_BATCHES_MAX, "the rest were dropped");
        let kept: Vec<Vec<u64>> = (0..RETURNED_BATCHES_MAX).map(|_| tx.fresh_batch(4)).collect();
        let kept_at: Vec<*const u64> = kept.iter().map(|batch| batch.as_ptr()).collect();
        assert_eq!(kept_at, given[..RETURNED_BATCHES_MAX], "the first ones, in order");
        assert!(kept.iter().all(|batch| batch.is_empty()));
        // Neither a buffer of no room nor one too large is kept.
        rx.recycle(Vec::new());
        rx.recycle(Vec::<u64>::with_capacity(RETURNED_BATCH_BYTES_MAX / 8 + 1));
        assert_eq!(tx.buffers_given_back(), 0);
        rx.recycle(Vec::<u64>::with_capacity(RETURNED_BATCH_BYTES_MAX / 8));
        assert_eq!(tx.buffers_given_back(), 1, "one of the largest size kept is");
    }

    /// The time a send took and how it ended.
    type Sent = (Duration, Result<(), &'static str>);

    /// A producer sending into a full channel of 4 on a thread of its own, once it waits.
    fn blocked_producer(to_half: bool) -> (BatchReceiver<u32>, Arc<Room>, std::thread::JoinHandle<Sent>) {
        let (tx, rx) = batch_channel::<u32>(4);
        (0..4).for_each(|i| tx.try_send(StreamMessage::Records(vec![i])).unwrap());
        let room = tx.room.clone();
        let producer = std::thread::spawn(move || {
            let started = Instant::now();
            let sent = tx.send_waiting(StreamMessage::Records(vec![9]), Duration::from_secs(20), to_half);
            let ended = match sent {
                Ok(()) => Ok(()),
                Err(SendTimeoutError::Timeout(_)) => Err("timed out"),
                Err(SendTimeoutError::Disconnected(_)) => Err("disconnected"),
            };
            (started.elapsed(), ended)
        });
        while !room.waiting.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        (rx, room, producer)
    }

    #[test]
    fn a_producer_waiting_for_room_is_woken_once_its_channel_is_half_empty_not_before() {
        let (rx, _room, producer) = blocked_producer(true);
        rx.try_recv().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!producer.is_finished(), "woken with 3 of 4 batches still queued");
        rx.try_recv().unwrap();
        let (took, ended) = producer.join().unwrap();
        assert_eq!(ended, Ok(()));
        assert!(took < Duration::from_secs(10), "woken by the receive, not its timeout: {took:?}");
        assert_eq!(rx.queue.len(), 3, "two read, one more sent");
    }

    #[test]
    fn a_producer_following_its_consumer_is_woken_at_the_first_free_slot() {
        let (rx, _room, producer) = blocked_producer(false);
        rx.try_recv().unwrap();
        let (took, ended) = producer.join().unwrap();
        assert_eq!(ended, Ok(()));
        assert!(took < Duration::from_secs(10), "woken by the receive, not its timeout: {took:?}");
    }

    #[test]
    fn a_producer_waiting_for_room_stops_when_its_consumer_goes() {
        let (rx, _room, producer) = blocked_producer(true);
        drop(rx);
        let (took, ended) = producer.join().unwrap();
        assert_eq!(ended, Err("disconnected"));
        assert!(took < Duration::from_secs(10), "told at once, not at its timeout: {took:?}");
    }
}
