//! The data plane (Flink's network stack): records, barriers, watermarks and ends of input
//! between task executors of different TaskManagers, with Flink's credit-based flow
//! control.
//!
//! - One TCP connection per ordered pair of task executors (producer → consumer), shared
//!   by every channel between their subtasks; the consumer's credits flow back on it.
//! - A channel is keyed by (edge, producer subtask, consumer subtask): both sides know
//!   every key from the job graph and the slots, so nothing is negotiated.
//! - A frame is a 16-byte header (payload length, kind, key, a value) and a payload.
//!   Records frames pack consecutive batches of one channel into one network buffer of
//!   [`NETWORK_BUFFER_BYTES`]; events (barriers, watermarks, ends of input) travel in band,
//!   in order, in frames of their own. An unaligned checkpoint's barrier overtakes: an
//!   announcement, copies of the records it passes (and of the watermarks among them)
//!   and the barrier go ahead of the queue ([`Overtaking`]).
//! - **Credits** (Flink's `CreditBasedPartitionRequestClientHandler`): a records frame
//!   costs the sender one credit; the consumer grants each channel its share of buffers
//!   first and one more credit per records frame its subtask takes, announced in
//!   coalesced `CREDIT` frames. Events cost none. A sender writes only what the receiver
//!   has room for, so a channel held by barrier alignment or a slow consumer never
//!   blocks the others on the connection, and the receiver's memory per channel is
//!   bounded by its credits. Without credit, the sender's bounded queue fills and the
//!   producing subtask waits: backpressure reaches the source.
//! - A connection lost while channels are still open fails their consumers with
//!   [`TaskError::Lost`](crate::error::TaskError::Lost) naming the peer; the job restarts
//!   from its latest checkpoint.
//!
//! Serialization happens here only, on the connections' threads, never on a task thread.
//!
//! - `wire`: the frame header, frame kinds and channel keys;
//! - `channel`: a channel's two ends, where the record type is known (encoding into
//!   frames, decoding from them), and the input channel a consuming subtask reads;
//! - [`credits`]: the credit bookkeeping of both sides, a small type of its own;
//! - `sender` and `receiver`: one connection's threads on each side.

mod channel;
pub mod credits;
mod receiver;
mod sender;
mod wire;

pub use channel::{
    ChannelEnd, InboundChannel, LostReason, OutboundChannel, OutboundChannels, Overtaken, Overtaking,
    RemoteInputChannel, TypedInbound, TypedOutbound,
};
pub use receiver::{start_receivers, InboundSet};
pub use sender::{start_sender, OutboundSet};
pub use wire::{ChannelKey, NETWORK_BUFFER_BYTES};

/// Per network channel, the counters of the subtask at this end (bytes in or out).
pub type ChannelCounters = std::collections::HashMap<ChannelKey, std::sync::Arc<crate::task::TaskCounters>>;

use eddy_rpc::{AttemptId, ExecutorIndex};
use serde::{Deserialize, Serialize};

/// A producing task executor's first words on a data connection, once in: which attempt
/// and which executor it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataHello {
    pub attempt: AttemptId,
    pub executor: ExecutorIndex,
}

