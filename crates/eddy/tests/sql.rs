//! Flink SQL on eddy, run as users run it (`eddy sql -f script.sql`), against Apache
//! Flink 2.3's own results: each script of `tests/sql/` (with `tables.sql` before it) over
//! `tests/sql/data/` prints, at parallelism 1 and 4, exactly the rows Flink printed for it
//! (`tests/sql/expected/`, written by `tests/sql/regenerate.py` with
//! shared/flink-sql-oracle), sorted; a script of an updating result (first line `-- final`)
//! leaves, once its changelog is applied, exactly Flink's final table. And every kind of bad input gets an error that names
//! what is wrong and where.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every script of `tests/sql/` (all but `tables.sql`, which goes before each): a script
/// added there is tested without being listed anywhere else.
fn scripts() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".sql").map(String::from))
        .filter(|name| name != "tables")
        .collect();
    names.sort();
    names
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sql")
}

fn tables() -> String {
    std::fs::read_to_string(dir().join("tables.sql"))
        .unwrap()
        .replace("${DATA}", &dir().join("data").display().to_string())
}

/// Runs a script with `eddy sql -f`: (exit success, standard output, standard error).
fn run(script: &str, work: &Path, name: &str) -> (bool, String, String) {
    let path = work.join(format!("{name}.sql"));
    std::fs::write(&path, script).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_eddy")).args(["sql", "-f"]).arg(&path).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The printed rows without the `k> ` of parallel print subtasks, as printed.
fn printed(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| match l.split_once("> ") {
            Some((k, rest)) if k.chars().all(|c| c.is_ascii_digit()) => rest.to_string(),
            _ => l.to_string(),
        })
        .filter(|l| l.len() >= 4 && &l[2..3] == "[")
        .collect()
}

/// The printed rows, sorted.
fn rows(stdout: &str) -> Vec<String> {
    let mut rows = printed(stdout);
    rows.sort();
    rows
}

/// The table a printed changelog leaves (`+I`/`+U` add a row, `-U`/`-D` take one back),
/// one row a line as `flink-sql-oracle --final` writes it, sorted; or a row taken back
/// more often than it was added. (Subtasks print side by side, so only the end counts.)
fn final_table(stdout: &str) -> Result<Vec<String>, String> {
    let mut table: std::collections::BTreeMap<String, i64> = Default::default();
    for line in printed(stdout) {
        let (kind, rest) = line.split_at(2);
        let row = rest[1..rest.len() - 1].to_string();
        *table.entry(row).or_default() += if kind.starts_with('+') { 1 } else { -1 };
    }
    if let Some((row, n)) = table.iter().find(|(_, n)| **n < 0) {
        return Err(format!("[{row}] is taken back {} times more than it was added", -n));
    }
    Ok(table.into_iter().flat_map(|(row, n)| std::iter::repeat_n(row, n as usize)).collect())
}

