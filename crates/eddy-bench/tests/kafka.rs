//! W1 from Kafka to Kafka with `eddy-bench`, against a real Kafka-protocol broker (tansu)
//! the test starts: a job killed with SIGKILL and restored from its latest checkpoint,
//! and a job on a cluster whose TaskManager is killed, must leave exactly the output of a
//! failure-free run in the output topic. (Read as uncommitted readers see it: see
//! `read_all`; the kills land between the sink's commits.)

mod common;
use common::process::{field, run_local, Cluster, Proc};
use eddy::connector::kafka::testing::{describe_ends, read_all, Broker};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Per key (path), the values of its records in the order of their partition: W1's counts
/// of that path, which must be exactly `1..=n`, once each.
fn output_by_key(brokers: &str, topic: &str) -> BTreeMap<String, Vec<String>> {
    let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, key, value) in read_all(brokers, topic, WAIT).unwrap() {
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

fn signal(signal: &str, pids: &[u32]) {
    for pid in pids {
        // A process that already ended (a killed TaskManager's executor) needs nothing.
        let _ = std::process::Command::new("kill").args([signal, &pid.to_string()]).status();
    }
}

/// Freezes `pids` (SIGSTOP) at a moment when the sink committed some transactions and
/// none is open, by the sink's own log lines in `logs`: frozen, it cannot begin another,
/// so that a kill lands between two commits. (Inside a commit, Kafka would abort the
/// transaction and hide its records from `read_committed` readers; tansu 0.6 does not
/// hide them, so these tests must not kill inside one.) The caller kills or thaws them.
fn freeze_between_commits(pids: &[u32], logs: &[Arc<Mutex<Vec<String>>>], job: &mut Proc) {
    let deadline = Instant::now() + WAIT;
    let count = |pattern: &str| -> usize {
        logs.iter().map(|log| log.lock().unwrap().iter().filter(|l| l.contains(pattern)).count()).sum()
    };
    loop {
        assert!(job.running(), "the job ended before it could be killed:\n{}", job.lines().join("\n"));
        signal("-STOP", pids);
        // What the frozen processes wrote reaches the logs.
        std::thread::sleep(Duration::from_millis(150));
        let (begun, committed) = (count("transaction begun"), count("transaction committed"));
        if committed >= 2 && begun == committed {
            return;
        }
        signal("-CONT", pids);
        assert!(Instant::now() < deadline, "no moment between commits within {WAIT:?}:\n{}", job.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_same_output(brokers: &str, reference: &str, recovered: &str) {
    let (expected, got) = (output_by_key(brokers, reference), output_by_key(brokers, recovered));
    assert_eq!(expected.len(), 500, "every path has its counts");
    for (key, values) in &expected {
        let counts: Vec<String> = (1..=values.len()).map(|c| format!("{key},{c}")).collect();
        assert_eq!(values, &counts, "the failure-free run's output of {key}");
    }
    let differing: Vec<&String> = expected.keys().filter(|k| expected.get(*k) != got.get(*k)).take(5).collect();
    if let Some(key) = differing.first() {
        let (want, have) = (&expected[*key], got.get(*key).cloned().unwrap_or_default());
        let at = want.iter().zip(&have).position(|(a, b)| a != b).unwrap_or(want.len().min(have.len()));
        panic!(
            "the recovered output differs for {differing:?}: {key} has {} records, not {}; from record {at}: {:?}; {}",
            have.len(),
            want.len(),
            &have[at..(at + 5).min(have.len())],
            describe_ends(brokers, recovered)
        );
    }
    assert_eq!(expected, got);
}

/// Consumer lag (seed 004) in `eddy status` while a rate-limited Kafka job runs on a
/// cluster: per partition of the input, its end offset, the readers' position and the
/// lag between, as the readers report them to the source's split enumerator with the
/// JobMaster.
#[test]
fn eddy_status_shows_the_consumer_lag_of_every_partition() {
    let broker = Broker::start().unwrap();
    let b = broker.brokers.clone();
    produce(&b, "events", "20000");
    let cluster = Cluster::start_with("kafka-lag", &[2], &[], &["--rest-bind", "127.0.0.1:0"]);
    let mut args = api_count_args(&b, "events", "out");
    let delivery = args.len() - 1;
    args[delivery] = "none";
    args.extend(["--rate", "2000"]);
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, WAIT);
    let deadline = Instant::now() + WAIT;
    let lags = loop {
        let (code, status) = cluster.control(&["status", "1"]);
        assert_eq!(code, 0, "{status}");
        // "Kafka Source: consumer lag events/2: 1234 (end offset 5000, position 3766)"
        let lags: Vec<(i64, i64, i64)> = status
            .lines()
            .filter_map(|l| l.split_once("consumer lag events/")?.1.split_once(": "))
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
        let lag =
            common::http::values(&metrics, "eddy_kafka_consumer_lag", &[("topic", "events"), ("partition", partition)]);
        assert_eq!(lag.len(), 1, "partition {partition}");
        assert!((0.0..=20000.0).contains(&lag[0]), "{lag:?}");
    }
    let (code, log) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");
}

/// One test, its two cases one after the other: each freezes its job between two
/// commits, which takes a machine that is not also running the other.
#[test]
#[ignore = "tansu 0.6 (memory storage) loses batches of concurrent transactional producers on a loaded \
            machine: the partitions' offsets count every record, fetches return fewer (reproduced: 1 run in 12 \
            with two busy loops beside it, 60008 offsets, 55510 records readable, the same on every re-read); \
            the job's own checksum is right. Run with --ignored on an idle machine"]
fn kills_of_exactly_once_kafka_jobs_leave_the_failure_free_output() {
    sigkill_of_an_exactly_once_job_then_restore_gives_the_failure_free_output();
    a_taskmanager_killed_under_an_exactly_once_kafka_job_leaves_the_failure_free_output();
}

fn sigkill_of_an_exactly_once_job_then_restore_gives_the_failure_free_output() {
    let broker = Broker::start().unwrap();
    let b = broker.brokers.clone();
    produce(&b, "events", "60000");
    let reference = run_local(&api_count_args(&b, "events", "reference"));
    let dir = std::env::temp_dir().join(format!("eddy-bench-kafka-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let checkpoints = dir.join("checkpoints");
    let mut args = api_count_args(&b, "events", "recovered");
    args.extend(["--checkpoint-ms", "200", "--checkpoint-dir", checkpoints.to_str().unwrap(), "--rate", "6000"]);
    let mut job = Proc::start(&args);
    job.wait_for("checkpoint completed", 2, WAIT);
    let pid = job.child.id();
    let log = job.log.clone();
    freeze_between_commits(&[pid], &[log], &mut job);
    drop(job); // SIGKILL
    let mut restored = args.clone();
    restored.extend(["--restore", "latest"]);
    let (code, finished) = Proc::start(&restored).finish(Duration::from_secs(300));
    assert_eq!(code, 0, "{finished}");
    assert!(finished.contains("/chk-"), "the second run restored no checkpoint:\n{finished}");
    assert_eq!(field(&finished, "checksum"), field(&reference, "checksum"));
    assert_same_output(&b, "reference", "recovered");
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_taskmanager_killed_under_an_exactly_once_kafka_job_leaves_the_failure_free_output() {
    let broker = Broker::start().unwrap();
    let b = broker.brokers.clone();
    produce(&b, "events", "60000");
    let reference = run_local(&api_count_args(&b, "events", "reference"));
    let mut cluster = Cluster::start("kafka", &[1, 1, 1]);
    let checkpoints = cluster.dir.join("checkpoints");
    let mut args = api_count_args(&b, "events", "recovered");
    args.extend([
        "--checkpoint-ms",
        "200",
        "--checkpoint-dir",
        checkpoints.to_str().unwrap(),
        "--rate",
        "6000",
        "--restart-delay-ms",
        "100",
    ]);
    let mut job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, WAIT);
    job.wait_for("checkpoint completed", 2, WAIT);
    let allocated = cluster.allocated();
    // The subtasks run in task executor processes the TaskManagers started; their logs
    // reach the TaskManagers' own.
    let mut executors = Vec::new();
    for id in &allocated {
        let tm = cluster.task_manager_by_id(*id).child.id();
        let children = std::process::Command::new("pgrep").args(["-P", &tm.to_string()]).output().unwrap();
        executors
            .extend(String::from_utf8_lossy(&children.stdout).split_whitespace().map(|p| p.parse::<u32>().unwrap()));
    }
    let logs: Vec<_> = cluster.task_managers.iter().map(|tm| tm.log.clone()).collect();
    freeze_between_commits(&executors, &logs, &mut job);
    cluster.task_manager_by_id(allocated[0]).child.kill().unwrap();
    signal("-CONT", &executors);
    let deadline = Instant::now() + WAIT;
    while job.count("attempt running on the cluster") < 2 {
        assert!(
            Instant::now() < deadline,
            "no restart after TaskManager {} was killed (executors {executors:?}):\n{}\n--- JobManager:\n{}",
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
    assert_same_output(&b, "reference", "recovered");
}
