//! Seed 000's two-topic join on Kafka: `key,value` lines from two topics, keyed by the
//! key, connected into the join of `two_topic_join` (two `ValueState`s, the latest value
//! of each side); every join result goes exactly once to a third topic as
//! `key,a,b`. The sources keep their partitions' offsets in operator state, the sink
//! commits with the checkpoints.
//!
//! ```text
//! cargo run --release --features kafka --example kafka_two_topic_join -- \
//!     --brokers 127.0.0.1:9092 --topic-a orders --topic-b payments --output joined
//! ```

#[path = "two_topic_join.rs"]
#[allow(dead_code)]
mod two_topic_join;

use clap::Parser;
use eddy::connector::kafka::{DeliveryGuarantee, KafkaRecord, KafkaSink, KafkaSource};
use eddy::prelude::*;
use two_topic_join::{Record, StatefulJoin};

/// A `key,value` line as a record; anything else fails the job naming where it is.
pub fn record(kafka: &KafkaRecord<'_>) -> Result<Option<Record>, String> {
    let line = std::str::from_utf8(kafka.value().unwrap_or_default()).map_err(|e| e.to_string())?;
    let (key, value) = line.split_once(',').ok_or_else(|| format!("not a key,value line: {line:?}"))?;
    let value = value.trim().parse().map_err(|e| format!("value {value:?}: {e}"))?;
    Ok(Some(Record { key: key.to_string(), value }))
}

/// The join from `topic_a` and `topic_b` into `output`; `bounded`: up to the topics' ends
/// at the start. Returns the sink, for a caller to set it apart (its parallelism).
pub fn job(
    env: &Env,
    brokers: &str,
    topic_a: &str,
    topic_b: &str,
    output: &str,
    bounded: bool,
) -> eddy::DataStreamSink {
    let source = |topic: &str| {
        let source = KafkaSource::new(brokers, &[topic], record).with_group_id("eddy-two-topic-join");
        if bounded {
            source.bounded()
        } else {
            source
        }
    };
    let a = env.add_parallel_source(source(topic_a)).name("topic A").uid("topic-a").key_by(|r: &Record| r.key.clone());
    let b = env.add_parallel_source(source(topic_b)).name("topic B").uid("topic-b").key_by(|r: &Record| r.key.clone());
    let sink = KafkaSink::new(brokers, output, |(key, a, b): &(String, i64, i64), k: &mut Vec<u8>, v: &mut Vec<u8>| {
        k.extend_from_slice(key.as_bytes());
        v.extend_from_slice(format!("{key},{a},{b}").as_bytes());
        true
    })
    .with_delivery_guarantee(DeliveryGuarantee::ExactlyOnce)
    .with_transactional_id_prefix(&format!("eddy-two-topic-join-{output}"));
    a.connect(&b).co_flat_map(StatefulJoin::default()).name("join").uid("join").add_sink(sink).uid("joined")
}

#[derive(Parser)]
struct Args {
    #[arg(long)]
    brokers: String,
    #[arg(long)]
    topic_a: String,
    #[arg(long)]
    topic_b: String,
    #[arg(long)]
    output: String,
    /// Stop at the topics' ends at the start.
    #[arg(long)]
    bounded: bool,
    #[arg(long, default_value_t = 1000)]
    checkpoint_ms: u64,
    #[arg(long, default_value_t = 2)]
    parallelism: u32,
    #[command(flatten)]
    cluster: eddy::cluster::SubmitArgs,
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let args = Args::parse();
    let env = Env::new();
    args.cluster.apply_to(&env)?;
    env.set_parallelism(args.parallelism);
    env.enable_checkpointing(args.checkpoint_ms);
    job(&env, &args.brokers, &args.topic_a, &args.topic_b, &args.output, args.bounded);
    env.execute("two topic join on Kafka")?;
    Ok(())
}
