//! Finding splits, on the split enumerator's discovery thread: the partitions of the
//! subscribed topics not known yet, where each starts (the job's starting offsets at its
//! first discovery, the earliest offset for partitions found later) and in bounded mode
//! where it stops. Requests to the brokers block here, never on the JobMaster's thread.

use super::split::{PartitionSplit, EARLIEST};
use super::{OffsetResetStrategy, StartingOffsets, REQUEST_TIMEOUT};
use crate::admin::{high_watermarks, named_topic};
use crate::{KafkaConnectorError, KafkaProperties};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::time::Duration;

/// Which topics a source reads.
#[derive(Debug, Clone)]
pub enum Subscription {
    Topics(Vec<String>),
    /// Every topic whose whole name matches (internal topics starting with `_` excluded).
    Pattern(regex::Regex),
}

impl Subscription {
    pub(super) fn matches(&self, topic: &str) -> bool {
        match self {
            Self::Topics(topics) => topics.iter().any(|t| t == topic),
            Self::Pattern(pattern) => {
                !topic.starts_with('_') && pattern.find(topic).is_some_and(|m| m.start() == 0 && m.end() == topic.len())
            }
        }
    }
}

/// What discovery needs of a source's settings.
#[derive(Clone)]
pub(super) struct DiscoverySettings {
    pub(super) brokers: String,
    pub(super) subscription: Subscription,
    pub(super) group_id: String,
    pub(super) starting: StartingOffsets,
    pub(super) bounded: bool,
    pub(super) interval: Duration,
    pub(super) properties: KafkaProperties,
}

/// The discovery thread's own client and what it found so far.
pub(super) struct Discovery {
    settings: DiscoverySettings,
    consumer: BaseConsumer,
    /// Every partition already handed out (restored from the enumerator's state).
    known: BTreeSet<(String, i32)>,
    /// Whether the job's first discovery is done: later partitions start at the earliest.
    first_done: bool,
}

impl Discovery {
    pub(super) fn new(
        settings: DiscoverySettings,
        known: BTreeSet<(String, i32)>,
        first_done: bool,
    ) -> Result<Self, KafkaConnectorError> {
        let consumer: BaseConsumer = settings
            .properties
            .client_config(&settings.brokers, &[("group.id", &settings.group_id), ("enable.auto.commit", "false")])
            .create()
            .map_err(|e| KafkaConnectorError::client("creating the split enumerator's client", &settings.brokers, e))?;
        Ok(Self { settings, consumer, known, first_done })
    }

    pub(super) fn is_first_done(&self) -> bool {
        self.first_done
    }

