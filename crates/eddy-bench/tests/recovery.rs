//! Recovery of W1 and W3 through the command line: a SIGKILL mid-run, then `--restore
//! latest`; stop-with-savepoint, then restore, also at other parallelisms and on the other
//! backend; each must give exactly the failure-free output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::output;

const EVENTS: &str = "300000";

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_eddy-bench")).args(args).output().expect("eddy-bench runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-recovery-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn checksum(stdout: &str) -> String {
    stdout.lines().last().unwrap().rsplit("checksum=").next().unwrap().to_string()
}

fn reference(dir: &Path, workload: &str) -> (String, Vec<String>) {
    let out = dir.join("reference");
    let (code, stdout, stderr) = bench(&[
        workload,
        "--events",
        EVENTS,
        "--keys",
        "1000",
        "--parallelism",
        "2",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    (checksum(&stdout), output(&out))
}

fn has_complete_checkpoint(dir: &Path) -> bool {
    std::fs::read_dir(dir).map(|d| d.flatten().any(|e| e.path().join("_metadata").exists())).unwrap_or(false)
}

/// Runs W1 with checkpoints, SIGKILLs it once a checkpoint completed, restarts it with
/// `--restore latest`: the output must equal a failure-free run's.
fn kill_and_restore(name: &str, extra: &[&str]) {
    kill_and_restore_with(name, "api-count", extra, &[]);
}

/// [`kill_and_restore`] of `workload` with `restore_extra` flags for the restored run only.
fn kill_and_restore_with(name: &str, workload: &str, extra: &[&str], restore_extra: &[&str]) {
    let dir = temp_dir(name);
    let (expected_checksum, expected) = reference(&dir, workload);
    if workload == "api-count" {
        assert_eq!(expected.len(), 300_000);
    }
    let (chk, out) = (dir.join("chk"), dir.join("out"));
    let common =
        [&[workload, "--events", EVENTS, "--keys", "1000", "--parallelism", "2", "--checkpoint-ms", "100"], extra]
            .concat();
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(&common)
        .args(["--checkpoint-dir", chk.to_str().unwrap(), "--output", out.to_str().unwrap(), "--rate", "100000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !has_complete_checkpoint(&chk) {
        assert!(started.elapsed() < Duration::from_secs(20), "no checkpoint completed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(600));
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed mid-run");
    let (code, stdout, stderr) = bench(
        &[
            &common[..],
            &["--checkpoint-dir", chk.to_str().unwrap(), "--output", out.to_str().unwrap(), "--restore", "latest"],
            restore_extra,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(checksum(&stdout), expected_checksum);
    assert_eq!(output(&out), expected, "exactly the failure-free output");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigkill_then_restore_latest_gives_the_failure_free_output() {
    kill_and_restore("kill", &[]);
}

#[test]
fn w1_on_rocksdb_survives_sigkill_like_on_the_heap() {
    kill_and_restore("rocks-kill", &["--backend", "rocksdb"]);
}

#[test]
fn w1_on_rocksdb_with_incremental_checkpoints_survives_sigkill_and_claims_its_checkpoint() {
    kill_and_restore_with(
        "rocks-incremental-kill",
        "api-count",
        &["--backend", "rocksdb", "--incremental"],
        &["--claim"],
    );
}

#[test]
fn w3_windows_and_timers_survive_sigkill() {
    kill_and_restore_with("w3-kill", "window", &[], &[]);
}

#[test]
fn w3_on_rocksdb_with_incremental_checkpoints_survives_sigkill() {
    kill_and_restore_with("w3-rocks-kill", "window", &["--backend", "rocksdb", "--incremental"], &[]);
}

#[test]
fn stop_with_savepoint_then_restore_finishes_like_an_uninterrupted_run() {
    let dir = temp_dir("savepoint");
    let (expected_checksum, expected) = reference(&dir, "api-count");
    let (savepoints, out) = (dir.join("savepoints"), dir.join("out"));
    let common = ["api-count", "--events", EVENTS, "--keys", "1000", "--parallelism", "2"];
    let (code, stdout, stderr) = bench(
        &[
            &common[..],
            &[
                "--output",
                out.to_str().unwrap(),
                "--rate",
                "100000",
                "--savepoint-dir",
                savepoints.to_str().unwrap(),
                "--stop-with-savepoint-after-ms",
                "600",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    let savepoint = stdout.lines().find_map(|l| l.strip_prefix("savepoint=")).expect("a savepoint line").to_string();
    let partial = output(&out);
    assert!(!partial.is_empty() && partial.len() < expected.len(), "stopped mid-run with {} lines", partial.len());
    let (code, stdout, stderr) =
        bench(&[&common[..], &["--output", out.to_str().unwrap(), "--restore", &savepoint]].concat());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(checksum(&stdout), expected_checksum);
    assert_eq!(output(&out), expected);

    // A savepoint of W1 has state for operators the join job does not have.
    let (code, _, stderr) = bench(&["join", "--events", "1000", "--restore", &savepoint]);
    assert_eq!(code, 1);
    assert!(stderr.contains("has state for operator uid") && stderr.contains("allow-non-restored-state"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Stops W1 with a savepoint at each (parallelism, backend) of `chain` but the last,
/// restoring the next step from it; the output must be the uninterrupted run's.
fn rescale_chain(name: &str, chain: &[(u32, &str)]) {
    rescale_chain_of(name, "api-count", chain);
}

fn rescale_chain_of(name: &str, workload: &str, chain: &[(u32, &str)]) {
    let dir = temp_dir(name);
    let (expected_checksum, expected) = reference(&dir, workload);
    let out = dir.join("out");
    let mut savepoint: Option<String> = None;
    for (step, &(parallelism, backend)) in chain.iter().enumerate() {
        let p = parallelism.to_string();
        let mut args: Vec<String> = [
            workload,
            "--events",
            EVENTS,
            "--keys",
            "1000",
            "--parallelism",
            &p,
            "--backend",
            backend,
            "--output",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(path) = &savepoint {
            args.extend(["--restore".to_string(), path.clone()]);
        }
        let last = step + 1 == chain.len();
        if !last {
            let savepoints = dir.join(format!("sp-{step}"));
            args.extend(
                [
                    "--rate",
                    "100000",
                    "--savepoint-dir",
                    savepoints.to_str().unwrap(),
                    "--stop-with-savepoint-after-ms",
                    "300",
                ]
                .map(String::from),
            );
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = bench(&args);
        assert_eq!(code, 0, "step {step} at parallelism {parallelism} on {backend}: {stderr}");
        if last {
            assert_eq!(checksum(&stdout), expected_checksum, "{name}: checksum");
        } else {
            savepoint =
                Some(stdout.lines().find_map(|l| l.strip_prefix("savepoint=")).expect("a savepoint").to_string());
        }
    }
    assert_eq!(output(&out), expected, "{name}: exactly the uninterrupted output");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn w1_rescales_along_1_2_3_1_switching_backends() {
    rescale_chain("chain-1231", &[(1, "heap"), (2, "rocksdb"), (3, "heap"), (1, "rocksdb")]);
}

#[test]
fn w1_rescales_along_4_2_4_switching_backends() {
    rescale_chain("chain-424", &[(4, "rocksdb"), (2, "heap"), (4, "rocksdb")]);
}

#[test]
fn w3_stops_with_a_savepoint_and_resumes_at_other_parallelisms_and_backends() {
    rescale_chain_of("w3-chain-213", "window", &[(2, "heap"), (1, "rocksdb"), (3, "heap")]);
}
