//! The data plane: records, barriers, watermarks and ends of input between task executors
//! of different TaskManagers, with Flink's credit-based flow control.
//!
//! - One TCP connection per ordered pair of task executors (producer → consumer), shared
//!   by every channel between their subtasks; the consumer's credits flow back on it.
//! - A channel is keyed by (edge, producer subtask, consumer subtask): both sides know
//!   every key from the job graph and the slots, so nothing is negotiated.
//! - A frame is a 16-byte header (payload length, kind, key, a value) and a payload.
//!   Records frames pack consecutive batches of one channel into one network buffer of
//!   [`NETWORK_BUFFER_BYTES`]; events (barriers, watermarks, ends of input) travel in band,
//!   in order, in frames of their own.
//! - **Credits** (Flink's `CreditBasedPartitionRequestClientHandler`): a records frame
//!   costs the sender one credit; the consumer grants each channel its share of buffers
//!   first and one more credit per records frame its subtask takes, announced in
//!   coalesced `CREDIT` frames. Events cost none. A sender writes only what the receiver
//!   has room for, so a channel held by barrier alignment or a slow consumer never
//!   blocks the others on the connection, and the receiver's memory per channel is
//!   bounded by its credits. Without credit, the sender's bounded queue fills and the
//!   producing subtask waits: backpressure reaches the source.
//! - A connection lost while channels are still open fails their consumers with
//!   [`TaskError::Lost`] naming the peer; the job restarts from its latest checkpoint.
//!
//! Serialization happens here only, on the connection's threads, never on a task thread.

use super::auth::PeerRole;
use super::frame::{read_message, write_message};
use super::messages::Message;
use super::stream::Stream;
use super::Security;
use crate::channel::{BatchReceiver, BatchSender, CheckpointBarrier, StreamMessage};
use crate::error::{ClusterError, TaskError};
use crate::task::InputChannel;
use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};
use eddy_types::{Watermark, WatermarkStatus};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bytes of records a frame holds before it is sent (Flink's 32 KiB memory segments).
/// A batch is never split: a frame ends after the batch that reaches this size.
pub const NETWORK_BUFFER_BYTES: usize = 32 * 1024;
const HEADER_BYTES: usize = 16;
/// A frame larger than this is refused as corrupt.
const FRAME_BYTES_MAX: usize = 64 << 20;
/// How often an idle sender looks at the cancel flag.
const IDLE_WAIT_MS: u64 = 100;

mod kind {
    pub const RECORDS: u8 = 1;
    pub const BARRIER: u8 = 2;
    pub const WATERMARK: u8 = 3;
    pub const WATERMARK_STATUS: u8 = 4;
    pub const END_OF_INPUT: u8 = 5;
    pub const CREDIT: u8 = 6;
    /// The producer cannot send the channel's records (a record that does not
    /// serialize): the payload says why, and the consumer fails with it.
    pub const UNSENDABLE: u8 = 7;
}

/// One channel on a connection: edge index, producer subtask, consumer subtask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelKey {
    pub edge: u16,
    pub from: u16,
    pub to: u16,
}

impl std::fmt::Display for ChannelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (from, to) = (u32::from(self.from) + 1, u32::from(self.to) + 1);
        write!(f, "edge {} from subtask {from} to subtask {to}", self.edge)
    }
}

struct Header {
    payload: u32,
    kind: u8,
    key: ChannelKey,
    value: u32,
}

fn encode_header(header: &Header) -> [u8; HEADER_BYTES] {
    let mut bytes = [0u8; HEADER_BYTES];
    bytes[0..4].copy_from_slice(&header.payload.to_le_bytes());
    bytes[4] = header.kind;
    bytes[6..8].copy_from_slice(&header.key.edge.to_le_bytes());
    bytes[8..10].copy_from_slice(&header.key.from.to_le_bytes());
    bytes[10..12].copy_from_slice(&header.key.to.to_le_bytes());
    bytes[12..16].copy_from_slice(&header.value.to_le_bytes());
    bytes
}

