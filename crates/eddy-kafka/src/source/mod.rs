//! [`KafkaSource`]: reads topics (by list or pattern) as splits, one per partition.
//!
//! Every reader (source subtask) finds the partitions it owns from the brokers' metadata
//! by [`split_owner`] and reads them with one librdkafka consumer in manual-assignment
//! mode (`assign`, never `subscribe`: Kafka's group rebalancing would fight eddy's own
//! assignment). Each split's next offset is union operator state, so after a restore, at
//! any parallelism, every reader sees every split and keeps exactly those it owns now.
//! Discovery runs again every `partition_discovery_interval`; a partition found after the
//! first discovery starts at its earliest offset.
//!
//! Offsets are committed to the consumer group only after a checkpoint completes, for
//! lag tools; a restore always uses the checkpointed positions (as in Flink).

mod offsets;
mod record;
mod split;

pub use offsets::{OffsetResetStrategy, StartingOffsets};
pub use record::{utf8_values, BadRecord, KafkaDeserializationSchema, KafkaRecord};
pub use split::{split_owner, FirstStart, PartitionSplit, EARLIEST};

use crate::admin::probe_end_offsets;
use crate::{KafkaConnectorError, KafkaProperties};
use eddy_api::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_api::time::{TimestampFn, WatermarkGenerator, WatermarkOutput, WatermarkStrategy};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;
use eddy_types::CheckpointId;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SPLITS_STATE: &str = "kafka-source-splits";
const FIRST_START_STATE: &str = "kafka-source-first-start";
/// Flink's `partition.discovery.interval.ms` default.
pub const PARTITION_DISCOVERY_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);
/// How long one metadata or offset request to the brokers may block the source's task.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How often "the brokers cannot be reached" is logged while it lasts.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Which topics a source reads.
#[derive(Debug, Clone)]
pub enum Subscription {
    Topics(Vec<String>),
    /// Every topic whose whole name matches (internal topics starting with `_` excluded).
    Pattern(regex::Regex),
}

impl Subscription {
    fn matches(&self, topic: &str) -> bool {
        match self {
            Self::Topics(topics) => topics.iter().any(|t| t == topic),
            Self::Pattern(pattern) => {
                !topic.starts_with('_') && pattern.find(topic).is_some_and(|m| m.start() == 0 && m.end() == topic.len())
            }
        }
    }
}

/// Flink's `KafkaSource`, built like Flink's `KafkaSource.builder()`.
pub struct KafkaSource<T> {
    brokers: String,
    subscription: Subscription,
    group_id: String,
    starting: StartingOffsets,
    bounded: bool,
    discovery_interval: Duration,
    commit_offsets_on_checkpoint: bool,
    properties: KafkaProperties,
    schema: Arc<dyn KafkaDeserializationSchema<T>>,
    watermarks: Option<WatermarkStrategy<T>>,
    reader: Option<Box<Reader>>,
    /// Event time per split, in the order of the reader's splits.
    clocks: Vec<SplitClock<T>>,
    next_periodic: Option<Instant>,
}

/// One split's event time: its own watermark generator (Flink's per-split watermarks),
/// the highest watermark it made, and whether records came lately.
struct SplitClock<T> {
    generator: Box<dyn WatermarkGenerator<T>>,
    output: WatermarkOutput,
    watermark: i64,
    active_since_last_look: bool,
    last_active: Instant,
    idle: bool,
}

impl<T> Clone for KafkaSource<T> {
    /// A copy of the configuration; the running reader stays with the original.
    fn clone(&self) -> Self {
        Self {
            brokers: self.brokers.clone(),
            subscription: self.subscription.clone(),
            group_id: self.group_id.clone(),
            starting: self.starting.clone(),
            bounded: self.bounded,
            discovery_interval: self.discovery_interval,
            commit_offsets_on_checkpoint: self.commit_offsets_on_checkpoint,
            properties: self.properties.clone(),
            schema: self.schema.clone(),
            watermarks: self.watermarks.clone(),
            reader: None,
            clocks: Vec::new(),
            next_periodic: None,
        }
    }
}

