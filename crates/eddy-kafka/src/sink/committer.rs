//! The exactly-once sink's committer: a thread per sink subtask that owns the slot's
//! transactional producer and commits the epochs a completed checkpoint made due, in
//! order, one transaction each batch, so that the task thread never waits for Kafka (a
//! commit waits for every record's acknowledgement and the transaction's markers, and
//! for as long as the brokers are away).
//!
//! The task keeps every epoch it handed over in its state until the committer reports it
//! committed: a failure in between restores them, and recovery sends again exactly what
//! the progress marker says Kafka lacks. A failed commit stops the committer; the task
//! learns of it at its next checkpoint event and fails.

use super::epochs::Epoch;
use super::producer::{SinkProducer, FLUSH_TIMEOUT};
use super::progress::{marker_key, Marker};
use crate::KafkaConnectorError;
use rdkafka::producer::Producer;
use std::borrow::Borrow;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};

/// Where a slot's transactions go, and under which marker.
#[derive(Clone)]
pub(crate) struct CommitTarget {
    pub(crate) topic: String,
    pub(crate) progress_topic: String,
    pub(crate) prefix: String,
    pub(crate) slot: u32,
    pub(crate) lineage: u64,
}

/// Sends `epochs` and the marker of the last in one transaction of `producer`; a failure
/// because another producer took the slot's transactional id says so.
pub(crate) fn commit_epochs<E: Borrow<Epoch>>(
    producer: &mut SinkProducer,
    target: &CommitTarget,
    epochs: &[E],
) -> Result<(), KafkaConnectorError> {
    transact(producer, target, epochs).map_err(|error| explain_fencing(error, producer, target))
}

/// `error` with the reason when the producer was fenced (its own error or the producer's
/// fatal error says so: a send after the fencing fails only as "fatal error").
fn explain_fencing(error: KafkaConnectorError, producer: &SinkProducer, target: &CommitTarget) -> KafkaConnectorError {
    use rdkafka::types::RDKafkaErrorCode::{Fenced, InvalidProducerEpoch, ProducerFenced};
    let is_fenced = |code| matches!(code, Some(Fenced | ProducerFenced | InvalidProducerEpoch));
    let KafkaConnectorError::Client { action, brokers, source } = error else { return error };
    if !is_fenced(source.rdkafka_error_code()) && !is_fenced(producer.producer.client().fatal_error().map(|(c, _)| c)) {
        return KafkaConnectorError::Client { action, brokers, source };
    }
    let prefix = &target.prefix;
    let action = format!(
        "{action}; another producer took the transactional id {prefix}-{}: another job with the transactional id \
         prefix '{prefix}' (each job needs its own; a JobManager refuses a second one at submission, jobs run apart \
         cannot know of each other), or a newer attempt of this job",
        target.slot
    );
    KafkaConnectorError::Client { action, brokers, source }
}

fn transact<E: Borrow<Epoch>>(
    producer: &mut SinkProducer,
    target: &CommitTarget,
    epochs: &[E],
) -> Result<(), KafkaConnectorError> {
    let Some(last) = epochs.last().map(|e| e.borrow().epoch) else { return Ok(()) };
    let slot = target.slot;
    let brokers = producer.brokers().to_string();
    let client = |action: &str, e| KafkaConnectorError::client(format!("{action} (slot {slot})"), &brokers, e);
    let started = std::time::Instant::now();
    producer.producer.begin_transaction().map_err(|e| client("beginning a transaction", e))?;
    tracing::debug!(slot, last_epoch = last, "Kafka sink: transaction begun");
    let mut records = 0u64;
    let sent = (|| {
        for epoch in epochs.iter().map(Borrow::borrow) {
            let mut count = 0;
            for record in epoch.records() {
                let (key, value) = record.map_err(KafkaConnectorError::Recovery)?;
                producer.send(&target.topic, key, value)?;
                count += 1;
            }
            if count != epoch.records {
                return Err(KafkaConnectorError::Recovery(format!(
                    "epoch {} of sink slot {slot} holds {count} records, its state says {}",
                    epoch.epoch, epoch.records
                )));
            }
            records += count;
        }
        let key = marker_key(&target.prefix, slot);
        let marker = Marker { lineage: target.lineage, epoch: last }.encode();
        producer.send(&target.progress_topic, Some(key.as_bytes()), Some(marker.as_bytes()))
    })();
    if let Err(error) = sent {
        let _ = producer.producer.abort_transaction(FLUSH_TIMEOUT);
        return Err(error);
    }
    let sent_ms = started.elapsed().as_millis();
    if let Err(error) = producer.producer.commit_transaction(FLUSH_TIMEOUT) {
        let _ = producer.producer.abort_transaction(FLUSH_TIMEOUT);
        return Err(client("committing a transaction", error));
    }
    producer.check_deliveries()?;
    tracing::debug!(
        slot,
        epochs = epochs.len(),
        last_epoch = last,
        records,
        send_ms = sent_ms,
        commit_ms = started.elapsed().as_millis() - sent_ms,
        "Kafka sink: transaction committed"
    );
    Ok(())
}