fn decode_header(bytes: &[u8; HEADER_BYTES]) -> Header {
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    Header {
        payload: u32_at(0),
        kind: bytes[4],
        key: ChannelKey { edge: u16_at(6), from: u16_at(8), to: u16_at(10) },
        value: u32_at(12),
    }
}

/// Reads one frame into `payload`; `Ok(None)` at a clean end of the connection.
fn read_frame(stream: &mut impl Read, payload: &mut Vec<u8>) -> std::io::Result<Option<Header>> {
    let mut bytes = [0u8; HEADER_BYTES];
    match stream.read_exact(&mut bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let header = decode_header(&bytes);
    let length = header.payload as usize;
    if length > FRAME_BYTES_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a frame of {length} bytes")));
    }
    payload.clear();
    payload.resize(length, 0);
    stream.read_exact(payload)?;
    Ok(Some(header))
}

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
}

impl<T> TypedOutbound<T> {
    pub fn new(queue: BatchReceiver<T>) -> Self {
        Self { queue, stash: None }
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
            if out.len() - start >= NETWORK_BUFFER_BYTES || count >= u32::MAX / 2 {
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

/// The channels one producing task executor sends to one consuming task executor.
pub struct OutboundSet {
    pub channels: OutboundChannels,
}

/// Connects to the consumer at `address` and sends `set`'s channels until each ended (or
/// the attempt is cancelled), on threads of their own.
pub fn start_sender(
    address: &str,
    security: &Security,
    attempt: u32,
    from_executor: u32,
    set: OutboundSet,
    cancel: Arc<AtomicBool>,
) -> Result<(), ClusterError> {
    let stream = security.connect(address, PeerRole::Data, "connecting for data")?;
    write_message(&mut &stream, &Message::DataHello { attempt, executor: from_executor })
        .map_err(|e| ClusterError::io(address, "opening a data connection", e))?;
    let reader = stream.clone();
    let (credit_tx, credit_rx) = crossbeam_channel::unbounded::<Result<(ChannelKey, u32), String>>();
    let peer = address.to_string();
    std::thread::Builder::new()
        .name(format!("eddy-credits-from-{peer}"))
        .spawn(move || read_credits(reader, credit_tx))
        .map_err(|e| ClusterError::Config(format!("cannot start a network thread: {e}")))?;
    std::thread::Builder::new()
        .name(format!("eddy-send-to-{peer}"))
        .spawn(move || {
            let mut sent = Sent::default();
            match send_frames(stream, set, credit_rx, &cancel, &mut sent) {
                Ok(()) => tracing::info!(
                    peer = %peer,
                    bytes = sent.bytes,
                    records = sent.records,
                    frames = sent.frames,
                    bytes_per_record = format!("{:.1}", sent.bytes as f64 / sent.records.max(1) as f64),
                    "data connection done"
                ),
                Err(e) if !cancel.load(Ordering::Relaxed) => {
                    tracing::warn!(peer = %peer, error = %e, "data connection lost while sending")
                }
                Err(_) => {}
            }
        })
        .map_err(|e| ClusterError::Config(format!("cannot start a network thread: {e}")))?;
    Ok(())
}

fn read_credits(stream: Stream, credits: Sender<Result<(ChannelKey, u32), String>>) {
    let mut stream = BufReader::new(stream);
    let mut payload = Vec::new();
    loop {
        match read_frame(&mut stream, &mut payload) {
            Ok(Some(header)) if header.kind == kind::CREDIT => {
                if credits.send(Ok((header.key, header.value))).is_err() {
                    return;
                }
            }
            Ok(Some(header)) => {
                let _ = credits.send(Err(format!("a frame of kind {} where credits were expected", header.kind)));
                return;
            }
            Ok(None) => return,
            Err(e) => {
                let _ = credits.send(Err(e.to_string()));
                return;
            }
        }
    }
}

/// The sender's loop (Flink's `PartitionRequestQueue`): one frame per channel with
/// credit (or an event waiting) per round, so that channels share the connection fairly.
/// What a data connection carried: bytes on the wire (before TLS), records, frames.
#[derive(Debug, Default)]
struct Sent {
    bytes: u64,
    records: u64,
    frames: u64,
}

fn send_frames(
    stream: Stream,
    set: OutboundSet,
    credit_rx: Receiver<Result<(ChannelKey, u32), String>>,
    cancel: &AtomicBool,
    sent: &mut Sent,
) -> std::io::Result<()> {
    let index: HashMap<ChannelKey, usize> = set.channels.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect();
    let (keys, mut channels): (Vec<ChannelKey>, Vec<Box<dyn OutboundChannel>>) = set.channels.into_iter().unzip();
    let mut credits = vec![0u32; channels.len()];
    let mut gone = vec![false; channels.len()];
    let mut open = channels.len();
    let shutdown = stream.clone();
    let mut out = BufWriter::with_capacity(2 * NETWORK_BUFFER_BYTES, stream);
    let mut frame = Vec::with_capacity(2 * NETWORK_BUFFER_BYTES);
    while open > 0 {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        loop {
            match credit_rx.try_recv() {
                Ok(Ok((key, n))) => match index.get(&key) {
                    Some(&i) => credits[i] = credits[i].saturating_add(n),
                    None => return Err(std::io::Error::other(format!("credit for an unknown channel ({key})"))),
                },
                Ok(Err(e)) => return Err(std::io::Error::other(e)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(std::io::Error::other("the consumer closed the connection"));
                }
            }
        }
        let mut progress = false;
        for i in 0..channels.len() {
            if gone[i] {
                continue;
            }
            frame.clear();
            frame.extend_from_slice(&[0u8; HEADER_BYTES]);
            match channels[i].next_frame(&mut frame, credits[i] > 0) {
                Ok(Some((frame_kind, value))) => {
                    if frame_kind == kind::RECORDS {
                        credits[i] -= 1;
                        sent.records += u64::from(value);
                    }
                    sent.bytes += frame.len() as u64;
                    sent.frames += 1;
                    let payload = (frame.len() - HEADER_BYTES) as u32;
                    let header = Header { payload, kind: frame_kind, key: keys[i], value };
                    frame[..HEADER_BYTES].copy_from_slice(&encode_header(&header));
                    out.write_all(&frame)?;
                    progress = true;
                }
                Ok(None) => {}
                Err(ChannelEnd::ProducerGone) => {
                    gone[i] = true;
                    open -= 1;
                    progress = true;
                }
                Err(ChannelEnd::Unsendable(why)) => {
                    // The consumer fails with the reason (the JobMaster hears it from
                    // there); the channels stay until the cancel, so that the producer
                    // waits instead of failing first with a vaguer "consumer gone".
                    let header = Header { payload: why.len() as u32, kind: kind::UNSENDABLE, key: keys[i], value: 0 };
                    out.write_all(&encode_header(&header))?;
                    out.write_all(why.as_bytes())?;
                    out.flush()?;
                    while !cancel.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(IDLE_WAIT_MS));
                    }
                    return Err(std::io::Error::other(why));
                }
            }
        }
        if !progress {
            out.flush()?;
            let mut select = Select::new();
            select.recv(&credit_rx);
            for i in 0..channels.len() {
                if !gone[i] && credits[i] > 0 && !channels[i].has_stashed() {
                    channels[i].watch(&mut select);
                }
            }
            let _ = select.ready_timeout(Duration::from_millis(IDLE_WAIT_MS));
        }
    }
    out.flush()?;
    shutdown.shutdown_write();
    // Channels keep their queues until here: a producer still sending after a cancel
    // sees its queue disconnected and stops.
    drop(channels);
    Ok(())
}

/// What one consuming task executor receives from one producing task executor.
pub struct InboundSet {
    pub channels: HashMap<ChannelKey, Box<dyn InboundChannel>>,
    /// Credits each channel starts with.
    pub initial_credit: u32,
    /// Keys its subtasks announce as they take records frames.
    pub credits: Receiver<ChannelKey>,
    pub lost: LostReason,
    /// For messages: who the producer is.
    pub producer: String,
}

/// Accepts one data connection per producing task executor of `attempt` on `listener`,
/// each served by threads of their own.
pub fn start_receivers(
    listener: TcpListener,
    security: Security,
    attempt: u32,
    sets: HashMap<u32, InboundSet>,
) -> Result<(), ClusterError> {
    if sets.is_empty() {
        return Ok(());
    }
    let sets = Arc::new(Mutex::new(sets));
    std::thread::Builder::new()
        .name("eddy-data-accept".into())
        .spawn(move || {
            while !sets.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
                let socket = match listener.accept() {
                    Ok((socket, _)) => socket,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot accept a data connection");
                        continue;
                    }
                };
                // Each on a thread of its own: a peer that connects and says nothing
                // (or slowly) holds up no producer.
                let (security, sets) = (security.clone(), sets.clone());
                let _ = std::thread::Builder::new()
                    .name("eddy-data-handshake".into())
                    .spawn(move || accept_producer(socket, &security, attempt, &sets));
            }
        })
        .map_err(|e| ClusterError::Config(format!("cannot start a network thread: {e}")))?;
    Ok(())
}

