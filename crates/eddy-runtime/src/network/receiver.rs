//! The consuming side of data connections: one listener per task executor, one
//! connection per producing executor, a thread that decodes its frames into the channels'
//! queues and one that sends credits back.

use super::channel::{InboundChannel, LostReason};
use super::credits::CreditsDue;
use super::wire::{encode_header, kind, read_frame, ChannelKey, Header, HEADER_BYTES, NETWORK_BUFFER_BYTES};
use super::{ChannelCounters, DataHello};
use crate::error::TaskError;
use crossbeam_channel::Receiver;
use eddy_rpc::frame::read_value;
use eddy_rpc::{AttemptId, ClusterError, ExecutorIndex, PeerRole, Security, Stream};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one consuming task executor receives from one producing task executor.
pub struct InboundSet {
    pub channels: HashMap<ChannelKey, Box<dyn InboundChannel>>,
    /// Per channel, the consuming subtask's counters (its bytes in).
    pub counters: ChannelCounters,
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
    attempt: AttemptId,
    sets: HashMap<ExecutorIndex, InboundSet>,
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
                        tracing::warn!(error = %eddy_types::chain(&e), "cannot accept a data connection");
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
        .map_err(|e| ClusterError::Config(format!("cannot start a network thread: {e}", e = eddy_types::chain(&e))))?;
    Ok(())
}

/// How long a producer has to say which executor it is, once in.
const DATA_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

fn accept_producer(
    socket: std::net::TcpStream,
    security: &Security,
    attempt: AttemptId,
    sets: &Mutex<HashMap<ExecutorIndex, InboundSet>>,
) {
    let stream = match security.accept(socket) {
        Ok((stream, PeerRole::Data)) => stream,
        _ => return,
    };
    let peer = stream.peer().to_string();
    let _ = stream.set_read_timeout(Some(DATA_HELLO_TIMEOUT));
    let executor = match read_value::<DataHello>(&mut &stream) {
        Ok(Some(DataHello { attempt: a, executor })) if a == attempt => executor,
        other => {
            tracing::warn!(peer = %peer, answer = ?other.map(|m| m.map(|m| format!("{m:?}"))), "a data connection for \
                another attempt or of another kind; closed");
            return;
        }
    };
    let _ = stream.set_read_timeout(None);
    let Some(set) = sets.lock().unwrap_or_else(|e| e.into_inner()).remove(&executor) else {
        tracing::warn!(peer = %peer, executor = %executor, "a second data connection from one task executor; closed");
        return;
    };
    if let Err(e) = serve_inbound(stream, set) {
        tracing::warn!(peer = %peer, error = %eddy_types::chain(&e), "cannot serve a data connection");
    }
}

fn serve_inbound(stream: Stream, set: InboundSet) -> std::io::Result<()> {
    let writer = stream.clone();
    let keys: Vec<ChannelKey> = set.channels.keys().copied().collect();
    let (credits, initial) = (set.credits, set.initial_credit);
    std::thread::Builder::new().name(format!("eddy-credits-to-{}", set.producer)).spawn(move || {
        let _ = write_credits(writer, &keys, initial, &credits);
    })?;
    let (channels, lost, producer, counters) = (set.channels, set.lost, set.producer, set.counters);
    std::thread::Builder::new().name(format!("eddy-receive-from-{producer}")).spawn(move || {
        receive_frames(stream, channels, &counters, &lost, &producer);
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
    let mut due = CreditsDue::default();
    // Ends when every subtask reading these channels is gone.
    while let Ok(key) = credits.recv() {
        due.taken(key);
        while let Ok(key) = credits.try_recv() {
            due.taken(key);
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
    counters: &ChannelCounters,
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
                if let Some(counters) = counters.get(&header.key) {
                    counters.add_bytes_in(HEADER_BYTES + payload.len());
                }
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
            Err(e) => {
                break TaskError::Lost(format!("the connection to {producer} failed: {e}", e = eddy_types::chain(&e)))
            }
        }
    };
    *lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
    // Dropping the channels disconnects their queues: consumers read what arrived, then
    // fail with the reason.
    drop(channels);
}
