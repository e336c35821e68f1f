//! [`KafkaSink`]: writes a stream to one topic with Flink's three delivery guarantees.
//!
//! - [`DeliveryGuarantee::None`]: records are sent as they come; what librdkafka has not
//!   delivered when a task dies is lost.
//! - [`DeliveryGuarantee::AtLeastOnce`] (the default): idempotent producer, and every
//!   checkpoint waits until all records before its barrier are acknowledged; a delivery
//!   failure fails the checkpoint. After a restore, records since the checkpoint come
//!   again: duplicates, no loss.
//! - [`DeliveryGuarantee::ExactlyOnce`]: a write-ahead sink. Each epoch's records stay in
//!   the sink's operator state; when the checkpoint completes the slot's committer thread
//!   ([`committer`]) sends them in one short transaction under the slot's fixed
//!   transactional id, together with a progress marker (slot → epoch) in a one-partition
//!   topic, while the task goes on; they leave the state once the commit is reported.
//!   After a failure the restored slot fences its
//!   id (`init_transactions` aborts whatever an earlier attempt left open), reads its
//!   marker with `read_committed`, and sends again only the epochs Kafka does not have.
//!   librdkafka cannot resume a transaction another producer began, so Flink's way
//!   (commit the pre-committed transaction after recovery) is closed; re-doing is not.
//!   The guarantee and its conditions are in the README.

mod committer;
mod epochs;
pub(crate) mod producer;
mod progress;

pub use progress::PROGRESS_TOPIC_DEFAULT;

use crate::{KafkaConnectorError, KafkaProperties};
use committer::{commit_epochs, CommitTarget, Committer};
use eddy_api::function::{FunctionResult, RichFunction, RuntimeContext, Sink, SnapshotContext};
use eddy_state::ListStateDescriptor;
use eddy_types::CheckpointId;
use epochs::{Epoch, PendingEpochs, SlotState, END_OF_INPUT};
use producer::{check_transaction_timeout, SinkProducer, FLUSH_TIMEOUT};
use progress::{ensure_progress_topic, marker_key, read_marker};
use rdkafka::producer::Producer;
use std::sync::Arc;

const SLOTS_STATE: &str = "kafka-sink-slots";

/// Exactly-once: how many bytes of records not yet in Kafka a sink subtask keeps before it
/// waits for its committer (`with_max_uncommitted_bytes`).
pub const MAX_UNCOMMITTED_BYTES_DEFAULT: usize = 256 << 20;

/// How often a sink subtask that waits for its committer says so.
const HOLD_WARNING_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Flink's `DeliveryGuarantee`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryGuarantee {
    None,
    AtLeastOnce,
    ExactlyOnce,
}

/// Turns a value into a Kafka record's key and value (Flink's
/// `KafkaRecordSerializationSchema`): writes them into the buffers (cleared before each
/// call, reused across records) and says whether the record has a key.
pub trait KafkaSerializationSchema<T>: Send + Sync + 'static {
    fn serialize(&self, value: &T, key: &mut Vec<u8>, payload: &mut Vec<u8>) -> bool;

    /// Whether the record of `value` has no value at all (a tombstone: an upsert sink's
    /// delete, which compaction turns into the key's removal) rather than `payload`.
    fn tombstone(&self, _value: &T) -> bool {
        false
    }
}

impl<T, F> KafkaSerializationSchema<T> for F
where
    F: Fn(&T, &mut Vec<u8>, &mut Vec<u8>) -> bool + Send + Sync + 'static,
{
    fn serialize(&self, value: &T, key: &mut Vec<u8>, payload: &mut Vec<u8>) -> bool {
        self(value, key, payload)
    }
}

/// Flink's `KafkaSink`.
pub struct KafkaSink<T> {
    brokers: String,
    topic: String,
    guarantee: DeliveryGuarantee,
    transactional_id_prefix: Option<String>,
    progress_topic: String,
    max_uncommitted_bytes: usize,
    properties: KafkaProperties,
    schema: Arc<dyn KafkaSerializationSchema<T>>,
    run: Option<Box<SinkRun>>,
}

impl<T> Clone for KafkaSink<T> {
    /// A copy of the configuration; the running producer stays with the original.
    fn clone(&self) -> Self {
        Self {
            brokers: self.brokers.clone(),
            topic: self.topic.clone(),
            guarantee: self.guarantee,
            transactional_id_prefix: self.transactional_id_prefix.clone(),
            progress_topic: self.progress_topic.clone(),
            max_uncommitted_bytes: self.max_uncommitted_bytes,
            properties: self.properties.clone(),
            schema: self.schema.clone(),
            run: None,
        }
    }
}

