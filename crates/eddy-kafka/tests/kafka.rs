//! The Kafka connector against Apache Kafka on loopback: the tests share one broker
//! started by the first (`KafkaCluster::shared`), each naming its own topics, but for the
//! one that cuts its broker off behind a proxy. Outputs are read as `read_committed`
//! consumers see them and compared record by record.

use eddy_api::sink::CollectSink;
use eddy_api::Env;
use eddy_checkpoint::restart::RestartStrategy;
use eddy_kafka::admin::create_topic;
use eddy_kafka::source::utf8_values;
use eddy_kafka::testing::{produce, read_committed, read_committed_with_java, KafkaCluster};
use eddy_kafka::{DeliveryGuarantee, KafkaSink, KafkaSource, StartingOffsets};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// A test's directory of checkpoints and savepoints: removed when the test passes, kept
/// (and named) when it fails, for a look at what the job left.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for a look", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn scratch(name: &str) -> Scratch {
    let _ = tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).with_test_writer().try_init();
    let dir = std::env::temp_dir().join(format!("eddy-kafka-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// Records `first..first+count` as `(partition, key, value)`, value = the number.
fn numbers(first: u64, count: u64, partitions: i32) -> Vec<(i32, String, Vec<u8>)> {
    (first..first + count)
        .map(|i| ((i % partitions as u64) as i32, i.to_string(), i.to_string().into_bytes()))
        .collect()
}

fn write_values(value: &String, key: &mut Vec<u8>, payload: &mut Vec<u8>) -> bool {
    key.extend_from_slice(value.as_bytes());
    payload.extend_from_slice(value.as_bytes());
    true
}

/// An exactly-once sink of strings into `topic` (key and value the string), its
/// transactional ids named after the topic.
fn exactly_once_to(brokers: &str, topic: &str) -> KafkaSink<String> {
    KafkaSink::new(brokers, topic, write_values)
        .with_delivery_guarantee(DeliveryGuarantee::ExactlyOnce)
        .with_transactional_id_prefix(topic)
}

/// How often each value occurs in the committed output.
fn output_counts(brokers: &str, topic: &str) -> BTreeMap<u64, u32> {
    let mut counts = BTreeMap::new();
    for (_, _, value) in read_committed(brokers, topic, WAIT).unwrap() {
        *counts.entry(String::from_utf8(value).unwrap().parse::<u64>().unwrap()).or_insert(0) += 1;
    }
    counts
}

fn assert_exactly(counts: &BTreeMap<u64, u32>, expected: std::ops::Range<u64>) {
    let missing: Vec<u64> = expected.clone().filter(|i| !counts.contains_key(i)).take(10).collect();
    let doubled: Vec<(u64, u32)> = counts.iter().filter(|(_, n)| **n > 1).map(|(i, n)| (*i, *n)).take(10).collect();
    let foreign: Vec<u64> = counts.keys().filter(|i| !expected.contains(i)).copied().take(10).collect();
    assert!(
        missing.is_empty() && doubled.is_empty() && foreign.is_empty(),
        "missing {missing:?}, doubled {doubled:?}, unexpected {foreign:?} (of {} distinct)",
        counts.len()
    );
}

/// The broker does what the exactly-once sink relies on: `init_transactions` on a reused
/// id fences the producer that used it before (it can no longer commit) and aborts its
/// open transaction, and a `read_committed` reader sees nothing of an open transaction
/// until it commits, and nothing of an aborted one ever.
#[test]
fn broker_transactions_behave_as_the_sink_needs() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::ClientConfig;
    let b = &KafkaCluster::shared().brokers;
    create_topic(b, "txn", 1, &[]).unwrap();
    let make = || -> BaseProducer {
        ClientConfig::new().set("bootstrap.servers", b).set("transactional.id", "txn-test-0").create().unwrap()
    };
    let first = make();
    first.init_transactions(WAIT).unwrap();
    first.begin_transaction().unwrap();
    first.send(BaseRecord::to("txn").key("a").payload("open")).unwrap();
    first.flush(WAIT).unwrap();
    // A committed reader cannot pass the open transaction.
    let blocked = read_committed(b, "txn", Duration::from_secs(3));
    assert!(
        blocked.as_ref().is_err_and(|e| e.contains("reading txn up to its end offsets")),
        "a committed reader passed an open transaction: {blocked:?}"
    );
    let second = make();
    second.init_transactions(WAIT).unwrap();
    assert!(first.commit_transaction(Duration::from_secs(5)).is_err(), "the fenced producer must not commit");
    second.begin_transaction().unwrap();
    second.send(BaseRecord::to("txn").key("b").payload("aborted")).unwrap();
    second.flush(WAIT).unwrap();
    second.abort_transaction(WAIT).unwrap();
    second.begin_transaction().unwrap();
    second.send(BaseRecord::to("txn").key("c").payload("committed")).unwrap();
    second.commit_transaction(WAIT).unwrap();
    let values: Vec<Vec<u8>> = read_committed(b, "txn", WAIT).unwrap().into_iter().map(|(_, _, v)| v).collect();
    assert_eq!(values, vec![b"committed".to_vec()]);
}

/// Seed 001's case: a 5-partition topic read at parallelism 1, stopped with a savepoint,
/// resumed at 2, then at 3, written exactly once: every input record once in the output.
#[test]
fn rescaled_source_and_exactly_once_sink_keep_every_record_once() {
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "rescale-in", 5, &[]).unwrap();
    create_topic(&b, "rescale-out", 3, &[]).unwrap();
    let dir = scratch("rescale");
    let mut restore: Option<String> = None;
    for (round, parallelism) in [1u32, 2, 3].into_iter().enumerate() {
        let round = round as u64;
        produce(&b, "rescale-in", &numbers(round * 3000, 3000, 5)).unwrap();
        let env = Env::new();
        env.set_parallelism(parallelism);
        env.enable_checkpointing(200);
        env.set_checkpoint_dir(dir.join("checkpoints"));
        env.set_restart_strategy(RestartStrategy::None);
        if let Some(savepoint) = &restore {
            env.restore_from(savepoint);
        }
        env.stop_with_savepoint_after(dir.join(format!("savepoint-{round}")), 2500);
        env.add_parallel_source(KafkaSource::new(&b, &["rescale-in"], utf8_values))
            .uid("kafka-in")
            .add_sink(exactly_once_to(&b, "rescale-out"))
            .uid("kafka-out");
        let result = env.execute("kafka rescale").unwrap();
        restore = Some(result.savepoint.clone().expect("stopped with a savepoint"));
        // Everything read so far is in the output, once (the savepoint's epoch is
        // committed when the job stops with it).
        assert_exactly(&output_counts(&b, "rescale-out"), 0..(round + 1) * 3000);
    }
    // Kafka's own Java consumer reads the same: every record once, none of an aborted
    // transaction.
    let mut by_java = BTreeMap::new();
    for (_, _, value) in read_committed_with_java(&b, "rescale-out", 9000).unwrap() {
        *by_java.entry(String::from_utf8(value).unwrap().parse::<u64>().unwrap()).or_insert(0) += 1;
    }
    assert_exactly(&by_java, 0..9000);
}

