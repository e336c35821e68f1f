//! Topic administration and end offsets, blocking: what the benchmark's producer, the
//! exactly-once sink's progress topic, consumer lag and the tests need.

use crate::{KafkaConnectorError, KafkaProperties};
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::types::RDKafkaErrorCode;
use std::time::Duration;

/// How long an administrative request may take before it is reported as timed out.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A topic's replication factor as the brokers' `default.replication.factor` sets it.
pub const DEFAULT_REPLICATION: i32 = -1;

fn admin(
    brokers: &str,
    properties: &KafkaProperties,
) -> Result<AdminClient<DefaultClientContext>, KafkaConnectorError> {
    properties
        .client_config(brokers, &[])
        .create()
        .map_err(|e| KafkaConnectorError::client("creating an admin client", brokers, e))
}

/// Creates `topic` with `partitions` partitions, the brokers' default replication factor
/// and `config`, and waits until the brokers list it; a topic that already exists is left
/// as it is.
pub fn create_topic(
    brokers: &str,
    topic: &str,
    partitions: i32,
    config: &[(&str, &str)],
) -> Result<(), KafkaConnectorError> {
    create_topic_with(brokers, &KafkaProperties::default(), topic, partitions, DEFAULT_REPLICATION, config)
}

/// [`create_topic`] with client `properties` and a replication factor
/// ([`DEFAULT_REPLICATION`]: the brokers' default).
pub fn create_topic_with(
    brokers: &str,
    properties: &KafkaProperties,
    topic: &str,
    partitions: i32,
    replication: i32,
    config: &[(&str, &str)],
) -> Result<(), KafkaConnectorError> {
    let admin = admin(brokers, properties)?;
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    for (key, value) in config {
        new = new.set(key, value);
    }
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let results = futures_executor::block_on(admin.create_topics([&new], &options))
        .map_err(|e| KafkaConnectorError::client(format!("creating topic {topic}"), brokers, e))?;
    // A topic that was there already is waited for with whatever partitions it has.
    let mut expected = 1;
    for result in results {
        match result {
            Ok(_) => expected = partitions.max(1) as usize,
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => {
                return Err(KafkaConnectorError::Config(format!("cannot create topic {name} on {brokers}: {code}")))
            }
        }
    }
    wait_until_listed(&admin, brokers, topic, expected)
}