/// How long a producer has to say which executor it is, once in.
const DATA_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

fn accept_producer(
    socket: std::net::TcpStream,
    security: &Security,
    attempt: u32,
    sets: &Mutex<HashMap<u32, InboundSet>>,
) {
    let stream = match security.accept(socket) {
        Ok((stream, PeerRole::Data)) => stream,
        _ => return,
    };
    let peer = stream.peer().to_string();
    let _ = stream.set_read_timeout(Some(DATA_HELLO_TIMEOUT));
    let executor = match read_message(&mut &stream) {
        Ok(Some(Message::DataHello { attempt: a, executor })) if a == attempt => executor,
        other => {
            tracing::warn!(peer = %peer, answer = ?other.map(|m| m.map(|m| format!("{m:?}"))), "a data connection for another attempt or of another kind; closed");
            return;
        }
    };
    let _ = stream.set_read_timeout(None);
    let Some(set) = sets.lock().unwrap_or_else(|e| e.into_inner()).remove(&executor) else {
        tracing::warn!(peer = %peer, executor, "a second data connection from one task executor; closed");
        return;
    };
    if let Err(e) = serve_inbound(stream, set) {
        tracing::warn!(peer = %peer, error = %e, "cannot serve a data connection");
    }
}

fn serve_inbound(stream: Stream, set: InboundSet) -> std::io::Result<()> {
    let writer = stream.clone();
    let keys: Vec<ChannelKey> = set.channels.keys().copied().collect();
    let (credits, initial) = (set.credits, set.initial_credit);
    std::thread::Builder::new().name(format!("eddy-credits-to-{}", set.producer)).spawn(move || {
        let _ = write_credits(writer, &keys, initial, &credits);
    })?;
    let (channels, lost, producer) = (set.channels, set.lost, set.producer);
    std::thread::Builder::new().name(format!("eddy-receive-from-{producer}")).spawn(move || {
        receive_frames(stream, channels, &lost, &producer);
    })?;
    Ok(())
}

