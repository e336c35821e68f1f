//! The Kafka source's split enumerator (Flink's `KafkaSourceEnumerator`), the source's
//! coordinator with the JobMaster: a thread of its own discovers partitions
//! ([`super::discovery`]); the enumerator hands each new one to its owner reader
//! ([`split_owner`]) as an event, and in bounded mode tells every reader that no more
//! splits come once the first discovery is handed out.
//!
//! Its checkpointed state is the set of partitions handed out and whether the job's first
//! discovery is done; the readers' states hold the splits' positions. A split handed out
//! after a checkpoint's trigger is in neither, and is found and handed out again after a
//! restore of that checkpoint.

use super::discovery::{Discovery, DiscoverySettings};
use super::split::{split_owner, PartitionSplit};
use super::WARN_EVERY;
use crate::KafkaConnectorError;
use eddy_runtime::coordination::{
    CoordinatorContext, CoordinatorError, CoordinatorRestore, CoordinatorResult, GaugeView, OperatorCoordinator,
};
use eddy_types::CheckpointId;
use eddy_types::SubtaskIndex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::{Duration, Instant};

/// Discovery results waiting for the enumerator (it takes them every few milliseconds).
const FOUND_QUEUE: usize = 4;
/// How long the discovery thread waits after the brokers did not answer.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long closing the enumerator waits for its discovery thread to end.
const DISCOVERY_JOIN_WAIT: Duration = Duration::from_secs(2);
/// How often the consumer lag is logged while the job runs.
const LAG_LOG_EVERY: Duration = Duration::from_secs(10);

/// What the enumerator sends its readers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum SourceEvent {
    /// Splits the reader owns from now on.
    AddSplits(Vec<PartitionSplit>),
    /// Bounded mode: every split is handed out; a reader that read its own ends.
    NoMoreSplits,
}

impl SourceEvent {
    pub(super) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a source event always encodes")
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self, KafkaConnectorError> {
        postcard::from_bytes(bytes).map_err(|e| {
            KafkaConnectorError::Config(format!(
                "an unreadable event from the split enumerator: {e}",
                e = eddy_types::chain(&e)
            ))
        })
    }
}

/// What a reader sends the enumerator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum ReaderEvent {
    /// Where its unfinished splits are, and where they end.
    Progress(Vec<SplitProgress>),
}

/// One split's position (the next offset to read) and end offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct SplitProgress {
    pub(super) topic: String,
    pub(super) partition: i32,
    pub(super) position: i64,
    pub(super) end: i64,
}

impl ReaderEvent {
    pub(super) fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("a reader event always encodes")
    }
}

/// What a checkpoint holds of the enumerator.
#[derive(Debug, Default, Serialize, Deserialize)]
struct EnumeratorState {
    assigned: BTreeSet<(String, i32)>,
    first_done: bool,
}

/// What the discovery thread reports.
enum Found {
    Splits(Vec<PartitionSplit>),
    /// A failure no retry mends (a bad setting).
    Failed(String),
}

pub(super) struct KafkaSourceEnumerator {
    settings: DiscoverySettings,
    state: EnumeratorState,
    /// Per partition, the latest (position, end offset) its reader reported.
    progress: BTreeMap<(String, i32), (i64, i64)>,
    last_lag_log: Option<Instant>,
    found: Option<Receiver<Found>>,
    /// Dropped to stop the discovery thread.
    stop: Option<Sender<()>>,
    discovery_thread: Option<std::thread::JoinHandle<()>>,
}

impl KafkaSourceEnumerator {
    pub(super) fn new(settings: DiscoverySettings) -> Self {
        Self {
            settings,
            state: EnumeratorState::default(),
            progress: BTreeMap::new(),
            last_lag_log: None,
            found: None,
            stop: None,
            discovery_thread: None,
        }
    }

    /// Per partition: end offset minus position (Kafka's consumer lag).
    fn lags(&self) -> impl Iterator<Item = (&(String, i32), i64, i64, i64)> {
        self.progress.iter().map(|(key, &(position, end))| (key, position, end, (end - position).max(0)))
    }

    fn no_more_splits(ctx: &mut CoordinatorContext<'_>) {
        let event = SourceEvent::NoMoreSplits.encode();
        for reader in 0..ctx.parallelism() {
            ctx.send_event(SubtaskIndex(reader), event.clone());
        }
    }
}

