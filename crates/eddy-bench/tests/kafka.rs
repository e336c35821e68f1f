//! W1 from Kafka to Kafka with `eddy-bench`, against Apache Kafka brokers the tests start:
//! a job killed with SIGKILL and restored from its latest checkpoint, a job on a cluster
//! whose TaskManager is killed, a job whose Kafka broker is killed (one of three, and the
//! only one), each must leave exactly the output of a failure-free run in the output
//! topic, as `read_committed` consumers read it. Kills land wherever the job is, inside
//! the sink's transactions too.

mod common;
use common::process::{field, run_local, Cluster, Proc};
use eddy::connector::kafka::testing::{describe_ends, read_committed, read_committed_with_java, KafkaCluster};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Per key (path), the values of its records in the order of their partition: W1's counts
/// of that path, which must be exactly `1..=n`, once each.
fn output_by_key(records: Vec<(i32, Vec<u8>, Vec<u8>)>) -> BTreeMap<String, Vec<String>> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, key, value) in records {
        by_key.entry(String::from_utf8(key).unwrap()).or_default().push(String::from_utf8(value).unwrap());
    }
    by_key
}

/// W1's stream into `topic`, with the same events as every run of `eddy-bench api-count`.
fn produce(brokers: &str, topic: &str, events: &str) {
    let out = run_local(&[
        "kafka-produce",
        "--brokers",
        brokers,
        "--topic",
        topic,
        "--partitions",
        "4",
        "--events",
        events,
        "--keys",
        "500",
    ]);
    assert_eq!(field(&out, "events"), events);
}

fn api_count_args<'a>(brokers: &'a str, input: &'a str, output: &'a str) -> Vec<&'a str> {
    vec![
        "api-count",
        "--kafka",
        brokers,
        "--input-topic",
        input,
        "--output-topic",
        output,
        "--bounded",
        "--parallelism",
        "2",
        "--delivery",
        "exactly-once",
    ]
}

/// [`api_count_args`] for a run a test disturbs: checkpoints every 200 ms into
/// `checkpoints`, 6,000 events a second (so that it still runs when disturbed), and the
/// delay before a restart if given.
fn disturbed_run_args<'a>(
    brokers: &'a str,
    input: &'a str,
    output: &'a str,
    checkpoints: &'a str,
    restart_delay_ms: Option<&'a str>,
) -> Vec<&'a str> {
    let mut args = api_count_args(brokers, input, output);
    args.extend(["--checkpoint-ms", "200", "--checkpoint-dir", checkpoints, "--rate", "6000"]);
    if let Some(delay) = restart_delay_ms {
        args.extend(["--restart-delay-ms", delay]);
    }
    args
}

/// The failure-free run's output of `reference` is W1's counts, and `recovered` holds
/// exactly the same, read through librdkafka; `java` also reads `recovered` through
/// Kafka's own Java consumer.
fn assert_same_output(brokers: &str, reference: &str, recovered: &str, java: bool) {
    let expected = output_by_key(read_committed(brokers, reference, WAIT).unwrap());
    assert_eq!(expected.len(), 500, "every path has its counts");
    for (key, values) in &expected {
        let counts: Vec<String> = (1..=values.len()).map(|c| format!("{key},{c}")).collect();
        assert_eq!(values, &counts, "the failure-free run's output of {key}");
    }
    let mut readers = vec![("librdkafka", output_by_key(read_committed(brokers, recovered, WAIT).unwrap()))];
    if java {
        let total = expected.values().map(Vec::len).sum();
        let records = read_committed_with_java(brokers, recovered, total).unwrap();
        readers.push(("Kafka's Java consumer", output_by_key(records)));
    }
    for (reader, got) in readers {
        let differing: Vec<&String> = expected.keys().filter(|k| expected.get(*k) != got.get(*k)).take(5).collect();
        if let Some(key) = differing.first() {
            let (want, have) = (&expected[*key], got.get(*key).cloned().unwrap_or_default());
            let at = want.iter().zip(&have).position(|(a, b)| a != b).unwrap_or(want.len().min(have.len()));
            panic!(
                "read by {reader}, the recovered output differs for {differing:?}: {key} has {} records, not {}; \
                 from record {at}: {:?}; {}",
                have.len(),
                want.len(),
                &have[at..(at + 5).min(have.len())],
                describe_ends(brokers, recovered)
            );
        }
        assert_eq!(expected, got, "read by {reader}");
    }
}