/// A record that is not UTF-8 fails the job with an error naming where it is.
#[test]
fn undeserializable_record_names_topic_partition_and_offset() {
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "bad", 1, &[]).unwrap();
    let mut records = numbers(0, 3, 1);
    records.push((0, "x".into(), vec![0xff, 0xfe]));
    produce(&b, "bad", &records).unwrap();
    let env = Env::new();
    env.set_restart_strategy(RestartStrategy::None);
    env.add_parallel_source(KafkaSource::new(&b, &["bad"], utf8_values).bounded()).add_sink(CollectSink::new());
    let error = env.execute("bad record").unwrap_err().to_string();
    assert!(error.contains("topic bad, partition 0, offset 3"), "{error}");

    // Routed instead: the good records come through, the bad one as a BadRecord.
    let env = Env::new();
    let out = CollectSink::new();
    env.add_parallel_source(KafkaSource::new(&b, &["bad"], utf8_values).bounded().routing_bad_records())
        .add_sink(out.clone());
    env.execute("bad record routed").unwrap();
    let got = out.take();
    assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 3);
    let bad: Vec<_> = got.into_iter().filter_map(Result::err).collect();
    assert_eq!((bad.len(), bad[0].offset, bad[0].value.clone()), (1, 3, Some(vec![0xff, 0xfe])));
}

/// Bounded: a restore stops at the end offsets of the first start, even though more
/// records arrived since.
#[test]
fn bounded_restore_stops_where_the_first_run_would_have() {
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "bounded", 3, &[]).unwrap();
    // Created here: the first run may be stopped before its first commit would create it.
    create_topic(&b, "bounded-out", 3, &[]).unwrap();
    produce(&b, "bounded", &numbers(0, 3000, 3)).unwrap();
    let dir = scratch("bounded");
    let run = |restore: Option<&str>, stop_after: Option<u64>| {
        let env = Env::new();
        env.set_parallelism(2);
        env.enable_checkpointing(100);
        env.set_checkpoint_dir(dir.join("checkpoints"));
        if let Some(savepoint) = restore {
            env.restore_from(savepoint);
        }
        if let Some(ms) = stop_after {
            env.stop_with_savepoint_after(dir.join("savepoint"), ms);
        }
        env.add_parallel_source(KafkaSource::new(&b, &["bounded"], utf8_values).bounded())
            .uid("in")
            .map(|v: String| {
                // Slow enough that the first run is stopped before it read everything.
                std::thread::sleep(Duration::from_millis(2));
                v
            })
            .uid("slow")
            .add_sink(exactly_once_to(&b, "bounded-out"))
            .uid("out");
        env.execute("bounded").unwrap()
    };
    // The savepoint comes after the readers fixed their ends (they start within ~1 s),
    // before they read everything (1,500 records each at 2 ms a record take 3 s).
    let first = run(None, Some(2000));
    let savepoint = first.savepoint.expect("stopped with a savepoint");
    let partial = output_counts(&b, "bounded-out").len();
    assert!(partial < 3000, "the first run should have been stopped early, it wrote {partial}");
    produce(&b, "bounded", &numbers(3000, 1000, 3)).unwrap();
    run(Some(&savepoint), None);
    assert_exactly(&output_counts(&b, "bounded-out"), 0..3000);
}

