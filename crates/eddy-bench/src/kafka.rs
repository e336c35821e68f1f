//! W1 on Kafka: `kafka-broker` starts Apache Kafka to run against, `kafka-produce` writes
//! W1's stream into a topic, `api-count --kafka` reads it, counts per path and writes one
//! record per event into another topic, with the delivery guarantee asked for; `--bare`
//! reads the topic in a plain rdkafka consumer loop (the limit the engine is compared
//! with); `kafka-latency` measures produce-to-readable latency through such a job.

use crate::api_count::{checksum_term, CountPerPath};
use crate::checksum::{checksum_of_job, ChecksumSink};
use crate::generator::Event;
use crate::rate::RateLimiter;
use crate::{Args, Report};
use eddy::connector::kafka::admin::create_topic;
use eddy::connector::kafka::{DeliveryGuarantee, KafkaRecord, KafkaSink, KafkaSource};
use eddy::prelude::*;
use std::time::{Duration, Instant};

/// The counter of input events a Kafka run counted (exactly once, like the checksum).
const EVENTS: &str = "events";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Delivery {
    ExactlyOnce,
    AtLeastOnce,
    None,
}

#[derive(Debug, Clone, clap::Args)]
pub struct KafkaArgs {
    /// Kafka brokers (`host:port,...`): api-count reads and writes Kafka instead of
    /// generating events; kafka-produce writes there.
    #[arg(long, alias = "brokers")]
    pub kafka: Option<String>,
    /// kafka-produce: the topic to create and fill.
    #[arg(long)]
    pub topic: Option<String>,
    /// kafka-produce: its partitions.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(i32).range(1..))]
    pub partitions: i32,
    /// api-count --kafka: the topic W1's events are read from.
    #[arg(long)]
    pub input_topic: Option<String>,
    /// api-count --kafka: the topic `(path, count)` records go to (key = path, value =
    /// `<path>,<count>`); none: only the checksum.
    #[arg(long)]
    pub output_topic: Option<String>,
    /// api-count --kafka: stop at the input's end offsets of the first start.
    #[arg(long)]
    pub bounded: bool,
    /// api-count --kafka: the sink's delivery guarantee.
    #[arg(long, value_enum, default_value_t = Delivery::ExactlyOnce)]
    pub delivery: Delivery,
    /// kafka-latency: how the output is read (`read_committed` or `read_uncommitted`).
    #[arg(long, default_value = "read_committed")]
    pub isolation: String,
    /// kafka-broker: how many brokers (more than one: every topic replicated to all).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub nodes: u16,
}

fn need<'a>(value: &'a Option<String>, flag: &str) -> anyhow::Result<&'a str> {
    value.as_deref().ok_or_else(|| anyhow::anyhow!("{flag} is required here"))
}

/// `kafka-broker`: `--nodes` Apache Kafka brokers until the process is stopped (their JVMs
/// and log directories go with it); says how long they took to start.
pub fn broker(args: &Args) -> anyhow::Result<Report> {
    use std::io::Write;
    let started = Instant::now();
    let kafka = eddy::connector::kafka::testing::KafkaCluster::start(args.kafka.nodes.into(), &[])
        .map_err(anyhow::Error::msg)?;
    println!("started_seconds={:.2}", started.elapsed().as_secs_f64());
    println!("brokers={}", kafka.brokers);
    std::io::stdout().flush()?;
    loop {
        std::thread::park();
    }
}

/// `kafka-produce`: W1's events `0..events` into `--topic` (created with `--partitions`),
/// key = the path, value = `<i>,<method>,<timestamp>,<path>` (an access-log line).
pub fn produce(args: &Args) -> anyhow::Result<Report> {
    use eddy::connector::kafka::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use eddy::connector::kafka::rdkafka::ClientConfig;
    let brokers = need(&args.kafka.kafka, "--brokers")?;
    let topic = need(&args.kafka.topic, "--topic")?;
    create_topic(brokers, topic, args.kafka.partitions, &[])?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .create()?;
    let keys = args.keys();
    let mut limiter = RateLimiter::new(args.rate);
    let started = Instant::now();
    let mut line = String::new();
    for i in 0..args.events {
        limiter.admit();
        let event = Event::generate(1, i, keys);
        line.clear();
        use std::fmt::Write;
        write!(line, "{},{},{},{}", event.i, event.method.as_str(), event.timestamp_ms, event.path)?;
        let mut record = BaseRecord::to(topic).key(event.path.as_str()).payload(line.as_str());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(5));
                }
            }
        }
        if i % 4096 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(300))?;
    Ok(Report::bare(args.events, started, 0))
}

