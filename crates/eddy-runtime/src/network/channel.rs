//! A network channel's two ends, made where the record type is known
//! ([`crate::graph::PortType::outbound`]): the producer's encodes what its subtask queued
//! into frames, the consumer's decodes frames into the queue its subtask reads.

use super::wire::{kind, ChannelKey, FRAME_BYTES_MAX, HEADER_BYTES, NETWORK_BUFFER_BYTES};
use crate::channel::{BatchReceiver, BatchSender, CheckpointBarrier, StreamMessage};
use crate::error::TaskError;
use crate::task::in_flight::{Announcement, Backlog, InFlightWatermark};
use crate::task::InputChannel;
use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};
use eddy_checkpoint::CheckpointId;
use eddy_types::{Watermark, WatermarkStatus};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a channel sends no more frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEnd {
    /// Its producer is gone, and everything it queued was sent.
    ProducerGone,
    /// A record cannot be sent (its type does not serialize, or a batch is larger than a
    /// frame may be): the message names the type. No restart mends that.
    Unsendable(String),
}

/// The channels one producing executor sends over one connection.
pub type OutboundChannels = Vec<(ChannelKey, Box<dyn OutboundChannel>)>;

/// The producer's end of a network channel, made where the record type is known
/// ([`crate::graph::PortType::outbound`]): takes what the producing subtask queued and
/// encodes it into frames.
pub trait OutboundChannel: Send {
    /// Registers with `select` what can let the channel send again: the producer's queue
    /// (when what it holds could go: `credit` for records), and its announcements.
    fn watch<'a>(&'a self, select: &mut Select<'a>, credit: bool);
    /// Appends the next frame's payload to `out` and says its kind and value; `Ok(None)`
    /// when nothing can go (nothing queued, or records without `credit`); `Err` when the
    /// producer is gone and everything it queued went.
    fn next_frame(&mut self, out: &mut Vec<u8>, credit: bool) -> Result<Option<(u8, u32)>, ChannelEnd>;
    /// When the channel has something to do whatever comes: a barrier's time to overtake.
    fn wake_at(&self) -> Option<Instant> {
        None
    }
}

/// The consumer's end of a network channel: decodes frames into the queue its subtask
/// reads.
pub trait InboundChannel: Send {
    /// Decodes one frame; `Ok(true)` after the end of input.
    fn deliver(&mut self, kind: u8, value: u32, payload: &[u8]) -> Result<bool, String>;
}

/// How a producer's network channel lets an unaligned checkpoint's barrier overtake what
/// its subtask queued (Flink's priority events with output channel state): on the
/// writer's announcement the barrier's consumer hears of it at once ([`kind::ANNOUNCE`]);
/// the queue is then drained up to the barrier into the channel's stash, a copy of the
/// stashed records goes out ([`kind::OVERTAKEN`], no credit), then the barrier, and the
/// stashed records follow as always, with credit. The consumer keeps the copy as the
/// channel's in-flight records, so a restore needs nothing from the producer's side. No
/// record moves sooner than credit allows: beyond its credits, a consumer holds only the
/// copies of the checkpoints it has under way, at most a queue's worth per channel each.
///
/// With an aligned-checkpoint timeout the barrier first waits its turn in band, and
/// overtakes only if it is still queued once the timeout passed since it was announced
/// (Flink's timeout of aligned barriers in the output queues).
pub struct Overtaking {
    pub announcements: Receiver<Announcement>,
    /// What the stash holds, which counts against the queue's capacity at the writer.
    pub backlog: Backlog,
    pub aligned_timeout: Option<Duration>,
}

/// Where an overtaking barrier is.
#[derive(Debug, Clone, Copy)]
enum Overtake {
    /// Announced, with an aligned-checkpoint timeout: it overtakes at `at` if it is still
    /// queued then.
    Due { barrier: CheckpointBarrier, at: Instant },
    /// Announced to the consumer; the queue is drained into the stash until the barrier
    /// comes.
    Awaiting(CheckpointBarrier),
    /// The stash's first `end` messages came before the barrier: their records are copied
    /// from `next` on, one batch per frame, then the barrier goes.
    Copying { barrier: CheckpointBarrier, next: usize, end: usize },
}