/// Splits found while the job runs are read from their first record: partitions added to
/// a subscribed topic, and a topic created that matches the job's pattern.
#[test]
fn splits_found_while_running_are_read_from_the_start() {
    use eddy_kafka::admin::add_partitions;
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "grow-in-a", 2, &[]).unwrap();
    produce(&b, "grow-in-a", &numbers(0, 100, 2)).unwrap();
    let dir = scratch("grow");
    let env = Env::new();
    env.set_parallelism(2);
    env.stop_with_savepoint_after(dir.join("savepoint"), 6000);
    env.add_parallel_source(
        KafkaSource::new(&b, &[], utf8_values)
            .with_topic_pattern("grow-in-.*")
            .unwrap()
            .with_partition_discovery_interval(Duration::from_millis(200)),
    )
    .add_sink(exactly_once_to(&b, "grow-out"));
    let grower = {
        let b = b.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            // Two partitions more for grow-in-a, written before discovery can find them.
            add_partitions(&b, "grow-in-a", 4).unwrap();
            produce(
                &b,
                "grow-in-a",
                &numbers(160, 40, 4).into_iter().map(|(p, k, v)| (2 + p % 2, k, v)).collect::<Vec<_>>(),
            )
            .unwrap();
            create_topic(&b, "grow-in-b", 3, &[]).unwrap();
            produce(&b, "grow-in-b", &numbers(100, 60, 3)).unwrap();
            // Not matched: never read.
            create_topic(&b, "grow-other", 1, &[]).unwrap();
            produce(&b, "grow-other", &numbers(1000, 5, 1)).unwrap();
        })
    };
    env.execute("grow").unwrap();
    grower.join().unwrap();
    // Stopped with a savepoint: what it read is committed.
    assert_exactly(&output_counts(&b, "grow-out"), 0..200);
}

/// Brokers unreachable at start, then cut while the job runs: the job waits, retries and
/// loses nothing.
#[test]
fn unreachable_brokers_are_waited_for() {
    let (broker, proxy) = KafkaCluster::single_behind_proxy().unwrap();
    let b = broker.brokers.clone();
    create_topic(&b, "flaky", 2, &[]).unwrap();
    produce(&b, "flaky", &numbers(0, 2000, 2)).unwrap();
    proxy.cut();
    let cutter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        proxy.restore();
        std::thread::sleep(Duration::from_millis(300));
        proxy.cut();
        std::thread::sleep(Duration::from_millis(2000));
        proxy.restore();
        proxy
    });
    let env = Env::new();
    env.set_parallelism(2);
    let out = CollectSink::new();
    env.add_parallel_source(KafkaSource::new(&b, &["flaky"], utf8_values).bounded()).add_sink(out.clone());
    env.execute("flaky").unwrap();
    let _proxy = cutter.join().unwrap();
    let mut got: Vec<u64> = out.take().into_iter().map(|v| v.parse().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
}