impl<T: 'static> KafkaSink<T> {
    /// A sink writing to `topic` on `brokers`, at least once.
    pub fn new(brokers: &str, topic: &str, schema: impl KafkaSerializationSchema<T>) -> Self {
        Self {
            brokers: brokers.to_string(),
            topic: topic.to_string(),
            guarantee: DeliveryGuarantee::AtLeastOnce,
            transactional_id_prefix: None,
            progress_topic: PROGRESS_TOPIC_DEFAULT.to_string(),
            max_uncommitted_bytes: MAX_UNCOMMITTED_BYTES_DEFAULT,
            properties: KafkaProperties::default(),
            schema: Arc::new(schema),
            run: None,
        }
    }

    pub fn with_delivery_guarantee(mut self, guarantee: DeliveryGuarantee) -> Self {
        self.guarantee = guarantee;
        self
    }

    /// Exactly-once: the prefix of the sink's transactional ids, `<prefix>-<subtask>`, one
    /// per subtask, reused forever. No other producer on the cluster may use it.
    pub fn with_transactional_id_prefix(mut self, prefix: &str) -> Self {
        self.transactional_id_prefix = Some(prefix.to_string());
        self
    }

    /// Exactly-once: the topic of the progress markers (default `_eddy_sink_progress`;
    /// created with one partition if missing).
    pub fn with_progress_topic(mut self, topic: &str) -> Self {
        self.progress_topic = topic.to_string();
        self
    }

    /// Exactly-once: a threshold on the bytes of records not yet in Kafka (buffered since
    /// the last barrier, or waiting for their commit) beyond which a subtask's task waits
    /// for the commits already due (default 256 MiB). The epochs live in memory and in
    /// every checkpoint until committed, so while commits are slower than the input
    /// (brokers slow or away) this turns into backpressure instead of growing them. It is
    /// a threshold, not a cap: records of checkpoints not completed yet cannot be
    /// committed and are not waited for (a long checkpoint interval, failing
    /// checkpoints), and a wait ends with a commit or its failure (up to the commit's
    /// 60 s timeout, also when the job is cancelled meanwhile).
    pub fn with_max_uncommitted_bytes(mut self, bytes: usize) -> Self {
        self.max_uncommitted_bytes = bytes;
        self
    }

    /// A librdkafka producer property (Flink's `setProperty`).
    pub fn with_property(mut self, key: &str, value: &str) -> Self {
        self.properties.set(key, value);
        self
    }
}

/// A running sink subtask.
struct SinkRun {
    slot: u32,
    key: Vec<u8>,
    payload: Vec<u8>,
    writer: Writer,
}

/// How a running sink subtask writes.
enum Writer {
    /// None and at-least-once: straight to the producer.
    Direct(SinkProducer),
    /// Exactly-once: into the write-ahead log, committed by the committer thread.
    WriteAhead(Box<WriteAhead>),
}

impl SinkRun {
    fn write_ahead(&mut self) -> Option<&mut WriteAhead> {
        match &mut self.writer {
            Writer::WriteAhead(log) => Some(log),
            Writer::Direct(_) => None,
        }
    }
}

/// The exactly-once sink's epochs not yet known to be in Kafka, and its committer.
struct WriteAhead {
    lineage: u64,
    epochs: PendingEpochs,
    /// The bytes of the sealed epochs.
    sealed_bytes: usize,
    /// See [`KafkaSink::with_max_uncommitted_bytes`].
    max_uncommitted_bytes: usize,
    /// When the task last said it waits for its committer (said at most every 10 s).
    last_hold_warning: Option<std::time::Instant>,
    /// How many sealed epochs, from the front, are handed to the committer.
    submitted: usize,
    committer: Committer,
}

impl WriteAhead {
    #[inline]
    fn over_threshold(&self) -> bool {
        self.epochs.current.bytes.len() + self.sealed_bytes > self.max_uncommitted_bytes
    }

