//! Seed 000's two-topic join on Kafka (`examples/kafka_two_topic_join.rs`) against
//! Apache Kafka the test starts (features `kafka` and `testing`).
#![cfg(all(feature = "kafka", feature = "testing"))]

#[path = "../examples/kafka_two_topic_join.rs"]
#[allow(dead_code)]
mod kafka_two_topic_join;

use eddy::connector::kafka::admin::create_topic;
use eddy::connector::kafka::testing::{produce, read_committed, KafkaCluster};
use eddy::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

mod common;

/// Orders for keys 0..200 and payments for keys 100..300 into two topics of 2 partitions.
fn produce_orders_and_payments(b: &str, orders: &str, payments: &str, joined: &str) {
    for topic in [orders, payments, joined] {
        create_topic(b, topic, 2, &[]).unwrap();
    }
    let line = |key: u64, value: u64| ((key % 2) as i32, key.to_string(), format!("{key},{value}").into_bytes());
    produce(b, orders, &(0..200).map(|k| line(k, k)).collect::<Vec<_>>()).unwrap();
    produce(b, payments, &(100..300).map(|k| line(k, 1000 + k)).collect::<Vec<_>>()).unwrap();
}

/// Every key on both sides joined exactly once (whichever side comes second emits), keys
/// on one side only never; `context` goes into the failure message.
fn assert_joined_exactly_once(b: &str, joined: &str, context: &str) {
    let mut got: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (_, key, value) in read_committed(b, joined, Duration::from_secs(60)).unwrap() {
        let key: u64 = String::from_utf8(key).unwrap().parse().unwrap();
        got.entry(key).or_default().push(String::from_utf8(value).unwrap());
    }
    let expected: BTreeMap<u64, Vec<String>> = (100..200).map(|k| (k, vec![format!("{k},{k},{}", 1000 + k)])).collect();
    assert_eq!(got, expected, "{context}; {}", eddy::connector::kafka::testing::describe_ends(b, joined));
}

/// One record per key on each side, joined in this process at parallelism 2.
#[test]
fn two_topics_joined_exactly_once_through_kafka() {
    let b = KafkaCluster::shared().brokers.clone();
    produce_orders_and_payments(&b, "orders", "payments", "joined");
    let env = Env::new();
    env.set_parallelism(2);
    env.enable_checkpointing(100);
    kafka_two_topic_join::job(&env, &b, "orders", "payments", "joined", true);
    let result = env.execute("two topic join on Kafka").unwrap();
    // A failover is allowed (exactly once), but says so if the output differs.
    assert_joined_exactly_once(&b, "joined", &format!("{} restarts: {:?}", result.restarts, result.warnings));
}

/// The same join on a cluster: the example's binary as JobManager and two TaskManagers of
/// one slot each, so that each subtask of the job runs in another process and the keyed
/// exchange crosses them over TCP.
#[test]
fn two_topics_joined_exactly_once_across_two_taskmanagers() {
    use std::process::{Command, Stdio};
    let b = KafkaCluster::shared().brokers.clone();
    produce_orders_and_payments(&b, "tm-orders", "tm-payments", "tm-joined");
    let dir = common::temp_dir("kafka-join-cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "the-secret-of-the-kafka-join-test").unwrap();
    let secret = secret.to_str().unwrap();
    let binary = common::example("kafka_two_topic_join");
    let jobmanager_log = dir.join("jobmanager.log");
    let log_file = std::fs::File::create(&jobmanager_log).unwrap();
    let (jobmanager, address) = common::start_jobmanager(&binary, secret, Stdio::from(log_file));
    let mut processes = common::KillOnDrop(vec![jobmanager]);
    for _ in 0..2 {
        let taskmanager = Command::new(&binary)
            .args(["taskmanager", "--jobmanager", &address, "--slots", "1", "--secret-file", secret])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        processes.0.push(taskmanager);
    }
    let job = Command::new(&binary)
        .args(["--brokers", &b, "--topic-a", "tm-orders", "--topic-b", "tm-payments", "--output", "tm-joined"])
        .args(["--bounded", "--parallelism", "2", "--checkpoint-ms", "100"])
        .args(["--jobmanager", &address, "--secret-file", secret, "--slot-timeout-ms", "30000"])
        .output()
        .unwrap();
    drop(processes);
    let jobmanager_log = std::fs::read_to_string(&jobmanager_log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let log = String::from_utf8_lossy(&job.stderr);
    assert!(job.status.success(), "{log}");
    // One slot on each TaskManager: "slots allocated; deploying … task_managers=[(1, 1), (2, 1)]".
    let allocation = jobmanager_log.lines().find(|l| l.contains("slots allocated")).unwrap_or_default();
    assert!(allocation.contains("(1, 1), (2, 1)"), "the job did not run across both TaskManagers:\n{jobmanager_log}");
    assert_joined_exactly_once(&b, "tm-joined", &format!("the job's log:\n{log}"));
}

/// Two jobs writing exactly once with one transactional id prefix would fence each other's
/// producers: the JobManager refuses the second at submission, naming the prefix and the
/// job that holds it, and the first goes on; a job with another prefix is admitted.
#[test]
fn a_second_job_with_the_same_transactional_id_prefix_is_refused_at_submission() {
    use std::process::{Command, Stdio};
    let b = KafkaCluster::shared().brokers.clone();
    for topic in ["prefix-orders", "prefix-payments", "prefix-joined"] {
        create_topic(&b, topic, 2, &[]).unwrap();
    }
    let dir = common::temp_dir("kafka-prefix-refused");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "the-secret-of-the-prefix-test").unwrap();
    let secret = secret.to_str().unwrap();
    let binary = common::example("kafka_two_topic_join");
    let jobmanager_log = dir.join("jobmanager.log");
    let (jobmanager, address) =
        common::start_jobmanager(&binary, secret, Stdio::from(std::fs::File::create(&jobmanager_log).unwrap()));
    let mut processes = common::KillOnDrop(vec![jobmanager]);
    let job = |output: &str| {
        let mut command = Command::new(&binary);
        command
            .args(["--brokers", &b, "--topic-a", "prefix-orders", "--topic-b", "prefix-payments", "--output", output])
            .args(["--jobmanager", &address, "--secret-file", secret, "--slot-timeout-ms", "120000"]);
        command
    };
    // No TaskManager: the first job waits for slots, submitted and not ended.
    let first = job("prefix-joined").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    processes.0.push(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&jobmanager_log).unwrap().contains("job submitted") {
        assert!(std::time::Instant::now() < deadline, "the first job was not submitted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let second = job("prefix-joined").output().unwrap();
    let log = String::from_utf8_lossy(&second.stderr).to_string();
    assert!(!second.status.success(), "the second job ran:\n{log}");
    assert!(
        log.contains("needs the Kafka transactional id prefix 'eddy-two-topic-join-prefix-joined'")
            && log.contains("which job 1 ('two topic join on Kafka'"),
        "{log}"
    );
    // Another output has another prefix: that job is admitted (it waits for slots too).
    let mut third = job("prefix-other").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&jobmanager_log).unwrap().matches("job submitted").count() < 2 {
        assert!(std::time::Instant::now() < deadline, "a job with another prefix was not admitted");
        assert!(third.try_wait().unwrap().is_none(), "a job with another prefix ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    processes.0.push(third);
    assert!(processes.0[1].try_wait().unwrap().is_none(), "the first job ended");
    drop(processes);
    let _ = std::fs::remove_dir_all(&dir);
}