/// Per-partition watermarks: a partition that gets no records goes idle after the
/// strategy's idleness timeout and holds nobody back, so event-time windows fire while
/// the job runs; without idleness the same job fires none (the empty partition's
/// watermark stays at the start of time).
#[test]
fn an_idle_partition_does_not_hold_back_event_time() {
    use eddy_api::time::WatermarkStrategy;
    use eddy_api::window::{window_function, TimeWindow, TumblingEventTimeWindows};
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "clicks", 2, &[]).unwrap();
    // Partition 0: timestamps 0, 100, …, 5000 (value = timestamp); partition 1: nothing.
    let records: Vec<_> = (0..=50u64).map(|i| (0, i.to_string(), (i * 100).to_string().into_bytes())).collect();
    produce(&b, "clicks", &records).unwrap();
    let dir = scratch("idle");
    for output in ["windows-idle", "windows-waiting"] {
        create_topic(&b, output, 1, &[]).unwrap();
    }
    let run = |idleness: Option<Duration>, output: &str| {
        let env = Env::new();
        env.stop_with_savepoint_after(dir.join(output), 3000);
        let mut strategy =
            WatermarkStrategy::for_monotonous_timestamps().with_timestamp_assigner(|(t, _): &(i64, u64)| *t);
        if let Some(timeout) = idleness {
            strategy = strategy.with_idleness(timeout);
        }
        let clicks = |record: &eddy_kafka::KafkaRecord<'_>| -> Result<Option<(i64, u64)>, String> {
            let text = std::str::from_utf8(record.value().unwrap_or_default()).map_err(|e| e.to_string())?;
            Ok(Some((text.parse::<i64>().map_err(|e| e.to_string())?, 1)))
        };
        env.add_parallel_source(KafkaSource::new(&b, &["clicks"], clicks).with_watermarks(strategy))
            .uid("clicks")
            .key_by(|_: &(i64, u64)| 0u8)
            .window(TumblingEventTimeWindows::of(Duration::from_millis(1000)))
            .reduce_with(
                |(t, a), (_, b)| (t, a + b),
                window_function(|_: &u8, window: &TimeWindow, sums: &mut dyn Iterator<Item = (i64, u64)>, out| {
                    for (_, count) in sums {
                        out.collect(format!("{}:{count}", window.start));
                    }
                }),
            )
            .uid("windows")
            .add_sink(exactly_once_to(&b, output))
            .uid("out");
        env.execute("idle partition").unwrap();
        let mut windows: Vec<String> = read_committed(&b, output, WAIT)
            .unwrap()
            .into_iter()
            .map(|(_, _, v)| String::from_utf8(v).unwrap())
            .collect();
        windows.sort_by_key(|w| w.split(':').next().unwrap().parse::<i64>().unwrap());
        windows
    };
    // Watermark 4999 after the record at 5000: windows up to [4000, 5000) fire.
    let expected: Vec<String> = (0..5).map(|w| format!("{}:10", w * 1000)).collect();
    assert_eq!(run(Some(Duration::from_millis(300)), "windows-idle"), expected);
    assert_eq!(run(None, "windows-waiting"), Vec::<String>::new());
}

/// A setting the split enumerator cannot work with fails the job at once, naming the
/// coordinator and the partition, without a restart (every restart would fail the same).
#[test]
fn a_partition_without_a_starting_offset_fails_the_job_without_restarts() {
    use eddy_kafka::{OffsetResetStrategy, StartingOffsets};
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "unplaced", 2, &[]).unwrap();
    let env = Env::new();
    // A restart would wait 60 s first.
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 3, delay_ms: 60_000 });
    let starts = StartingOffsets::Offsets(vec![("unplaced".into(), 0, 0)], OffsetResetStrategy::None);
    env.add_source(KafkaSource::new(&b, &["unplaced"], utf8_values).with_starting_offsets(starts).bounded())
        .add_sink(CollectSink::new());
    let started = std::time::Instant::now();
    let error = env.execute("unplaced").unwrap_err().to_string();
    assert!(error.contains("the coordinator of operator"), "{error}");
    assert!(error.contains("no starting offset for unplaced/1 and no reset strategy"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(30), "the job restarted: {:?}", started.elapsed());
}

/// A bounded read of a topic the brokers do not have fails by the topic's name, instead
/// of finishing at once as if the topic were empty.
#[test]
fn a_bounded_source_over_a_missing_topic_fails_the_job_by_the_topics_name() {
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "present", 1, &[]).unwrap();
    produce(&b, "present", &numbers(0, 3, 1)).unwrap();
    let env = Env::new();
    env.set_restart_strategy(RestartStrategy::None);
    env.add_source(KafkaSource::new(&b, &["present", "absent"], utf8_values).bounded()).add_sink(CollectSink::new());
    let error = env.execute("missing topic").unwrap_err().to_string();
    assert!(error.contains("topic 'absent' does not exist"), "{error}");
}

/// Where a source starts: explicit offsets, the first record at or after a time, and the
/// end ("latest", resolved once when the reader starts, so records written after it are
/// read and none before).
#[test]
fn starting_offsets_by_offset_timestamp_and_latest() {
    use eddy_kafka::{OffsetResetStrategy, StartingOffsets};
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "starts", 1, &[]).unwrap();
    produce(&b, "starts", &numbers(0, 50, 1)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let between = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    std::thread::sleep(Duration::from_millis(100));
    produce(&b, "starts", &numbers(50, 50, 1)).unwrap();
    let bounded_from = |starting: StartingOffsets| -> Vec<u64> {
        let env = Env::new();
        let out = CollectSink::new();
        env.add_parallel_source(
            KafkaSource::new(&b, &["starts"], utf8_values).with_starting_offsets(starting).bounded(),
        )
        .add_sink(out.clone());
        env.execute("starts").unwrap();
        let mut got: Vec<u64> = out.take().into_iter().map(|v| v.parse().unwrap()).collect();
        got.sort_unstable();
        got
    };
    let explicit = StartingOffsets::Offsets(vec![("starts".into(), 0, 30)], OffsetResetStrategy::None);
    assert_eq!(bounded_from(explicit), (30..100).collect::<Vec<_>>());
    assert_eq!(bounded_from(StartingOffsets::Timestamp(between)), (50..100).collect::<Vec<_>>());

    let dir = scratch("latest");
    let env = Env::new();
    env.stop_with_savepoint_after(dir.join("savepoint"), 4000);
    env.add_parallel_source(
        KafkaSource::new(&b, &["starts"], utf8_values).with_starting_offsets(StartingOffsets::Latest),
    )
    .uid("in")
    .add_sink(exactly_once_to(&b, "latest-out"))
    .uid("out");
    let later = {
        let b = b.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2000));
            produce(&b, "starts", &numbers(100, 10, 1)).unwrap();
        })
    };
    env.execute("latest").unwrap();
    later.join().unwrap();
    assert_exactly(&output_counts(&b, "latest-out"), 100..110);
}