impl OperatorCoordinator for KafkaSourceEnumerator {
    fn start(&mut self, restored: CoordinatorRestore<'_>, ctx: &mut CoordinatorContext<'_>) -> CoordinatorResult {
        match restored {
            CoordinatorRestore::Fresh => {}
            CoordinatorRestore::State(bytes) => {
                self.state = postcard::from_bytes(bytes).map_err(|e| {
                    CoordinatorError::permanent(format!(
                        "cannot read the Kafka split enumerator's checkpointed state: {e}",
                        e = eddy_types::chain(&e)
                    ))
                })?;
            }
            // A checkpoint of an earlier eddy, whose readers found their partitions
            // themselves: a first discovery hands every partition out again, and a reader
            // keeps the position it restored for one it holds. One no reader held (found
            // after the checkpoint, or not started yet) starts at its earliest offset, as
            // partitions found after a job's first discovery do: the job's starting
            // offsets were resolved when it first started, and resolving "latest" or a
            // time again now would skip what came in between.
            CoordinatorRestore::WithoutState => self.settings.starting = super::StartingOffsets::Earliest,
        }
        tracing::info!(
            brokers = %self.settings.brokers,
            restored_partitions = self.state.assigned.len(),
            first_discovery_done = self.state.first_done,
            "Kafka split enumerator starting"
        );
        if self.settings.bounded && self.state.first_done {
            // Every split of a bounded source is with the readers (in their state).
            Self::no_more_splits(ctx);
            return Ok(());
        }
        let (found_tx, found_rx) = sync_channel(FOUND_QUEUE);
        let (stop_tx, stop_rx) = channel();
        let (settings, known, first_done) = (self.settings.clone(), self.state.assigned.clone(), self.state.first_done);
        let thread = std::thread::Builder::new()
            .name("kafka-split-discovery".into())
            .spawn(move || discover_until_stopped(settings, known, first_done, &found_tx, &stop_rx))
            .map_err(|e| {
                CoordinatorError::restartable(format!(
                    "cannot start the Kafka split discovery thread: {e}",
                    e = eddy_types::chain(&e)
                ))
            })?;
        self.discovery_thread = Some(thread);
        self.found = Some(found_rx);
        self.stop = Some(stop_tx);
        Ok(())
    }

    fn handle_event(
        &mut self,
        subtask: SubtaskIndex,
        event: &[u8],
        _ctx: &mut CoordinatorContext<'_>,
    ) -> CoordinatorResult {
        let ReaderEvent::Progress(splits) = postcard::from_bytes(event).map_err(|e| {
            CoordinatorError::permanent(format!(
                "an unreadable event from Kafka source reader {}: {e}",
                subtask.0,
                e = eddy_types::chain(&e)
            ))
        })?;
        for split in splits {
            self.progress.insert((split.topic, split.partition), (split.position, split.end));
        }
        if self.last_lag_log.is_none_or(|at| at.elapsed() >= LAG_LOG_EVERY) {
            self.last_lag_log = Some(Instant::now());
            let (total, max) = self.lags().fold((0, 0), |(total, max), (_, _, _, lag)| (total + lag, max.max(lag)));
            tracing::info!(partitions = self.progress.len(), total, max, "Kafka consumer lag");
        }
        Ok(())
    }

    fn status(&self) -> Vec<String> {
        self.lags()
            .map(|((topic, partition), position, end, lag)| {
                format!("consumer lag {topic}/{partition}: {lag} (end offset {end}, position {position})")
            })
            .collect()
    }

    fn gauges(&self) -> Vec<GaugeView> {
        self.lags()
            .map(|((topic, partition), _, _, lag)| GaugeView {
                name: "kafka_consumer_lag".into(),
                help: "Records of the partition not read yet: its end offset (the last stable offset) minus the \
                    reader's position"
                    .into(),
                labels: vec![("topic".into(), topic.to_string()), ("partition".into(), partition.to_string())],
                value: lag as f64,
            })
            .collect()
    }