/// Consumer lag (seed 004) in `eddy status` while a rate-limited Kafka job runs on a
/// cluster: per partition of the input, its end offset, the readers' position and the
/// lag between, as the readers report them to the source's split enumerator with the
/// JobMaster.
#[test]
fn eddy_status_shows_the_consumer_lag_of_every_partition() {
    let b = KafkaCluster::shared().brokers.clone();
    produce(&b, "lag-events", "20000");
    let cluster = Cluster::start_with("kafka-lag", &[2], &[], &["--rest-bind", "127.0.0.1:0"]);
    let mut args = api_count_args(&b, "lag-events", "lag-out");
    let delivery = args.len() - 1;
    args[delivery] = "none";
    args.extend(["--rate", "2000"]);
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, WAIT);
    let deadline = Instant::now() + WAIT;
    let lags = loop {
        let (code, status) = cluster.control(&["status", "1"]);
        assert_eq!(code, 0, "{status}");
        // "Kafka Source: consumer lag lag-events/2: 1234 (end offset 5000, position 3766)"
        let lags: Vec<(i64, i64, i64)> = status
            .lines()
            .filter_map(|l| l.split_once("consumer lag lag-events/")?.1.split_once(": "))
            .map(|(_, rest)| {
                let numbers: Vec<i64> = rest
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|w| !w.is_empty())
                    .map(|w| w.parse().unwrap())
                    .collect();
                (numbers[0], numbers[1], numbers[2])
            })
            .collect();
        if lags.len() == 4 && lags.iter().all(|(_, _, position)| *position > 0) {
            break lags;
        }
        assert!(Instant::now() < deadline, "no consumer lag of 4 partitions in the status:\n{status}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let ends: i64 = lags.iter().map(|(_, end, _)| end).sum();
    assert_eq!(ends, 20000, "the end offsets of the 4 partitions hold every event: {lags:?}");
    for (lag, end, position) in &lags {
        assert_eq!(*lag, end - position, "{lags:?}");
    }
    // At 2000 events/s, the readers are behind a topic filled beforehand.
    assert!(lags.iter().map(|(lag, _, _)| lag).sum::<i64>() > 0, "{lags:?}");
    // The same lag as a Prometheus gauge on the JobManager, one series per partition.
    cluster.jobmanager.wait_for("rest listening on ", 1, WAIT);
    let rest = cluster.jobmanager.lines().iter().find_map(|l| l.strip_prefix("rest listening on ").map(String::from));
    let metrics = common::http::scrape(&format!("{}/metrics", rest.unwrap()), Some(common::process::SECRET));
    for partition in ["0", "1", "2", "3"] {
        let lag = common::http::values(
            &metrics,
            "eddy_kafka_consumer_lag",
            &[("topic", "lag-events"), ("partition", partition)],
        );
        assert_eq!(lag.len(), 1, "partition {partition}");
        assert!((0.0..=20000.0).contains(&lag[0]), "{lag:?}");
    }
    let (code, log) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");
}