/// A job at parallelism 3 fails for good; restored from its latest checkpoint at
/// parallelism 2, subtask 0 also recovers slot 2 (slot s goes to subtask s mod p): it
/// fences slot 2's transactional id, reads its marker, and sends again what Kafka lacks.
/// Every record once.
#[test]
fn a_restore_at_lower_parallelism_recovers_every_slot_exactly_once() {
    use eddy_checkpoint::CheckpointConfig;
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "down", 3, &[]).unwrap();
    create_topic(&b, "down-out", 3, &[]).unwrap();
    produce(&b, "down", &numbers(0, 6000, 3)).unwrap();
    let dir = scratch("down");
    let run = |parallelism: u32, fail_after: Option<u64>| {
        let env = Env::new();
        env.set_parallelism(parallelism);
        env.set_checkpoint_config(CheckpointConfig {
            interval_ms: 100,
            retain_on_cancel: true,
            ..CheckpointConfig::default()
        });
        env.set_checkpoint_dir(dir.join("checkpoints"));
        env.set_restart_strategy(RestartStrategy::None);
        if fail_after.is_none() {
            env.restore_latest_from(dir.join("checkpoints"));
        }
        let mut seen = 0u64;
        env.add_parallel_source(KafkaSource::new(&b, &["down"], utf8_values).bounded())
            .uid("in")
            .map(move |v: String| {
                seen += 1;
                if seen.is_multiple_of(20) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert!(fail_after.is_none_or(|n| seen < n), "failing on purpose after {seen} records");
                v
            })
            .uid("maybe-fail")
            .add_sink(exactly_once_to(&b, "down-out"))
            .uid("out");
        env.execute("scale down")
    };
    assert!(run(3, Some(1500)).is_err(), "the first run fails");
    let committed_before = output_counts(&b, "down-out").len();
    assert!(committed_before < 6000, "the first run should fail part-way, it wrote {committed_before}");
    run(2, None).unwrap();
    assert_exactly(&output_counts(&b, "down-out"), 0..6000);
}

/// Brokers whose `transaction.max.timeout.ms` (5 s) is below the sink's
/// `transaction.timeout.ms` (librdkafka's 60 s): the job is refused when the sink starts,
/// naming both settings; with the sink's timeout lowered to fit, every record is written
/// once.
#[test]
fn a_transaction_timeout_above_the_brokers_maximum_is_refused_naming_both_settings() {
    let kafka = KafkaCluster::start(1, &[("transaction.max.timeout.ms", "5000")]).unwrap();
    let b = kafka.brokers.clone();
    create_topic(&b, "short", 2, &[]).unwrap();
    produce(&b, "short", &numbers(0, 1000, 2)).unwrap();
    let run = |sink: KafkaSink<String>| {
        let env = Env::new();
        env.set_parallelism(2);
        env.enable_checkpointing(100);
        env.set_restart_strategy(RestartStrategy::None);
        env.add_parallel_source(KafkaSource::new(&b, &["short"], utf8_values).bounded()).add_sink(sink);
        env.execute("short transactions")
    };
    let error = run(exactly_once_to(&b, "short-out")).unwrap_err().to_string();
    assert!(
        error.contains("transaction.timeout.ms is 60000 ms") && error.contains("transaction.max.timeout.ms of 5000 ms"),
        "{error}"
    );
    run(exactly_once_to(&b, "short-out").with_property("transaction.timeout.ms", "4000")).unwrap();
    assert_exactly(&output_counts(&b, "short-out"), 0..1000);
}

/// Two exactly-once sinks of one job with one transactional id prefix would fence each
/// other: the job is refused before it runs, naming both sinks and the prefix.
#[test]
fn one_transactional_id_prefix_for_two_sinks_of_a_job_is_refused() {
    let env = Env::new();
    let words = env.from_collection(vec!["a".to_string(), "b".to_string()]);
    words.add_sink(exactly_once_to("127.0.0.1:1", "twice")).name("first");
    words.add_sink(exactly_once_to("127.0.0.1:1", "twice")).name("second");
    let error = env.execute("two sinks, one prefix").unwrap_err().to_string();
    assert!(
        error.contains("operator 'first' (uid ")
            && error.contains("and operator 'second' (uid ")
            && error.contains("both need the Kafka transactional id prefix 'twice'"),
        "{error}"
    );
}