/// [`OutboundChannel`] of records of type `T`.
pub struct TypedOutbound<T> {
    queue: BatchReceiver<T>,
    /// Messages taken from the queue that go before it: an event found while packing
    /// records, or everything an overtaking barrier passed.
    stash: VecDeque<StreamMessage<T>>,
    /// A frame packs the batches queued behind the first up to a network buffer's size;
    /// with buffer debloating only one, because a credit is one frame: packed frames
    /// would let the credits carry many times the debloated amount.
    pack: bool,
    overtaking: Option<Overtaking>,
    overtake: Option<Overtake>,
    /// The writer that announces is gone: its announcements are not watched any more (a
    /// closed channel would wake the connection's wait at once, every time).
    announcer_gone: bool,
    /// The newest barrier sent in band: an announcement that comes after it is stale.
    last_in_band: Option<CheckpointId>,
}

impl<T> TypedOutbound<T> {
    pub fn new(queue: BatchReceiver<T>) -> Self {
        Self {
            queue,
            stash: VecDeque::new(),
            pack: true,
            overtaking: None,
            overtake: None,
            announcer_gone: false,
            last_in_band: None,
        }
    }

    /// One batch per frame (buffer debloating).
    pub fn one_batch_per_frame(self) -> Self {
        Self { pack: false, ..self }
    }

    /// Unaligned checkpoints' barriers overtake the queue (see [`Overtaking`]).
    pub fn overtaking(self, overtaking: Overtaking) -> Self {
        Self { overtaking: Some(overtaking), ..self }
    }

    fn stashed(&mut self) {
        if let Some(overtaking) = &self.overtaking {
            overtaking.backlog.store(self.stash.len(), Ordering::Relaxed);
        }
    }
}

fn encode_barrier(barrier: &CheckpointBarrier, out: &mut Vec<u8>) {
    out.extend_from_slice(&barrier.id.0.to_le_bytes());
    out.push(matches!(barrier.kind, eddy_checkpoint::SnapshotKind::Savepoint) as u8);
}

fn decode_watermark(payload: &[u8]) -> Option<Watermark> {
    Some(Watermark(i64::from_le_bytes(payload.get(0..8)?.try_into().ok()?)))
}

/// A copy a barrier overtook at the producer, sent ahead of it (see [`Overtaking`]).
#[derive(Debug)]
pub enum Overtaken<T> {
    Records(Vec<T>),
    Watermark(Watermark),
}

fn decode_barrier(payload: &[u8]) -> Option<CheckpointBarrier> {
    let id = u64::from_le_bytes(payload.get(0..8)?.try_into().ok()?);
    let kind = match payload.get(8)? {
        0 => eddy_checkpoint::SnapshotKind::Checkpoint,
        _ => eddy_checkpoint::SnapshotKind::Savepoint,
    };
    Some(CheckpointBarrier { id: CheckpointId(id), kind })
}

fn encode_event<T>(message: &StreamMessage<T>, out: &mut Vec<u8>) -> (u8, u32) {
    match message {
        StreamMessage::Barrier(barrier) => {
            encode_barrier(barrier, out);
            (kind::BARRIER, 0)
        }
        StreamMessage::Watermark(watermark) => {
            out.extend_from_slice(&watermark.0.to_le_bytes());
            (kind::WATERMARK, 0)
        }
        StreamMessage::WatermarkStatus(status) => {
            (kind::WATERMARK_STATUS, matches!(status, WatermarkStatus::Idle) as u32)
        }
        StreamMessage::EndOfInput => (kind::END_OF_INPUT, 0),
        StreamMessage::Records(_) | StreamMessage::HashedRecords(..) => unreachable!("records are not an event"),
    }
}