    /// Above the threshold: waits for the committer while it has commits in hand that free
    /// bytes. Epochs whose checkpoint has not completed yet cannot be committed (waiting
    /// for them would hold back the barrier that completes it), so without commits in
    /// hand the task goes on.
    fn hold_back(&mut self, slot: u32) -> Result<(), KafkaConnectorError> {
        self.forget_committed()?;
        if !self.over_threshold() || !self.committer.is_busy() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        if self.last_hold_warning.is_none_or(|at| at.elapsed() >= HOLD_WARNING_EVERY) {
            self.last_hold_warning = Some(started);
            tracing::warn!(
                slot,
                uncommitted_bytes = self.epochs.current.bytes.len() + self.sealed_bytes,
                epochs = self.epochs.sealed.len(),
                threshold = self.max_uncommitted_bytes,
                "Kafka sink: more records wait for their commit than max_uncommitted_bytes; the task waits for its \
                 committer (said at most every 10 s)"
            );
        }
        while self.over_threshold() && self.committer.is_busy() {
            if let Some(last) = self.committer.wait_one()? {
                self.forget_up_to(last);
            }
        }
        tracing::debug!(
            slot,
            waited_ms = started.elapsed().as_millis() as u64,
            "Kafka sink: commits caught up; the task goes on"
        );
        Ok(())
    }

    /// Drops the sealed epochs the committer reports committed; its failure, if a commit
    /// failed.
    fn forget_committed(&mut self) -> Result<(), KafkaConnectorError> {
        if let Some(last) = self.committer.committed()? {
            self.forget_up_to(last);
        }
        Ok(())
    }

    /// Waits until the committer committed everything handed over, and drops it.
    fn wait_for_commits(&mut self) -> Result<(), KafkaConnectorError> {
        if let Some(last) = self.committer.wait_all()? {
            self.forget_up_to(last);
        }
        Ok(())
    }

    fn forget_up_to(&mut self, last: u64) {
        let done = self.epochs.due(last);
        self.epochs.sealed.drain(..done);
        self.submitted -= done;
        self.count_sealed_bytes();
    }

    fn count_sealed_bytes(&mut self) {
        self.sealed_bytes = self.epochs.sealed.iter().map(|e| e.bytes.len()).sum();
    }
}

impl<T: 'static> KafkaSink<T> {
    fn run(&mut self) -> Result<&mut SinkRun, KafkaConnectorError> {
        self.run.as_deref_mut().ok_or_else(|| KafkaConnectorError::Config("the Kafka sink was not initialized".into()))
    }

    fn producer_settings(&self, transactional_id: Option<&str>) -> Vec<(&'static str, String)> {
        let mut settings = Vec::new();
        if self.guarantee != DeliveryGuarantee::None {
            settings.push(("enable.idempotence", "true".to_string()));
            settings.push(("acks", "all".to_string()));
        }
        if let Some(id) = transactional_id {
            settings.push(("transactional.id", id.to_string()));
            // A transaction's requests that the coordinator answers "busy, try again" (the
            // previous one still ending) are retried after this: librdkafka's 100 ms
            // default made every commit last 100 ms.
            settings.push(("retry.backoff.ms", "5".to_string()));
        }
        settings
    }

    fn new_producer(&self, transactional_id: Option<&str>) -> Result<SinkProducer, KafkaConnectorError> {
        let settings = self.producer_settings(transactional_id);
        let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        SinkProducer::new(&self.brokers, &self.properties, &settings)
    }

    /// A transactional producer for `slot`, its id fenced: whatever an earlier producer
    /// with the id left open is aborted.
    fn fenced_producer(&self, prefix: &str, slot: u32) -> Result<SinkProducer, KafkaConnectorError> {
        let id = format!("{prefix}-{slot}");
        let producer = self.new_producer(Some(&id))?;
        producer.producer.init_transactions(FLUSH_TIMEOUT).map_err(|e| {
            KafkaConnectorError::client(format!("initializing transactions for {id}"), &self.brokers, e)
        })?;
        Ok(producer)
    }

    /// Exactly-once: hands the sealed epochs up to `last` not handed over yet to the
    /// committer, and forgets those it reported committed.
    fn commit_up_to(&mut self, last: u64) -> Result<(), KafkaConnectorError> {
        let Some(log) = self.run()?.write_ahead() else { return Ok(()) };
        log.forget_committed()?;
        let due = log.epochs.due(last);
        if due > log.submitted {
            let epochs = log.epochs.sealed[log.submitted..due].to_vec();
            log.committer.submit(epochs)?;
            log.submitted = due;
        }
        Ok(())
    }

    fn commit_target(&self, prefix: &str, slot: u32, lineage: u64) -> CommitTarget {
        CommitTarget {
            topic: self.topic.clone(),
            progress_topic: self.progress_topic.clone(),
            prefix: prefix.to_string(),
            slot,
            lineage,
        }
    }

    /// Exactly-once recovery of one restored slot, its id already fenced by `producer`:
    /// read its marker, send again what Kafka does not have.
    fn recover(&self, prefix: &str, state: &SlotState, producer: &mut SinkProducer) -> Result<(), KafkaConnectorError> {
        let marker =
            read_marker(&self.brokers, &self.properties, &self.progress_topic, &marker_key(prefix, state.slot))?;
        let committed = marker.filter(|m| m.lineage == state.lineage).map(|m| m.epoch);
        let redo = state.to_resend(committed).map_err(|committed| {
            KafkaConnectorError::Recovery(format!(
                "the Kafka sink slot {} (transactional id {prefix}-{}) already committed epoch {committed}, after the \
                 restored checkpoint {}: restoring an older checkpoint or savepoint would write its records twice. \
                 Restore the latest checkpoint, or use another transactional id prefix (a new output)",
                state.slot, state.slot, state.snapshot_epoch
            ))
        })?;
        tracing::info!(
            slot = state.slot,
            restored_epochs = ?state.epochs.iter().map(|e| e.epoch).collect::<Vec<_>>(),
            snapshot_epoch = state.snapshot_epoch,
            committed_epoch = ?committed,
            resent_epochs = redo.len(),
            resent_records = redo.iter().map(|e| e.records).sum::<u64>(),
            "Kafka sink: slot recovered"
        );
        commit_epochs(producer, &self.commit_target(prefix, state.slot, state.lineage), &redo)
    }
}