/// Emits "0" once, then nothing (holding its alignment group's event time at 0) until the
/// test says it is over, then fails the job with [`HELD_SOURCE_DONE`].
#[derive(Clone, Default)]
struct HeldAtZero {
    emitted: bool,
}

static TEST_OVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
const HELD_SOURCE_DONE: &str = "the lag test is over";

impl eddy_api::RichFunction for HeldAtZero {}

impl eddy_api::SourceFunction<String> for HeldAtZero {
    fn emit_batch(
        &mut self,
        _max: usize,
        out: &mut eddy_runtime::Collector<'_, String>,
    ) -> eddy_api::FunctionResult<eddy_api::SourceStep> {
        if TEST_OVER.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(HELD_SOURCE_DONE.into());
        }
        if !std::mem::replace(&mut self.emitted, true) {
            out.collect("0".to_string());
        }
        std::thread::sleep(Duration::from_millis(10));
        Ok(eddy_api::SourceStep::Idle)
    }
}

/// The body of `GET path` from the job's REST server at `port` (empty if it cannot be read).
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes());
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

/// The Kafka consumer lag gauges of the job's `/metrics` at `port`, per topic/partition.
fn lag_gauges(port: u16) -> BTreeMap<String, i64> {
    http_get(port, "/metrics")
        .lines()
        .filter(|l| l.starts_with("eddy_kafka_consumer_lag{"))
        .filter_map(|l| {
            let topic = l.split_once("topic=\"")?.1.split_once('"')?.0;
            let partition = l.split_once("partition=\"")?.1.split_once('"')?.0;
            Some((format!("{topic}/{partition}"), l.rsplit_once(' ')?.1.parse::<f64>().ok()? as i64))
        })
        .collect()
}

/// (end offset, position) of `topic_partition` as the Kafka source's coordinator last
/// heard from its reader: its status in the REST API's view of the only job at `port`.
fn end_and_position(port: u16, topic_partition: &str) -> Option<(i64, i64)> {
    let jobs = http_get(port, "/jobs");
    let job = jobs.split_once("\"id\":\"")?.1.split_once('"')?.0.to_string();
    let view = http_get(port, &format!("/jobs/{job}"));
    // "consumer lag held-back/0: 5 (end offset 20000, position 19995)"
    let status = view.split_once(&format!("consumer lag {topic_partition}: "))?.1;
    let end = status.split_once("end offset ")?.1.split_once(',')?.0.parse().ok()?;
    let position = status.split_once("position ")?.1.split_once(')')?.0.parse().ok()?;
    Some((end, position))
}

/// Where a reader held back by watermark alignment stands once settled, as it reported.
#[derive(Debug)]
struct Held {
    end: i64,
    position: i64,
}

/// Waits until the reader of held-back/0 has reported the topic's end offset as it is
/// now (until then its reports carry an older one: a loaded machine delayed that by
/// seconds) and a position that stays put over three reports 2.5 s apart (a reader
/// reports once a second; a status can be two seconds old).
///
/// Records produced before are read up to where watermark alignment pauses the reader,
/// which is not defined: the pause is decided every update interval (as in Flink), and a
/// fetch of thousands of records is emitted within one, so it may stop anywhere, or at the
/// end (positions from 1,024 to 20,000 of 20,000 were seen). Once held, it reads nothing
/// more.
fn held_reader(brokers: &str, port: u16, job: &std::thread::JoinHandle<Result<(), String>>) -> Held {
    // The topic's own end offset: a producer's retry may have written a record twice.
    let end = eddy_kafka::admin::end_offsets(brokers, "held-back").unwrap()[0].1;
    let deadline = std::time::Instant::now() + WAIT;
    let mut readings = Vec::new();
    loop {
        assert!(!job.is_finished(), "the job ended while the reader was held back");
        let now = end_and_position(port, "held-back/0");
        readings.push(now);
        let last = &readings[readings.len().saturating_sub(3)..];
        if last.len() == 3 && last.iter().all(|r| *r == now) {
            if let Some((reported, position)) = now.filter(|(reported, _)| *reported == end) {
                return Held { end: reported, position };
            }
        }
        assert!(std::time::Instant::now() < deadline, "the reader never settled at end offset {end}: {readings:?}");
        std::thread::sleep(Duration::from_millis(2500));
    }
}

