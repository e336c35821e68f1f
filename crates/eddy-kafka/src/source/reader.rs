//! A running reader (Flink's `KafkaSourceReader`): its consumer, the splits it owns (from
//! its restored state and the enumerator's events), and how they are handed to the
//! consumer.

use super::enumerator::SourceEvent;
use super::split::{PartitionSplit, EARLIEST};
use super::{KafkaSource, WARN_EVERY};
use crate::KafkaConnectorError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::Instant;

/// One running reader: its consumer and the splits it owns.
pub(super) struct Reader {
    pub(super) consumer: BaseConsumer,
    pub(super) subtask: u32,
    /// Owned splits, finished ones included (bounded mode keeps them in its state).
    pub(super) splits: Vec<PartitionSplit>,
    /// Bounded mode: the enumerator handed out every split.
    pub(super) no_more_splits: bool,
    pub(super) assignment_stale: bool,
    /// Positions taken at each checkpoint, committed when it completes.
    pub(super) pending_commits: BTreeMap<u64, Vec<(String, i32, i64)>>,
    pub(super) last_warning: Option<Instant>,
}

impl Reader {
    pub(super) fn warn(&mut self, what: &str, error: &dyn std::fmt::Display, brokers: &str) {
        if self.last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.last_warning = Some(Instant::now());
            tracing::warn!(subtask = self.subtask, brokers, "Kafka source: {what}: {error}; retrying");
        }
    }

    /// Whether every split it owns is read to its end and no more will come.
    pub(super) fn is_done(&self) -> bool {
        self.no_more_splits && self.splits.iter().all(PartitionSplit::is_finished)
    }
}

impl<T: 'static> KafkaSource<T> {
    pub(super) fn reader(&mut self) -> Result<&mut Reader, KafkaConnectorError> {
        self.reader
            .as_deref_mut()
            .ok_or_else(|| KafkaConnectorError::Config("the Kafka source was not initialized".into()))
    }

    /// An event from the split enumerator. A split the reader holds already (restored from
    /// a checkpoint the enumerator's state predates) keeps its restored position.
    pub(super) fn on_event(&mut self, event: SourceEvent) -> Result<(), KafkaConnectorError> {
        let reader = self.reader()?;
        match event {
            SourceEvent::AddSplits(splits) => {
                for split in splits {
                    if reader.splits.iter().any(|s| s.partition == split.partition && s.topic == split.topic) {
                        continue;
                    }
                    tracing::debug!(subtask = reader.subtask, topic = %split.topic, partition = split.partition, "Kafka source: split received");
                    reader.splits.push(split);
                    reader.assignment_stale = true;
                }
            }
            SourceEvent::NoMoreSplits => reader.no_more_splits = true,
        }
        Ok(())
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
