//! In-flight data of unaligned checkpoints (Flink's channel state): the records a
//! checkpoint's barrier overtook, written into the checkpoint and replayed on restore.
//!
//! eddy keeps the whole of it on the consumer's side. A producer that snapshots for an
//! unaligned checkpoint first *announces* the barrier to each consumer, beside the queue
//! (an unbounded [`Announcement`] channel per consumer input), then queues the barrier
//! behind its records as always. The consumer snapshots at the first announcement or
//! barrier, then reads each announced channel ahead up to its barrier, keeping what it read
//! to process next, and records every record a channel delivers before its barrier. So the
//! records queued between producer and consumer at the checkpoint, and those still on
//! their way, are in the consumer's part of the checkpoint, and in-process no queue is
//! reordered.
//!
//! Across processes the producer's queue is read by its network connection, not by the
//! consumer, so the barrier overtakes it there (see `network::Overtaking`): the
//! announcement crosses the network first, then copies of the records the barrier passed
//! in the queue, then the barrier; the records themselves follow with credit. The
//! consumer records what its channel delivered before the barrier, then the copies: a
//! barrier with copies makes its checkpoint unaligned at the consumer, however it was
//! read. What a consumer reads ahead keeps its network buffer's credit until processed,
//! so reading ahead lets no producer run further ahead.
//!
//! The records are stored per channel ([`InFlightChannel`]) as a union list state of the
//! consumer's head operator, [`IN_FLIGHT_STATE`]: at the same parallelism each subtask
//! gets its own back; at another every subtask gets all of them and keeps what is its own
//! now ([`keeps`]): by key group after a `key_by`, else the old consumer's share.
//!
//! Watermarks are in flight too (in Flink they travel inside the channel state's
//! buffers): every channel stores the watermark it had reached when the snapshot was
//! taken (a channel that delivered its barrier before took nothing after it), and a
//! recorded channel every watermark it delivered before its barrier, each at its place
//! among the records ([`InFlightWatermark`]). A restore hands them to the task's
//! watermark valve as it replays the records, so that a record late behind an
//! in-flight watermark is late after the restore too, and a window the watermark closes
//! closes before the records behind it. A channel with watermarks only stores no
//! records (empty bytes), and nothing checks it against the job's edges or chaining.
//! Watermarks are replayed only into the same channel: same producer, same consumer,
//! neither rescaled. Elsewhere a watermark of an old channel says nothing of
//! what the new channel will carry, so it is dropped, which only makes fewer records
//! late (the valve starts at the lowest watermark, as without a restore). The copies a
//! barrier overtook at a network producer carry the watermarks among them too, also when
//! it overtook watermarks but no record (a task that takes that checkpoint aligned leaves
//! them out: an aligned checkpoint stores no watermark).

use crate::channel::CheckpointBarrier;
use crate::graph::Partitioning;
use crossbeam_channel::{Receiver, Sender};
use eddy_checkpoint::OperatorSnapshot;
use eddy_state::operator::{ListDistribution, ListSnapshot};
use eddy_types::{KeyGroupRange, MaxParallelism};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// The operator list state that holds a task's in-flight data.
pub const IN_FLIGHT_STATE: &str = "eddy.in-flight";

/// The element type of [`IN_FLIGHT_STATE`]'s list as written now: channels with their
/// watermarks.
const IN_FLIGHT_TYPE: &str = "eddy::InFlightChannel/2";

/// The element type written before in-flight watermarks were stored (records only);
/// still read.
const IN_FLIGHT_TYPE_V1: &str = "eddy::InFlightChannel";

/// A producer's word that barrier `barrier` is queued in channel `channel` of the
/// consumer's input, behind records the consumer may read ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement {
    pub channel: usize,
    pub barrier: CheckpointBarrier,
}

/// A consumer input's announcements channel, both ends.
pub type Inbox = (Sender<Announcement>, Receiver<Announcement>);

/// Where a producer's writer announces barriers to one consumer input in this process, or
/// to the network connection to a consumer in another (which tells the consumer).
#[derive(Debug, Clone)]
pub struct AnnouncementTarget {
    pub inbox: Sender<Announcement>,
    /// The producer's channel among the consumer input's channels (unused by a network
    /// connection: the consumer's side knows it).
    pub channel: usize,
    /// The batches of this channel held beyond its queue (by the consumer that read them
    /// ahead, or by the connection that a barrier overtook them at): they count against
    /// the queue's capacity, so that neither lets a producer run further ahead.
    pub backlog: Backlog,
}