/// A reader that watermark alignment holds back polls nothing, so librdkafka's statistics
/// stop; its consumer lag still follows the topic: records produced while it waits show in
/// the lag gauge, one for one.
#[test]
fn the_consumer_lag_follows_the_topic_while_watermark_alignment_holds_the_reader_back() {
    use eddy_api::time::WatermarkStrategy;
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "held-back", 1, &[]).unwrap();
    let port = eddy_kafka::testing::free_port();
    let brokers = b.clone();
    let job = std::thread::spawn(move || {
        let env = Env::new();
        env.set_parallelism(1);
        env.set_restart_strategy(RestartStrategy::None);
        env.set_rest_bind(&format!("127.0.0.1:{port}"));
        let aligned = || {
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|v: &String| v.parse::<i64>().unwrap_or(0))
                .with_watermark_alignment("held-back", Duration::from_millis(100), Duration::from_millis(10))
        };
        let fast = env
            .add_parallel_source(KafkaSource::new(&brokers, &["held-back"], utf8_values))
            .assign_timestamps_and_watermarks(aligned());
        let slow = env.add_source(HeldAtZero::default()).assign_timestamps_and_watermarks(aligned());
        fast.union(&[slow]).add_sink(CollectSink::new());
        env.execute("held back").map(|_| ()).map_err(|e| e.to_string())
    });
    let deadline = std::time::Instant::now() + WAIT;
    while !lag_gauges(port).contains_key("held-back/0") {
        assert!(!job.is_finished(), "the job ended before its reader reported a lag");
        assert!(std::time::Instant::now() < deadline, "the reader never reported a lag");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Event times 0 to 19,999 against a drift of 100 from the held-back source's 0: the
    // reader pauses once its watermark passes 100 (how much further it reads first is not
    // defined, see `held_reader`); then it reads nothing more.
    produce(&b, "held-back", &numbers(0, 20_000, 1)).unwrap();
    let held = held_reader(&b, port, &job);
    assert!(held.position > 100, "the reader stopped at {}, before the drift allowed", held.position);
    produce(&b, "held-back", &numbers(20_000, 5_000, 1)).unwrap();
    let now = held_reader(&b, port, &job);
    let gauge = lag_gauges(port).get("held-back/0").copied();
    TEST_OVER.store(true, std::sync::atomic::Ordering::SeqCst);
    let ended = job.join().unwrap();
    assert!(now.end >= held.end + 5_000, "the end offset did not follow the topic: {held:?}, then {now:?}");
    assert_eq!(now.position, held.position, "the held-back reader read on: {held:?}, then {now:?}");
    assert_eq!(gauge, Some(now.end - now.position), "the lag gauge while held back did not follow the topic");
    assert!(ended.as_ref().is_err_and(|e| e.contains(HELD_SOURCE_DONE)), "{ended:?}");
}

/// While commits wait for brokers that are away, the exactly-once sink keeps at most its
/// bound of records not in Kafka (here 64 KiB, about 3,000 records) and then holds its
/// task back: from 2 s to 6 s into an outage it takes in less than a quarter of what it
/// took in the 4 s before (without the bound, as much). Once the brokers are back it goes
/// on, and every record is in Kafka once.
#[test]
fn the_exactly_once_sink_holds_its_task_back_beyond_its_bound_of_uncommitted_bytes() {
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    static TAKEN: AtomicU64 = AtomicU64::new(0);
    const RECORDS: u64 = 150_000;
    let (_broker, proxy) = KafkaCluster::single_behind_proxy().unwrap();
    let b = _broker.brokers.clone();
    create_topic(&b, "capped-out", 1, &[]).unwrap();
    let sampler = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + WAIT;
        while TAKEN.load(SeqCst) < 10_000 {
            assert!(std::time::Instant::now() < deadline, "the job did not start writing");
            std::thread::sleep(Duration::from_millis(20));
        }
        let start = TAKEN.load(SeqCst);
        std::thread::sleep(Duration::from_secs(4));
        let before = TAKEN.load(SeqCst) - start;
        proxy.cut();
        std::thread::sleep(Duration::from_secs(2));
        let held = TAKEN.load(SeqCst);
        std::thread::sleep(Duration::from_secs(4));
        let during = TAKEN.load(SeqCst) - held;
        proxy.restore();
        (before, during, proxy)
    });
    let env = Env::new();
    env.set_parallelism(1);
    env.enable_checkpointing(100);
    env.set_restart_strategy(RestartStrategy::None);
    env.from_sequence(0, RECORDS - 1)
        .map(|i: u64| {
            // At most about 20,000 records a second: the job outlasts the outage.
            if i.is_multiple_of(20) {
                std::thread::sleep(Duration::from_millis(1));
            }
            TAKEN.fetch_add(1, SeqCst);
            i.to_string()
        })
        .add_sink(exactly_once_to(&b, "capped-out").with_max_uncommitted_bytes(64 << 10));
    env.execute("bounded uncommitted bytes").unwrap();
    let (before, during, _proxy) = sampler.join().unwrap();
    eprintln!("taken in 4 s before the outage: {before}; from 2 s to 6 s into it: {during}");
    assert!(during * 4 < before, "taken in 4 s before the outage {before}, in 4 s of it {during}");
    assert_exactly(&output_counts(&b, "capped-out"), 0..RECORDS);
}