/// The path of a W1 record: its key.
fn path_of(record: &KafkaRecord<'_>) -> Result<Option<String>, String> {
    let key = record.key().ok_or("a W1 record without a key (the path)")?;
    let path = std::str::from_utf8(key).map_err(|e| format!("the key is not UTF-8: {e}"))?;
    Event::key_of_path(path).ok_or_else(|| format!("the key {path:?} is not an API path"))?;
    Ok(Some(path.to_string()))
}

/// `api-count --kafka`: W1 from `--input-topic` to `--output-topic`.
pub fn api_count(args: &Args) -> anyhow::Result<Report> {
    let brokers = need(&args.kafka.kafka, "--kafka")?;
    let input = need(&args.kafka.input_topic, "--input-topic")?;
    let env = Env::new();
    args.configure(&env)?;
    let mut source = KafkaSource::new(brokers, &[input], path_of).with_group_id(&format!("eddy-api-count-{input}"));
    if args.kafka.bounded {
        source = source.bounded();
    }
    let mut paths = env.add_parallel_source(source).name("kafka source").uid("kafka-source");
    if args.rate > 0 {
        // --rate caps the whole job: each subtask its share.
        let mut limiter = RateLimiter::new(args.rate / u64::from(args.parallelism));
        paths = paths
            .map(move |path: String| {
                limiter.admit();
                path
            })
            .name("rate")
            .uid("rate");
    }
    let counts = paths
        .key_by(|path: &String| path.clone())
        .process(CountPerPath::default())
        .name("count per path")
        .uid("count-per-path");
    counts.add_sink(ChecksumSink::new(checksum_term)).name("checksum").uid("checksum");
    counts.add_sink(ChecksumSink::named(EVENTS, |_: &(String, u64)| Ok(1))).name("events").uid("events");
    if let Some(output) = &args.kafka.output_topic {
        let guarantee = match args.kafka.delivery {
            Delivery::ExactlyOnce => DeliveryGuarantee::ExactlyOnce,
            Delivery::AtLeastOnce => DeliveryGuarantee::AtLeastOnce,
            Delivery::None => DeliveryGuarantee::None,
        };
        let sink =
            KafkaSink::new(brokers, output, |(path, count): &(String, u64), key: &mut Vec<u8>, value: &mut Vec<u8>| {
                use std::io::Write;
                key.extend_from_slice(path.as_bytes());
                let _ = write!(value, "{path},{count}");
                true
            })
            .with_delivery_guarantee(guarantee)
            .with_transactional_id_prefix(&format!("eddy-api-count-{output}"));
        counts.add_sink(sink).name("kafka sink").uid("kafka-sink");
    }
    let result = env.execute("W1 api-count on Kafka")?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: result.accumulators.get(EVENTS).copied().unwrap_or(0),
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra: args.checkpoints.report(&result),
    })
}

