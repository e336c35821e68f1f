//! A running reader (Flink's `KafkaSourceReader`): its consumer, the splits it owns (from
//! its restored state and the enumerator's events), how they are handed to the consumer,
//! and its progress (position and end offset per split) for the enumerator's consumer lag.

use super::enumerator::{ReaderEvent, SourceEvent, SplitProgress};
use super::split::{PartitionSplit, EARLIEST};
use super::{KafkaSource, WARN_EVERY};
use crate::KafkaConnectorError;
use eddy_runtime::coordination::OperatorEventGateway;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::{ClientContext, Offset, Statistics, TopicPartitionList};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a reader reports its progress to the enumerator (and librdkafka its
/// statistics to the reader).
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How long a paused reader waits for one partition's end offset: the task thread waits
/// with it (a checkpoint too), so a broker that does not answer costs this once a round.
const PAUSED_END_OFFSET_TIMEOUT: Duration = Duration::from_millis(200);

/// The reader's consumer context: per partition, the first and the end offset readable
/// (the last stable offset for `read_committed`, librdkafka's default) from librdkafka's
/// statistics. Locked once per statistics report and once per progress report, never per
/// record.
#[derive(Default)]
pub(super) struct EndOffsets(Mutex<HashMap<(String, i32), (i64, i64)>>);

impl ClientContext for EndOffsets {
    fn stats(&self, statistics: Statistics) {
        let Ok(mut ends) = self.0.lock() else { return };
        for (topic, stats) in statistics.topics {
            for (partition, p) in stats.partitions {
                let end = if p.ls_offset >= 0 { p.ls_offset } else { p.hi_offset };
                if partition >= 0 && end >= 0 {
                    ends.insert((topic.clone(), partition), (p.lo_offset.max(0), end));
                }
            }
        }
    }
}

impl ConsumerContext for EndOffsets {}

/// One running reader: its consumer and the splits it owns.
pub(super) struct Reader {
    pub(super) consumer: BaseConsumer<EndOffsets>,
    /// Its way to the split enumerator (`None` when a test runs the task alone).
    pub(super) gateway: Option<OperatorEventGateway>,
    pub(super) next_progress: Instant,
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

    /// Every [`PROGRESS_EVERY`]: tells the enumerator each unfinished split's position and
    /// end offset (consumer lag).
    pub(super) fn report_progress(&mut self) {
        let now = Instant::now();
        if now < self.next_progress {
            return;
        }
        self.next_progress = now + PROGRESS_EVERY;
        let Some(gateway) = &self.gateway else { return };
        let ends = match self.consumer.context().0.lock() {
            Ok(ends) => ends.clone(),
            Err(_) => return,
        };
        let progress: Vec<SplitProgress> = self
            .splits
            .iter()
            .filter_map(|s| {
                let (topic, partition) = (s.topic.clone(), s.partition);
                if s.is_finished() {
                    // Read to its stop offset: nothing of it is behind any more.
                    let end = s.next_offset.max(0);
                    return Some(SplitProgress { topic, partition, position: end, end });
                }
                let &(first, end) = ends.get(&(topic.clone(), partition))?;
                let position = if s.next_offset == EARLIEST { first } else { s.next_offset };
                Some(SplitProgress { topic, partition, position, end })
            })
            .collect();
        if !progress.is_empty() {
            gateway.send(ReaderEvent::Progress(progress).encode());
        }
    }

    /// While watermark alignment holds the reader back it polls nothing, so librdkafka's
    /// statistics (served by polls, and fed by fetches) stop: every [`PROGRESS_EVERY`] the
    /// end offsets are asked of the brokers instead (as the consumer reads them: the last
    /// stable offset for `read_committed`), and the progress goes out as usual. A failed
    /// request ends the round; the next one asks again.
    pub(super) fn report_progress_while_paused(&mut self, brokers: &str) {
        if Instant::now() < self.next_progress {
            return;
        }
        let unfinished: Vec<(String, i32)> =
            self.splits.iter().filter(|s| !s.is_finished()).map(|s| (s.topic.clone(), s.partition)).collect();
        for (topic, partition) in unfinished {
            match self.consumer.fetch_watermarks(&topic, partition, PAUSED_END_OFFSET_TIMEOUT) {
                Ok((first, end)) => {
                    if let Ok(mut ends) = self.consumer.context().0.lock() {
                        ends.insert((topic, partition), (first.max(0), end));
                    }
                }
                Err(error) => {
                    self.warn(&format!("reading the end offset of {topic}/{partition} while paused"), &error, brokers);
                    break;
                }
            }
        }
        self.report_progress();
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
                    tracing::debug!(
                        subtask = reader.subtask,
                        topic = %split.topic,
                        partition = split.partition,
                        "Kafka source: split received"
                    );
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