/// `savepoint`'s `_metadata` written again as format 2 wrote it (an eddy before the split
/// enumerators' state was checkpointed): without coordinator state, and with no subtask
/// marked finished (format 4's mark).
fn rewrite_as_format_2(savepoint: &str) {
    use eddy_checkpoint::metadata::{decode_metadata, frame, OperatorEntry, StateHandle, METADATA_FILE};
    use eddy_checkpoint::{CheckpointId, SnapshotKind};
    #[derive(serde::Serialize)]
    struct TaskV2<'a> {
        task: &'a str,
        subtask: u32,
        operators: &'a [OperatorEntry],
        handle: &'a StateHandle,
    }
    #[derive(serde::Serialize)]
    struct MetadataV2<'a> {
        checkpoint_id: &'a CheckpointId,
        kind: &'a SnapshotKind,
        job_name: &'a str,
        max_parallelism: u32,
        timestamp_ms: u64,
        tasks: Vec<TaskV2<'a>>,
    }
    let path = std::path::Path::new(savepoint).join(METADATA_FILE);
    let metadata = decode_metadata(savepoint, &std::fs::read(&path).unwrap()).unwrap();
    assert!(metadata.coordinators.is_some(), "the savepoint holds the split enumerator's state");
    let old = MetadataV2 {
        checkpoint_id: &metadata.checkpoint_id,
        kind: &metadata.kind,
        job_name: &metadata.job_name,
        max_parallelism: metadata.max_parallelism,
        timestamp_ms: metadata.timestamp_ms,
        tasks: metadata
            .tasks
            .iter()
            .map(|t| TaskV2 { task: &t.task, subtask: t.subtask, operators: &t.operators, handle: &t.handle })
            .collect(),
    };
    let mut bytes = frame(&postcard::to_allocvec(&old).unwrap());
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes()); // the checksum covers the payload only
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(decode_metadata(savepoint, &bytes).unwrap().coordinators, None);
}

/// A savepoint of format 2 has no split enumerator state: the readers' restored splits
/// keep their positions, and a partition none of them held (here one added after the
/// savepoint) starts at its earliest offset, not at the job's starting offsets resolved
/// anew ("latest" would skip every record written to it before the restore).
#[test]
fn a_partition_no_reader_held_at_a_format_2_savepoint_starts_at_its_earliest_offset() {
    let b = KafkaCluster::shared().brokers.clone();
    create_topic(&b, "fmt2", 2, &[]).unwrap();
    // Created here: the first run may be stopped before its first commit would create it.
    create_topic(&b, "fmt2-out", 2, &[]).unwrap();
    produce(&b, "fmt2", &numbers(0, 2000, 2)).unwrap();
    let dir = scratch("fmt2");
    let run = |restore: Option<&str>, stop_after: Option<u64>| {
        let env = Env::new();
        env.set_parallelism(2);
        env.enable_checkpointing(100);
        env.set_checkpoint_dir(dir.join("checkpoints"));
        env.set_restart_strategy(RestartStrategy::None);
        if let Some(savepoint) = restore {
            env.restore_from(savepoint);
        }
        if let Some(ms) = stop_after {
            env.stop_with_savepoint_after(dir.join("savepoint"), ms);
        }
        // The two first partitions from offset 0; any other from the latest offset.
        let starting = StartingOffsets::Offsets(
            vec![("fmt2".into(), 0, 0), ("fmt2".into(), 1, 0)],
            eddy_kafka::OffsetResetStrategy::Latest,
        );
        env.add_parallel_source(KafkaSource::new(&b, &["fmt2"], utf8_values).with_starting_offsets(starting).bounded())
            .uid("in")
            .map(|v: String| {
                // Slow enough that the first run is stopped before it read everything.
                std::thread::sleep(Duration::from_millis(2));
                v
            })
            .uid("slow")
            .add_sink(exactly_once_to(&b, "fmt2-out"))
            .uid("out");
        env.execute("format 2").unwrap()
    };
    let first = run(None, Some(1500));
    let savepoint = first.savepoint.expect("stopped with a savepoint");
    let partial = output_counts(&b, "fmt2-out").len();
    assert!(partial < 2000, "the first run should have been stopped early, it wrote {partial}");
    rewrite_as_format_2(&savepoint);
    eddy_kafka::admin::add_partitions(&b, "fmt2", 3).unwrap();
    produce(&b, "fmt2", &(2000..3000).map(|i| (2, i.to_string(), i.to_string().into_bytes())).collect::<Vec<_>>())
        .unwrap();
    run(Some(&savepoint), None);
    assert_exactly(&output_counts(&b, "fmt2-out"), 0..3000);
}
