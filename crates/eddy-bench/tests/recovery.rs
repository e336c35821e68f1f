//! Recovery of W1 and W3 through the command line: a SIGKILL mid-run, then `--restore
//! latest`; stop-with-savepoint, then restore, also at other parallelisms and on the other
//! backend; each must give exactly the failure-free output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::process::Proc;
use common::{has_complete_checkpoint, holds_checkpoint, job_dirs, output};

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

/// Starts W1 with checkpoints every 100 ms into `chk` and output into `out`, rate-limited
/// so that it runs for seconds.
fn start_w1(events: &str, keys: &str, chk: &Path, out: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(["api-count", "--events", events, "--keys", keys, "--parallelism", "2", "--checkpoint-ms", "100"])
        .args(["--checkpoint-dir", chk.to_str().unwrap(), "--output", out.to_str().unwrap(), "--rate", "100000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// SIGKILLs `child` once `among` job directories under `chk` hold a complete checkpoint.
fn kill_after_a_checkpoint(child: &mut std::process::Child, chk: &Path, among: usize) {
    let started = Instant::now();
    while job_dirs(chk).iter().filter(|job| holds_checkpoint(job)).count() < among {
        assert!(started.elapsed() < Duration::from_secs(20), "no checkpoint completed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    assert!(!child.wait().unwrap().success(), "killed mid-run");
}

/// Runs W1 with checkpoints, SIGKILLs it once a checkpoint completed, restarts it with
/// `--restore latest`: the output must equal a failure-free run's.
fn kill_and_restore(name: &str, extra: &[&str]) {
    kill_and_restore_with(name, "api-count", extra, &[]);
}

/// [`kill_and_restore`] of `workload` with `restore_extra` flags for the restored run only.
fn kill_and_restore_with(name: &str, workload: &str, extra: &[&str], restore_extra: &[&str]) {
    kill_and_restore_at(name, workload, extra, restore_extra, "2");
}

/// [`kill_and_restore_with`], the restored run at `restore_parallelism`.
fn kill_and_restore_at(
    name: &str,
    workload: &str,
    extra: &[&str],
    restore_extra: &[&str],
    restore_parallelism: &str,
) -> String {
    let dir = temp_dir(name);
    let (expected_checksum, expected) = reference(&dir, workload);
    if workload == "api-count" {
        assert_eq!(expected.len(), 300_000);
    }
    let (chk, out) = (dir.join("chk"), dir.join("out"));
    let common = [&[workload, "--events", EVENTS, "--keys", "1000", "--checkpoint-ms", "100"], extra].concat();
    let mut child = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(&common)
        .args(["--parallelism", "2"])
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
            &["--parallelism", restore_parallelism],
            &["--checkpoint-dir", chk.to_str().unwrap(), "--output", out.to_str().unwrap(), "--restore", "latest"],
            restore_extra,
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(checksum(&stdout), expected_checksum);
    assert_eq!(output(&out), expected, "exactly the failure-free output");
    std::fs::remove_dir_all(&dir).unwrap();
    stderr
}

/// W1 behind a slow sink with unaligned checkpoints, killed and restored at
/// `restore_parallelism`: the checkpoint it restores held in-flight records, and they
/// were replayed.
fn unaligned_kill(name: &str, restore_parallelism: &str) {
    let extra = ["--slow-sink-us", "30", "--unaligned"];
    let log = kill_and_restore_at(name, "api-count", &extra, &[], restore_parallelism);
    assert!(log.contains("replayed the in-flight records"), "the restored checkpoint had in-flight records: {log}");
}

/// The heap's incremental checkpoints: the restore reads a chain of a base and deltas, at
/// another parallelism (each new subtask takes its key groups out of both old chains).
#[test]
fn w1_on_the_heap_with_incremental_checkpoints_survives_sigkill_and_restores_at_parallelism_3() {
    kill_and_restore_at("heap-incremental-kill", "api-count", &["--incremental"], &[], "3");
}

/// Windows remove their contents when they fire: the deltas carry removals.
#[test]
fn w3_on_the_heap_with_incremental_checkpoints_survives_sigkill() {
    kill_and_restore_with("w3-heap-incremental-kill", "window", &["--incremental"], &[]);
}

/// Under backpressure (one sink subtask at 30 µs a record, behind a source at 100,000 a
/// second) with unaligned checkpoints, whose in-flight records are replayed on restore.
#[test]
fn w1_behind_a_slow_sink_with_unaligned_checkpoints_survives_sigkill() {
    unaligned_kill("unaligned-kill", "2");
}

/// The same, restored at parallelism 3: the in-flight records go by key group to the
/// subtasks that own them now.
#[test]
fn w1_with_unaligned_checkpoints_restores_its_in_flight_records_at_another_parallelism() {
    unaligned_kill("unaligned-rescale-up", "3");
}

/// The same, restored at parallelism 1.
#[test]
fn w1_with_unaligned_checkpoints_restores_its_in_flight_records_at_parallelism_1() {
    unaligned_kill("unaligned-rescale-down", "1");
}

/// One command line starts the job and resumes it: `--restore latest` starts fresh, and
/// says so, while the checkpoint directory holds nothing of the job; after a SIGKILL the
/// same command line resumes from the newest checkpoint, to the failure-free output.
#[test]
fn one_command_line_with_restore_latest_starts_fresh_then_resumes_after_sigkill() {
    let dir = temp_dir("restore-latest-fresh");
    let (expected_checksum, expected) = reference(&dir, "api-count");
    let (chk, out) = (dir.join("chk"), dir.join("out"));
    let (chk, out) = (chk.to_str().unwrap(), out.to_str().unwrap());
    let args = ["api-count", "--events", EVENTS, "--keys", "1000", "--parallelism", "2", "--checkpoint-ms", "100"];
    let args =
        [&args[..], &["--checkpoint-dir", chk, "--output", out, "--rate", "100000", "--restore", "latest"]].concat();
    let first = Proc::start(&args);
    let started = Instant::now();
    while !has_complete_checkpoint(&dir.join("chk")) {
        assert!(started.elapsed() < Duration::from_secs(20), "no checkpoint completed: {}", first.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(first.count("no checkpoint of the job yet: starting fresh"), 1, "{}", first.lines().join("\n"));
    drop(first); // SIGKILL
    let (code, stdout, stderr) = bench(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("starting fresh") && stderr.contains("chk-"), "it resumed: {stderr}");
    assert_eq!(checksum(&stdout), expected_checksum);
    assert_eq!(output(&dir.join("out")), expected, "exactly the failure-free output");
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

/// Under backpressure (one sink subtask at 30 µs a record, behind a source at 100,000 a
/// second) with debloated batches of a 100 ms target: small batches and short source
/// steps change where barriers fall, never what is committed.
#[test]
fn w1_behind_a_slow_sink_with_debloated_batches_survives_sigkill() {
    kill_and_restore("debloat-kill", &["--slow-sink-us", "30", "--debloat-target-ms", "100"]);
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
    // Flink's `-s` takes the savepoint's directory or its `_metadata` file.
    let metadata = format!("{savepoint}/_metadata");
    let (code, stdout, stderr) = bench(&[&common[..], &["--output", out.to_str().unwrap(), "-s", &metadata]].concat());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(checksum(&stdout), expected_checksum);
    assert_eq!(output(&out), expected);

    // A savepoint of W1 has state for operators the join job does not have: refused,
    // naming the flag that drops it; with `-n` (Flink's --allowNonRestoredState) it runs.
    let (code, _, stderr) = bench(&["join", "--events", "1000", "--from-savepoint", &savepoint]);
    assert_eq!(code, 1);
    assert!(stderr.contains("has state for operator uid") && stderr.contains("allow-non-restored-state"), "{stderr}");
    let (code, stdout, stderr) = bench(&["join", "--events", "1000", "--from-savepoint", &savepoint, "-n"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("checksum="), "{stdout}");
    let (code, _, stderr) = bench(&["join", "--events", "1000", "--allow-non-restored-state"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--allow-non-restored-state goes with -s/--from-savepoint PATH or --restore"), "{stderr}");
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

/// Issue 18: job A is killed, job B (same name, other input) runs to its end on the same
/// checkpoint directory, then A is restored from the latest checkpoint there: before job
/// directories, A restored from B's newer checkpoint and ended "successfully" with most of
/// its records missing. Now A finds its own (the interrupted job of its name, not the
/// finished one), and its committed output is exactly the failure-free run's.
#[test]
fn two_jobs_on_one_checkpoint_directory_keep_apart_and_a_restore_reads_its_own() {
    let dir = temp_dir("shared-dir");
    let (_, expected) = reference(&dir, "api-count");
    let chk = dir.join("chk");
    let (out_a, out_b) = (dir.join("out-a"), dir.join("out-b"));
    let mut a = start_w1(EVENTS, "1000", &chk, &out_a);
    kill_after_a_checkpoint(&mut a, &chk, 1);
    assert_eq!(job_dirs(&chk).len(), 1, "job A has a directory of its own");

    // While A's directory is free, a second job B runs through beside it.
    let b_args = ["api-count", "--events", "200000", "--keys", "500", "--parallelism", "2", "--checkpoint-ms", "100"];
    let (code, _, stderr) = bench(
        &[&b_args[..], &["--checkpoint-dir", chk.to_str().unwrap(), "--output", out_b.to_str().unwrap()]].concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(output(&out_b).len(), 200_000);
    let dirs = job_dirs(&chk);
    assert_eq!(dirs.len(), 2, "B wrote into a directory of its own: {dirs:?}");
    let finished: Vec<_> = dirs.iter().filter(|d| d.join("_job.finished").exists()).collect();
    assert_eq!(finished.len(), 1, "B's directory says it finished (eddy-bench keeps checkpoints): {dirs:?}");

    let restore = ["api-count", "--events", EVENTS, "--keys", "1000", "--parallelism", "2", "--checkpoint-ms", "100"];
    let (code, _, stderr) = bench(
        &[
            &restore[..],
            &["--checkpoint-dir", chk.to_str().unwrap(), "--output", out_a.to_str().unwrap(), "--restore", "latest"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(output(&out_a), expected, "A's output is exactly the failure-free run's");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two jobs of one name killed on one checkpoint directory: a restore of "the latest"
/// cannot tell whose it is and says so, naming both job directories; restored from its
/// own job directory by name, A's output is exact. A job directory held by a running job
/// is refused to a second process.
#[test]
fn a_restore_of_the_latest_among_two_killed_jobs_is_refused_until_one_is_named() {
    let dir = temp_dir("two-killed");
    let (_, expected) = reference(&dir, "api-count");
    let chk = dir.join("chk");
    let (out_a, out_b) = (dir.join("out-a"), dir.join("out-b"));
    let mut a = start_w1(EVENTS, "1000", &chk, &out_a);
    kill_after_a_checkpoint(&mut a, &chk, 1);
    let a_dir = job_dirs(&chk).pop().unwrap();
    let mut b = start_w1("2000000", "500", &chk, &out_b);
    kill_after_a_checkpoint(&mut b, &chk, 2);
    assert_eq!(job_dirs(&chk).len(), 2);

    let restore = ["api-count", "--events", EVENTS, "--keys", "1000", "--parallelism", "2", "--checkpoint-ms", "100"];
    let with = |from: &Path| {
        bench(
            &[
                &restore[..],
                &[
                    "--checkpoint-dir",
                    chk.to_str().unwrap(),
                    "--output",
                    out_a.to_str().unwrap(),
                    "--restore",
                    from.to_str().unwrap(),
                ],
            ]
            .concat(),
        )
    };
    let (code, _, stderr) = with(&chk);
    assert_eq!(code, 1, "{stderr}");
    for job in job_dirs(&chk) {
        assert!(stderr.contains(job.file_name().unwrap().to_str().unwrap()), "names {job:?}: {stderr}");
    }
    assert!(stderr.contains("2 jobs named") && !stderr.contains("panicked"), "{stderr}");

    // A second process on a job directory in use is refused.
    let mut holder = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(["api-count", "--events", EVENTS, "--keys", "1000", "--parallelism", "2", "--checkpoint-ms", "100"])
        .args(["--checkpoint-dir", chk.to_str().unwrap(), "--output", out_a.to_str().unwrap(), "--rate", "20000"])
        .args(["--restore", a_dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::fs::read_to_string(a_dir.join("_job.lock")).map_or(true, |s| !s.contains(&holder.id().to_string())) {
        assert!(started.elapsed() < Duration::from_secs(20), "the restored job never took its directory");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, _, stderr) = with(&a_dir);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("is running") && stderr.contains(&format!("process {}", holder.id())),
        "refused, naming the process that runs it: {stderr}"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();

    let (code, _, stderr) = with(&a_dir);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(output(&out_a), expected, "A's output is exactly the failure-free run's");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// W6, the interval join: its buffers and cleanup timers are keyed state; restored at
/// parallelism 3, the pairs are exactly the failure-free run's.
#[test]
fn the_interval_join_survives_sigkill_and_restores_at_parallelism_3_record_exact() {
    kill_and_restore_at("interval-join-kill", "interval-join", &[], &[], "3");
}

/// W7, the window join, on RocksDB: both sides' window contents restored at parallelism 1.
#[test]
fn the_window_join_on_rocksdb_survives_sigkill_and_restores_at_parallelism_1_record_exact() {
    kill_and_restore_at("window-join-kill", "window-join", &["--backend", "rocksdb"], &[], "1");
}

/// Checkpoints after the sources finished (Flink's FLIP-147): W1's 4,000 events are all
/// queued at once in front of a sink subtask that takes 5 ms a record, so the sources
/// finish at once and the job's tail lasts about 10 s. Checkpoints (every 500 ms) complete
/// during the tail, each holding what the sink has not processed yet as in-flight data; a
/// SIGKILL in the tail restores from one at `restore_parallelism`, the restored sources
/// send nothing, and the output is exactly the failure-free run's.
fn kill_in_the_tail_after_the_sources_finished(name: &str, extra: &[&str], restore_parallelism: &str) {
    const FINISHED: &str = "task finished its input";
    const COMPLETED: &str = "checkpoint completed";
    let dir = temp_dir(name);
    let job = ["api-count", "--events", "4000", "--keys", "100", "--checkpoint-ms", "500"];
    let reference = dir.join("reference");
    let (code, stdout, stderr) =
        bench(&[&job[..], &["--parallelism", "2", "--output", reference.to_str().unwrap()]].concat());
    assert_eq!(code, 0, "{stderr}");
    let (expected_checksum, expected) = (checksum(&stdout), output(&reference));
    assert_eq!(expected.len(), 4000);

    let (chk, out) = (dir.join("chk"), dir.join("out"));
    let paths = ["--checkpoint-dir", chk.to_str().unwrap(), "--output", out.to_str().unwrap()];
    let slow = ["--slow-sink-us", "5000"];
    let run = Proc::start(&[&job[..], &["--parallelism", "2"], &slow, &paths, extra].concat());
    let sources_finished = |lines: &[String]| {
        let finished = lines.iter().filter(|l| l.contains(FINISHED) && l.contains("events -> generate"));
        finished.count() == 2
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sources_finished(&run.lines()) {
        assert!(Instant::now() < deadline, "the sources did not finish:\n{}", run.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(10));
    }
    let at_finish = run.count(COMPLETED);
    run.wait_for(COMPLETED, at_finish + 3, Duration::from_secs(8));
    let lines = run.lines();
    assert!(
        !lines.iter().any(|l| l.contains(FINISHED) && l.contains("(1/2)") && l.contains("count per path")),
        "the slow sink subtask is still in its tail:\n{}",
        lines.join("\n")
    );
    drop(run); // SIGKILL
    let restored = Proc::start(
        &[&job[..], &["--parallelism", restore_parallelism], &slow, &paths, extra, &["--restore", "latest"]].concat(),
    );
    let (code, log) = restored.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{log}");
    let sources: Vec<&str> = log.lines().filter(|l| l.contains(FINISHED) && l.contains("events -> generate")).collect();
    assert!(!sources.is_empty(), "{log}");
    for line in sources {
        assert!(line.contains("records_out=0"), "a restored source read its input again: {line}");
    }
    // The checkpoint recorded the sources as finished: they were not run at all.
    let not_run = log.lines().filter(|l| l.contains("source finished before the restored checkpoint")).count();
    assert_eq!(not_run, restore_parallelism.parse::<usize>().unwrap(), "{log}");
    assert!(log.contains("replayed the in-flight records"), "{log}");
    // Standard output and error are read apart: the report is found by its field.
    let report = log.lines().rfind(|l| l.contains("checksum=")).unwrap_or_default();
    assert_eq!(checksum(report), expected_checksum, "{log}");
    assert_eq!(output(&out), expected, "exactly the failure-free output");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn checkpoints_go_on_after_the_sources_finish_and_a_restore_in_the_tail_does_not_read_them_again() {
    kill_in_the_tail_after_the_sources_finished("after-sources", &[], "2");
}

#[test]
fn checkpoints_after_the_sources_finish_restore_on_rocksdb_at_another_parallelism() {
    kill_in_the_tail_after_the_sources_finished("after-sources-rocks", &["--backend", "rocksdb"], "3");
}
