//! Seed 000's two-topic join on Kafka (`examples/kafka_two_topic_join.rs`) against
//! Apache Kafka the test starts (feature `kafka`).
#![cfg(feature = "kafka")]

#[path = "../examples/kafka_two_topic_join.rs"]
#[allow(dead_code)]
mod kafka_two_topic_join;

use eddy::connector::kafka::admin::create_topic;
use eddy::connector::kafka::testing::{produce, read_committed, KafkaCluster};
use eddy::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// One record per key on each side: every key on both sides is joined exactly once
/// (whichever side comes second emits), keys on one side only never.
#[test]
fn two_topics_joined_exactly_once_through_kafka() {
    let kafka = KafkaCluster::single().unwrap();
    let b = kafka.brokers.clone();
    for topic in ["orders", "payments", "joined"] {
        create_topic(&b, topic, 2, &[]).unwrap();
    }
    let line = |key: u64, value: u64| ((key % 2) as i32, key.to_string(), format!("{key},{value}").into_bytes());
    produce(&b, "orders", &(0..200).map(|k| line(k, k)).collect::<Vec<_>>()).unwrap();
    produce(&b, "payments", &(100..300).map(|k| line(k, 1000 + k)).collect::<Vec<_>>()).unwrap();
    let env = Env::new();
    env.set_parallelism(2);
    env.enable_checkpointing(100);
    kafka_two_topic_join::job(&env, &b, "orders", "payments", "joined", true);
    let result = env.execute("two topic join on Kafka").unwrap();
    let mut joined: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (_, key, value) in read_committed(&b, "joined", Duration::from_secs(60)).unwrap() {
        let key: u64 = String::from_utf8(key).unwrap().parse().unwrap();
        joined.entry(key).or_default().push(String::from_utf8(value).unwrap());
    }
    let expected: BTreeMap<u64, Vec<String>> = (100..200).map(|k| (k, vec![format!("{k},{k},{}", 1000 + k)])).collect();
    // A failover is allowed (exactly once), but says so if the output differs.
    assert_eq!(
        joined,
        expected,
        "{} restarts: {:?}; {}",
        result.restarts,
        result.warnings,
        eddy::connector::kafka::testing::describe_ends(&b, "joined")
    );
}