/// Waits until the brokers' metadata lists `topic` with at least `partitions`
/// partitions: a broker answers a creation before its metadata cache has the topic (a
/// bounded source started at once would take it for missing), or its new partitions (a
/// producer would find no such partition).
fn wait_until_listed(
    admin: &AdminClient<DefaultClientContext>,
    brokers: &str,
    topic: &str,
    partitions: usize,
) -> Result<(), KafkaConnectorError> {
    let deadline = std::time::Instant::now() + ADMIN_TIMEOUT;
    loop {
        let metadata = admin
            .inner()
            .fetch_metadata(Some(topic), ADMIN_TIMEOUT)
            .map_err(|e| KafkaConnectorError::client(format!("reading the metadata of {topic}"), brokers, e))?;
        if named_topic(metadata.topics(), topic, brokers).is_ok_and(|t| t.partitions().len() >= partitions) {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(KafkaConnectorError::Timeout {
                action: format!("waiting for the created topic {topic} to be listed"),
                brokers: brokers.to_string(),
                seconds: ADMIN_TIMEOUT.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Grows `topic` to `total` partitions.
pub fn add_partitions(brokers: &str, topic: &str, total: usize) -> Result<(), KafkaConnectorError> {
    let admin = admin(brokers, &KafkaProperties::default())?;
    let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
    let growth = NewPartitions::new(topic, total);
    let results = futures_executor::block_on(admin.create_partitions([&growth], &options))
        .map_err(|e| KafkaConnectorError::client(format!("adding partitions to {topic}"), brokers, e))?;
    for result in results {
        if let Err((name, code)) = result {
            return Err(KafkaConnectorError::Config(format!("cannot grow topic {name} to {total} partitions: {code}")));
        }
    }
    wait_until_listed(&admin, brokers, topic, total)
}

/// The value of broker setting `name` as one of the brokers reports it (`None`: the broker
/// does not know the setting).
pub fn broker_config(
    brokers: &str,
    properties: &KafkaProperties,
    name: &str,
) -> Result<Option<String>, KafkaConnectorError> {
    use rdkafka::admin::ResourceSpecifier;
    let admin = admin(brokers, properties)?;
    let metadata = admin
        .inner()
        .fetch_metadata(None, ADMIN_TIMEOUT)
        .map_err(|e| KafkaConnectorError::client("reading the brokers' metadata", brokers, e))?;
    let Some(broker) = metadata.brokers().first().map(|b| b.id()) else {
        return Err(KafkaConnectorError::Config(format!("the cluster at {brokers} lists no brokers")));
    };
    let options = AdminOptions::new().request_timeout(Some(ADMIN_TIMEOUT));
    let results = futures_executor::block_on(admin.describe_configs([&ResourceSpecifier::Broker(broker)], &options))
        .map_err(|e| {
            KafkaConnectorError::client(format!("reading the setting {name} of broker {broker}"), brokers, e)
        })?;
    match results.into_iter().next() {
        Some(Ok(resource)) => Ok(resource.get(name).and_then(|entry| entry.value.clone())),
        Some(Err(code)) => Err(KafkaConnectorError::Config(format!(
            "cannot read the setting {name} of broker {broker} at {brokers}: {code}"
        ))),
        None => Ok(None),
    }
}

/// The partitions of `topic` with their end offsets (the offset the next record will
/// get, records of open transactions included), in partition order.
pub fn end_offsets(brokers: &str, topic: &str) -> Result<Vec<(i32, i64)>, KafkaConnectorError> {
    let mut properties = KafkaProperties::default();
    properties.set("isolation.level", "read_uncommitted");
    let consumer: BaseConsumer = properties
        .client_config(brokers, &[])
        .create()
        .map_err(|e| KafkaConnectorError::client("creating a consumer", brokers, e))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), ADMIN_TIMEOUT)
        .map_err(|e| KafkaConnectorError::client(format!("reading the metadata of {topic}"), brokers, e))?;
    let mut partitions: Vec<i32> =
        named_topic(metadata.topics(), topic, brokers)?.partitions().iter().map(|p| p.id()).collect();
    partitions.sort_unstable();
    let ends = high_watermarks(brokers, &properties, topic, &partitions, ADMIN_TIMEOUT)?;
    Ok(partitions.into_iter().zip(ends).collect())
}

/// The metadata of topic `name` among `topics`: an error that names it if the brokers do
/// not have it (a `Config` error: asking again will not help), or reported an error for it
/// (a `Client` error, worth asking again).
pub(crate) fn named_topic<'a>(
    topics: &'a [rdkafka::metadata::MetadataTopic],
    name: &str,
    brokers: &str,
) -> Result<&'a rdkafka::metadata::MetadataTopic, KafkaConnectorError> {
    use rdkafka::types::RDKafkaRespErr;
    let topic = topics.iter().find(|t| t.name() == name);
    match topic.map(|t| (t, t.error())) {
        Some((topic, None)) => Ok(topic),
        None | Some((_, Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART))) => {
            Err(KafkaConnectorError::Config(format!("topic '{name}' does not exist on brokers {brokers}")))
        }
        Some((_, Some(error))) => Err(KafkaConnectorError::client(
            format!("reading the metadata of topic '{name}'"),
            brokers,
            rdkafka::error::KafkaError::MetadataFetch(error.into()),
        )),
    }
}

