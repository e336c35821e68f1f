//! The SQL `kafka` connector against Apache Kafka the test starts (features `sql`,
//! `kafka` and `testing`): a bounded Kafka table with the DDL's watermark, windowed, into
//! an exactly-once Kafka table, read back committed; the same query over the same rows in
//! a file gives the same records.
#![cfg(all(feature = "sql", feature = "kafka", feature = "testing"))]

use eddy::connector::kafka::admin::create_topic;
use eddy::connector::kafka::testing::{produce, read_committed, KafkaCluster};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql")
}

const COLUMNS: &str = "`user` STRING, url STRING, amount DECIMAL(10, 2), qty INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND";
const QUERY: &str = "SELECT `user`, window_start, COUNT(*), SUM(qty) FROM TABLE(TUMBLE(TABLE input, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY `user`, window_start, window_end";

fn run(work: &Path, name: &str, script: &str) {
    let path = work.join(format!("{name}.sql"));
    std::fs::write(&path, script).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_eddy")).args(["sql", "-p", "2", "-f"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_windowed_query_from_kafka_into_kafka_writes_each_result_once() {
    let b = KafkaCluster::shared().brokers.clone();
    let work = std::env::temp_dir().join(format!("eddy-sql-kafka-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    for topic in ["sql-clicks", "sql-counts"] {
        create_topic(&b, topic, 2, &[]).unwrap();
    }
    let clicks = std::fs::read_to_string(dir().join("data/clicks.json")).unwrap();
    let records: Vec<(i32, String, Vec<u8>)> =
        clicks.lines().enumerate().map(|(i, l)| ((i % 2) as i32, i.to_string(), l.as_bytes().to_vec())).collect();
    // Each partition in the file's order: the watermark follows each partition's rows.
    produce(&b, "sql-clicks", &records).unwrap();

    let kafka = format!(
        "SET 'execution.checkpointing.interval' = '100 ms';
CREATE TABLE input ({COLUMNS}) WITH ('connector' = 'kafka', 'topic' = 'sql-clicks', 'properties.bootstrap.servers' = '{b}',
  'properties.group.id' = 'sql-test', 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json');
CREATE TABLE counts (`user` STRING, window_start TIMESTAMP(3), n BIGINT, q INT) WITH ('connector' = 'kafka', 'topic' = 'sql-counts',
  'properties.bootstrap.servers' = '{b}', 'format' = 'json', 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'sql-test');
INSERT INTO counts {QUERY};
"
    );
    run(&work, "kafka", &kafka);
    let file = format!(
        "CREATE TABLE input ({COLUMNS}) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
CREATE TABLE counts (`user` STRING, window_start TIMESTAMP(3), n BIGINT, q INT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
INSERT INTO counts {QUERY};
",
        dir().join("data/clicks.json").display(),
        work.join("file-out").display()
    );
    run(&work, "file", &file);
    let mut expected: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(work.join("file-out")).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("part-") {
            expected.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from));
        }
    }
    expected.sort();
    assert!(expected.len() > 50, "{} windows", expected.len());
    let mut got: Vec<String> = read_committed(&b, "sql-counts", Duration::from_secs(60))
        .unwrap()
        .into_iter()
        .map(|(_, _, v)| String::from_utf8(v).unwrap())
        .collect();
    got.sort();
    assert_eq!(got, expected);
    let _ = std::fs::remove_dir_all(&work);
}