/// `api-count --kafka --bare`: the input topic read to its current end by one plain
/// rdkafka consumer loop, counting per path in a hash map: what reading alone costs.
pub fn bare(args: &Args) -> anyhow::Result<Report> {
    use eddy::connector::kafka::rdkafka::consumer::{BaseConsumer, Consumer};
    use eddy::connector::kafka::rdkafka::message::Message;
    use eddy::connector::kafka::rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let brokers = need(&args.kafka.kafka, "--kafka")?;
    let input = need(&args.kafka.input_topic, "--input-topic")?;
    let ends = eddy::connector::kafka::admin::end_offsets(brokers, input)?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "eddy-bench-bare")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for (partition, _) in &ends {
        assignment.add_partition_offset(input, *partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let started = Instant::now();
    let mut counts: std::collections::HashMap<Vec<u8>, u64> = std::collections::HashMap::new();
    let mut left: u64 = ends.iter().map(|(_, end)| *end as u64).sum();
    let (mut events, mut checksum) = (0u64, 0u64);
    while left > 0 {
        match consumer.poll(Duration::from_secs(10)) {
            Some(Ok(message)) => {
                left -= 1;
                let key = message.key().unwrap_or_default();
                let count = match counts.get_mut(key) {
                    Some(count) => count,
                    None => counts.entry(key.to_vec()).or_insert(0),
                };
                *count += 1;
                let path = std::str::from_utf8(key)?;
                checksum =
                    checksum.wrapping_add(crate::api_count::checksum_of(path, *count).map_err(anyhow::Error::msg)?);
                events += 1;
            }
            Some(Err(error)) => anyhow::bail!("reading {input}: {error}"),
            None => anyhow::bail!("reading {input}: nothing for 10 s with {left} records to go"),
        }
    }
    Ok(Report::bare(events, started, checksum))
}

/// `kafka-latency`: writes W1's events into `--topic` at `--rate` while reading
/// `--output-topic` (as `--isolation` readers do), and reports how long each `(path,
/// count)` took from its event's send to being readable: end-to-end latency of a job
/// running `api-count --kafka` between the two (started beforehand, unbounded).
pub fn latency(args: &Args) -> anyhow::Result<Report> {
    use eddy::connector::kafka::rdkafka::consumer::{BaseConsumer, Consumer};
    use eddy::connector::kafka::rdkafka::message::Message;
    use eddy::connector::kafka::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use eddy::connector::kafka::rdkafka::{ClientConfig, Offset, TopicPartitionList};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    let brokers = need(&args.kafka.kafka, "--brokers")?.to_string();
    let topic = need(&args.kafka.topic, "--topic")?.to_string();
    let output = need(&args.kafka.output_topic, "--output-topic")?.to_string();
    anyhow::ensure!(args.rate > 0, "kafka-latency needs --rate");
    let ends = eddy::connector::kafka::admin::end_offsets(&brokers, &output)?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", "eddy-bench-latency")
        .set("isolation.level", args.kafka.isolation.as_str())
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for (partition, end) in &ends {
        assignment.add_partition_offset(&output, *partition, Offset::Offset(*end))?;
    }
    consumer.assign(&assignment)?;
    let sent: Arc<Mutex<HashMap<(String, u64), Instant>>> = Arc::default();
    let producer_sent = sent.clone();
    let (events, keys, rate) = (args.events, args.keys(), args.rate);
    let producer_thread = std::thread::spawn(move || -> anyhow::Result<()> {
        let producer: BaseProducer =
            ClientConfig::new().set("bootstrap.servers", &brokers).set("linger.ms", "1").create()?;
        let mut limiter = RateLimiter::new(rate);
        let mut counts: HashMap<String, u64> = HashMap::new();
        for i in 0..events {
            limiter.admit();
            let event = Event::generate(1, i, keys);
            let count = counts.entry(event.path.clone()).or_insert(0);
            *count += 1;
            producer_sent.lock().unwrap().insert((event.path.clone(), *count), Instant::now());
            let line = format!("{},{},{},{}", event.i, event.method.as_str(), event.timestamp_ms, event.path);
            let mut record = BaseRecord::to(&topic).key(event.path.as_str()).payload(line.as_str());
            while let Err((_, back)) = producer.send(record) {
                record = back;
                producer.poll(Duration::from_millis(1));
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(60))?;
        Ok(())
    });
    let started = Instant::now();
    let mut latencies_us = Vec::with_capacity(events as usize);
    let mut quiet_since = Instant::now();
    while (latencies_us.len() as u64) < events && quiet_since.elapsed() < Duration::from_secs(30) {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else { continue };
        let message = message?;
        let now = Instant::now();
        quiet_since = now;
        let value = std::str::from_utf8(message.payload().unwrap_or_default())?;
        let Some((path, count)) = value.split_once(',') else { continue };
        let key = (path.to_string(), count.parse::<u64>()?);
        if let Some(at) = sent.lock().unwrap().remove(&key) {
            latencies_us.push(now.duration_since(at).as_micros() as u64);
        }
    }
    producer_thread.join().map_err(|_| anyhow::anyhow!("the producer thread panicked"))??;
    latencies_us.sort_unstable();
    let at =
        |q: f64| latencies_us.get(((latencies_us.len() as f64 * q) as usize).min(latencies_us.len().saturating_sub(1)));
    let ms = |v: Option<&u64>| v.map_or("none".to_string(), |us| format!("{:.1}", *us as f64 / 1000.0));
    let mut report = Report::bare(latencies_us.len() as u64, started, 0);
    report.extra = vec![
        ("latency_p50_ms".into(), ms(at(0.5))),
        ("latency_p99_ms".into(), ms(at(0.99))),
        ("latency_max_ms".into(), ms(latencies_us.last())),
    ];
    Ok(report)
}