impl<T: 'static> KafkaSource<T> {
    /// A source reading `topics` from `brokers` (`host:port,...`) through `schema`.
    pub fn new(brokers: &str, topics: &[&str], schema: impl KafkaDeserializationSchema<T>) -> Self {
        Self {
            brokers: brokers.to_string(),
            subscription: Subscription::Topics(topics.iter().map(|t| t.to_string()).collect()),
            group_id: "eddy".into(),
            starting: StartingOffsets::Earliest,
            bounded: false,
            discovery_interval: PARTITION_DISCOVERY_INTERVAL_DEFAULT,
            commit_offsets_on_checkpoint: true,
            properties: KafkaProperties::default(),
            schema: Arc::new(schema),
            watermarks: None,
            reader: None,
            clocks: Vec::new(),
            next_periodic: None,
        }
    }

    /// Watermarks per partition (Flink's `fromSource(source, strategy, ..)`): each split
    /// has its own generator from `strategy`, the source's watermark is the lowest of its
    /// splits that are not idle, a split without records for the strategy's idleness
    /// timeout holds nobody back, and a reader without splits is idle at once. The
    /// stream's records get the strategy's timestamps (it needs a timestamp assigner).
    pub fn with_watermarks(mut self, strategy: WatermarkStrategy<T>) -> Self {
        self.watermarks = Some(strategy);
        self
    }

    /// Reads every topic whose name matches `pattern` as a whole (Flink's `setTopicPattern`).
    pub fn with_topic_pattern(mut self, pattern: &str) -> Result<Self, KafkaConnectorError> {
        let pattern = regex::Regex::new(pattern)
            .map_err(|e| KafkaConnectorError::Config(format!("topic pattern {pattern:?}: {e}")))?;
        self.subscription = Subscription::Pattern(pattern);
        Ok(self)
    }

    /// The consumer group offsets are committed to (for lag tools) and read from with
    /// [`StartingOffsets::Committed`]. Default `eddy`.
    pub fn with_group_id(mut self, group: &str) -> Self {
        self.group_id = group.to_string();
        self
    }

    pub fn with_starting_offsets(mut self, starting: StartingOffsets) -> Self {
        self.starting = starting;
        self
    }

    /// Stops at the end offsets seen at the first start (Flink's `setBounded(latest())`);
    /// they are kept in checkpoints, so a restore stops at the same place. No partition
    /// discovery after the first.
    pub fn bounded(mut self) -> Self {
        self.bounded = true;
        self
    }

    /// How often new partitions are looked for (default 5 min; zero: only at start).
    pub fn with_partition_discovery_interval(mut self, interval: Duration) -> Self {
        self.discovery_interval = interval;
        self
    }

    /// Whether offsets go back to the consumer group when a checkpoint completes
    /// (default yes; Flink's `commit.offsets.on.checkpoint`).
    pub fn with_commit_offsets_on_checkpoint(mut self, commit: bool) -> Self {
        self.commit_offsets_on_checkpoint = commit;
        self
    }

    /// A librdkafka consumer property (Flink's `setProperty`).
    pub fn with_property(mut self, key: &str, value: &str) -> Self {
        self.properties.set(key, value);
        self
    }

    /// Emits records the schema cannot read as `Err(BadRecord)` instead of failing the
    /// job, for the job to route to a side output.
    pub fn routing_bad_records(self) -> KafkaSource<Result<T, BadRecord>>
    where
        T: Send + Sync,
    {
        let inner = self.schema.clone();
        let schema = move |record: &KafkaRecord<'_>| -> Result<Option<Result<T, BadRecord>>, String> {
            Ok(match inner.deserialize(record) {
                Ok(value) => value.map(Ok),
                Err(error) => Some(Err(BadRecord {
                    topic: record.topic().to_string(),
                    partition: record.partition(),
                    offset: record.offset(),
                    error,
                    key: record.key().map(<[u8]>::to_vec),
                    value: record.value().map(<[u8]>::to_vec),
                })),
            })
        };
        KafkaSource {
            brokers: self.brokers,
            subscription: self.subscription,
            group_id: self.group_id,
            starting: self.starting,
            bounded: self.bounded,
            discovery_interval: self.discovery_interval,
            commit_offsets_on_checkpoint: self.commit_offsets_on_checkpoint,
            properties: self.properties,
            schema: Arc::new(schema),
            watermarks: None,
            reader: None,
            clocks: Vec::new(),
            next_periodic: None,
        }
    }
}