/// Appends `batch`'s records to `out`, postcard-encoded; the count of a frame's batches
/// goes in its header.
fn encode_records<T: Serialize>(batch: &[T], out: &mut Vec<u8>) -> Result<(), ChannelEnd> {
    for record in batch {
        // Postcard writes into the buffer in place. A type whose Serialize fails
        // (a map of unknown length, a custom error) fails the job, named.
        let buffer = std::mem::take(out);
        *out = postcard::to_extend(record, buffer).map_err(|e| {
            ChannelEnd::Unsendable(format!(
                "a record of type `{}` cannot be serialized to go to another process: {e}",
                std::any::type_name::<T>(),
                e = eddy_types::chain(&e)
            ))
        })?;
    }
    if out.len().saturating_sub(HEADER_BYTES) > FRAME_BYTES_MAX {
        return Err(ChannelEnd::Unsendable(format!(
            "a batch of records of type `{}` takes {} bytes, more than a network frame may carry ({FRAME_BYTES_MAX})",
            std::any::type_name::<T>(),
            out.len().saturating_sub(HEADER_BYTES)
        )));
    }
    Ok(())
}

fn count_of(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl<T: Serialize + Send> TypedOutbound<T> {
    /// The next frame of an overtaking barrier, if one is under way or due.
    fn next_overtaking_frame(&mut self, out: &mut Vec<u8>) -> Result<Option<(u8, u32)>, ChannelEnd> {
        let Some(overtaking) = &self.overtaking else { return Ok(None) };
        if self.overtake.is_none() {
            let barrier = match overtaking.announcements.try_recv() {
                Ok(announcement) => announcement.barrier,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => {
                    self.announcer_gone = true;
                    return Ok(None);
                }
            };
            if self.sent_in_band(barrier) {
                // The barrier went in band before its announcement was read.
                return Ok(None);
            }
            let Some(timeout) = overtaking.aligned_timeout else { return Ok(Some(self.overtake_now(barrier, out))) };
            self.overtake = Some(Overtake::Due { barrier, at: Instant::now() + timeout });
        }
        if let Some(Overtake::Due { barrier, at }) = self.overtake {
            if self.sent_in_band(barrier) {
                self.overtake = None;
                return Ok(None);
            }
            if Instant::now() < at {
                return Ok(None);
            }
            return Ok(Some(self.overtake_now(barrier, out)));
        }
        if let Some(Overtake::Awaiting(barrier)) = self.overtake {
            loop {
                match self.receive() {
                    Ok(StreamMessage::Barrier(b)) if b == barrier => {
                        self.overtake = Some(Overtake::Copying { barrier, next: 0, end: self.stash.len() });
                        break;
                    }
                    Ok(message) => self.stash.push_back(message),
                    Err(TryRecvError::Empty) => {
                        self.stashed();
                        return Ok(None);
                    }
                    Err(TryRecvError::Disconnected) => {
                        // The producer went before its barrier (a cancel): what it
                        // queued still goes, in order.
                        self.overtake = None;
                        self.stashed();
                        return Ok(None);
                    }
                }
            }
            self.stashed();
        }
        let Some(Overtake::Copying { barrier, next, end }) = self.overtake else { return Ok(None) };
        let copied = (next..end).find(|&i| match &self.stash[i] {
            StreamMessage::Records(batch) => !batch.is_empty(),
            StreamMessage::Watermark(_) => true,
            _ => false,
        });
        match copied {
            Some(i) => {
                self.overtake = Some(Overtake::Copying { barrier, next: i + 1, end });
                match &self.stash[i] {
                    StreamMessage::Records(records) => {
                        encode_records(records, out)?;
                        Ok(Some((kind::OVERTAKEN, count_of(records.len()))))
                    }
                    message => {
                        // A watermark: its copy keeps its place among the records' copies.
                        encode_event(message, out);
                        Ok(Some((kind::OVERTAKEN_WATERMARK, 0)))
                    }
                }
            }
            None => {
                self.overtake = None;
                self.last_in_band = self.last_in_band.max(Some(barrier.id));
                encode_barrier(&barrier, out);
                Ok(Some((kind::BARRIER, 0)))
            }
        }
    }

    fn sent_in_band(&self, barrier: CheckpointBarrier) -> bool {
        self.last_in_band.is_some_and(|sent| sent >= barrier.id)
    }

    /// Starts overtaking with `barrier`: the consumer hears of it now; the barrier goes
    /// ahead of what is stashed before it (packing may have stashed it already), or of
    /// the queue up to it.
    fn overtake_now(&mut self, barrier: CheckpointBarrier, out: &mut Vec<u8>) -> (u8, u32) {
        let stashed = self.stash.iter().position(|m| matches!(m, StreamMessage::Barrier(b) if *b == barrier));
        self.overtake = Some(match stashed {
            Some(end) => {
                self.stash.remove(end);
                Overtake::Copying { barrier, next: 0, end }
            }
            None => Overtake::Awaiting(barrier),
        });
        self.stashed();
        encode_barrier(&barrier, out);
        (kind::ANNOUNCE, 0)
    }

    /// The next message to send, from the stash first; `None` if nothing can go.
    fn take_next(&mut self, credit: bool) -> Result<Option<StreamMessage<T>>, ChannelEnd> {
        let message = match self.stash.pop_front() {
            Some(message) => message,
            None if !credit => return Ok(None),
            None => match self.receive() {
                Ok(message) => message,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => return Err(ChannelEnd::ProducerGone),
            },
        };
        if !credit && matches!(message, StreamMessage::Records(_)) {
            self.stash.push_front(message);
            return Ok(None);
        }
        Ok(Some(message))
    }
}

impl<T> TypedOutbound<T> {
    /// The next message of the producer's queue, its records without their keys' hashes
    /// (the consumer in the other process computes them again).
    #[inline]
    fn receive(&self) -> Result<StreamMessage<T>, TryRecvError> {
        self.queue.try_recv().map(StreamMessage::without_hashes)
    }
}

impl<T: Serialize + Send> OutboundChannel for TypedOutbound<T> {
    fn watch<'a>(&'a self, select: &mut Select<'a>, credit: bool) {
        // Announcements are read one at a time: only when none is under way or due (the
        // time a due one overtakes is `wake_at`).
        if let Some(overtaking) = self.overtaking.as_ref().filter(|_| self.overtake.is_none() && !self.announcer_gone) {
            select.recv(&overtaking.announcements);
        }
        let awaiting = matches!(self.overtake, Some(Overtake::Awaiting(_)));
        if awaiting || (credit && self.stash.is_empty()) {
            self.queue.watch(select);
        }
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.overtake {
            Some(Overtake::Due { at, .. }) => Some(at),
            _ => None,
        }
    }

    fn next_frame(&mut self, out: &mut Vec<u8>, credit: bool) -> Result<Option<(u8, u32)>, ChannelEnd> {
        if let Some(frame) = self.next_overtaking_frame(out)? {
            return Ok(Some(frame));
        }
        if matches!(self.overtake, Some(Overtake::Awaiting(_) | Overtake::Copying { .. })) {
            // Waiting for the barrier to be queued: nothing goes before it.
            return Ok(None);
        }
        let first = self.take_next(credit)?;
        self.stashed();
        let Some(first) = first else { return Ok(None) };
        let StreamMessage::Records(mut batch) = first else {
            if let StreamMessage::Barrier(barrier) = &first {
                self.last_in_band = self.last_in_band.max(Some(barrier.id));
            }
            return Ok(Some(encode_event(&first, out)));
        };
        let start = out.len();
        let mut count = 0u32;
        loop {
            encode_records(&batch, out)?;
            count = count.saturating_add(count_of(batch.len()));
            // Records of no size never fill a buffer: the count bounds a frame too.
            if !self.pack || out.len() - start >= NETWORK_BUFFER_BYTES || count >= u32::MAX / 2 {
                break;
            }
            // From the stash while it holds anything, else from the queue.
            let next = match self.stash.pop_front() {
                Some(message) => Some(message),
                None => self.receive().ok(),
            };
            match next {
                // Each encoded batch's buffer goes back to the writer (see `BatchSender`).
                Some(StreamMessage::Records(next)) => self.queue.recycle(std::mem::replace(&mut batch, next)),
                Some(event) => {
                    self.stash.push_front(event);
                    break;
                }
                None => break,
            }
        }
        self.queue.recycle(batch);
        self.stashed();
        Ok(Some((kind::RECORDS, count)))
    }
}

