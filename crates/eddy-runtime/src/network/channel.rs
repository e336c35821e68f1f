//! A network channel's two ends, made where the record type is known
//! ([`crate::graph::PortType::outbound`]): the producer's encodes what its subtask queued
//! into frames, the consumer's decodes frames into the queue its subtask reads.

use super::wire::{kind, ChannelKey, FRAME_BYTES_MAX, HEADER_BYTES, NETWORK_BUFFER_BYTES};
use crate::channel::{BatchReceiver, BatchSender, CheckpointBarrier, StreamMessage};
use crate::error::TaskError;
use crate::task::InputChannel;
use crossbeam_channel::{Select, Sender, TryRecvError};
use eddy_types::{Watermark, WatermarkStatus};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::{Arc, Mutex};

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
    /// Registers the producer's queue with `select`.
    fn watch<'a>(&'a self, select: &mut Select<'a>);
    /// Whether a message taken earlier waits to be sent (an event after records).
    fn has_stashed(&self) -> bool;
    /// Appends the next frame's payload to `out` and says its kind and value; `Ok(None)`
    /// when nothing can go (nothing queued, or records without `credit`); `Err` when the
    /// producer is gone and everything it queued went.
    fn next_frame(&mut self, out: &mut Vec<u8>, credit: bool) -> Result<Option<(u8, u32)>, ChannelEnd>;
}

/// The consumer's end of a network channel: decodes frames into the queue its subtask
/// reads.
pub trait InboundChannel: Send {
    /// Decodes one frame; `Ok(true)` after the end of input.
    fn deliver(&mut self, kind: u8, value: u32, payload: &[u8]) -> Result<bool, String>;
}

/// [`OutboundChannel`] of records of type `T`.
pub struct TypedOutbound<T> {
    queue: BatchReceiver<T>,
    stash: Option<StreamMessage<T>>,
    /// A frame packs the batches queued behind the first up to a network buffer's size;
    /// with buffer debloating only one, because a credit is one frame: packed frames
    /// would let the credits carry many times the debloated amount.
    pack: bool,
}

impl<T> TypedOutbound<T> {
    pub fn new(queue: BatchReceiver<T>) -> Self {
        Self { queue, stash: None, pack: true }
    }

    /// One batch per frame (buffer debloating).
    pub fn one_batch_per_frame(self) -> Self {
        Self { pack: false, ..self }
    }
}

fn encode_event<T>(message: &StreamMessage<T>, out: &mut Vec<u8>) -> (u8, u32) {
    match message {
        StreamMessage::Barrier(barrier) => {
            out.extend_from_slice(&barrier.id.0.to_le_bytes());
            out.push(matches!(barrier.kind, eddy_checkpoint::SnapshotKind::Savepoint) as u8);
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
        StreamMessage::Records(_) => unreachable!("records are not an event"),
    }
}

impl<T: Serialize + Send> OutboundChannel for TypedOutbound<T> {
    fn watch<'a>(&'a self, select: &mut Select<'a>) {
        select.recv(&self.queue);
    }

    fn has_stashed(&self) -> bool {
        self.stash.is_some()
    }

    fn next_frame(&mut self, out: &mut Vec<u8>, credit: bool) -> Result<Option<(u8, u32)>, ChannelEnd> {
        let first = match self.stash.take() {
            Some(message) => message,
            None if !credit => return Ok(None),
            None => match self.queue.try_recv() {
                Ok(message) => message,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => return Err(ChannelEnd::ProducerGone),
            },
        };
        let StreamMessage::Records(batch) = first else {
            return Ok(Some(encode_event(&first, out)));
        };
        if !credit {
            self.stash = Some(StreamMessage::Records(batch));
            return Ok(None);
        }
        let start = out.len();
        let mut count = 0u32;
        let mut batch = batch;
        loop {
            for record in &batch {
                // Postcard writes into the buffer in place. A type whose Serialize fails
                // (a map of unknown length, a custom error) fails the job, named.
                let buffer = std::mem::take(out);
                *out = postcard::to_extend(record, buffer).map_err(|e| {
                    ChannelEnd::Unsendable(format!(
                        "a record of type `{}` cannot be serialized to go to another process: {e}",
                        std::any::type_name::<T>()
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
            count = count.saturating_add(u32::try_from(batch.len()).unwrap_or(u32::MAX));
            // Records of no size never fill a buffer: the count bounds a frame too.
            if !self.pack || out.len() - start >= NETWORK_BUFFER_BYTES || count >= u32::MAX / 2 {
                break;
            }
            match self.queue.try_recv() {
                Ok(StreamMessage::Records(next)) => batch = next,
                Ok(event) => {
                    self.stash = Some(event);
                    break;
                }
                Err(_) => break,
            }
        }
        Ok(Some((kind::RECORDS, count)))
    }
}

/// [`InboundChannel`] of records of type `T`.
pub struct TypedInbound<T> {
    queue: BatchSender<T>,
}

impl<T> TypedInbound<T> {
    pub fn new(queue: BatchSender<T>) -> Self {
        Self { queue }
    }
}

impl<T: DeserializeOwned + Send> InboundChannel for TypedInbound<T> {
    fn deliver(&mut self, frame_kind: u8, value: u32, payload: &[u8]) -> Result<bool, String> {
        let short = || format!("a frame of kind {frame_kind} is too short ({} bytes)", payload.len());
        let message = match frame_kind {
            kind::RECORDS => {
                // Each record takes a byte at least: a lying count cannot reserve more.
                let mut records = Vec::with_capacity((value as usize).min(payload.len()));
                let mut rest = payload;
                for _ in 0..value {
                    let (record, tail) =
                        postcard::take_from_bytes::<T>(rest).map_err(|e| format!("an undecodable record: {e}"))?;
                    records.push(record);
                    rest = tail;
                }
                if !rest.is_empty() {
                    return Err(format!("{} bytes after the {value} records of a frame", rest.len()));
                }
                StreamMessage::Records(records)
            }
            kind::BARRIER => {
                let id = u64::from_le_bytes(payload.get(0..8).ok_or_else(short)?.try_into().expect("8 bytes"));
                let kind = match payload.get(8).ok_or_else(short)? {
                    0 => eddy_checkpoint::SnapshotKind::Checkpoint,
                    _ => eddy_checkpoint::SnapshotKind::Savepoint,
                };
                StreamMessage::Barrier(CheckpointBarrier { id: eddy_checkpoint::CheckpointId(id), kind })
            }
            kind::WATERMARK => {
                let at = i64::from_le_bytes(payload.get(0..8).ok_or_else(short)?.try_into().expect("8 bytes"));
                StreamMessage::Watermark(Watermark(at))
            }
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
}

impl<T> RemoteInputChannel<T> {
    pub fn new(queue: BatchReceiver<T>, key: ChannelKey, credits: Sender<ChannelKey>, lost: LostReason) -> Self {
        Self { queue, key, credits, lost }
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

    fn watch<'a>(&'a self, select: &mut Select<'a>) {
        select.recv(&self.queue);
    }

    fn disconnected(&self) -> TaskError {
        let reason = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        reason.unwrap_or_else(|| {
            TaskError::Lost(format!("the network channel ({}) closed before its end of input", self.key))
        })
    }
}
