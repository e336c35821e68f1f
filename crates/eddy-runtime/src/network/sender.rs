//! The producing side of one data connection: a thread that writes frames of every
//! channel with credit, and one that reads the consumer's credits.

use super::channel::{ChannelEnd, OutboundChannel, OutboundChannels};
use super::credits::SenderCredits;
use super::wire::{
    encode_header, kind, read_frame, ChannelKey, Header, HEADER_BYTES, IDLE_WAIT_MS, NETWORK_BUFFER_BYTES,
};
use super::{ChannelCounters, DataHello};
use crossbeam_channel::{Receiver, Select, Sender, TryRecvError};
use eddy_rpc::frame::write_value;
use eddy_rpc::{AttemptId, ClusterError, ExecutorIndex, PeerRole, Security, Stream};
use std::io::{BufReader, BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The channels one producing task executor sends to one consuming task executor.
pub struct OutboundSet {
    pub channels: OutboundChannels,
    /// Per channel, the producing subtask's counters (its bytes out).
    pub counters: ChannelCounters,
}

/// Connects to the consumer at `address` and sends `set`'s channels until each ended (or
/// the attempt is cancelled), on threads of their own.
pub fn start_sender(
    address: &str,
    security: &Security,
    attempt: AttemptId,
    from_executor: ExecutorIndex,
    set: OutboundSet,
    cancel: Arc<AtomicBool>,
) -> Result<(), ClusterError> {
    let stream = security.connect(address, PeerRole::Data, "connecting for data")?;
    write_value(&mut &stream, &DataHello { attempt, executor: from_executor })
        .map_err(|e| ClusterError::io(address, "opening a data connection", e))?;
    let reader = stream.clone();
    let (credit_tx, credit_rx) = crossbeam_channel::unbounded::<Result<(ChannelKey, u32), String>>();
    let peer = address.to_string();
    std::thread::Builder::new()
        .name(format!("eddy-credits-from-{peer}"))
        .spawn(move || read_credits(reader, credit_tx))
        .map_err(|e| ClusterError::Config(format!("cannot start a network thread: {e}", e = eddy_types::chain(&e))))?;
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
                    tracing::warn!(peer = %peer, error = %eddy_types::chain(&e), "data connection lost while sending")
                }
                Err(_) => {}
            }
        })
        .map_err(|e| ClusterError::Config(format!("cannot start a network thread: {e}", e = eddy_types::chain(&e))))?;
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
                let _ = credits.send(Err(eddy_types::chain(&e)));
                return;
            }
        }
    }
}

/// What a data connection carried: bytes on the wire (before TLS), records, frames.
#[derive(Debug, Default)]
struct Sent {
    bytes: u64,
    records: u64,
    frames: u64,
}

/// The sender's loop (Flink's `PartitionRequestQueue`): one frame per channel with
/// credit (or an event waiting) per round, so that channels share the connection fairly.
fn send_frames(
    stream: Stream,
    set: OutboundSet,
    credit_rx: Receiver<Result<(ChannelKey, u32), String>>,
    cancel: &AtomicBool,
    sent: &mut Sent,
) -> std::io::Result<()> {
    let (keys, mut channels): (Vec<ChannelKey>, Vec<Box<dyn OutboundChannel>>) = set.channels.into_iter().unzip();
    let counted: Vec<_> = keys.iter().map(|key| set.counters.get(key).cloned()).collect();
    let mut credits = SenderCredits::new(&keys);
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
                Ok(Ok((key, n))) => credits.grant(key, n).map_err(std::io::Error::other)?,
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
            match channels[i].next_frame(&mut frame, credits.has(i)) {
                Ok(Some((frame_kind, value))) => {
                    if frame_kind == kind::RECORDS {
                        credits.spend(i);
                        sent.records += u64::from(value);
                    }
                    sent.bytes += frame.len() as u64;
                    sent.frames += 1;
                    if let Some(counters) = &counted[i] {
                        counters.add_bytes_out(frame.len());
                    }
                    // A frame holds about one network buffer: far below 4 GiB.
                    let payload = u32::try_from(frame.len() - HEADER_BYTES).unwrap_or(u32::MAX);
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
                    let why = &why[..why.len().min(super::wire::FRAME_BYTES_MAX)];
                    let header = Header {
                        payload: u32::try_from(why.len()).unwrap_or(0),
                        kind: kind::UNSENDABLE,
                        key: keys[i],
                        value: 0,
                    };
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
                if !gone[i] {
                    channels[i].watch(&mut select, credits.has(i));
                }
            }
            // A barrier due to overtake wakes the loop at its time.
            let mut wait = Duration::from_millis(IDLE_WAIT_MS);
            let now = std::time::Instant::now();
            for at in channels.iter().zip(&gone).filter(|(_, gone)| !**gone).filter_map(|(c, _)| c.wake_at()) {
                wait = wait.min(at.saturating_duration_since(now));
            }
            let _ = select.ready_timeout(wait);
        }
    }
    out.flush()?;
    shutdown.shutdown_write();
    // Channels keep their queues until here: a producer still sending after a cancel
    // sees its queue disconnected and stops.
    drop(channels);
    Ok(())
}