/// The end offsets of `partitions` of `topic` as a consumer with `properties` sees them:
/// each partition's high watermark, or for `isolation.level=read_committed` its last
/// stable offset (where the first transaction still open begins).
pub(crate) fn high_watermarks(
    brokers: &str,
    properties: &KafkaProperties,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<Vec<i64>, KafkaConnectorError> {
    let consumer: BaseConsumer = properties
        .client_config(brokers, &[("enable.auto.commit", "false"), ("group.id", "eddy-end-offsets")])
        .create()
        .map_err(|e| KafkaConnectorError::client("creating a consumer", brokers, e))?;
    partitions
        .iter()
        .map(|&partition| {
            let (_, high) = consumer.fetch_watermarks(topic, partition, timeout).map_err(|e| {
                KafkaConnectorError::client(format!("reading the end offset of {topic}/{partition}"), brokers, e)
            })?;
            Ok(high)
        })
        .collect()
}

/// Reads `topic`'s `ends` (partition, end offset) from each partition's beginning as a
/// `read_committed` consumer with `properties` (in consumer group `group`, committing
/// nothing), handing every message to `each`, until every partition's position passed its
/// end: transactions still open there are waited for until decided, up to `wait`.
/// Aborted records and transaction markers move a position without a message, so the
/// positions are looked at too. A failed poll is logged and retried.
pub(crate) fn read_committed_up_to(
    brokers: &str,
    properties: &KafkaProperties,
    group: &str,
    topic: &str,
    ends: &[(i32, i64)],
    wait: Duration,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>),
) -> Result<(), KafkaConnectorError> {
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};
    if ends.iter().all(|(_, end)| *end <= 0) {
        return Ok(());
    }
    let failed = |e| KafkaConnectorError::client(format!("reading {topic}"), brokers, e);
    let consumer: BaseConsumer = properties
        .client_config(
            brokers,
            &[("isolation.level", "read_committed"), ("enable.auto.commit", "false"), ("group.id", group)],
        )
        .create()
        .map_err(failed)?;
    let mut assignment = TopicPartitionList::new();
    for (partition, _) in ends {
        assignment.add_partition_offset(topic, *partition, Offset::Beginning).map_err(failed)?;
    }
    consumer.assign(&assignment).map_err(failed)?;
    let mut reached: Vec<bool> = ends.iter().map(|(_, end)| *end <= 0).collect();
    let deadline = std::time::Instant::now() + wait;
    let mut last_warning: Option<std::time::Instant> = None;
    let mut last_error = None;
    while reached.iter().any(|r| !r) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                if let Some(i) = ends.iter().position(|(p, _)| *p == message.partition()) {
                    reached[i] |= message.offset() + 1 >= ends[i].1;
                }
                each(&message);
            }
            Some(Err(error)) => {
                if last_warning.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                    last_warning = Some(std::time::Instant::now());
                    tracing::warn!(
                        topic,
                        brokers,
                        "reading {topic}: {error}; retrying",
                        error = eddy_types::chain(&error)
                    );
                }
                last_error = Some(error);
            }
            None => {
                if let Ok(positions) = consumer.position() {
                    for (i, (partition, end)) in ends.iter().enumerate() {
                        let position = positions.find_partition(topic, *partition).map(|e| e.offset());
                        reached[i] |= matches!(position, Some(Offset::Offset(p)) if p >= *end);
                    }
                }
            }
        }
        if reached.iter().any(|r| !r) && std::time::Instant::now() > deadline {
            let short: Vec<String> = ends
                .iter()
                .zip(&reached)
                .filter(|(_, reached)| !**reached)
                .map(|((partition, end), _)| format!("{topic}/{partition} to offset {end}"))
                .collect();
            let why = match last_error {
                Some(error) => format!("the last read failed: {error}", error = eddy_types::chain(&error)),
                None => "a transaction still open there holds a committed reader back".to_string(),
            };
            return Err(KafkaConnectorError::Timeout {
                action: format!("reading {topic} up to its end offsets ({} not reached; {why})", short.join(", ")),
                brokers: brokers.to_string(),
                seconds: wait.as_secs(),
            });
        }
    }
    Ok(())
}