#[cfg(test)]
mod tests {
    use super::wire::{decode_header, encode_header, kind, Header};
    use super::*;
    use crate::channel::StreamMessage;
    use crate::task::InputChannel;
    use eddy_rpc::{AttemptId, ExecutorIndex, Secret, Security, TlsConfig, TlsFiles};
    use eddy_types::Watermark;
    use std::collections::HashMap;
    use std::io::Read;
    use std::net::TcpListener;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

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
        let (tx, rx) = crate::channel::batch_channel::<(u64, String)>(8);
        let mut outbound = TypedOutbound::new(rx);
        tx.send(StreamMessage::Records(vec![(1, "a".into()), (2, "b".into())])).unwrap();
        tx.send(StreamMessage::Records(vec![(3, "c".into())])).unwrap();
        tx.send(StreamMessage::Watermark(Watermark(-5))).unwrap();
        tx.send(StreamMessage::EndOfInput).unwrap();
        drop(tx);
        let (in_tx, in_rx) = crate::channel::ChannelCapacity::Unbounded.channel::<(u64, String)>();
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
        let got: Vec<String> = std::iter::from_fn(|| in_rx.try_recv().ok()).map(|m| format!("{m:?}")).collect();
        assert_eq!(
            got,
            vec![
                "Records([(1, \"a\"), (2, \"b\"), (3, \"c\")])".to_string(),
                "Watermark(Watermark(-5))".into(),
                "EndOfInput".into()
            ]
        );
    }

    /// An unaligned checkpoint's barrier overtakes the producer's queue: announced at
    /// once, then copies of the records it passed (and of the watermarks among them) and
    /// the barrier itself, all without credit; the records themselves follow with credit. The consumer's channel hands
    /// the copies out at the barrier, and owes the credits of what it reads ahead.
    #[test]
    fn an_announced_barrier_overtakes_the_queue_with_copies_of_what_it_passed() {
        use crate::channel::CheckpointBarrier;
        use crate::task::in_flight::{Announcement, Backlog};
        use eddy_checkpoint::{CheckpointId, SnapshotKind};
        use std::sync::atomic::Ordering;
        let barrier = CheckpointBarrier { id: CheckpointId(7), kind: SnapshotKind::Checkpoint };
        let (tx, rx) = crate::channel::batch_channel::<u64>(8);
        let (announce_tx, announcements) = crossbeam_channel::unbounded();
        let backlog = Backlog::default();
        let overtaking = Overtaking { announcements, backlog: backlog.clone(), aligned_timeout: None };
        let mut outbound = TypedOutbound::new(rx).overtaking(overtaking);
        tx.send(StreamMessage::Records(vec![1, 2])).unwrap();
        tx.send(StreamMessage::Watermark(Watermark(5))).unwrap();
        tx.send(StreamMessage::Records(vec![3])).unwrap();
        announce_tx.send(Announcement { channel: 0, barrier }).unwrap();

        let key = ChannelKey { edge: 0, from: 0, to: 0 };
        let (in_tx, in_rx) = crate::channel::ChannelCapacity::Unbounded.channel::<u64>();
        let (inbox_tx, inbox_rx) = crossbeam_channel::unbounded();
        let (overtaken_tx, overtaken_rx) = crossbeam_channel::unbounded();
        let mut inbound = TypedInbound::new(in_tx).overtaken_by_barriers(inbox_tx, 3, overtaken_tx);
        let (credit_tx, credit_rx) = crossbeam_channel::unbounded();
        let input = RemoteInputChannel::new(in_rx, key, credit_tx, LostReason::default()).with_overtaken(overtaken_rx);

        let mut frame = Vec::new();
        let mut next = |outbound: &mut TypedOutbound<u64>, credit: bool, frame: &mut Vec<u8>| {
            frame.clear();
            let sent = outbound.next_frame(frame, credit).unwrap();
            if let Some((k, n)) = sent {
                inbound.deliver(k, n, frame).unwrap();
            }
            sent.map(|(k, _)| k)
        };
        assert_eq!(next(&mut outbound, false, &mut frame), Some(kind::ANNOUNCE), "announced at once, no credit");
        assert_eq!(inbox_rx.try_recv().unwrap(), Announcement { channel: 3, barrier });
        assert_eq!(next(&mut outbound, false, &mut frame), None, "the barrier is not queued yet");
        assert_eq!(backlog.load(Ordering::Relaxed), 3, "the drained queue counts against the producer");
        tx.send(StreamMessage::Barrier(barrier)).unwrap();
        tx.send(StreamMessage::Records(vec![4])).unwrap();
        assert_eq!(next(&mut outbound, false, &mut frame), Some(kind::OVERTAKEN));
        assert_eq!(next(&mut outbound, false, &mut frame), Some(kind::OVERTAKEN_WATERMARK));
        assert_eq!(next(&mut outbound, false, &mut frame), Some(kind::OVERTAKEN));
        assert_eq!(next(&mut outbound, false, &mut frame), Some(kind::BARRIER), "then the barrier, ahead");
        assert_eq!(next(&mut outbound, false, &mut frame), None, "the stashed records wait for credit");
        assert_eq!(next(&mut outbound, true, &mut frame), Some(kind::RECORDS));
        assert_eq!(next(&mut outbound, true, &mut frame), Some(kind::WATERMARK));
        assert_eq!(next(&mut outbound, true, &mut frame), Some(kind::RECORDS), "3, then 4 from the queue");
        assert_eq!(backlog.load(Ordering::Relaxed), 0);
        assert_eq!(next(&mut outbound, true, &mut frame), None);

        // The consumer reads ahead to the barrier: no credit back until a batch is processed.
        let (mut copies, mut watermarks) = (Vec::new(), Vec::new());
        let got = std::iter::from_fn(|| input.try_recv_ahead().ok()).collect::<Vec<_>>();
        assert_eq!(
            format!("{got:?}"),
            format!(
                "{:?}",
                vec![
                    StreamMessage::<u64>::Barrier(barrier),
                    StreamMessage::Records(vec![1, 2]),
                    StreamMessage::Watermark(Watermark(5)),
                    StreamMessage::Records(vec![3, 4])
                ]
            )
        );
        assert!(credit_rx.try_recv().is_err(), "reading ahead returns no credit");
        input.take_overtaken(&barrier, &mut copies, &mut watermarks);
        assert_eq!(copies, vec![1, 2, 3], "the copies of what the barrier passed, in order");
        let watermark = crate::task::in_flight::InFlightWatermark { after: 2, watermark: 5 };
        assert_eq!(watermarks, vec![watermark], "with the watermark at its place among them");
        input.release();
        assert_eq!(credit_rx.try_recv().unwrap(), key);

        // Copies of a checkpoint the consumer is done with (declined) do not pile up.
        let next = CheckpointBarrier { id: CheckpointId(8), ..barrier };
        let mut payload = Vec::new();
        payload.extend_from_slice(&8u64.to_le_bytes());
        payload.push(0);
        inbound.deliver(kind::ANNOUNCE, 0, &payload).unwrap();
        inbound.deliver(kind::OVERTAKEN, 1, &postcard::to_allocvec(&9u64).unwrap()).unwrap();
        input.discard_overtaken(CheckpointId(8));
        input.take_overtaken(&next, &mut copies, &mut watermarks);
        assert_eq!((copies, watermarks), (vec![1, 2, 3], vec![watermark]), "discarded");
    }

    /// With an aligned-checkpoint timeout a barrier goes in band if it can within the
    /// timeout, and overtakes only what still holds it back then.
    #[test]
    fn with_an_aligned_timeout_a_barrier_overtakes_only_once_the_timeout_passed() {
        use crate::channel::CheckpointBarrier;
        use crate::task::in_flight::{Announcement, Backlog};
        use eddy_checkpoint::{CheckpointId, SnapshotKind};
        let barrier = |id| CheckpointBarrier { id: CheckpointId(id), kind: SnapshotKind::Checkpoint };
        let (tx, rx) = crate::channel::batch_channel::<u64>(8);
        let (announce_tx, announcements) = crossbeam_channel::unbounded();
        let timeout = Duration::from_millis(50);
        let overtaking = Overtaking { announcements, backlog: Backlog::default(), aligned_timeout: Some(timeout) };
        let mut outbound = TypedOutbound::new(rx).overtaking(overtaking);
        let kinds = |outbound: &mut TypedOutbound<u64>, credit: bool| {
            let mut frame = Vec::new();
            std::iter::from_fn(|| outbound.next_frame(&mut frame, credit).unwrap().map(|(k, _)| k)).collect::<Vec<_>>()
        };
        tx.send(StreamMessage::Records(vec![1])).unwrap();
        announce_tx.send(Announcement { channel: 0, barrier: barrier(1) }).unwrap();
        tx.send(StreamMessage::Barrier(barrier(1))).unwrap();
        assert_eq!(kinds(&mut outbound, true), vec![kind::RECORDS, kind::BARRIER], "in band, in time");
        assert!(outbound.wake_at().is_none());

        tx.send(StreamMessage::Records(vec![2])).unwrap();
        announce_tx.send(Announcement { channel: 0, barrier: barrier(2) }).unwrap();
        tx.send(StreamMessage::Barrier(barrier(2))).unwrap();
        assert_eq!(kinds(&mut outbound, false), Vec::<u8>::new(), "no credit: the barrier waits its turn");
        assert!(outbound.wake_at().is_some());
        std::thread::sleep(timeout);
        let overtook = kinds(&mut outbound, false);
        assert_eq!(overtook, vec![kind::ANNOUNCE, kind::OVERTAKEN, kind::BARRIER], "then overtakes");
        assert_eq!(kinds(&mut outbound, true), vec![kind::RECORDS]);
    }

    #[test]
    fn a_truncated_records_frame_is_an_error() {
        let (in_tx, _in_rx) = crate::channel::ChannelCapacity::Unbounded.channel::<u64>();
        let mut inbound = TypedInbound::new(in_tx);
        assert!(inbound.deliver(kind::RECORDS, 2, &[7]).is_err());
        assert!(inbound.deliver(kind::BARRIER, 0, &[1, 2]).is_err());
    }

    /// Sends 5,000 records through a data connection, via a relay that records every
    /// byte on the wire; what the consumer got, and the wire's bytes.
    fn through_a_recording_relay(tls: bool) -> (Vec<String>, Vec<u8>) {
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
        let (in_tx, in_rx) = crate::channel::ChannelCapacity::Unbounded.channel::<String>();
        let (credit_tx, credit_rx) = crossbeam_channel::unbounded();
        let lost = LostReason::default();
        let channels = HashMap::from([(key, Box::new(TypedInbound::new(in_tx)) as Box<dyn InboundChannel>)]);
        let input = RemoteInputChannel::new(in_rx, key, credit_tx, lost.clone());
        let set = InboundSet {
            channels,
            counters: ChannelCounters::new(),
            initial_credit: 2,
            credits: credit_rx,
            lost,
            producer: "test".into(),
        };
        start_receivers(listener, security.clone(), AttemptId(7), HashMap::from([(ExecutorIndex(1), set)])).unwrap();

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

        let (tx, rx) = crate::channel::batch_channel::<String>(4);
        let outbound = OutboundSet {
            channels: vec![(key, Box::new(TypedOutbound::new(rx)) as Box<dyn OutboundChannel>)],
            counters: ChannelCounters::new(),
        };
        start_sender(
            &relay_address,
            &security,
            AttemptId(7),
            ExecutorIndex(1),
            outbound,
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
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