/// [`InboundChannel`] of records of type `T`.
pub struct TypedInbound<T> {
    queue: BatchSender<T>,
    /// Where an announced barrier is told to the consuming subtask (its input's
    /// announcements, and this channel's index there), with unaligned checkpoints.
    announce: Option<(Sender<Announcement>, usize)>,
    /// Copies of records and watermarks a barrier overtook, by barrier, for the
    /// consumer's checkpoint.
    overtaken: Option<Sender<(CheckpointId, Overtaken<T>)>>,
    /// The barrier announced last: the copies that follow are its.
    last_announced: Option<CheckpointId>,
}

impl<T> TypedInbound<T> {
    pub fn new(queue: BatchSender<T>) -> Self {
        Self { queue, announce: None, overtaken: None, last_announced: None }
    }

    /// Hears overtaking barriers: announcements go to `inbox` as channel `channel`, copies
    /// of the overtaken records to `overtaken`.
    pub fn overtaken_by_barriers(
        self,
        inbox: Sender<Announcement>,
        channel: usize,
        overtaken: Sender<(CheckpointId, Overtaken<T>)>,
    ) -> Self {
        Self { announce: Some((inbox, channel)), overtaken: Some(overtaken), ..self }
    }
}

fn decode_records<T: DeserializeOwned>(count: u32, payload: &[u8]) -> Result<Vec<T>, String> {
    decode_records_into(count, payload, Vec::new())
}