/// How long [`Committer::take_results`] waits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    No,
    One,
    All,
}

/// A slot's committer thread and the two channels to it.
pub(crate) struct Committer {
    jobs: Option<Sender<Vec<Arc<Epoch>>>>,
    /// In a mutex only because a sink must be `Sync`; only the task thread takes it.
    results: Mutex<Receiver<Result<u64, KafkaConnectorError>>>,
    /// Batches handed over and not reported yet.
    in_flight: usize,
    /// The first failure, kept: every later call fails with it.
    failure: Option<String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Committer {
    /// Starts the thread; `producer`'s transactional id is fenced already.
    pub(crate) fn start(mut producer: SinkProducer, target: CommitTarget) -> Result<Self, KafkaConnectorError> {
        let (jobs, job_rx) = channel::<Vec<Arc<Epoch>>>();
        let (result_tx, results) = channel();
        let thread = std::thread::Builder::new()
            .name(format!("kafka-sink-commit-{}", target.slot))
            .spawn(move || {
                for epochs in job_rx {
                    let last = epochs.last().map_or(0, |e| e.epoch);
                    let result = commit_epochs(&mut producer, &target, &epochs).map(|()| last);
                    let failed = result.is_err();
                    if result_tx.send(result).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|e| {
                KafkaConnectorError::Config(format!(
                    "cannot start the Kafka sink's committer thread: {e}",
                    e = eddy_types::chain(&e)
                ))
            })?;
        Ok(Self { jobs: Some(jobs), results: Mutex::new(results), in_flight: 0, failure: None, thread: Some(thread) })
    }

    /// Hands `epochs` over, to be committed after those handed over before. Fails if a
    /// commit failed before.
    pub(crate) fn submit(&mut self, epochs: Vec<Arc<Epoch>>) -> Result<(), KafkaConnectorError> {
        self.take_results(Wait::No)?;
        let jobs = self.jobs.as_ref().expect("the committer runs until dropped");
        if jobs.send(epochs).is_err() {
            // The thread is gone without a failure in its reports: it cannot commit.
            return Err(self.failed("the Kafka sink's committer thread ended".into()));
        }
        self.in_flight += 1;
        Ok(())
    }

    /// The last epoch committed since the previous call, without waiting; the first
    /// failure of a commit, if one failed.
    pub(crate) fn committed(&mut self) -> Result<Option<u64>, KafkaConnectorError> {
        self.take_results(Wait::No)
    }

    /// Waits until every batch handed over is committed; the last epoch committed since
    /// the previous call.
    pub(crate) fn wait_all(&mut self) -> Result<Option<u64>, KafkaConnectorError> {
        self.take_results(Wait::All)
    }

    /// Waits until one more batch handed over is committed (none if none is in flight);
    /// the last epoch committed since the previous call.
    pub(crate) fn wait_one(&mut self) -> Result<Option<u64>, KafkaConnectorError> {
        self.take_results(Wait::One)
    }

    /// Whether batches are handed over and not reported yet.
    pub(crate) fn is_busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Takes the committer's reports (waiting as `wait` says), failing from the first
    /// failure on: a failed commit stays failed.
    fn take_results(&mut self, mut wait: Wait) -> Result<Option<u64>, KafkaConnectorError> {
        if let Some(failure) = &self.failure {
            return Err(KafkaConnectorError::Config(failure.clone()));
        }
        let mut last = None;
        while self.in_flight > 0 {
            let results = self.results.get_mut().unwrap_or_else(|p| p.into_inner());
            let result = match wait {
                Wait::No => results.try_recv(),
                Wait::One | Wait::All => results.recv().map_err(|_| TryRecvError::Disconnected),
            };
            if wait == Wait::One {
                wait = Wait::No;
            }
            match result {
                Ok(Ok(epoch)) => {
                    self.in_flight -= 1;
                    last = Some(epoch);
                }
                Ok(Err(error)) => {
                    self.in_flight -= 1;
                    self.failure = Some(eddy_types::chain(&error));
                    return Err(error);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(self.failed("the Kafka sink's committer thread ended without reporting".into()))
                }
            }
        }
        Ok(last)
    }

    fn failed(&mut self, message: String) -> KafkaConnectorError {
        self.failure = Some(message.clone());
        KafkaConnectorError::Config(message)
    }
}

impl Drop for Committer {
    /// Lets the thread commit what it was handed (each commit bounded by its timeout) and
    /// end: a transaction it left open would hold `read_committed` readers back until the
    /// next attempt fences the id. The sink's `close` waits for the same and reports a
    /// failure; here, on a path without `close`, a failure is only logged.
    fn drop(&mut self) {
        if self.failure.is_none() && self.in_flight > 0 {
            if let Err(error) = self.wait_all() {
                tracing::warn!(
                    "Kafka sink: a commit failed while the sink was dropped: {error}",
                    error = eddy_types::chain(&error)
                );
            }
        }
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