/// Batches held for one channel beyond its queue (read ahead or put back by the consumer,
/// or stashed by the producer's network connection).
pub type Backlog = Arc<AtomicUsize>;

/// Which edge and producer a channel of an input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelOrigin {
    /// The uid of the operator at the producer's end of the edge, and its output port.
    pub from_uid: String,
    pub from_port: u32,
    /// Which of the edges from that port into this input (the same stream may come twice).
    pub nth: u32,
    pub producer: u32,
    /// The producer's parallelism: a watermark replays into the same channel only if
    /// the producer was not rescaled.
    pub producers: u32,
}

/// One input of a task, for unaligned checkpoints: where each channel comes from, and
/// where producers announce barriers.
pub struct InputLayout {
    pub origins: Vec<ChannelOrigin>,
    /// Keeps the announcements channel open when no producer in this process announces
    /// (a closed channel would wake every wait at once).
    pub keep_open: Sender<Announcement>,
    /// Per channel, what the consumer holds of it beyond its queue.
    pub backlogs: Vec<Backlog>,
    pub announcements: Receiver<Announcement>,
}

/// Records to process before any input after a restore, the in-flight data of one old
/// channel.
pub struct ReplayChannel {
    pub input: usize,
    /// As in [`InFlightChannel::records`].
    pub records: Vec<u8>,
    /// After a `key_by` at another parallelism: keep only the records of these key groups.
    pub key_filter: Option<KeyFilter>,
    /// The old channel's watermarks, to hand to the valve as channel `channel` of the
    /// input (empty unless it is the same channel: see the module's overview).
    pub watermarks: Vec<InFlightWatermark>,
    pub channel: usize,
}

/// A watermark among a channel's in-flight records: it came after the first `after` of
/// them (0: before any, which is where the watermark the channel had reached at the
/// snapshot is stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightWatermark {
    pub after: u32,
    pub watermark: i64,
}

/// What a task recorded of one channel for an unaligned checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedChannel {
    /// The input (0, or 1 for a two-input operator's second), and the channel in it.
    pub input: usize,
    pub channel: usize,
    /// The records, encoded by the input's [`RecordCodec`].
    pub records: Vec<u8>,
    pub watermarks: Vec<InFlightWatermark>,
}

/// The key groups a restored subtask owns, and how to find a record's.
pub struct KeyFilter {
    /// A `KeySelectorFactory<T>` of the input's record type.
    pub selector: Arc<dyn Any + Send + Sync>,
    pub range: KeyGroupRange,
    pub max_parallelism: MaxParallelism,
}

/// A task's inputs as unaligned checkpoints see them.
pub struct ChannelLayout {
    /// The uid of the chain's head operator: its snapshot carries the in-flight data.
    pub head_uid: String,
    pub head_name: String,
    pub subtask: u32,
    pub parallelism: u32,
    pub inputs: Vec<InputLayout>,
    pub replay: Vec<ReplayChannel>,
}

/// The in-flight records and watermarks of one channel at a checkpoint, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightChannel {
    /// The consumer's input (0, or 1 for a two-input operator's second).
    pub input: u8,
    pub from_uid: String,
    pub from_port: u32,
    pub nth: u32,
    pub producer: u32,
    pub consumer: u32,
    pub consumer_parallelism: u32,
    /// The records, a postcard `Vec<T>` of the input's type (empty bytes: none, the
    /// channel had only watermarks).
    pub records: Vec<u8>,
    /// The producer's parallelism (0 in data written before watermarks were stored).
    pub producer_parallelism: u32,
    /// In order of `after`.
    pub watermarks: Vec<InFlightWatermark>,
}

/// [`InFlightChannel`] as written before watermarks were stored.
#[derive(Deserialize)]
struct InFlightChannelV1 {
    input: u8,
    from_uid: String,
    from_port: u32,
    nth: u32,
    producer: u32,
    consumer: u32,
    consumer_parallelism: u32,
    records: Vec<u8>,
}

impl From<InFlightChannelV1> for InFlightChannel {
    fn from(v1: InFlightChannelV1) -> Self {
        Self {
            input: v1.input,
            from_uid: v1.from_uid,
            from_port: v1.from_port,
            nth: v1.nth,
            producer: v1.producer,
            consumer: v1.consumer,
            consumer_parallelism: v1.consumer_parallelism,
            records: v1.records,
            producer_parallelism: 0,
            watermarks: Vec::new(),
        }
    }
}