/// A lineage number nobody else draws: time, process and a counter, hashed.
fn new_lineage(slot: u32) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    std::time::SystemTime::now().hash(&mut hasher);
    std::process::id().hash(&mut hasher);
    slot.hash(&mut hasher);
    hasher.finish()
}

impl<T: 'static> RichFunction for KafkaSink<T> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let slot = ctx.index_of_this_subtask().0;
        let parallelism = ctx.number_of_parallel_subtasks();
        let restored =
            ctx.operator_state().union_list_state(&ListStateDescriptor::<SlotState>::new(SLOTS_STATE))?.get();
        if self.guarantee != DeliveryGuarantee::ExactlyOnce {
            // An exactly-once sink's buffered epochs would be dropped without a word.
            if let Some(state) = restored.iter().find(|s| s.epochs.iter().any(|e| e.records > 0)) {
                return Err(KafkaConnectorError::Recovery(format!(
                    "the restored state holds records of an exactly-once Kafka sink (slot {}) that may not be in \
                     Kafka yet; restore it with DeliveryGuarantee::ExactlyOnce (it sends them), not {:?}",
                    state.slot, self.guarantee
                ))
                .into());
            }
            let writer = Writer::Direct(self.new_producer(None)?);
            self.run = Some(Box::new(SinkRun { slot, key: Vec::new(), payload: Vec::new(), writer }));
            return Ok(());
        }
        let prefix = self.transactional_id_prefix.clone().ok_or_else(|| {
            KafkaConnectorError::Config(
                "an exactly-once Kafka sink needs a transactional id prefix (with_transactional_id_prefix)".into(),
            )
        })?;
        check_transaction_timeout(&self.brokers, &self.properties)?;
        ensure_progress_topic(&self.brokers, &self.properties, &self.progress_topic)?;
        let mut producer = self.fenced_producer(&prefix, slot)?;
        // Slot s's state goes to subtask s mod p: slot j < p stays on subtask j, so no
        // transactional id is ever used by two subtasks at once. Every id is fenced before
        // any marker is read: a dead attempt's open transaction on one of them would hold
        // the markers back until the broker timed it out.
        let mine: Vec<&SlotState> = restored.iter().filter(|s| s.slot % parallelism == slot).collect();
        let mut others = Vec::new();
        for state in mine.iter().filter(|s| s.slot != slot) {
            others.push(self.fenced_producer(&prefix, state.slot)?);
        }
        let mut others = others.iter_mut();
        let mut lineage = None;
        for state in mine {
            if state.slot == slot {
                self.recover(&prefix, state, &mut producer)?;
                lineage = Some(state.lineage);
            } else if let Some(other) = others.next() {
                self.recover(&prefix, state, other)?;
            }
        }
        let lineage = lineage.unwrap_or_else(|| new_lineage(slot));
        tracing::info!(
            slot,
            parallelism,
            transactional_id = %format!("{prefix}-{slot}"),
            lineage = %format!("{lineage:016x}"),
            "Kafka sink (exactly-once) ready"
        );
        let committer = Committer::start(producer, self.commit_target(&prefix, slot, lineage))?;
        let log = WriteAhead {
            lineage,
            epochs: PendingEpochs::default(),
            sealed_bytes: 0,
            max_uncommitted_bytes: self.max_uncommitted_bytes,
            last_hold_warning: None,
            submitted: 0,
            committer,
        };
        self.run = Some(Box::new(SinkRun {
            slot,
            key: Vec::new(),
            payload: Vec::new(),
            writer: Writer::WriteAhead(Box::new(log)),
        }));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        let checkpoint = ctx.checkpoint_id().map(|c| c.0);
        let guarantee = self.guarantee;
        let run = self.run()?;
        let slot = run.slot;
        let mut states = Vec::new();
        match &mut run.writer {
            Writer::WriteAhead(log) => {
                log.forget_committed()?;
                let snapshot_epoch = log.epochs.seal(checkpoint);
                log.count_sealed_bytes();
                states.push(SlotState {
                    slot,
                    lineage: log.lineage,
                    snapshot_epoch,
                    epochs: log.epochs.sealed.iter().map(|e| Epoch::clone(e)).collect(),
                });
            }
            Writer::Direct(producer) if guarantee == DeliveryGuarantee::AtLeastOnce => producer.flush()?,
            Writer::Direct(_) => {}
        }
        ctx.operator_state().union_list_state(&ListStateDescriptor::<SlotState>::new(SLOTS_STATE))?.update(states);
        Ok(())
    }

    fn notify_checkpoint_complete(&mut self, checkpoint: CheckpointId) -> FunctionResult {
        Ok(self.commit_up_to(checkpoint.0)?)
    }

    fn notify_job_finished(&mut self) -> FunctionResult {
        self.commit_up_to(END_OF_INPUT)?;
        // The job ends with this: everything it wrote is in Kafka first.
        if let Some(log) = self.run()?.write_ahead() {
            log.wait_for_commits()?;
        }
        Ok(())
    }

    fn close(&mut self) -> FunctionResult {
        // Commits handed over are due (their checkpoint completed): they finish before
        // the sink goes, and a failure among them is the task's (after a stop with a
        // savepoint, the savepoint's records would otherwise be missing without a word).
        let waited = match self.run.as_deref_mut().and_then(SinkRun::write_ahead) {
            Some(log) => log.wait_for_commits(),
            None => Ok(()),
        };
        self.run = None;
        Ok(waited?)
    }
}

