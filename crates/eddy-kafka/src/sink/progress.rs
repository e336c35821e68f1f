//! Progress markers of the exactly-once sink: per sink slot, the last epoch (checkpoint)
//! whose records were committed, written in the same Kafka transaction as the records,
//! to a one-partition topic. Read back with `read_committed` after fencing, the marker
//! says which restored epochs Kafka already has (Materialize's progress topic).

use crate::admin::{create_topic_with, read_committed_up_to, DEFAULT_REPLICATION};
use crate::{KafkaConnectorError, KafkaProperties};
use rdkafka::message::Message;
use std::time::Duration;

/// The default progress topic.
pub const PROGRESS_TOPIC_DEFAULT: &str = "_eddy_sink_progress";

/// How long reading the markers may wait for transactions that hold the topic back.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A slot's marker: the lineage (one per fresh start of a sink slot) and the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marker {
    pub(crate) lineage: u64,
    pub(crate) epoch: u64,
}

impl Marker {
    pub(crate) fn encode(self) -> String {
        format!("{:016x} {}", self.lineage, self.epoch)
    }

    fn decode(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let (lineage, epoch) = text.split_once(' ')?;
        Some(Self { lineage: u64::from_str_radix(lineage, 16).ok()?, epoch: epoch.parse().ok()? })
    }
}

/// The key of a slot's markers.
pub(crate) fn marker_key(transactional_id_prefix: &str, slot: u32) -> String {
    format!("{transactional_id_prefix}/{slot}")
}

/// Creates the progress topic if it is missing: one partition, compacted, replicated as
/// the brokers' default; through the sink's own client settings (security included).
pub(crate) fn ensure_progress_topic(
    brokers: &str,
    properties: &KafkaProperties,
    topic: &str,
) -> Result<(), KafkaConnectorError> {
    create_topic_with(brokers, properties, topic, 1, DEFAULT_REPLICATION, &[("cleanup.policy", "compact")])
}

/// The last committed marker under `key`, reading the whole topic up to the end that
/// uncommitted readers see: once every transaction before it was decided, a committed
/// reader's position passes that end, and nothing committed can hide behind it.
pub(crate) fn read_marker(
    brokers: &str,
    properties: &KafkaProperties,
    topic: &str,
    key: &str,
) -> Result<Option<Marker>, KafkaConnectorError> {
    // The end uncommitted readers see: every marker ever written lies before it, also
    // those of transactions still open (another slot's, aborted when its new owner fences
    // it). A committed reader passes it only once they are all decided; stopping at the
    // last stable offset instead could miss this slot's newest marker behind another
    // slot's open transaction, and send an epoch again that Kafka already has.
    let mut uncommitted = properties.clone();
    uncommitted.set("isolation.level", "read_uncommitted");
    let end = crate::admin::high_watermarks(brokers, &uncommitted, topic, &[0], Duration::from_secs(30))?[0];
    let mut marker = None;
    read_committed_up_to(brokers, properties, "eddy-progress", topic, &[(0, end)], READ_TIMEOUT, |message| {
        if message.key() == Some(key.as_bytes()) {
            marker = message.payload().and_then(Marker::decode).or(marker);
        }
    })?;
    Ok(marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_refuse_garbage() {
        let marker = Marker { lineage: 0xdead_beef, epoch: u64::MAX };
        assert_eq!(Marker::decode(marker.encode().as_bytes()), Some(marker));
        assert_eq!(Marker::decode(b"xyz 1"), None);
        assert_eq!(Marker::decode(b"00ff"), None);
        assert_eq!(Marker::decode(&[0xff, 0x20, 0x31]), None);
    }
}