/// The records of a frame, in `records` (an empty buffer to reuse).
fn decode_records_into<T: DeserializeOwned>(count: u32, payload: &[u8], mut records: Vec<T>) -> Result<Vec<T>, String> {
    // Each record takes a byte at least: a lying count cannot reserve more.
    records.reserve((count as usize).min(payload.len()));
    let mut rest = payload;
    for _ in 0..count {
        let (record, tail) = postcard::take_from_bytes::<T>(rest)
            .map_err(|e| format!("an undecodable record: {e}", e = eddy_types::chain(&e)))?;
        records.push(record);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(format!("{} bytes after the {count} records of a frame", rest.len()));
    }
    Ok(records)
}

impl<T: DeserializeOwned + Send> InboundChannel for TypedInbound<T> {
    fn deliver(&mut self, frame_kind: u8, value: u32, payload: &[u8]) -> Result<bool, String> {
        let short = || format!("a frame of kind {frame_kind} is too short ({} bytes)", payload.len());
        let message = match frame_kind {
            kind::RECORDS => {
                // Into a buffer the consumer gave back (see `BatchSender`); the decoder
                // reserves room for as many records as the frame can hold.
                let buffer = self.queue.fresh_batch(0);
                StreamMessage::Records(decode_records_into(value, payload, buffer)?)
            }
            kind::BARRIER => StreamMessage::Barrier(decode_barrier(payload).ok_or_else(short)?),
            kind::ANNOUNCE => {
                let barrier = decode_barrier(payload).ok_or_else(short)?;
                self.last_announced = Some(barrier.id);
                if let Some((inbox, channel)) = &self.announce {
                    let _ = inbox.send(Announcement { channel: *channel, barrier });
                }
                return Ok(false);
            }
            kind::OVERTAKEN | kind::OVERTAKEN_WATERMARK => {
                let copy = match frame_kind {
                    kind::OVERTAKEN => Overtaken::Records(decode_records(value, payload)?),
                    _ => Overtaken::Watermark(decode_watermark(payload).ok_or_else(short)?),
                };
                // Stored with the barrier announced last, which follows the copies.
                let Some(overtaken) = &self.overtaken else {
                    return Err("overtaken records on a channel without unaligned checkpoints".into());
                };
                let barrier = self.last_announced.ok_or("overtaken records before any announcement")?;
                let _ = overtaken.send((barrier, copy));
                return Ok(false);
            }
            kind::WATERMARK => StreamMessage::Watermark(decode_watermark(payload).ok_or_else(short)?),
            kind::WATERMARK_STATUS => {
                StreamMessage::WatermarkStatus(if value == 1 { WatermarkStatus::Idle } else { WatermarkStatus::Active })
            }
            kind::END_OF_INPUT => StreamMessage::EndOfInput,
            other => return Err(format!("a frame of unknown kind {other}")),
        };
        let ended = matches!(message, StreamMessage::EndOfInput);
        // The consumer gone (its task ended or failed): nothing to deliver to.
        let _ = self.queue.send(message);
        Ok(ended)
    }
}