/// Encodes, decodes and copies records of one input's type, for the untyped parts.
pub struct RecordCodec<T> {
    pub encode: fn(&[T]) -> Result<Vec<u8>, String>,
    pub decode: fn(&[u8]) -> Result<Vec<T>, String>,
    pub copy: fn(&T) -> T,
}

impl<T: Clone + Serialize + DeserializeOwned> RecordCodec<T> {
    pub fn new() -> Self {
        Self {
            encode: |records| postcard::to_allocvec(records).map_err(|e| eddy_types::chain(&e)),
            decode: |bytes| postcard::from_bytes(bytes).map_err(|e| eddy_types::chain(&e)),
            copy: T::clone,
        }
    }
}

impl<T: Clone + Serialize + DeserializeOwned> Default for RecordCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Adds `channels` to the snapshot of the chain's head (`layout.head_uid`), which a chain
/// head always makes; an empty list is not written.
pub fn attach(
    snapshots: &mut Vec<OperatorSnapshot>,
    layout: &ChannelLayout,
    channels: Vec<InFlightChannel>,
) -> Result<(), String> {
    if channels.is_empty() {
        return Ok(());
    }
    let elements = channels
        .iter()
        .map(|c| postcard::to_allocvec(c).map_err(|e| eddy_types::chain(&e)))
        .collect::<Result<_, _>>()?;
    let list = ListSnapshot {
        name: IN_FLIGHT_STATE.to_string(),
        distribution: ListDistribution::Union,
        element_type: IN_FLIGHT_TYPE.to_string(),
        elements,
    };
    match snapshots.iter_mut().find(|s| s.uid == layout.head_uid) {
        Some(head) => head.operator.lists.push(list),
        None => {
            let mut head = OperatorSnapshot {
                uid: layout.head_uid.clone(),
                name: layout.head_name.clone(),
                subtask: layout.subtask,
                parallelism: layout.parallelism,
                ..OperatorSnapshot::default()
            };
            head.operator.lists.push(list);
            snapshots.insert(0, head);
        }
    }
    Ok(())
}

/// Takes the in-flight data out of a restored head snapshot (the operator never sees it).
pub fn take_from(restored: &mut OperatorSnapshot) -> Result<Vec<InFlightChannel>, String> {
    let Some(at) = restored.operator.lists.iter().position(|l| l.name == IN_FLIGHT_STATE) else {
        return Ok(Vec::new());
    };
    let list = restored.operator.lists.remove(at);
    let decode: fn(&[u8]) -> Result<InFlightChannel, postcard::Error> = match list.element_type.as_str() {
        IN_FLIGHT_TYPE => |bytes| postcard::from_bytes(bytes),
        IN_FLIGHT_TYPE_V1 => |bytes| postcard::from_bytes::<InFlightChannelV1>(bytes).map(InFlightChannel::from),
        other => return Err(format!("in-flight data of an unknown kind '{other}' (written by a newer eddy?)")),
    };
    list.elements
        .iter()
        .map(|e| {
            let channel =
                decode(e).map_err(|e| format!("undecodable in-flight data: {e}", e = eddy_types::chain(&e)))?;
            if channel.input > 1 || channel.consumer >= channel.consumer_parallelism {
                return Err(format!(
                    "corrupt in-flight data: input {} of consumer {} of {}",
                    channel.input, channel.consumer, channel.consumer_parallelism
                ));
            }
            let records = channel.watermarks.iter().map(|w| w.after);
            if !records.clone().zip(records.skip(1)).all(|(a, b)| a <= b) {
                return Err(format!(
                    "corrupt in-flight data: watermarks out of order in the channel from '{}' (producer {})",
                    channel.from_uid, channel.producer
                ));
            }
            Ok(channel)
        })
        .collect()
}

