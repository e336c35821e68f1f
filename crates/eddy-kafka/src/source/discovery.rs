//! Finding a reader's splits: the partitions of the subscribed topics it owns, where
//! they start (resolved once, at the job's first start) and in bounded mode where they
//! end; handing them to the consumer.

use super::split::{split_owner, FirstStart, PartitionSplit, EARLIEST};
use super::{KafkaSource, OffsetResetStrategy, StartingOffsets, REQUEST_TIMEOUT};
use crate::admin::probe_end_offsets;
use crate::KafkaConnectorError;
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

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

impl<T: 'static> KafkaSource<T> {
    /// Looks for partitions this reader owns and does not know yet; resolves where they
    /// start (and in bounded mode where they stop). Returns whether any was added.
    ///
    /// The first discovery of a job resolves the start (and bounded end) of *every*
    /// partition, and every reader keeps them (union state): a reader that had not
    /// discovered yet when a checkpoint was taken still starts its partitions where the
    /// job's start said, after a restore at any parallelism. Partitions found later start
    /// at their earliest offset; a bounded source reads only those of the first start.
    pub(super) fn discover(&mut self) -> Result<bool, KafkaConnectorError> {
        let brokers = self.brokers.clone();
        let (subtask, parallelism) = {
            let reader = self.reader()?;
            (reader.subtask, reader.parallelism)
        };
        let first_known = !self.reader()?.first_start.is_empty();
        let partitions: Vec<(String, i32)> = if self.bounded && first_known {
            self.reader()?.first_start.iter().map(|f| (f.topic.clone(), f.partition)).collect()
        } else {
            let metadata = self
                .reader()?
                .consumer
                .fetch_metadata(None, REQUEST_TIMEOUT)
                .map_err(|e| KafkaConnectorError::client("reading the topics' metadata", &brokers, e))?;
            let mut all = Vec::new();
            for topic in metadata.topics() {
                if self.subscription.matches(topic.name()) && topic.error().is_none() {
                    all.extend(topic.partitions().iter().map(|p| (topic.name().to_string(), p.id())));
                }
            }
            all.sort();
            all
        };
        if !first_known {
            let mut first = Vec::with_capacity(partitions.len());
            let mut rest = partitions.as_slice();
            while let Some((topic, _)) = rest.first() {
                let same = rest.iter().take_while(|(t, _)| t == topic).count();
                let ids: Vec<i32> = rest[..same].iter().map(|(_, p)| *p).collect();
                let ends = if self.bounded {
                    probe_end_offsets(&brokers, &self.properties, topic, &ids, REQUEST_TIMEOUT * 5)?
                        .into_iter()
                        .map(Some)
                        .collect()
                } else {
                    vec![None; ids.len()]
                };
                for (partition, stop) in ids.into_iter().zip(ends) {
                    let start = self.resolve_start(topic, partition)?;
                    first.push(FirstStart { topic: topic.clone(), partition, start, stop });
                }
                rest = &rest[same..];
            }
            self.reader()?.first_start = first;
        }
        let reader = self.reader()?;
        let found: Vec<(String, i32)> = partitions
            .into_iter()
            .filter(|(topic, id)| split_owner(topic, *id, parallelism) == subtask)
            .filter(|(topic, id)| !reader.splits.iter().any(|s| s.partition == *id && s.topic == *topic))
            .collect();
        let mut added = Vec::with_capacity(found.len());
        for (topic, partition) in found {
            let first = reader.first_start.iter().find(|f| f.topic == topic && f.partition == partition);
            let (next_offset, stop_offset) = match first {
                Some(first) => (first.start, first.stop),
                None => (EARLIEST, None),
            };
            added.push(PartitionSplit { topic, partition, next_offset, stop_offset });
        }
        if added.is_empty() {
            return Ok(false);
        }
        for split in &added {
            tracing::info!(
                subtask = reader.subtask,
                topic = %split.topic,
                partition = split.partition,
                start = split.next_offset,
                stop = ?split.stop_offset,
                "Kafka source: split assigned"
            );
        }
        reader.splits.extend(added);
        reader.assignment_stale = true;
        Ok(true)
    }

    /// Where `partition` ends now ("latest").
    fn high_watermark(&mut self, topic: &str, partition: i32) -> Result<i64, KafkaConnectorError> {
        let ends = probe_end_offsets(&self.brokers, &self.properties, topic, &[partition], REQUEST_TIMEOUT * 5)?;
        Ok(ends[0])
    }

    /// Where a partition found at the first start begins, as a concrete offset (or
    /// [`EARLIEST`]).
    pub(super) fn resolve_start(&mut self, topic: &str, partition: i32) -> Result<i64, KafkaConnectorError> {
        let brokers = self.brokers.clone();
        let fallback = |source: &mut Self, strategy: OffsetResetStrategy| -> Result<i64, KafkaConnectorError> {
            match strategy {
                OffsetResetStrategy::Earliest => Ok(EARLIEST),
                OffsetResetStrategy::Latest => source.high_watermark(topic, partition),
                OffsetResetStrategy::None => Err(KafkaConnectorError::Config(format!(
                    "no starting offset for {topic}/{partition} and no reset strategy"
                ))),
            }
        };
        match self.starting.clone() {
            StartingOffsets::Earliest => Ok(EARLIEST),
            StartingOffsets::Latest => self.high_watermark(topic, partition),
            StartingOffsets::Timestamp(at) => {
                let mut query = TopicPartitionList::new();
                query
                    .add_partition_offset(topic, partition, Offset::Offset(at))
                    .map_err(|e| KafkaConnectorError::client("building an offset query", &brokers, e))?;
                let answer = self.reader()?.consumer.offsets_for_times(query, REQUEST_TIMEOUT).map_err(|e| {
                    KafkaConnectorError::client(
                        format!("finding the offset of time {at} in {topic}/{partition}"),
                        &brokers,
                        e,
                    )
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
                let answer = self.reader()?.consumer.committed_offsets(query, REQUEST_TIMEOUT).map_err(|e| {
                    KafkaConnectorError::client(
                        format!("reading the committed offset of {topic}/{partition}"),
                        &brokers,
                        e,
                    )
                })?;
                match answer.find_partition(topic, partition).map(|e| e.offset()) {
                    Some(Offset::Offset(offset)) if offset >= 0 => Ok(offset),
                    _ => fallback(self, strategy),
                }
            }
            StartingOffsets::Offsets(offsets, strategy) => {
                match offsets.iter().find(|(t, p, _)| t == topic && *p == partition) {
                    Some((_, _, offset)) => Ok(*offset),
                    None => fallback(self, strategy),
                }
            }
        }
    }

    /// Hands the consumer the unfinished splits at their positions.
    pub(super) fn assign(&mut self) -> Result<(), KafkaConnectorError> {
        let brokers = self.brokers.clone();
        let reader = self.reader()?;
        let mut assignment = TopicPartitionList::new();
        for split in reader.splits.iter().filter(|s| !s.is_finished()) {
            let offset =
                if split.next_offset == EARLIEST { Offset::Beginning } else { Offset::Offset(split.next_offset) };
            assignment
                .add_partition_offset(&split.topic, split.partition, offset)
                .map_err(|e| KafkaConnectorError::client("building the assignment", &brokers, e))?;
        }
        reader
            .consumer
            .assign(&assignment)
            .map_err(|e| KafkaConnectorError::client("assigning partitions", &brokers, e))?;
        reader.assignment_stale = false;
        Ok(())
    }

    /// Bounded mode: a split whose position passed its stop offset without a record
    /// there (transaction markers, aborted records) is finished too.
    pub(super) fn check_positions(&mut self) -> Result<(), KafkaConnectorError> {
        let reader = self.reader()?;
        if !reader.splits.iter().any(|s| !s.is_finished()) {
            return Ok(());
        }
        let Ok(positions) = reader.consumer.position() else { return Ok(()) };
        let mut finished_any = false;
        for split in reader.splits.iter_mut().filter(|s| !s.is_finished()) {
            if let Some(Offset::Offset(position)) =
                positions.find_partition(&split.topic, split.partition).map(|e| e.offset())
            {
                if split.stop_offset.is_some_and(|stop| position >= stop) {
                    split.next_offset = split.next_offset.max(split.stop_offset.unwrap_or(0));
                    finished_any = true;
                }
            }
        }
        if finished_any {
            self.assign()?;
        }
        Ok(())
    }
}