/// One running reader: its consumer and the splits it owns.
struct Reader {
    consumer: BaseConsumer,
    subtask: u32,
    parallelism: u32,
    /// Owned splits, finished ones included (bounded mode keeps them in its state).
    splits: Vec<PartitionSplit>,
    /// Every partition of the job's first start with where it starts (and in bounded mode
    /// ends), resolved by whichever reader discovered first and kept by all.
    first_start: Vec<FirstStart>,
    next_discovery: Option<Instant>,
    assignment_stale: bool,
    /// Positions taken at each checkpoint, committed when it completes.
    pending_commits: BTreeMap<u64, Vec<(String, i32, i64)>>,
    last_warning: Option<Instant>,
}

impl Reader {
    fn warn(&mut self, what: &str, error: &dyn std::fmt::Display, brokers: &str) {
        if self.last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.last_warning = Some(Instant::now());
            tracing::warn!(subtask = self.subtask, brokers, "Kafka source: {what}: {error}; retrying");
        }
    }
}

impl<T: 'static> KafkaSource<T> {
    fn reader(&mut self) -> Result<&mut Reader, KafkaConnectorError> {
        self.reader
            .as_deref_mut()
            .ok_or_else(|| KafkaConnectorError::Config("the Kafka source was not initialized".into()))
    }

    /// Looks for partitions this reader owns and does not know yet; resolves where they
    /// start (and in bounded mode where they stop). Returns whether any was added.
    ///
    /// The first discovery of a job resolves the start (and bounded end) of *every*
    /// partition, and every reader keeps them (union state): a reader that had not
    /// discovered yet when a checkpoint was taken still starts its partitions where the
    /// job's start said, after a restore at any parallelism. Partitions found later start
    /// at their earliest offset; a bounded source reads only those of the first start.
    fn discover(&mut self) -> Result<bool, KafkaConnectorError> {
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

    /// One clock per split, new splits' clocks made here.
    fn sync_clocks(&mut self) {
        let Some(strategy) = &self.watermarks else { return };
        let splits = self.reader.as_deref().map_or(0, |r| r.splits.len());
        while self.clocks.len() < splits {
            self.clocks.push(SplitClock {
                generator: strategy.create_watermark_generator(),
                output: WatermarkOutput::default(),
                watermark: i64::MIN,
                active_since_last_look: false,
                last_active: Instant::now(),
                idle: false,
            });
        }
    }

    /// Where `partition` ends now ("latest").
    fn high_watermark(&mut self, topic: &str, partition: i32) -> Result<i64, KafkaConnectorError> {
        let ends = probe_end_offsets(&self.brokers, &self.properties, topic, &[partition], REQUEST_TIMEOUT * 5)?;
        Ok(ends[0])
    }

    /// Where a partition found at the first start begins, as a concrete offset (or
    /// [`EARLIEST`]).
    fn resolve_start(&mut self, topic: &str, partition: i32) -> Result<i64, KafkaConnectorError> {
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
    fn assign(&mut self) -> Result<(), KafkaConnectorError> {
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
    fn check_positions(&mut self) -> Result<(), KafkaConnectorError> {
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

impl<T: 'static> RichFunction for KafkaSource<T> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let subtask = ctx.index_of_this_subtask().0;
        let parallelism = ctx.number_of_parallel_subtasks();
        let store = ctx.operator_state();
        let all_splits = store.union_list_state(&ListStateDescriptor::<PartitionSplit>::new(SPLITS_STATE))?.get();
        let mut first_start = store.union_list_state(&ListStateDescriptor::<FirstStart>::new(FIRST_START_STATE))?.get();
        // Readers that resolved the first start at slightly different times disagree on
        // "latest": one entry per partition, the earliest start (nothing is skipped).
        first_start.sort_by(|a, b| (&a.topic, a.partition, a.start).cmp(&(&b.topic, b.partition, b.start)));
        first_start.dedup_by(|later, kept| later.topic == kept.topic && later.partition == kept.partition);
        let splits: Vec<PartitionSplit> =
            all_splits.into_iter().filter(|s| split_owner(&s.topic, s.partition, parallelism) == subtask).collect();
        let consumer: BaseConsumer = self
            .properties
            .client_config(
                &self.brokers,
                &[
                    ("group.id", &self.group_id),
                    ("enable.auto.commit", "false"),
                    ("enable.auto.offset.store", "false"),
                    ("enable.partition.eof", "false"),
                    ("auto.offset.reset", "earliest"),
                ],
            )
            .create()
            .map_err(|e| KafkaConnectorError::client("creating the source's consumer", &self.brokers, e))?;
        tracing::info!(
            subtask,
            parallelism,
            restored_splits = splits.len(),
            brokers = %self.brokers,
            "Kafka source reader starting"
        );
        if self.watermarks.as_ref().is_some_and(|w| w.timestamp_assigner().is_none()) {
            return Err(KafkaConnectorError::Config(
                "the watermark strategy of a Kafka source needs a timestamp assigner (with_timestamp_assigner)".into(),
            )
            .into());
        }
        self.clocks.clear();
        self.reader = Some(Box::new(Reader {
            consumer,
            subtask,
            parallelism,
            splits,
            first_start,
            next_discovery: Some(Instant::now()),
            assignment_stale: true,
            pending_commits: BTreeMap::new(),
            last_warning: None,
        }));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        let checkpoint = ctx.checkpoint_id();
        let (splits, first_start) = match self.reader.as_deref_mut() {
            Some(reader) => {
                if let (Some(id), true) = (checkpoint, self.commit_offsets_on_checkpoint) {
                    let positions = reader
                        .splits
                        .iter()
                        .filter(|s| s.next_offset >= 0)
                        .map(|s| (s.topic.clone(), s.partition, s.next_offset))
                        .collect();
                    reader.pending_commits.insert(id.0, positions);
                }
                (reader.splits.clone(), reader.first_start.clone())
            }
            None => (Vec::new(), Vec::new()),
        };
        let store = ctx.operator_state();
        store.union_list_state(&ListStateDescriptor::<PartitionSplit>::new(SPLITS_STATE))?.update(splits);
        store.union_list_state(&ListStateDescriptor::<FirstStart>::new(FIRST_START_STATE))?.update(first_start);
        Ok(())
    }

    fn notify_checkpoint_complete(&mut self, checkpoint: CheckpointId) -> FunctionResult {
        let Some(reader) = self.reader.as_deref_mut() else { return Ok(()) };
        let mut latest = None;
        while let Some(entry) = reader.pending_commits.first_entry() {
            if *entry.key() > checkpoint.0 {
                break;
            }
            latest = Some(entry.remove());
        }
        let Some(positions) = latest.filter(|p| !p.is_empty()) else { return Ok(()) };
        let mut offsets = TopicPartitionList::new();
        for (topic, partition, offset) in &positions {
            offsets.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
        }
        // For lag tools only: a failed commit costs nothing but a stale lag figure.
        if let Err(error) = reader.consumer.commit(&offsets, CommitMode::Async) {
            tracing::warn!(subtask = reader.subtask, %checkpoint, "Kafka source: committing offsets failed: {error}");
        }
        Ok(())
    }

    fn close(&mut self) -> FunctionResult {
        self.reader = None;
        Ok(())
    }
}

impl<T: 'static> SourceFunction<T> for KafkaSource<T> {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, T>) -> FunctionResult<SourceStep> {
        let reader = self.reader()?;
        if reader.next_discovery.is_some_and(|at| Instant::now() >= at) {
            let result = self.discover();
            let brokers = self.brokers.clone();
            let (interval, bounded) = (self.discovery_interval, self.bounded);
            let reader = self.reader()?;
            match result {
                Ok(_) => {
                    reader.next_discovery =
                        if bounded || interval.is_zero() { None } else { Some(Instant::now() + interval) };
                }
                // A broker down or a metadata request that failed: wait and try again.
                Err(KafkaConnectorError::Client { action, source, .. }) => {
                    reader.warn(&format!("{action} failed"), &source, &brokers);
                    reader.next_discovery = Some(Instant::now() + Duration::from_secs(1));
                }
                Err(timeout @ KafkaConnectorError::Timeout { .. }) => {
                    reader.warn("discovery", &timeout, &brokers);
                    reader.next_discovery = Some(Instant::now() + Duration::from_secs(1));
                }
                Err(other) => return Err(other.into()),
            }
        }
        if self.reader()?.assignment_stale {
            self.assign()?;
            self.sync_clocks();
        }
        let reader = self.reader.as_deref_mut().expect("initialized");
        if !reader.splits.iter().any(|s| !s.is_finished()) {
            if self.bounded && reader.next_discovery.is_none() {
                tracing::info!(subtask = reader.subtask, "Kafka source: every split read to its stop offset");
                return Ok(SourceStep::Finished);
            }
            std::thread::sleep(Duration::from_millis(10));
            return Ok(SourceStep::Idle);
        }
        let timestamps: Option<TimestampFn<T>> = self.watermarks.as_ref().and_then(|w| w.timestamp_assigner());
        let mut emitted = 0;
        let mut split_finished = false;
        let mut timeout = Duration::from_millis(10);
        while emitted < max_records {
            let Some(polled) = reader.consumer.poll(timeout) else { break };
            timeout = Duration::ZERO;
            let message = match polled {
                Ok(message) => message,
                Err(error) => {
                    reader.warn("reading failed", &error, &self.brokers);
                    break;
                }
            };
            let (partition, offset) = (message.partition(), message.offset());
            let topic = message.topic();
            let Some(index) = reader.splits.iter().position(|s| s.partition == partition && s.topic == topic) else {
                continue;
            };
            let split = &mut reader.splits[index];
            if split.is_finished() || split.stop_offset.is_some_and(|stop| offset >= stop) {
                continue;
            }
            split.next_offset = offset + 1;
            split_finished |= split.is_finished();
            match self.schema.deserialize(&KafkaRecord::new(&message)) {
                Ok(Some(value)) => {
                    if let (Some(timestamps), Some(clock)) = (&timestamps, self.clocks.get_mut(index)) {
                        clock.generator.on_event(&value, timestamps(&value), &mut clock.output);
                        clock.active_since_last_look = true;
                    }
                    out.collect(value);
                    emitted += 1;
                }
                Ok(None) => {}
                Err(message) => {
                    return Err(KafkaConnectorError::Deserialize {
                        topic: topic.to_string(),
                        partition,
                        offset,
                        message,
                    }
                    .into())
                }
            }
        }
        if split_finished {
            self.assign()?;
        }
        if emitted == 0 && self.bounded {
            self.check_positions()?;
        }
        Ok(if emitted > 0 { SourceStep::More } else { SourceStep::Idle })
    }

    fn timestamps(&self) -> Option<TimestampFn<T>> {
        self.watermarks.as_ref().and_then(|w| w.timestamp_assigner())
    }

    fn emit_watermarks(&mut self, output: &mut WatermarkOutput) {
        let Some(strategy) = &self.watermarks else { return };
        let Some(reader) = self.reader.as_deref() else { return };
        let now = Instant::now();
        let periodic = self.next_periodic.is_none_or(|at| now >= at);
        if periodic {
            self.next_periodic = Some(now + strategy.auto_watermark_interval());
        }
        let idleness = strategy.idleness();
        let mut lowest: Option<i64> = None;
        for (split, clock) in reader.splits.iter().zip(&mut self.clocks) {
            if periodic {
                clock.generator.on_periodic_emit(&mut clock.output);
                if std::mem::take(&mut clock.active_since_last_look) {
                    clock.last_active = now;
                    clock.idle = false;
                } else if idleness.is_some_and(|timeout| now.duration_since(clock.last_active) >= timeout) {
                    clock.idle = true;
                }
            }
            if let Some(watermark) = clock.output.take_watermark() {
                clock.watermark = clock.watermark.max(watermark);
            }
            // Finished and idle splits hold nobody back.
            if !split.is_finished() && !clock.idle {
                lowest = Some(lowest.map_or(clock.watermark, |l| l.min(clock.watermark)));
            }
        }
        match lowest {
            Some(watermark) => output.emit_watermark(watermark),
            // No split, or all idle: downstream does not wait for this reader.
            None => output.mark_idle(),
        }
    }
}