fn work_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("eddy-sql-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_script_prints_flinks_rows_at_parallelism_1_and_4() {
    let work = work_dir("conformance");
    let mut failures = Vec::new();
    let scripts = scripts();
    assert!(scripts.len() >= 23, "tests/sql/ has lost scripts: {scripts:?}");
    for name in &scripts {
        let query = std::fs::read_to_string(dir().join(format!("{name}.sql")))
            .unwrap()
            .replace("${DATA}", &dir().join("data").display().to_string());
        let expected: Vec<String> = std::fs::read_to_string(dir().join(format!("expected/{name}.txt")))
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        assert!(!expected.is_empty(), "{name}: Flink's result is empty: the script tests nothing");
        for p in [1, 4] {
            let script = format!("SET 'parallelism.default' = '{p}';\n{}\n{query}", tables());
            let (ok, stdout, stderr) = run(&script, &work, &format!("{name}-p{p}"));
            if !ok {
                failures.push(format!("{name} p={p} failed: {}", stderr.lines().last().unwrap_or("")));
                continue;
            }
            let actual = if query.starts_with("-- final") {
                match final_table(&stdout) {
                    Ok(table) => table,
                    Err(e) => {
                        failures.push(format!("{name} p={p}: {e}"));
                        continue;
                    }
                }
            } else {
                rows(&stdout)
            };
            if actual != expected {
                let missing: Vec<&String> = expected.iter().filter(|r| !actual.contains(r)).take(3).collect();
                let extra: Vec<&String> = actual.iter().filter(|r| !expected.contains(r)).take(3).collect();
                failures.push(format!(
                    "{name} p={p}: {} rows, Flink {}; missing {missing:?}, extra {extra:?}",
                    actual.len(),
                    expected.len()
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The script fails, and its error says `needles`.
fn fails_with(work: &Path, name: &str, script: &str, needles: &[&str]) {
    let (ok, stdout, stderr) = run(script, work, name);
    assert!(!ok, "{name}: the script ran: {stdout}");
    for needle in needles {
        assert!(stderr.contains(needle), "{name}: the error does not say {needle:?}:\n{stderr}");
    }
    assert!(!stderr.contains("panicked"), "{name}: a panic:\n{stderr}");
}

#[test]
fn bad_scripts_get_errors_that_name_what_and_where() {
    let work = work_dir("errors");
    let t = tables();
    // The query follows the tables and a blank line.
    let at = |line: usize| format!("line {}", t.lines().count() + 1 + line);
    fails_with(&work, "syntax", &format!("{t}\nSELECT url\nFROM clicks WHERE"), &["SQL parse failed", &at(2)]);
    fails_with(&work, "unknown-table", &format!("{t}\nSELECT * FROM nope"), &["Object 'nope' not found", &at(1)]);
    fails_with(
        &work,
        "unknown-column",
        &format!("{t}\nSELECT url,\n  price FROM clicks"),
        &["Column 'price' not found in any table", &format!("{}, column 3", at(2))],
    );
    fails_with(
        &work,
        "case-sensitive",
        &format!("{t}\nSELECT URL FROM clicks"),
        &["Column 'URL' not found", "did you mean 'url'"],
    );
    fails_with(
        &work,
        "type-mismatch",
        &format!("{t}\nSELECT url + qty FROM clicks"),
        &["Cannot apply '+' to arguments of type '<STRING> + <INT>'", &at(1)],
    );
    fails_with(
        &work,
        "where-not-boolean",
        &format!("{t}\nSELECT url FROM clicks WHERE qty"),
        &["must be of type BOOLEAN, not INT"],
    );
    fails_with(
        &work,
        "order-without-limit",
        &format!("{t}\nSELECT url FROM clicks ORDER BY url"),
        &["ORDER BY without LIMIT on a stream", &at(1)],
    );
    fails_with(
        &work,
        "unknown-window",
        &format!("{t}\nSELECT SUM(qty) OVER v FROM clicks WINDOW w AS (ORDER BY ts)"),
        &["Window 'v' not found", &at(1)],
    );
    fails_with(
        &work,
        "refined-window",
        &format!("{t}\nSELECT SUM(qty) OVER (w ORDER BY ts) FROM clicks WINDOW w AS (PARTITION BY url)"),
        &["a window that refines the named window 'w'", &at(1)],
    );
    fails_with(
        &work,
        "rank",
        &format!(
            "{t}\nSELECT * FROM (SELECT url, RANK() OVER (PARTITION BY url ORDER BY qty) AS r FROM clicks) WHERE r = 1"
        ),
        &["RANK() on streaming table", &at(1)],
    );
    fails_with(
        &work,
        "limit-not-a-number",
        &format!("{t}\nSELECT url FROM clicks ORDER BY url LIMIT 'x'"),
        &["LIMIT takes a number of rows, not ''x''"],
    );
    fails_with(
        &work,
        "unknown-option",
        "CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'path' = '/tmp', 'format' = 'json', 'bogus' = '1');\nSELECT * FROM t",
        &["table 't'", "Unsupported options found for 'filesystem'", "Unsupported options:\n\nbogus", "Supported options:"],
    );
    fails_with(
        &work,
        "unknown-connector",
        "CREATE TABLE t (a INT) WITH ('connector' = 'nope');\nSELECT * FROM t",
        &["Could not find any factory for identifier 'nope'"],
    );
    fails_with(
        &work,
        "updates-into-append-only-sink",
        &format!(
            "{t}\nCREATE TABLE per_url (url STRING, n BIGINT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');\nINSERT INTO per_url SELECT url, COUNT(*) FROM clicks GROUP BY url",
            work.join("per-url").display()
        ),
        &[
            "Table sink 'default_catalog.default_database.per_url' doesn't support consuming update changes",
            "which is produced by node GroupAggregate(groupBy=[$f0], select=[$f0, COUNT(*)])",
        ],
    );
    fails_with(
        &work,
        "temporal-join-without-primary-key",
        &format!("{t}\nSELECT * FROM clicks c JOIN clicks FOR SYSTEM_TIME AS OF c.ts AS d ON c.url = d.url"),
        &["Temporal Table Join requires primary key in versioned table"],
    );
    fails_with(
        &work,
        "missing-file",
        "CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'path' = '/nonexistent/x.json', 'format' = 'json');\nSELECT * FROM t",
        &["'/nonexistent/x.json' does not exist"],
    );
    let bad = work.join("bad.json");
    std::fs::write(&bad, "{\"a\": 1}\n{\"a\": \"one\"}\n").unwrap();
    fails_with(
        &work,
        "bad-row",
        &format!("CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\nSELECT * FROM t", bad.display()),
        &["table 't'", "{\"a\": \"one\"}", "'one' is not an integer"],
    );
    fails_with(
        &work,
        "watermark-type",
        "CREATE TABLE t (a INT, WATERMARK FOR a AS a) WITH ('connector' = 'datagen');\nSELECT * FROM t",
        &["The field 'a' must be of type TIMESTAMP(p) or TIMESTAMP_LTZ(p)"],
    );
    fails_with(
        &work,
        "insert-mismatch",
        &format!(
            "{t}\nCREATE TABLE out (a INT) WITH ('connector' = 'blackhole');\nINSERT INTO out SELECT url FROM clicks"
        ),
        &["Column types of query result and sink", "Incompatible types for sink column 'a'"],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_eddy")).args(["sql", "-f", "/nonexistent/script.sql"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("cannot read the script '/nonexistent/script.sql'"), "{stderr}");
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn explain_prints_the_plan_with_operator_names_and_changelog_modes() {
    let work = work_dir("explain");
    let script = format!(
        "{}\nEXPLAIN SELECT `user`, window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE qty > 1 GROUP BY `user`, window_start, window_end",
        tables()
    );
    let (ok, stdout, stderr) = run(&script, &work, "explain");
    assert!(ok, "{stderr}");
    for needle in [
        "== Optimized Physical Plan ==",
        "WindowAggregate(groupBy=[$f0], window=[TUMBLE(time_col=[$f1], size=[10000 ms])], select=[COUNT(*)]), changelogMode=[I]",
        "where=[>(qty, 1)]",
        "TableSourceScan(table=[[default_catalog, default_database, clicks]], fields=[user, url, amount, qty, ts])",
    ] {
        assert!(stdout.contains(needle), "EXPLAIN does not show {needle:?}:\n{stdout}");
    }
    // An aggregation updates its rows; one over an updating input deletes them too.
    let script = format!(
        "{}\nEXPLAIN SELECT n, COUNT(*) FROM (SELECT url, COUNT(*) AS n FROM clicks GROUP BY url) GROUP BY n",
        tables()
    );
    let (ok, stdout, stderr) = run(&script, &work, "explain-updates");
    assert!(ok, "{stderr}");
    for needle in [
        "GroupAggregate(groupBy=[$f0], select=[$f0, COUNT(*)]), changelogMode=[I,UB,UA,D]",
        "Calc(select=[$agg0 AS $f0]), changelogMode=[I,UB,UA]",
        "GroupAggregate(groupBy=[$f0], select=[$f0, COUNT(*)]), changelogMode=[I,UB,UA]",
        "changelogMode=[I]",
    ] {
        assert!(stdout.contains(needle), "EXPLAIN does not show {needle:?}:\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Every line of the committed part files of a filesystem sink, sorted (a line written
/// twice shows twice).
fn committed_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("part-") {
            lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from));
        }
    }
    lines.sort();
    lines
}

fn checkpoint_completed(chk: &Path) -> bool {
    let Ok(jobs) = std::fs::read_dir(chk) else { return false };
    jobs.flatten().any(|job| {
        std::fs::read_dir(job.path())
            .into_iter()
            .flatten()
            .flatten()
            .any(|c| c.file_name().to_string_lossy().starts_with("chk-") && c.path().join("_metadata").exists())
    })
}

/// The Nexmark events of eddy's deterministic generator at a limited rate (so that a kill
/// lands mid-run), with the benchmark's columns, and its bids.
const NEXMARK_BIDS: &str = "SET 'execution.checkpointing.interval' = '200 ms';
CREATE TABLE events (
  event_type INT,
  person ROW<id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING, `dateTime` TIMESTAMP(3), extra STRING>,
  auction ROW<id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING>,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3), extra STRING>,
  `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime` WHEN event_type = 1 THEN auction.`dateTime` ELSE bid.`dateTime` END,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'events.num' = '12000', 'first-event.rate' = '3000', 'rate.limited' = 'true');
CREATE VIEW bids AS SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price, `dateTime` FROM events WHERE event_type = 2;
";

/// A windowed count of Nexmark bids into an exactly-once filesystem sink.
fn bids_per_second_script(out: &Path) -> String {
    format!(
        "{NEXMARK_BIDS}
CREATE TABLE per_second (bidder BIGINT, bids BIGINT, top BIGINT, second_start TIMESTAMP(3)) WITH (
  'connector' = 'filesystem', 'path' = '{}', 'format' = 'csv');
INSERT INTO per_second
SELECT bidder, COUNT(*), MAX(price), window_start
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND))
GROUP BY bidder, window_start, window_end;
",
        out.display()
    )
}

/// Runs `script(out)` at parallelism 2 to its end (the reference), then again killed
/// with SIGKILL once a checkpoint completed and resumed from it at parallelism 3: the
/// directories the two wrote into, (reference, resumed).
fn killed_and_resumed(work: &Path, script: impl Fn(&Path) -> String) -> (PathBuf, PathBuf) {
    let eddy = |script: &Path, extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_eddy"));
        c.args(["sql", "-f"]).arg(script).args(["--checkpoint-dir"]).arg(work.join("chk")).args(extra);
        c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
        c
    };
    let reference_script = work.join("reference.sql");
    std::fs::write(&reference_script, script(&work.join("reference"))).unwrap();
    let done = eddy(&reference_script, &["-p", "2"]).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let reference_lines = committed_lines(&work.join("reference")).len();

    // The same script and command line start and resume: killed once a checkpoint
    // completed, then resumed from it at parallelism 3.
    let _ = std::fs::remove_dir_all(work.join("chk"));
    let resumed_script = work.join("resumed.sql");
    std::fs::write(&resumed_script, script(&work.join("resumed"))).unwrap();
    let mut first = eddy(&resumed_script, &["-p", "2", "--restore", "latest"]).spawn().unwrap();
    let started = std::time::Instant::now();
    while !checkpoint_completed(&work.join("chk")) {
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "no checkpoint completed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    first.kill().unwrap();
    first.wait().unwrap();
    let partial = committed_lines(&work.join("resumed")).len();
    assert!(partial < reference_lines, "killed mid-run: {partial} of {reference_lines}");
    let resumed = eddy(&resumed_script, &["-p", "3", "--restore", "latest"]).output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{log}");
    assert!(log.contains("restor"), "the second run did not restore:\n{log}");
    (work.join("reference"), work.join("resumed"))
}

#[test]
fn a_sql_job_killed_and_restored_at_another_parallelism_writes_every_row_once() {
    let work = work_dir("sigkill");
    let (reference, resumed) = killed_and_resumed(&work, bids_per_second_script);
    let reference = committed_lines(&reference);
    assert!(reference.len() > 500, "{} rows", reference.len());
    assert_eq!(committed_lines(&resumed), reference, "exactly once across the kill");
    let _ = std::fs::remove_dir_all(&work);
}

/// The table debezium-json messages leave: each create adds its `after`, each delete
/// takes its `before` back (a row taken back more often than added fails the test).
fn debezium_table(lines: &[String]) -> Vec<String> {
    let mut table: std::collections::BTreeMap<String, i64> = Default::default();
    for line in lines {
        let message: serde_json::Value = serde_json::from_str(line).unwrap();
        let (row, delta) = match message["op"].as_str() {
            Some("c") => (&message["after"], 1),
            Some("d") => (&message["before"], -1),
            other => panic!("an op {other:?} in {line}"),
        };
        *table.entry(row.to_string()).or_default() += delta;
    }
    assert!(table.values().all(|n| *n >= 0), "a row taken back more often than added: {table:?}");
    table.into_iter().flat_map(|(row, n)| std::iter::repeat_n(row, n as usize)).collect()
}

#[test]
fn an_updating_sql_job_killed_and_restored_at_another_parallelism_leaves_the_same_table() {
    let work = work_dir("sigkill-updates");
    // Counts and top prices per bidder, and the best bid of each auction: -U/+U and -D
    // rows into an exactly-once changelog of files.
    let (reference, resumed) = killed_and_resumed(&work, |out| {
        format!(
            "{NEXMARK_BIDS}
CREATE TABLE per_bidder (k STRING, id BIGINT, bids BIGINT, top BIGINT) WITH (
  'connector' = 'filesystem', 'path' = '{}', 'format' = 'debezium-json');
INSERT INTO per_bidder
SELECT 'bidder', bidder, COUNT(*), MAX(price) FROM bids GROUP BY bidder
UNION ALL
SELECT 'auction', auction, bidder, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids
) WHERE rn = 1;
",
            out.display()
        )
    });
    let reference = debezium_table(&committed_lines(&reference));
    assert!(reference.len() > 300, "{} rows", reference.len());
    assert_eq!(debezium_table(&committed_lines(&resumed)), reference, "the same table across the kill");
    let _ = std::fs::remove_dir_all(&work);
}

/// A free TCP port on the loopback address.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Kills a background process when dropped (a failed assertion leaves no cluster behind).
struct Background(std::process::Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_sql_job_on_a_cluster_stopped_with_a_savepoint_resumes_at_another_parallelism_exactly_once() {
    let work = work_dir("savepoint");
    let eddy = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_eddy"));
        c.current_dir(&work);
        c
    };
    std::fs::write(work.join("secret"), "a-test-secret-of-the-sql-cluster-test\n").unwrap();
    let address = format!("127.0.0.1:{}", free_port());
    let cluster = ["--jobmanager", address.as_str(), "--secret-file", "secret"];
    let log = |name: &str| std::fs::File::create(work.join(name)).unwrap();
    let _jobmanager = Background(
        eddy()
            .args(["jobmanager", "--bind", &address, "--secret-file", "secret"])
            .stderr(log("jm.log"))
            .spawn()
            .unwrap(),
    );
    let _taskmanager = Background(
        eddy().arg("taskmanager").args(cluster).args(["--slots", "4"]).stderr(log("tm.log")).spawn().unwrap(),
    );

    let reference_script = work.join("reference.sql");
    std::fs::write(&reference_script, bids_per_second_script(&work.join("reference"))).unwrap();
    let done = eddy().args(["sql", "-p", "2", "-f"]).arg(&reference_script).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let reference = committed_lines(&work.join("reference"));

    // Submitted detached at parallelism 2; stopped with a savepoint once a checkpoint
    // completed; resumed here from the savepoint at parallelism 3.
    let script = work.join("job.sql");
    std::fs::write(&script, bids_per_second_script(&work.join("out"))).unwrap();
    let chk = work.join("chk");
    let submit = eddy()
        .args(["sql", "-p", "2", "-d", "--checkpoint-dir"])
        .arg(&chk)
        .arg("-f")
        .arg(&script)
        .args(cluster)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&submit.stdout).into_owned() + &String::from_utf8_lossy(&submit.stderr);
    assert!(submit.status.success(), "{printed}");
    let started = std::time::Instant::now();
    while !checkpoint_completed(&chk) {
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "no checkpoint completed:\n{printed}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stop = eddy()
        .args(["stop", "insert-into_default_catalog.default_database.per_second", "--savepoint"])
        .arg(work.join("savepoints"))
        .args(cluster)
        .output()
        .unwrap();
    let stopped = String::from_utf8_lossy(&stop.stdout).into_owned();
    assert!(stop.status.success(), "{stopped}{}", String::from_utf8_lossy(&stop.stderr));
    let savepoint =
        stopped.lines().find_map(|l| l.strip_prefix("savepoint=")).expect("stop prints savepoint=").trim().to_string();
    let partial = committed_lines(&work.join("out"));
    assert!(partial.len() < reference.len(), "stopped mid-run: {} of {}", partial.len(), reference.len());
    let resumed = eddy().args(["sql", "-p", "3", "-s", &savepoint, "-f"]).arg(&script).output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(committed_lines(&work.join("out")), reference, "exactly once across the stop and the rescale");
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_partitioned_filesystem_sink_writes_each_partition_once_and_marks_it_done() {
    let work = work_dir("partitioned");
    let out = work.join("out");
    let script = format!(
        "{}
CREATE TABLE by_minute (`user` STRING, url STRING, ts TIMESTAMP(3), dt STRING, hm STRING) PARTITIONED BY (dt, hm) WITH (
  'connector' = 'filesystem', 'path' = 'file://{}', 'format' = 'csv',
  'sink.partition-commit.trigger' = 'partition-time', 'sink.partition-commit.delay' = '1 min',
  'sink.partition-commit.policy.kind' = 'success-file', 'partition.time-extractor.timestamp-pattern' = '$dt $hm:00');
INSERT INTO by_minute SELECT `user`, url, ts, DATE_FORMAT(ts, 'yyyy-MM-dd'), DATE_FORMAT(ts, 'HH:mm') FROM clicks;
",
        tables(),
        out.display()
    );
    let (ok, _, stderr) = run(&script, &work, "partitioned");
    assert!(ok, "{stderr}");
    // The clicks of each minute, from the data file itself.
    let mut expected: std::collections::BTreeMap<String, usize> = Default::default();
    for line in std::fs::read_to_string(dir().join("data/clicks.json")).unwrap().lines() {
        let ts = &line[line.find("\"ts\": \"").unwrap() + 7..][..19];
        *expected.entry(format!("dt={}/hm={}%3A{}", &ts[..10], &ts[11..13], &ts[14..16])).or_default() += 1;
    }
    assert!(expected.len() >= 3, "{expected:?}");
    let dt = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    assert_eq!(dt, vec!["dt=2023-11-14".to_string()]);
    let mut written = std::collections::BTreeMap::new();
    for hm in std::fs::read_dir(out.join("dt=2023-11-14")).unwrap().flatten() {
        let partition = format!("dt=2023-11-14/{}", hm.file_name().to_string_lossy());
        assert!(hm.path().join("_SUCCESS").exists(), "{partition} is not marked done");
        let mut lines = 0;
        for file in std::fs::read_dir(hm.path()).unwrap().flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            assert!(name == "_SUCCESS" || name.starts_with("part-"), "{partition}: an uncommitted file {name}");
            if name.starts_with("part-") {
                for line in std::fs::read_to_string(file.path()).unwrap().lines() {
                    // user,url,ts: the partition columns are not in the files.
                    assert_eq!(line.matches(',').count(), 2, "{line}");
                    assert!(line.contains(&format!("2023-11-14 {}", &partition[17..19])), "{partition}: {line}");
                    lines += 1;
                }
            }
        }
        written.insert(partition, lines);
    }
    assert_eq!(written, expected);
    let _ = std::fs::remove_dir_all(&work);
}
