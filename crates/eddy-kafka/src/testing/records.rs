//! Writing and reading topics in tests: [`produce`] through librdkafka, and every
//! committed record of a topic read back through librdkafka ([`read_committed`]) or
//! through Kafka's own Java consumer ([`read_committed_with_java`]).

use std::time::Duration;

/// Writes `records` (`(partition, key, value)`) to `topic` and waits until all are
/// acknowledged; fails if any was not delivered (a partition the producer does not know
/// yet, say).
pub fn produce(brokers: &str, topic: &str, records: &[(i32, String, Vec<u8>)]) -> Result<(), String> {
    use crate::sink::producer::SinkProducer;
    use rdkafka::producer::BaseRecord;
    let mut producer = SinkProducer::new(brokers, &crate::KafkaProperties::default(), &[("acks", "all")])
        .map_err(|e| e.to_string())?;
    for (partition, key, value) in records {
        let record = BaseRecord::to(topic).partition(*partition).key(key.as_bytes()).payload(value.as_slice());
        producer.send_record(record).map_err(|e| format!("producing to {topic}: {e}"))?;
    }
    producer.flush().map_err(|e| format!("producing to {topic}: {e}"))
}

/// A record as a test reads it back: partition, key, value.
pub type ReadRecord = (i32, Vec<u8>, Vec<u8>);

/// Every record of `topic` a `read_committed` consumer sees, up to each partition's end
/// offset now, open transactions included: the read waits until they are decided (up to
/// `wait`), as `(partition, key, value)` in partition and offset order.
pub fn read_committed(brokers: &str, topic: &str, wait: Duration) -> Result<Vec<ReadRecord>, String> {
    use rdkafka::message::Message;
    let ends = crate::admin::end_offsets(brokers, topic).map_err(|e| e.to_string())?;
    let properties = crate::KafkaProperties::default();
    let mut records: Vec<(i32, i64, Vec<u8>, Vec<u8>)> = Vec::new();
    crate::admin::read_committed_up_to(brokers, &properties, "eddy-test-reader", topic, &ends, wait, |message| {
        records.push((
            message.partition(),
            message.offset(),
            message.key().unwrap_or_default().to_vec(),
            message.payload().unwrap_or_default().to_vec(),
        ))
    })
    .map_err(|e| e.to_string())?;
    records.sort_by_key(|(partition, offset, _, _)| (*partition, *offset));
    Ok(records.into_iter().map(|(p, _, k, v)| (p, k, v)).collect())
}

/// The first `expected` records of `topic` as Kafka's own Java consumer
/// (`kafka-console-consumer`, from the jars in [`kafka_libs`](super::kafka_libs)) reads
/// them with `isolation.level=read_committed` from the beginning, fewer if no record comes
/// for 30 s (the first wait includes joining its consumer group), as `(partition, key,
/// value)`, each partition in offset order. Keys and values must be UTF-8 without tabs or
/// line breaks (it prints them as text). Records beyond `expected` are not read: compare
/// the whole topic through [`read_committed`].
pub fn read_committed_with_java(brokers: &str, topic: &str, expected: usize) -> Result<Vec<ReadRecord>, String> {
    let libs = super::kafka_libs()?;
    let output = super::cluster::java(&libs)
        // Its log would go to standard output among the records.
        .args(["-Xmx256m", "-Dlog4j2.level=OFF", "org.apache.kafka.tools.consumer.ConsoleConsumer"])
        .args(["--bootstrap-server", brokers])
        .args(["--topic", topic, "--from-beginning", "--isolation-level", "read_committed"])
        .args(["--formatter-property", "print.partition=true", "--formatter-property", "print.key=true"])
        .args(["--max-messages", &expected.to_string(), "--timeout-ms", "30000"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run Kafka's console consumer: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    // It ends after `expected` records or by the idle timeout (reported as an error),
    // then counts what it printed.
    let processed = stderr
        .lines()
        .find_map(|l| l.strip_prefix("Processed a total of ")?.strip_suffix(" messages")?.parse::<usize>().ok())
        .ok_or_else(|| format!("Kafka's console consumer of {topic} did not finish: {stderr}"))?;
    let mut records = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        // "Partition:0<TAB>key<TAB>value"
        let mut fields = line.splitn(3, '\t');
        let partition = fields.next().and_then(|p| p.strip_prefix("Partition:")).and_then(|p| p.parse::<i32>().ok());
        match (partition, fields.next(), fields.next()) {
            (Some(partition), Some(key), Some(value)) => {
                records.push((partition, key.as_bytes().to_vec(), value.as_bytes().to_vec()))
            }
            _ => return Err(format!("Kafka's console consumer printed an unexpected line: {line:?}")),
        }
    }
    if records.len() != processed {
        return Err(format!(
            "Kafka's console consumer counted {processed} records of {topic}, printed {}",
            records.len()
        ));
    }
    // Stable: each partition's records stay in their offset order.
    records.sort_by_key(|(partition, _, _)| *partition);
    Ok(records)
}

/// Each partition's end offsets as committed and uncommitted readers see them, for the
/// messages of failed tests.
pub fn describe_ends(brokers: &str, topic: &str) -> String {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let Ok(partitions) = crate::admin::end_offsets(brokers, topic) else { return format!("{topic}: no metadata") };
    let mut text = format!("{topic}:");
    for isolation in ["read_committed", "read_uncommitted"] {
        let Ok(consumer) = crate::KafkaProperties::default()
            .client_config(brokers, &[("isolation.level", isolation)])
            .create::<BaseConsumer>()
        else {
            continue;
        };
        let ends: Vec<String> = partitions
            .iter()
            .map(|(p, _)| format!("{:?}", consumer.fetch_watermarks(topic, *p, Duration::from_secs(10)).map(|w| w.1)))
            .collect();
        text.push_str(&format!(" {isolation} {}", ends.join(" ")));
    }
    text
}