/// Whether new subtask `subtask` of `parallelism` replays an old channel's records, coming
/// over an edge partitioned by `partitioning`: at the same parallelism its own; after a
/// `key_by` every channel, filtered by key group; a broadcast's copy of the old subtask
/// whose broadcast state it restores; otherwise the old subtasks it takes over.
pub fn keeps(channel: &InFlightChannel, partitioning: &Partitioning, subtask: u32, parallelism: u32) -> bool {
    if channel.consumer_parallelism == parallelism {
        return channel.consumer == subtask;
    }
    match partitioning {
        Partitioning::KeyGroups(_) => true,
        Partitioning::Broadcast => channel.consumer == subtask % channel.consumer_parallelism,
        Partitioning::Forward | Partitioning::Rebalance | Partitioning::Shuffle => {
            channel.consumer % parallelism == subtask
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(consumer: u32, of: u32) -> InFlightChannel {
        InFlightChannel {
            input: 0,
            from_uid: "src".into(),
            from_port: 0,
            nth: 0,
            producer: 0,
            consumer,
            consumer_parallelism: of,
            records: vec![1],
            producer_parallelism: 1,
            watermarks: vec![
                InFlightWatermark { after: 0, watermark: 7 },
                InFlightWatermark { after: 1, watermark: 9 },
            ],
        }
    }

    #[test]
    fn every_old_channel_is_replayed_exactly_once_at_any_parallelism() {
        for partitioning in [Partitioning::Rebalance, Partitioning::Forward, Partitioning::Shuffle] {
            for (old, new) in [(2, 2), (2, 3), (3, 2), (4, 1)] {
                for consumer in 0..old {
                    let takers = (0..new).filter(|&s| keeps(&channel(consumer, old), &partitioning, s, new)).count();
                    assert_eq!(takers, 1, "{old} -> {new}, old consumer {consumer}");
                }
            }
        }
    }

    #[test]
    fn in_flight_data_rides_on_the_head_snapshot_and_comes_back_out() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let layout = ChannelLayout {
            head_uid: "head".into(),
            head_name: "Head".into(),
            subtask: 1,
            parallelism: 2,
            inputs: vec![InputLayout { origins: Vec::new(), keep_open: tx, backlogs: Vec::new(), announcements: rx }],
            replay: Vec::new(),
        };
        let mut snapshots = Vec::new();
        attach(&mut snapshots, &layout, vec![channel(1, 2)]).unwrap();
        assert_eq!((snapshots.len(), snapshots[0].uid.as_str(), snapshots[0].subtask), (1, "head", 1));
        assert_eq!(take_from(&mut snapshots[0]).unwrap(), vec![channel(1, 2)]);
        let mut corrupt = Vec::new();
        attach(&mut corrupt, &layout, vec![channel(2, 2)]).unwrap();
        assert!(take_from(&mut corrupt[0]).unwrap_err().contains("corrupt in-flight data"));
        assert!(snapshots[0].operator.lists.is_empty(), "taken out, the operator never sees it");
        let mut disordered = channel(1, 2);
        disordered.watermarks.reverse();
        let mut stored = Vec::new();
        attach(&mut stored, &layout, vec![disordered]).unwrap();
        assert!(take_from(&mut stored[0]).unwrap_err().contains("watermarks out of order"));
        let codec = RecordCodec::<String>::new();
        let bytes = (codec.encode)(&["a".to_string(), "b".to_string()]).unwrap();
        assert_eq!((codec.decode)(&bytes).unwrap(), vec!["a".to_string(), "b".to_string()]);
    }

    /// In-flight data written before watermarks were stored still restores: its records,
    /// no watermarks; a kind of list this version does not know is refused by name.
    #[test]
    fn in_flight_data_of_the_first_format_restores_without_watermarks() {
        #[derive(Serialize)]
        struct V1<'a>(u8, &'a str, u32, u32, u32, u32, u32, Vec<u8>);
        let v1 = postcard::to_allocvec(&V1(1, "src", 0, 2, 3, 1, 2, vec![4, 5])).unwrap();
        let list = |element_type: &str| ListSnapshot {
            name: IN_FLIGHT_STATE.to_string(),
            distribution: ListDistribution::Union,
            element_type: element_type.to_string(),
            elements: vec![v1.clone()],
        };
        let mut head = OperatorSnapshot::default();
        head.operator.lists.push(list(IN_FLIGHT_TYPE_V1));
        let restored = take_from(&mut head).unwrap();
        let expected = InFlightChannel {
            input: 1,
            from_uid: "src".into(),
            from_port: 0,
            nth: 2,
            producer: 3,
            consumer: 1,
            consumer_parallelism: 2,
            records: vec![4, 5],
            producer_parallelism: 0,
            watermarks: Vec::new(),
        };
        assert_eq!(restored, vec![expected]);
        head.operator.lists.push(list("eddy::InFlightChannel/9"));
        assert!(take_from(&mut head).unwrap_err().contains("unknown kind 'eddy::InFlightChannel/9'"));
    }
}