/// Why a network channel's connection is gone, shared by its consumer's channels.
pub type LostReason = Arc<Mutex<Option<TaskError>>>;

/// The input channel a consuming subtask reads from the network: the frames its
/// connection decoded, and one credit back per records frame taken.
pub struct RemoteInputChannel<T> {
    queue: BatchReceiver<T>,
    key: ChannelKey,
    credits: Sender<ChannelKey>,
    lost: LostReason,
    /// Copies of records and watermarks that overtaking barriers passed at the producer,
    /// by barrier.
    overtaken: Option<Receiver<(CheckpointId, Overtaken<T>)>>,
    /// Those taken from `overtaken` whose barrier is still to come.
    early: RefCell<VecDeque<(CheckpointId, Overtaken<T>)>>,
}

impl<T> RemoteInputChannel<T> {
    pub fn new(queue: BatchReceiver<T>, key: ChannelKey, credits: Sender<ChannelKey>, lost: LostReason) -> Self {
        Self { queue, key, credits, lost, overtaken: None, early: RefCell::default() }
    }

    /// Gets the copies of overtaken records from `overtaken` (see [`TypedInbound`]).
    pub fn with_overtaken(self, overtaken: Receiver<(CheckpointId, Overtaken<T>)>) -> Self {
        Self { overtaken: Some(overtaken), ..self }
    }
}

impl<T> RemoteInputChannel<T> {
    /// The copies of overtaken records of checkpoint `id` and older ones, taken out.
    fn overtaken_through(&self, id: CheckpointId) -> Vec<(CheckpointId, Overtaken<T>)> {
        let mut early = self.early.borrow_mut();
        if let Some(overtaken) = &self.overtaken {
            early.extend(overtaken.try_iter());
        }
        let through = early.iter().take_while(|(copied, _)| *copied <= id).count();
        early.drain(..through).collect()
    }
}

impl<T: Send> InputChannel<T> for RemoteInputChannel<T> {
    #[inline]
    fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError> {
        let message = self.queue.try_recv()?;
        if matches!(message, StreamMessage::Records(_)) {
            let _ = self.credits.send(self.key);
        }
        Ok(message)
    }

    #[inline]
    fn recycle(&self, batch: Vec<T>) {
        self.queue.recycle(batch);
    }

    /// Without a credit back: what the consumer reads ahead keeps its buffer until it is
    /// processed ([`Self::release`]), so that reading ahead lets the producer send no more.
    fn try_recv_ahead(&self) -> Result<StreamMessage<T>, TryRecvError> {
        self.queue.try_recv()
    }

    fn release(&self) {
        let _ = self.credits.send(self.key);
    }

    fn take_overtaken(&self, barrier: &CheckpointBarrier, into: &mut Vec<T>, watermarks: &mut Vec<InFlightWatermark>) {
        for (id, copy) in self.overtaken_through(barrier.id) {
            match copy {
                _ if id != barrier.id => {}
                Overtaken::Records(records) => into.extend(records),
                Overtaken::Watermark(watermark) => {
                    watermarks.push(InFlightWatermark { after: into.len() as u32, watermark: watermark.0 })
                }
            }
        }
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        if self.overtaken.as_ref().is_some_and(|o| !o.is_empty()) || !self.early.borrow().is_empty() {
            drop(self.overtaken_through(done));
        }
    }

    fn watch<'a>(&'a self, select: &mut Select<'a>) {
        self.queue.watch(select);
    }

    fn disconnected(&self) -> TaskError {
        let reason = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        reason.unwrap_or_else(|| {
            TaskError::Lost(format!("the network channel ({}) closed before its end of input", self.key))
        })
    }
}