    /// The partitions not known yet, as splits with their start (and bounded stop)
    /// resolved; they are known from now on. The first successful call of a job resolves
    /// the job's starting offsets.
    pub(super) fn discover(&mut self) -> Result<Vec<PartitionSplit>, KafkaConnectorError> {
        let brokers = self.settings.brokers.clone();
        let metadata = self
            .consumer
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| KafkaConnectorError::client("reading the topics' metadata", &brokers, e))?;
        if self.settings.bounded {
            self.check_named_topics(metadata.topics())?;
        }
        let mut found: Vec<(String, i32)> = Vec::new();
        for topic in metadata.topics() {
            if self.settings.subscription.matches(topic.name()) && topic.error().is_none() {
                for partition in topic.partitions() {
                    let key = (topic.name().to_string(), partition.id());
                    if !self.known.contains(&key) {
                        found.push(key);
                    }
                }
            }
        }
        found.sort();
        let mut splits = Vec::with_capacity(found.len());
        let mut rest = found.as_slice();
        while let Some((topic, _)) = rest.first() {
            let same = rest.iter().take_while(|(t, _)| t == topic).count();
            let ids: Vec<i32> = rest[..same].iter().map(|(_, p)| *p).collect();
            let stops: Vec<Option<i64>> = if self.settings.bounded {
                let ends = high_watermarks(&brokers, &self.settings.properties, topic, &ids, REQUEST_TIMEOUT * 5)?;
                ends.into_iter().map(Some).collect()
            } else {
                vec![None; ids.len()]
            };
            for (partition, stop_offset) in ids.into_iter().zip(stops) {
                let next_offset = if self.first_done { EARLIEST } else { self.resolve_start(topic, partition)? };
                splits.push(PartitionSplit { topic: topic.clone(), partition, next_offset, stop_offset });
            }
            rest = &rest[same..];
        }
        self.known.extend(found);
        self.first_done = true;
        Ok(splits)
    }

    /// A bounded source reads its topics as they are when the job starts, once: a named
    /// topic the brokers do not have would make it finish at once without that topic's
    /// records, as if it were empty. So a missing one fails the job by name (as Flink's
    /// topic-list subscriber does), and one the brokers report an error for is asked
    /// again, like a failed request.
    fn check_named_topics(&self, topics: &[rdkafka::metadata::MetadataTopic]) -> Result<(), KafkaConnectorError> {
        let Subscription::Topics(names) = &self.settings.subscription else { return Ok(()) };
        for name in names {
            named_topic(topics, name, &self.settings.brokers).map_err(|error| match error {
                KafkaConnectorError::Config(message) => KafkaConnectorError::Config(format!(
                    "{message}: a bounded source reads its topics as they are when the job starts"
                )),
                retried => retried,
            })?;
        }
        Ok(())
    }

    /// Where `partition` ends now ("latest").
    fn high_watermark(&self, topic: &str, partition: i32) -> Result<i64, KafkaConnectorError> {
        let (brokers, properties) = (&self.settings.brokers, &self.settings.properties);
        let ends = high_watermarks(brokers, properties, topic, &[partition], REQUEST_TIMEOUT * 5)?;
        Ok(ends[0])
    }

    /// Where a partition found at the first discovery begins, as a concrete offset (or
    /// [`EARLIEST`]).
    fn resolve_start(&self, topic: &str, partition: i32) -> Result<i64, KafkaConnectorError> {
        let brokers = &self.settings.brokers;
        let fallback = |strategy: &OffsetResetStrategy| -> Result<i64, KafkaConnectorError> {
            match strategy {
                OffsetResetStrategy::Earliest => Ok(EARLIEST),
                OffsetResetStrategy::Latest => self.high_watermark(topic, partition),
                OffsetResetStrategy::None => Err(KafkaConnectorError::Config(format!(
                    "no starting offset for {topic}/{partition} and no reset strategy"
                ))),
            }
        };
        match &self.settings.starting {
            StartingOffsets::Earliest => Ok(EARLIEST),
            StartingOffsets::Latest => self.high_watermark(topic, partition),
            StartingOffsets::Timestamp(at) => {
                let mut query = TopicPartitionList::new();
                query
                    .add_partition_offset(topic, partition, Offset::Offset(*at))
                    .map_err(|e| KafkaConnectorError::client("building an offset query", brokers, e))?;
                let answer = self.consumer.offsets_for_times(query, REQUEST_TIMEOUT).map_err(|e| {
                    let action = format!("finding the offset of time {at} in {topic}/{partition}");
                    KafkaConnectorError::client(action, brokers, e)
                })?;
                match answer.find_partition(topic, partition).map(|e| e.offset()) {
                    Some(Offset::Offset(offset)) => Ok(offset),
                    // No record at or after the time: start at the end.
                    _ => self.high_watermark(topic, partition),
                }
            }
            StartingOffsets::Committed(strategy) => {
                let mut query = TopicPartitionList::new();
                query.add_partition(topic, partition);
                let answer = self.consumer.committed_offsets(query, REQUEST_TIMEOUT).map_err(|e| {
                    let action = format!("reading the committed offset of {topic}/{partition}");
                    KafkaConnectorError::client(action, brokers, e)
                })?;
                match answer.find_partition(topic, partition).map(|e| e.offset()) {
                    Some(Offset::Offset(offset)) if offset >= 0 => Ok(offset),
                    _ => fallback(strategy),
                }
            }
            StartingOffsets::Offsets(offsets, strategy) => {
                match offsets.iter().find(|(t, p, _)| t == topic && *p == partition) {
                    Some((_, _, offset)) => Ok(*offset),
                    None => fallback(strategy),
                }
            }
        }
    }
}
