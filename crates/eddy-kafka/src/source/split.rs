//! Partitions as splits (Flink's `KafkaPartitionSplit`): which reader owns which, and the
//! position of each in the source's operator state.

use serde::{Deserialize, Serialize};

/// Offset marker: start at the partition's first record (resolved by the reader; an
/// "earliest" start cannot lose data, so it need not be made concrete first).
pub const EARLIEST: i64 = -2;

/// One partition and how far it has been read: what a checkpoint holds per split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSplit {
    pub topic: String,
    pub partition: i32,
    /// The offset of the next record to read, or [`EARLIEST`].
    pub next_offset: i64,
    /// Bounded mode: the offset where reading ends (exclusive), fixed at the first start.
    pub stop_offset: Option<i64>,
}

impl PartitionSplit {
    /// A bounded split that has read everything up to its stop offset.
    pub fn is_finished(&self) -> bool {
        matches!(self.stop_offset, Some(stop) if self.next_offset >= stop || stop == 0)
    }
}

/// Java's `String.hashCode`, over UTF-16 code units, as Flink's owner function uses it:
/// the same topic maps to the same readers in eddy as in Flink.
fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| hash.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The reader (subtask index) that owns `partition` of `topic` among `readers` (Flink's
/// `KafkaSourceEnumerator.getSplitOwner`): a topic's partitions go round-robin from a
/// start that depends on the topic, so that several topics spread evenly.
pub fn split_owner(topic: &str, partition: i32, readers: u32) -> u32 {
    let readers = readers.max(1) as i64;
    let start = (i64::from(java_string_hash(topic).wrapping_mul(31)) & 0x7fff_ffff) % readers;
    ((start + i64::from(partition)) % readers) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_java() {
        // "orders".hashCode() in Java is -1008770331; "" is 0.
        assert_eq!(java_string_hash("orders"), -1008770331);
        assert_eq!(java_string_hash(""), 0);
    }

    #[test]
    fn every_partition_has_exactly_one_owner_and_spreads_evenly() {
        for readers in 1..=7 {
            let mut load = vec![0; readers as usize];
            for partition in 0..35 {
                load[split_owner("access-log", partition, readers) as usize] += 1;
            }
            assert!(load.iter().all(|&n| n == 35 / readers as i32 || n == 35 / readers as i32 + 1), "{load:?}");
        }
    }
}