impl<T: 'static> Sink<T> for KafkaSink<T> {
    #[inline]
    fn invoke(&mut self, value: T) -> FunctionResult {
        let run = self.run.as_deref_mut().ok_or("the Kafka sink was not initialized")?;
        run.key.clear();
        run.payload.clear();
        let keyed = self.schema.serialize(&value, &mut run.key, &mut run.payload);
        let key = keyed.then_some(run.key.as_slice());
        let payload = (!self.schema.tombstone(&value)).then_some(run.payload.as_slice());
        match &mut run.writer {
            Writer::WriteAhead(log) => {
                log.epochs.current.push(key, payload);
                if log.over_threshold() {
                    log.hold_back(run.slot)?;
                }
            }
            Writer::Direct(producer) => producer.send(&self.topic, key, payload)?,
        }
        Ok(())
    }

    fn finish(&mut self) -> FunctionResult {
        if let Writer::Direct(producer) = &mut self.run()?.writer {
            producer.flush()?;
        }
        Ok(())
    }

    /// Exactly-once: its transactional id prefix. A second job with the same prefix would
    /// fence this one's producers at its start (and this one's restart would fence it
    /// back), so a JobManager refuses it at submission. The prefix alone, not the brokers:
    /// one cluster has many spellings (names, addresses, a subset of its brokers), and a
    /// prefix of its own per job costs nothing.
    fn exclusive_resources(&self) -> Vec<String> {
        match (&self.transactional_id_prefix, self.guarantee) {
            (Some(prefix), DeliveryGuarantee::ExactlyOnce) => {
                vec![format!("the Kafka transactional id prefix '{prefix}'")]
            }
            _ => Vec::new(),
        }
    }
}