/// The job runs locally with checkpoints every 200 ms, is SIGKILLed after its second
/// completed checkpoint (inside a transaction or not, as it falls) and restored from the
/// latest checkpoint: its output is the failure-free run's, as both clients read it.
#[test]
fn sigkill_of_an_exactly_once_job_then_restore_gives_the_failure_free_output() {
    let b = KafkaCluster::shared().brokers.clone();
    produce(&b, "kill-events", "60000");
    let reference = run_local(&api_count_args(&b, "kill-events", "kill-reference"));
    let dir = std::env::temp_dir().join(format!("eddy-bench-kafka-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let checkpoints = dir.join("checkpoints");
    let args = disturbed_run_args(&b, "kill-events", "kill-recovered", checkpoints.to_str().unwrap(), None);
    let mut job = Proc::start(&args);
    job.wait_for("checkpoint completed", 2, WAIT);
    job.wait_for("transaction committed", 1, WAIT);
    assert!(job.running(), "the job ended before it was killed:\n{}", job.lines().join("\n"));
    drop(job); // SIGKILL
    let mut restored = args.clone();
    restored.extend(["--restore", "latest"]);
    let (code, finished) = Proc::start(&restored).finish(Duration::from_secs(300));
    assert_eq!(code, 0, "{finished}");
    assert!(finished.contains("/chk-"), "the second run restored no checkpoint:\n{finished}");
    assert_eq!(field(&finished, "checksum"), field(&reference, "checksum"));
    assert_same_output(&b, "kill-reference", "kill-recovered", true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a cluster of three TaskManagers, one running the job's subtasks is SIGKILLed after
/// two completed checkpoints; the job fails over once and its output is the failure-free
/// run's.
#[test]
fn a_taskmanager_killed_under_an_exactly_once_kafka_job_leaves_the_failure_free_output() {
    let b = KafkaCluster::shared().brokers.clone();
    produce(&b, "tm-events", "60000");
    let reference = run_local(&api_count_args(&b, "tm-events", "tm-reference"));
    let mut cluster = Cluster::start("kafka", &[1, 1, 1]);
    let checkpoints = cluster.dir.join("checkpoints");
    let args = disturbed_run_args(&b, "tm-events", "tm-recovered", checkpoints.to_str().unwrap(), Some("100"));
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, WAIT);
    job.wait_for("checkpoint completed", 2, WAIT);
    let allocated = cluster.allocated();
    cluster.task_manager_by_id(allocated[0]).child.kill().unwrap();
    let deadline = Instant::now() + WAIT;
    while job.count("attempt running on the cluster") < 2 {
        assert!(
            Instant::now() < deadline,
            "no restart after TaskManager {} was killed:\n{}\n--- JobManager:\n{}",
            allocated[0],
            job.lines().join("\n"),
            cluster.jobmanager.lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, log) = job.finish(Duration::from_secs(300));
    assert_eq!(code, 0, "{log}");
    assert_eq!(field(&log, "restarts"), "1", "{log}");
    assert_eq!(field(&log, "checksum"), field(&reference, "checksum"));
    assert_same_output(&b, "tm-reference", "tm-recovered", false);
}

/// Kafka's own faults: a broker SIGKILLed while an exactly-once job reads and writes
/// through it, and started again on its log directory 4 s later. `kafka` is the cluster,
/// `node` the broker to kill. The job's output must be the failure-free run's.
fn a_broker_killed_mid_job_leaves_the_failure_free_output(kafka: &mut KafkaCluster, node: usize, name: &str) {
    let b = kafka.brokers.clone();
    let (input, reference_topic, recovered) =
        (format!("{name}-events"), format!("{name}-reference"), format!("{name}-recovered"));
    produce(&b, &input, "60000");
    let reference = run_local(&api_count_args(&b, &input, &reference_topic));
    let dir = std::env::temp_dir().join(format!("eddy-bench-kafka-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let checkpoints = dir.join("checkpoints");
    let args = disturbed_run_args(&b, &input, &recovered, checkpoints.to_str().unwrap(), Some("500"));
    let mut job = Proc::start(&args);
    job.wait_for("checkpoint completed", 2, WAIT);
    job.wait_for("transaction committed", 1, WAIT);
    assert!(job.running(), "the job ended before the broker was killed:\n{}", job.lines().join("\n"));
    kafka.kill(node);
    let before = job.count("checkpoint completed");
    std::thread::sleep(Duration::from_secs(4));
    // The sink commits on a thread of its own: a commit waiting for the brokers holds
    // neither the task nor checkpoints (the 4 s give room for 20 at 200 ms).
    let during = job.count("checkpoint completed") - before;
    kafka.restart(node).unwrap();
    let (code, log) = job.finish(Duration::from_secs(300));
    assert_eq!(code, 0, "{log}\n--- broker {node}:\n{}", kafka.log_tail(node, 40));
    for line in log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("restart")) {
        eprintln!("{name}: {line}");
    }
    assert_eq!(field(&log, "checksum"), field(&reference, "checksum"));
    assert_same_output(&b, &reference_topic, &recovered, false);
    assert!(during >= 3, "{during} checkpoints completed in the 4 s without broker {node}:\n{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One broker of three (replication factor 3, min.insync.replicas 2) dies mid-job.
#[test]
fn a_broker_of_three_killed_and_restarted_mid_job_loses_and_doubles_nothing() {
    let mut kafka = KafkaCluster::start(3, &[]).unwrap();
    a_broker_killed_mid_job_leaves_the_failure_free_output(&mut kafka, 0, "one-of-three");
}

/// The only broker dies mid-job and comes back on its log directory.
#[test]
fn the_only_broker_killed_and_restarted_mid_job_loses_and_doubles_nothing() {
    let mut kafka = KafkaCluster::single().unwrap();
    a_broker_killed_mid_job_leaves_the_failure_free_output(&mut kafka, 0, "only");
}

/// The brokers unreachable when an exactly-once job starts: within 15 s its log warns
/// that they are, naming the bootstrap servers, and it waits; once they are reachable the
/// job runs to the failure-free output.
#[test]
fn brokers_unreachable_at_start_are_named_in_the_log_and_waited_for() {
    let (kafka, proxy) = KafkaCluster::single_behind_proxy().unwrap();
    let b = kafka.brokers.clone();
    produce(&b, "late-events", "20000");
    let reference = run_local(&api_count_args(&b, "late-events", "late-reference"));
    proxy.cut();
    let dir = std::env::temp_dir().join(format!("eddy-bench-kafka-late-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let checkpoints = dir.join("checkpoints");
    let mut args = api_count_args(&b, "late-events", "late-recovered");
    args.extend(["--checkpoint-ms", "200", "--checkpoint-dir", checkpoints.to_str().unwrap()]);
    let started = Instant::now();
    let job = Proc::start(&args);
    let warned = |job: &Proc| job.lines().into_iter().find(|l| l.contains("WARN") && l.contains(b.as_str()));
    let warning = loop {
        if let Some(line) = warned(&job) {
            break line;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "no warning naming {b} within 15 s:\n{}",
            job.lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("warned after {:?}: {warning}", started.elapsed());
    std::thread::sleep(Duration::from_secs(3));
    proxy.restore();
    let (code, log) = job.finish(Duration::from_secs(300));
    assert_eq!(code, 0, "{log}");
    assert_eq!(field(&log, "checksum"), field(&reference, "checksum"));
    assert_same_output(&b, "late-reference", "late-recovered", false);
    let _ = std::fs::remove_dir_all(&dir);
}
