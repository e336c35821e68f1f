//! Async I/O against a real HTTP service on loopback (`eddy-bench enrich-service`: 10 ms
//! per answer, 200 ms for every 50th id, HTTP 503 first for every 13th id, which the job
//! retries): the output is exact in ordered and unordered mode, and after a SIGKILL
//! mid-run and a restore at another parallelism every record's result is emitted exactly
//! once (exactly-once file sink), its request having been made at least once.

use std::path::PathBuf;
use std::time::{Duration, Instant};

mod common;
use common::process::Proc;
use common::{has_complete_checkpoint, output};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-async-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Starts the service; its address.
fn service() -> (Proc, String) {
    let service = Proc::start(&["enrich-service"]);
    service.wait_for("service=", 1, Duration::from_secs(20));
    let line = service.lines().into_iter().find(|l| l.starts_with("service=")).unwrap();
    let address = line.trim_start_matches("service=").to_string();
    (service, address)
}

/// The service's `(requests, distinct ids)`.
fn requests(address: &str) -> (u64, u64) {
    let (status, body) = common::http::get(&format!("http://{address}/requests"), None);
    assert_eq!(status, 200, "{body}");
    let field = |name: &str| -> u64 {
        body.split_whitespace().find_map(|w| w.strip_prefix(name)).and_then(|v| v.parse().ok()).unwrap()
    };
    (field("requests="), field("distinct="))
}

fn expected(events: u64) -> Vec<String> {
    let mut lines: Vec<String> = (0..events).map(|i| format!("{i} {}", 3 * i + 1)).collect();
    lines.sort();
    lines
}

#[test]
fn ordered_and_unordered_enrichment_give_every_record_its_answer_once() {
    let (_service, address) = service();
    for mode in [&["--ordered"][..], &[]] {
        let dir = temp_dir(if mode.is_empty() { "unordered" } else { "ordered" });
        let out = dir.join("out");
        let args = [&["async-enrich", "--events", "3000", "--capacity", "50", "--parallelism", "2"][..], mode].concat();
        let args =
            [&args[..], &["--service", &address, "--checkpoint-ms", "200", "--output", out.to_str().unwrap()]].concat();
        let (code, log) = Proc::start(&args).finish(Duration::from_secs(120));
        assert_eq!(code, 0, "{log}");
        assert_eq!(output(&out), expected(3000), "{mode:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_sigkill_mid_run_and_a_restore_at_another_parallelism_emit_every_result_exactly_once() {
    let (_service, address) = service();
    let dir = temp_dir("kill");
    let (chk, out) = (dir.join("chk"), dir.join("out"));
    let events = "20000";
    let common =
        ["async-enrich", "--events", events, "--capacity", "100", "--service", &address, "--checkpoint-ms", "200"];
    let paths = ["--checkpoint-dir", chk.to_str().unwrap(), "--output", out.to_str().unwrap()];
    let mut first = Proc::start(&[&common[..], &["--parallelism", "2"], &paths].concat());
    // Killed once a checkpoint is complete and a quarter of the records were requested.
    let started = Instant::now();
    while !has_complete_checkpoint(&chk) || requests(&address).1 < 5_000 {
        assert!(started.elapsed() < Duration::from_secs(60), "no checkpoint completed: {}", first.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(10));
    }
    first.child.kill().unwrap(); // SIGKILL
    assert!(!first.child.wait().unwrap().success(), "killed mid-run");
    let (before, distinct_before) = requests(&address);
    assert!(distinct_before < 20_000, "killed before every record was requested ({distinct_before} were)");
    let restored = Proc::start(&[&common[..], &["--parallelism", "3", "--restore", "latest"], &paths].concat());
    let (code, log) = restored.finish(Duration::from_secs(180));
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("requesting the restored in-flight records again"),
        "the restored checkpoint held records in flight: {log}"
    );
    assert_eq!(output(&out), expected(20_000), "every result exactly once");
    let (total, distinct) = requests(&address);
    assert_eq!(distinct, 20_000, "every record requested at least once");
    println!("requests: {before} before the kill, {total} in all, for 20000 records");
    std::fs::remove_dir_all(&dir).unwrap();
}