fn write_credits(
    stream: Stream,
    keys: &[ChannelKey],
    initial: u32,
    credits: &Receiver<ChannelKey>,
) -> std::io::Result<()> {
    let mut out = BufWriter::new(stream);
    let credit_frame =
        |key: ChannelKey, value: u32| encode_header(&Header { payload: 0, kind: kind::CREDIT, key, value });
    for key in keys {
        out.write_all(&credit_frame(*key, initial))?;
    }
    out.flush()?;
    let mut due: HashMap<ChannelKey, u32> = HashMap::new();
    // Ends when every subtask reading these channels is gone.
    while let Ok(key) = credits.recv() {
        *due.entry(key).or_default() += 1;
        while let Ok(key) = credits.try_recv() {
            *due.entry(key).or_default() += 1;
        }
        for (key, n) in due.drain() {
            out.write_all(&credit_frame(key, n))?;
        }
        out.flush()?;
    }
    Ok(())
}

fn receive_frames(
    stream: Stream,
    mut channels: HashMap<ChannelKey, Box<dyn InboundChannel>>,
    lost: &LostReason,
    producer: &str,
) {
    let mut input = BufReader::with_capacity(2 * NETWORK_BUFFER_BYTES, stream);
    let mut payload = Vec::with_capacity(NETWORK_BUFFER_BYTES);
    let failure = loop {
        if channels.is_empty() {
            return;
        }
        match read_frame(&mut input, &mut payload) {
            Ok(Some(header)) if header.kind == kind::UNSENDABLE => {
                break TaskError::Unsendable(format!(
                    "{} ({}, from {producer})",
                    String::from_utf8_lossy(&payload),
                    header.key
                ));
            }
            Ok(Some(header)) => {
                let Some(channel) = channels.get_mut(&header.key) else {
                    break TaskError::Lost(format!(
                        "{producer} sent a frame for a channel it does not have ({})",
                        header.key
                    ));
                };
                match channel.deliver(header.kind, header.value, &payload) {
                    Ok(false) => {}
                    Ok(true) => {
                        channels.remove(&header.key);
                    }
                    Err(e) => {
                        break TaskError::Lost(format!("{producer} sent an unreadable frame on {}: {e}", header.key))
                    }
                }
            }
            Ok(None) => {
                break TaskError::Lost(format!(
                    "the connection to {producer} was closed before its channels ended (was its TaskManager lost?)"
                ))
            }
            Err(e) => break TaskError::Lost(format!("the connection to {producer} failed: {e}")),
        }
    };
    *lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
    // Dropping the channels disconnects their queues: consumers read what arrived, then
    // fail with the reason.
    drop(channels);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let header = Header {
            payload: 70_000,
            kind: kind::RECORDS,
            key: ChannelKey { edge: 3, from: 1, to: 65_535 },
            value: 1024,
        };
        let back = decode_header(&encode_header(&header));
        assert_eq!((back.payload, back.kind, back.key, back.value), (70_000, kind::RECORDS, header.key, 1024));
    }

    #[test]
    fn records_and_events_cross_an_outbound_and_inbound_pair_in_order() {
        let (tx, rx) = crossbeam_channel::bounded::<StreamMessage<(u64, String)>>(8);
        let mut outbound = TypedOutbound::new(rx);
        tx.send(StreamMessage::Records(vec![(1, "a".into()), (2, "b".into())])).unwrap();
        tx.send(StreamMessage::Records(vec![(3, "c".into())])).unwrap();
        tx.send(StreamMessage::Watermark(Watermark(-5))).unwrap();
        tx.send(StreamMessage::EndOfInput).unwrap();
        drop(tx);
        let (in_tx, in_rx) = crossbeam_channel::unbounded::<StreamMessage<(u64, String)>>();
        let mut inbound = TypedInbound::new(in_tx);
        let mut frame = Vec::new();
        assert_eq!(outbound.next_frame(&mut frame, false).unwrap(), None, "records need credit");
        let (k, n) = outbound.next_frame(&mut frame, true).unwrap().unwrap();
        assert_eq!((k, n), (kind::RECORDS, 3), "consecutive batches share a frame");
        assert!(!inbound.deliver(k, n, &frame).unwrap());
        frame.clear();
        let (k, n) = outbound.next_frame(&mut frame, false).unwrap().unwrap();
        assert_eq!(k, kind::WATERMARK, "an event needs no credit");
        inbound.deliver(k, n, &frame).unwrap();
        frame.clear();
        assert_eq!(outbound.next_frame(&mut frame, false).unwrap(), None, "without credit the queue is not read");
        let (k, n) = outbound.next_frame(&mut frame, true).unwrap().unwrap();
        assert!(inbound.deliver(k, n, &frame).unwrap(), "the end of input ends the channel");
        assert_eq!(outbound.next_frame(&mut frame, true), Err(ChannelEnd::ProducerGone));
        let got: Vec<String> = in_rx.try_iter().map(|m| format!("{m:?}")).collect();
        assert_eq!(
            got,
            vec![
                "Records([(1, \"a\"), (2, \"b\"), (3, \"c\")])".to_string(),
                "Watermark(Watermark(-5))".into(),
                "EndOfInput".into()
            ]
        );
    }

    #[test]
    fn a_truncated_records_frame_is_an_error() {
        let (in_tx, _in_rx) = crossbeam_channel::unbounded::<StreamMessage<u64>>();
        let mut inbound = TypedInbound::new(in_tx);
        assert!(inbound.deliver(kind::RECORDS, 2, &[7]).is_err());
        assert!(inbound.deliver(kind::BARRIER, 0, &[1, 2]).is_err());
    }

    /// Sends 5,000 records through a data connection, via a relay that records every
    /// byte on the wire; what the consumer got, and the wire's bytes.
    fn through_a_recording_relay(tls: bool) -> (Vec<String>, Vec<u8>) {
        use crate::cluster::{Secret, TlsConfig, TlsFiles};
        use std::io::Write as _;
        use std::net::TcpStream;
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
        let tls = tls.then(|| {
            let files = TlsFiles { cert: fixtures.join("cert.pem"), key: fixtures.join("key.pem"), ca: None };
            TlsConfig::from_files(files).unwrap()
        });
        let security = Security { secret: Secret::from_bytes(b"0123456789abcdef-data").unwrap(), tls };
        let key = ChannelKey { edge: 0, from: 0, to: 0 };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let consumer = listener.local_addr().unwrap();
        let (in_tx, in_rx) = crossbeam_channel::unbounded::<StreamMessage<String>>();
        let (credit_tx, credit_rx) = crossbeam_channel::unbounded();
        let lost = LostReason::default();
        let channels = HashMap::from([(key, Box::new(TypedInbound::new(in_tx)) as Box<dyn InboundChannel>)]);
        let input = RemoteInputChannel::new(in_rx, key, credit_tx, lost.clone());
        let set = InboundSet { channels, initial_credit: 2, credits: credit_rx, lost, producer: "test".into() };
        start_receivers(listener, security.clone(), 7, HashMap::from([(1, set)])).unwrap();

        let relay = TcpListener::bind("127.0.0.1:0").unwrap();
        let relay_address = relay.local_addr().unwrap().to_string();
        let wire: Arc<Mutex<Vec<u8>>> = Arc::default();
        let recorder = wire.clone();
        std::thread::spawn(move || {
            let (client, _) = relay.accept().unwrap();
            let server = TcpStream::connect(consumer).unwrap();
            for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)] {
                let recorder = recorder.clone();
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 8192];
                    while let Ok(n) = from.read(&mut buffer) {
                        if n == 0 || to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                        recorder.lock().unwrap().extend_from_slice(&buffer[..n]);
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        });

        let (tx, rx) = crossbeam_channel::bounded::<StreamMessage<String>>(4);
        let outbound =
            OutboundSet { channels: vec![(key, Box::new(TypedOutbound::new(rx)) as Box<dyn OutboundChannel>)] };
        start_sender(&relay_address, &security, 7, 1, outbound, Arc::new(AtomicBool::new(false))).unwrap();
        std::thread::spawn(move || {
            for batch in 0..50 {
                let records = (0..100).map(|i| format!("plain-record-{batch}-{i}")).collect();
                tx.send(StreamMessage::Records(records)).unwrap();
            }
            tx.send(StreamMessage::EndOfInput).unwrap();
        });
        let mut received = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match input.try_recv() {
                Ok(StreamMessage::Records(records)) => received.extend(records),
                Ok(StreamMessage::EndOfInput) => break,
                Ok(other) => panic!("unexpected {other:?}"),
                Err(_) => {
                    assert!(std::time::Instant::now() < deadline, "{} records so far", received.len());
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        let bytes = wire.lock().unwrap().clone();
        (received, bytes)
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn with_tls_no_record_crosses_the_wire_in_the_clear() {
        let (plain_records, plain_wire) = through_a_recording_relay(false);
        assert_eq!(plain_records.len(), 5000);
        assert!(contains(&plain_wire, b"plain-record-49-99"), "without TLS the records are readable on the wire");
        let (records, wire) = through_a_recording_relay(true);
        assert_eq!(records, plain_records, "every record arrives, in order");
        assert!(wire.len() > 5000 * 10, "the records crossed the relay: {} bytes", wire.len());
        assert!(!contains(&wire, b"plain-record-"), "a record crossed the wire in the clear");
    }
}