    fn poll(&mut self, ctx: &mut CoordinatorContext<'_>) -> CoordinatorResult {
        let Some(found) = &self.found else { return Ok(()) };
        while let Ok(found) = found.try_recv() {
            let splits = match found {
                Found::Splits(splits) => splits,
                // A bad setting: every restart would fail the same way.
                Found::Failed(message) => return Err(CoordinatorError::permanent(message)),
            };
            let readers = ctx.parallelism();
            let mut per_reader: Vec<Vec<PartitionSplit>> = vec![Vec::new(); readers as usize];
            for split in splits {
                if self.state.assigned.insert((split.topic.clone(), split.partition)) {
                    let owner = split_owner(&split.topic, split.partition, readers);
                    tracing::info!(
                        reader = owner,
                        topic = %split.topic,
                        partition = split.partition,
                        start = split.next_offset,
                        stop = ?split.stop_offset,
                        "Kafka source: split assigned"
                    );
                    per_reader[owner as usize].push(split);
                }
            }
            for (reader, splits) in per_reader.into_iter().enumerate() {
                if !splits.is_empty() {
                    ctx.send_event(SubtaskIndex(reader as u32), SourceEvent::AddSplits(splits).encode());
                }
            }
            if !self.state.first_done {
                self.state.first_done = true;
                if self.settings.bounded {
                    Self::no_more_splits(ctx);
                }
            }
        }
        Ok(())
    }

    fn checkpoint(&mut self, _checkpoint: CheckpointId) -> CoordinatorResult<Vec<u8>> {
        postcard::to_allocvec(&self.state).map_err(|e| {
            CoordinatorError::permanent(format!(
                "cannot encode the Kafka split enumerator's state: {e}",
                e = eddy_types::chain(&e)
            ))
        })
    }

    fn close(&mut self) {
        // The thread sees the channel gone at its next wait and ends: joined, unless it
        // is inside a request to brokers that do not answer (up to its timeout), which
        // must not hold the JobMaster's thread; it ends when the request returns.
        self.stop = None;
        self.found = None;
        if let Some(thread) = self.discovery_thread.take() {
            let deadline = Instant::now() + DISCOVERY_JOIN_WAIT;
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                tracing::warn!(
                    brokers = %self.settings.brokers,
                    "Kafka split enumerator closed while its discovery thread waits for the brokers; it ends when \
                     the request returns"
                );
            }
        }
    }
}

/// The discovery thread: discovers at once, then every interval (once in bounded mode),
/// retrying while the brokers do not answer, until the enumerator closes.
fn discover_until_stopped(
    settings: DiscoverySettings,
    known: BTreeSet<(String, i32)>,
    first_done: bool,
    found: &SyncSender<Found>,
    stop: &Receiver<()>,
) {
    let brokers = settings.brokers.clone();
    let (bounded, interval) = (settings.bounded, settings.interval);
    let mut discovery = match Discovery::new(settings, known, first_done) {
        Ok(discovery) => discovery,
        Err(e) => {
            let _ = found.send(Found::Failed(eddy_types::chain(&e)));
            return;
        }
    };
    let mut last_warning: Option<Instant> = None;
    loop {
        let wait = match discovery.discover() {
            Ok(splits) => {
                if found.send(Found::Splits(splits)).is_err() || bounded || interval.is_zero() {
                    return;
                }
                interval
            }
            // A broker down or a request that failed: wait and try again.
            Err(e @ (KafkaConnectorError::Client { .. } | KafkaConnectorError::Timeout { .. })) => {
                if last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    last_warning = Some(Instant::now());
                    let what = if discovery.is_first_done() { "partition discovery" } else { "the first discovery" };
                    tracing::warn!(brokers = %brokers, "Kafka split enumerator: {what} failed: {e}; retrying", e = eddy_types::chain(&e));
                }
                RETRY_AFTER
            }
            Err(e) => {
                let _ = found.send(Found::Failed(eddy_types::chain(&e)));
                return;
            }
        };
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_state_read_back() {
        let split = PartitionSplit { topic: "t".into(), partition: 3, next_offset: 7, stop_offset: Some(9) };
        for event in [SourceEvent::AddSplits(vec![split]), SourceEvent::NoMoreSplits] {
            assert_eq!(SourceEvent::decode(&event.encode()).unwrap(), event);
        }
        let progress =
            ReaderEvent::Progress(vec![SplitProgress { topic: "t".into(), partition: 1, position: 5, end: 9 }]);
        assert_eq!(postcard::from_bytes::<ReaderEvent>(&progress.encode()).unwrap(), progress);
        assert!(SourceEvent::decode(&[0xff, 0xff]).is_err());
    }
}
