//! [`KafkaSource`]: reads topics (by list or pattern) as splits, one per partition, on
//! eddy's split-based sources (Flink's FLIP-27 `Source`).
//!
//! The split enumerator runs with the JobMaster (an operator coordinator): it discovers
//! partitions on a thread of its own, resolves where each starts (the job's starting
//! offsets at the first discovery, the earliest offset for partitions found later) and in
//! bounded mode where it stops, and hands each to its owner reader ([`split_owner`]) as an
//! event. Its state (the partitions handed out) is in every checkpoint.
//!
//! Every reader (source subtask) reads its splits with one librdkafka consumer in
//! manual-assignment mode (`assign`, never `subscribe`: Kafka's group rebalancing would
//! fight eddy's own assignment). Each split's next offset is union operator state, so
//! after a restore, at any parallelism, every reader sees every split and keeps exactly
//! those it owns now, by the same owner function the enumerator uses.
//!
//! Offsets are committed to the consumer group only after a checkpoint completes, for
//! lag tools; a restore always uses the checkpointed positions (as in Flink).
//!
//! - this file: the source's settings, its state, and the read loop;
//! - `enumerator`: the split enumerator and its events to the readers;
//! - `discovery`: finding partitions, where they start and end (the enumerator's thread);
//! - `reader`: a running reader, its splits and its consumer's assignment;
//! - `event_time`: watermarks per split;
//! - `split`: a split and the owner function; `offsets`: where a source starts;
//!   `record`: what a deserialization schema sees.

mod discovery;
mod enumerator;
mod event_time;
mod offsets;
mod reader;
mod record;
mod split;

use discovery::DiscoverySettings;
pub use discovery::Subscription;
use enumerator::{KafkaSourceEnumerator, SourceEvent};
use event_time::SplitClock;
pub use offsets::{OffsetResetStrategy, StartingOffsets};
use reader::{EndOffsets, Reader};
pub use record::{utf8_values, BadRecord, KafkaDeserializationSchema, KafkaRecord};
pub use split::{split_owner, PartitionSplit, EARLIEST};

use crate::{KafkaConnectorError, KafkaProperties};
use eddy_api::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_api::time::{TimestampFn, WatermarkOutput, WatermarkStrategy};
use eddy_runtime::coordination::CoordinatorProvider;
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
/// Flink's `partition.discovery.interval.ms` default.
pub const PARTITION_DISCOVERY_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);
/// How long one metadata or offset request to the brokers may block (the enumerator's
/// discovery thread, or a reader's commit).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How often "the brokers cannot be reached" is logged while it lasts.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(10);

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
        let pattern = regex::Regex::new(pattern).map_err(|e| {
            KafkaConnectorError::Config(format!("topic pattern {pattern:?}: {e}", e = eddy_types::chain(&e)))
        })?;
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

impl<T: 'static> RichFunction for KafkaSource<T> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let subtask = ctx.index_of_this_subtask().0;
        let parallelism = ctx.number_of_parallel_subtasks();
        let store = ctx.operator_state();
        let all_splits = store.union_list_state(&ListStateDescriptor::<PartitionSplit>::new(SPLITS_STATE))?.get();
        let splits: Vec<PartitionSplit> =
            all_splits.into_iter().filter(|s| split_owner(&s.topic, s.partition, parallelism) == subtask).collect();
        let consumer: BaseConsumer<EndOffsets> = self
            .properties
            .client_config(
                &self.brokers,
                &[
                    ("group.id", &self.group_id),
                    ("enable.auto.commit", "false"),
                    ("enable.auto.offset.store", "false"),
                    ("enable.partition.eof", "false"),
                    ("auto.offset.reset", "earliest"),
                    ("statistics.interval.ms", "1000"),
                ],
            )
            .create_with_context(EndOffsets::default())
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
        let gateway = ctx.operator_event_gateway();
        self.reader = Some(Box::new(Reader {
            consumer,
            gateway,
            next_progress: Instant::now(),
            subtask,
            splits,
            no_more_splits: false,
            assignment_stale: true,
            pending_commits: BTreeMap::new(),
            last_warning: None,
        }));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        let checkpoint = ctx.checkpoint_id();
        let splits = match self.reader.as_deref_mut() {
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
                reader.splits.clone()
            }
            None => Vec::new(),
        };
        let store = ctx.operator_state();
        store.union_list_state(&ListStateDescriptor::<PartitionSplit>::new(SPLITS_STATE))?.update(splits);
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
            tracing::warn!(subtask = reader.subtask, %checkpoint, "Kafka source: committing offsets failed: {error}", error = eddy_types::chain(&error));
        }
        Ok(())
    }

    fn close(&mut self) -> FunctionResult {
        self.reader = None;
        Ok(())
    }
}

impl<T: 'static> SourceFunction<T> for KafkaSource<T> {
    /// Held back by watermark alignment: the consumer lag stays current (the enumerator
    /// shows it in `/metrics`, the job's status and its log).
    fn while_paused(&mut self) -> FunctionResult {
        let brokers = self.brokers.clone();
        self.reader()?.report_progress_while_paused(&brokers);
        Ok(())
    }

    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, T>) -> FunctionResult<SourceStep> {
        if self.reader()?.assignment_stale {
            self.assign()?;
            self.sync_clocks();
        }
        let reader = self.reader.as_deref_mut().expect("initialized");
        reader.report_progress();
        if !reader.splits.iter().any(|s| !s.is_finished()) {
            if reader.is_done() {
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
                        clock.on_record(&value, timestamps(&value));
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
        self.split_watermarks(output);
    }

    fn coordinator(&self) -> Option<CoordinatorProvider> {
        let settings = DiscoverySettings {
            brokers: self.brokers.clone(),
            subscription: self.subscription.clone(),
            group_id: self.group_id.clone(),
            starting: self.starting.clone(),
            bounded: self.bounded,
            interval: self.discovery_interval,
            properties: self.properties.clone(),
        };
        Some(Arc::new(move || Box::new(KafkaSourceEnumerator::new(settings.clone()))))
    }

    fn handle_operator_event(&mut self, event: &[u8]) -> FunctionResult {
        self.on_event(SourceEvent::decode(event)?)?;
        Ok(())
    }
}
