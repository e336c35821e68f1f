//! The SQL `kafka` connector against Apache Kafka the test starts (features `sql`,
//! `kafka` and `testing`): a bounded Kafka table with the DDL's watermark, windowed, into
//! an exactly-once Kafka table, read back committed; the same query over the same rows in
//! a file gives the same records; CDC changes through a topic into upsert-kafka, read back
//! by Kafka's own consumer and as an upsert-kafka table.
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

/// Runs a script at parallelism 2: what it printed.
fn run(work: &Path, name: &str, script: &str) -> String {
    let path = work.join(format!("{name}.sql"));
    std::fs::write(&path, script).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_eddy")).args(["sql", "-p", "2", "-f"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The table a printed changelog leaves (`+I[a, 1]` adds "a, 1", `-U`/`-D` take it back),
/// sorted; a row taken back that was not there fails the test.
fn printed_table(stdout: &str) -> Vec<String> {
    let mut table: Vec<String> = Vec::new();
    // At parallelism 2 each line starts with its subtask ("1> +I[…]").
    let lines = stdout.lines().map(|l| l.split_once("> ").map_or(l, |(_, rest)| rest));
    for line in lines.filter(|l| l.len() > 4 && l.as_bytes()[2] == b'[' && l.ends_with(']')) {
        let row = line[3..line.len() - 1].to_string();
        if line.starts_with('+') {
            table.push(row);
        } else {
            let at =
                table.iter().position(|r| *r == row).unwrap_or_else(|| panic!("{line} takes back a row not there"));
            table.swap_remove(at);
        }
    }
    table.sort();
    table
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

/// The table an upsert topic's records leave, as `flink-sql-oracle --final` writes it: the
/// last value of each key (csv, as "a, 1"), a key whose last record is a tombstone gone.
fn upsert_table(records: &[(i32, Vec<u8>, Vec<u8>)], tombstone: &[u8]) -> Vec<String> {
    let mut table = std::collections::BTreeMap::new();
    for (_, key, value) in records {
        if value.as_slice() == tombstone {
            table.remove(key);
        } else {
            table.insert(key.clone(), String::from_utf8(value.clone()).unwrap().replace(',', ", "));
        }
    }
    let mut rows: Vec<String> = table.into_values().collect();
    rows.sort();
    rows
}

#[test]
fn cdc_changes_through_kafka_into_upsert_kafka_leave_flinks_table() {
    let b = KafkaCluster::shared().brokers.clone();
    let work = std::env::temp_dir().join(format!("eddy-sql-kafka-cdc-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    create_topic(&b, "cdc-products", 1, &[]).unwrap();
    create_topic(&b, "cdc-shelves", 2, &[("cleanup.policy", "compact")]).unwrap();
    let changes = std::fs::read_to_string(dir().join("data/products.debezium.json")).unwrap();
    let records: Vec<(i32, String, Vec<u8>)> =
        changes.lines().enumerate().map(|(i, l)| (0, i.to_string(), l.as_bytes().to_vec())).collect();
    produce(&b, "cdc-products", &records).unwrap();
    let script = format!(
        "SET 'execution.checkpointing.interval' = '100 ms';
CREATE TABLE products (id INT, name STRING, price DECIMAL(10, 2), shelf STRING) WITH ('connector' = 'kafka',
  'topic' = 'cdc-products', 'properties.bootstrap.servers' = '{b}', 'scan.startup.mode' = 'earliest-offset',
  'scan.bounded.mode' = 'latest-offset', 'format' = 'debezium-json');
CREATE TABLE shelves (shelf STRING, total DECIMAL(38, 2), n BIGINT, PRIMARY KEY (shelf) NOT ENFORCED) WITH (
  'connector' = 'upsert-kafka', 'topic' = 'cdc-shelves', 'properties.bootstrap.servers' = '{b}',
  'key.format' = 'json', 'value.format' = 'csv', 'sink.delivery-guarantee' = 'exactly-once',
  'sink.transactional-id-prefix' = 'sql-cdc-test');
INSERT INTO shelves SELECT shelf, SUM(price), COUNT(*) FROM products GROUP BY shelf;
"
    );
    run(&work, "cdc", &script);
    // Read back by Kafka's own consumer; its tombstones print as "null".
    let all = read_committed(&b, "cdc-shelves", Duration::from_secs(60)).unwrap();
    let records = eddy::connector::kafka::testing::read_committed_with_java(&b, "cdc-shelves", all.len()).unwrap();
    assert_eq!(records.len(), all.len(), "Kafka's consumer read every record");
    assert!(records.iter().any(|(_, _, v)| v == b"null"), "shelf a emptied: a tombstone");
    let expected: Vec<String> =
        std::fs::read_to_string(dir().join("expected/cdc_aggregate.txt")).unwrap().lines().map(String::from).collect();
    assert_eq!(upsert_table(&records, b"null"), expected);
    assert!(
        all.iter().any(|(_, k, v)| k == br#"{"shelf":"a"}"# && v.is_empty()),
        "the tombstone has shelf a's key and no value"
    );

    // Read back as an upsert-kafka table: each key's last row, shelf a deleted by its
    // tombstone; and a GROUP BY over it takes back what the updates replace. A record its
    // value format cannot read is skipped, as the prefixed format option asks.
    produce(&b, "cdc-shelves", &[(0, r#"{"shelf":"z"}"#.to_string(), b"z,not a number,1".to_vec())]).unwrap();
    let read_back = format!(
        "CREATE TABLE shelves (shelf STRING, total DECIMAL(38, 2), n BIGINT, PRIMARY KEY (shelf) NOT ENFORCED) WITH (
  'connector' = 'upsert-kafka', 'topic' = 'cdc-shelves', 'properties.bootstrap.servers' = '{b}',
  'key.format' = 'json', 'value.format' = 'csv', 'value.csv.ignore-parse-errors' = 'true',
  'scan.bounded.mode' = 'latest-offset', 'properties.isolation.level' = 'read_committed');
SELECT shelf, total, n FROM shelves;
SELECT 'all', SUM(total), SUM(n) FROM shelves;
"
    );
    let printed = run(&work, "read-back", &read_back);
    let table = printed_table(&printed);
    let (all_rows, shelves): (Vec<String>, Vec<String>) = table.into_iter().partition(|r| r.starts_with("all, "));
    assert_eq!(shelves, expected, "the upsert-kafka table is Flink's final table; printed:\n{printed}");
    let totals = expected.iter().fold((0.0, 0), |(t, n), row| {
        let f: Vec<&str> = row.split(", ").collect();
        (t + f[1].parse::<f64>().unwrap(), n + f[2].parse::<i64>().unwrap())
    });
    assert_eq!(all_rows, vec![format!("all, {:.2}, {}", totals.0, totals.1)], "the sums over the table's last rows");
    let _ = std::fs::remove_dir_all(&work);
}
