//! A librdkafka producer whose delivery failures are kept, not lost: librdkafka reports
//! them asynchronously, and a sink that ignores them loses data silently (Flink's
//! FLINK-35749). The sink checks them at every flush.

use crate::{KafkaConnectorError, KafkaProperties};
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How long a flush or a transaction's commit may take.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// Counts failed deliveries and keeps the first failure's description.
#[derive(Default)]
pub(crate) struct Deliveries {
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, message)) = result {
            // Only on failure: the normal path takes no lock.
            self.failed.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first_failure.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| {
                format!("{error} (topic {}, partition {})", message.topic(), message.partition())
            });
        }
    }
}

/// One sink subtask's producer.
pub(crate) struct SinkProducer {
    pub(crate) producer: BaseProducer<Deliveries>,
    brokers: String,
    sent_since_poll: u32,
}

impl SinkProducer {
    pub(crate) fn new(
        brokers: &str,
        properties: &KafkaProperties,
        settings: &[(&str, &str)],
    ) -> Result<Self, KafkaConnectorError> {
        let producer = properties
            .client_config(brokers, settings)
            .create_with_context(Deliveries::default())
            .map_err(|e| KafkaConnectorError::client("creating the sink's producer", brokers, e))?;
        Ok(Self { producer, brokers: brokers.to_string(), sent_since_poll: 0 })
    }

    /// Queues one record (without a value: a tombstone); waits while librdkafka's queue
    /// is full.
    #[inline]
    pub(crate) fn send(
        &mut self,
        topic: &str,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), KafkaConnectorError> {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic);
        if let Some(value) = value {
            record = record.payload(value);
        }
        if let Some(key) = key {
            record = record.key(key);
        }
        self.send_record(record)
    }

    /// Queues `record` (to any partition it names); waits while librdkafka's queue is full.
    #[inline]
    pub(crate) fn send_record(&mut self, mut record: BaseRecord<'_, [u8], [u8]>) -> Result<(), KafkaConnectorError> {
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    self.producer.poll(Duration::from_millis(5));
                }
                Err((error, back)) => {
                    return Err(KafkaConnectorError::client(
                        format!("sending a record to {}", back.topic),
                        &self.brokers,
                        error,
                    ))
                }
            }
        }
        // Serve delivery reports now and then, so that they do not pile up.
        self.sent_since_poll += 1;
        if self.sent_since_poll >= 1024 {
            self.sent_since_poll = 0;
            self.producer.poll(Duration::ZERO);
        }
        Ok(())
    }

    /// Waits until every queued record is delivered; fails if any delivery failed.
    pub(crate) fn flush(&mut self) -> Result<(), KafkaConnectorError> {
        self.producer
            .flush(FLUSH_TIMEOUT)
            .map_err(|e| KafkaConnectorError::client("flushing the sink", &self.brokers, e))?;
        self.check_deliveries()
    }

    pub(crate) fn check_deliveries(&self) -> Result<(), KafkaConnectorError> {
        let context = self.producer.context();
        let failed = context.failed.swap(0, Ordering::Relaxed);
        if failed == 0 {
            return Ok(());
        }
        let first = context.first_failure.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
        Err(KafkaConnectorError::Config(format!(
            "{failed} record(s) could not be delivered to Kafka at {}; the first: {first}",
            self.brokers
        )))
    }

    pub(crate) fn brokers(&self) -> &str {
        &self.brokers
    }
}

/// librdkafka's `transaction.timeout.ms` when the job does not set it.
const LIBRDKAFKA_TRANSACTION_TIMEOUT_MS: u64 = 60_000;

/// Refuses a transactional producer whose `transaction.timeout.ms` (from `properties`, else
/// librdkafka's 60 s) is above the brokers' `transaction.max.timeout.ms`: the brokers would
/// refuse every transaction of it, and the job would restart again and again on an error
/// that names only the broker's setting. A broker that cannot be asked is not checked (its
/// answer to the transactions will say it).
pub(crate) fn check_transaction_timeout(
    brokers: &str,
    properties: &KafkaProperties,
) -> Result<(), KafkaConnectorError> {
    let ours = match properties.get("transaction.timeout.ms") {
        Some(value) => value.parse::<u64>().map_err(|_| {
            KafkaConnectorError::Config(format!("the sink's transaction.timeout.ms is not a number of ms: {value:?}"))
        })?,
        None => LIBRDKAFKA_TRANSACTION_TIMEOUT_MS,
    };
    let theirs = match crate::admin::broker_config(brokers, properties, "transaction.max.timeout.ms") {
        Ok(Some(value)) => value.parse::<u64>().ok(),
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(
                brokers,
                "Kafka sink: cannot read the brokers' transaction.max.timeout.ms: {error}",
                error = eddy_types::chain(&error)
            );
            None
        }
    };
    match theirs {
        Some(max) if ours > max => Err(KafkaConnectorError::Config(format!(
            "the exactly-once sink's transaction.timeout.ms is {ours} ms, above the brokers' \
             transaction.max.timeout.ms of {max} ms at {brokers}, so they would refuse its transactions: set the \
             sink's transaction.timeout.ms to at most {max} (with_property), or raise transaction.max.timeout.ms on \
             the brokers. A transaction of eddy's is open only while one checkpoint's records are sent and \
             committed, so it need not cover the checkpoint interval"
        ))),
        _ => Ok(()),
    }
}
