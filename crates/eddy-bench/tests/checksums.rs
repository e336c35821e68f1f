//! The known checksums of WORKLOADS.md at parallelism 1 and 2, and clear flag errors.

use std::process::Command;

fn bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_eddy-bench")).args(args).output().expect("eddy-bench runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn last_line_checksum(stdout: &str) -> &str {
    let last = stdout.lines().last().expect("a result line");
    assert!(last.starts_with("events="), "{last}");
    last.rsplit("checksum=").next().unwrap()
}

#[test]
fn api_count_checksum_matches_workloads_md() {
    for p in ["1", "2"] {
        let (code, stdout, stderr) =
            bench(&["api-count", "--events", "1000000", "--keys", "10000", "--parallelism", p]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(last_line_checksum(&stdout), "14658609663398263639", "parallelism {p}");
    }
}

#[test]
fn window_checksum_matches_workloads_md_at_each_parallelism_backend_and_with_checkpoints() {
    for p in ["1", "2"] {
        for backend in ["heap", "rocksdb"] {
            for checkpoint_ms in ["0", "100"] {
                // At p = 2 the second source subtask's half of the stream runs far ahead
                // in event time, so its windows wait for the first's watermark: more
                // state than the memory storage takes. Checkpoints go to files.
                let dir = std::env::temp_dir().join(format!("eddy-w3-{p}-{backend}-{}", std::process::id()));
                let (code, stdout, stderr) = bench(&[
                    "window",
                    "--checkpoint-dir",
                    dir.to_str().unwrap(),
                    "--events",
                    "1000000",
                    "--keys",
                    "10000",
                    "--window-ms",
                    "1000",
                    "--parallelism",
                    p,
                    "--backend",
                    backend,
                    "--checkpoint-ms",
                    checkpoint_ms,
                ]);
                let _ = std::fs::remove_dir_all(&dir);
                assert_eq!(code, 0, "{stderr}");
                assert_eq!(
                    last_line_checksum(&stdout),
                    "9404401769818326085",
                    "parallelism {p}, {backend}, checkpoints every {checkpoint_ms} ms"
                );
            }
        }
    }
}

#[test]
fn window_under_simulation_with_faults_keeps_its_checksum() {
    let plain = bench(&["window", "--events", "100000", "--keys", "1000", "--window-ms", "100"]);
    assert_eq!(plain.0, 0, "{}", plain.2);
    for seed in ["3", "8"] {
        let (code, stdout, stderr) = bench(&[
            "window",
            "--events",
            "100000",
            "--keys",
            "1000",
            "--window-ms",
            "100",
            "--parallelism",
            "2",
            "--checkpoint-ms",
            "50",
            "--simulate",
            seed,
            "--faults",
            "10",
        ]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("restarts="), "faults were injected: {stdout}");
        assert_eq!(last_line_checksum(&stdout), last_line_checksum(&plain.1), "seed {seed}");
    }
}

#[test]
fn join_checksum_matches_workloads_md() {
    for p in ["1", "2"] {
        let (code, stdout, stderr) = bench(&["join", "--events", "1000000", "--keys", "10000", "--parallelism", p]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(last_line_checksum(&stdout), "11989892871960818329", "parallelism {p}");
        assert!(stdout.contains("emitted="), "{stdout}");
    }
}

/// W4 has no known checksum: RocksDB (with a heap cache far smaller than its keys, and
/// with incremental checkpoints) and the heap with incremental checkpoints must give the
/// heap's.
#[test]
fn large_state_on_rocksdb_matches_the_heap() {
    let common = ["large-state", "--events", "300000", "--keys", "200000"];
    let (code, stdout, stderr) = bench(&[&common[..], &["--backend", "heap"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let heap = last_line_checksum(&stdout).to_string();
    let dir = std::env::temp_dir().join(format!("eddy-bench-w4-{}", std::process::id()));
    let chk = dir.to_str().unwrap();
    for extra in [
        &["--parallelism", "1"][..],
        &["--parallelism", "2", "--incremental", "--checkpoint-ms", "50", "--checkpoint-dir", chk],
    ] {
        let rocksdb = ["--backend", "rocksdb", "--rocksdb-cache-entries", "1000"];
        let (code, stdout, stderr) = bench(&[&common[..], &rocksdb, extra].concat());
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(last_line_checksum(&stdout), heap, "{extra:?}");
    }
    // The heap with incremental checkpoints (a base and deltas) gives the same.
    let _ = std::fs::remove_dir_all(&dir);
    let incremental = ["--parallelism", "2", "--incremental", "--checkpoint-ms", "50", "--checkpoint-dir", chk];
    let (code, stdout, stderr) = bench(&[&common[..], &["--backend", "heap"], &incremental].concat());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(last_line_checksum(&stdout), heap, "heap, incremental");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rate_cap_slows_the_source_down() {
    let (code, stdout, _) = bench(&["api-count", "--events", "20000", "--keys", "100", "--rate", "40000"]);
    assert_eq!(code, 0);
    let seconds: f64 =
        stdout.lines().last().unwrap().split(' ').find_map(|f| f.strip_prefix("seconds=")).unwrap().parse().unwrap();
    assert!(seconds >= 0.4, "20000 events at 40000/s take about 0.5 s, took {seconds}");
}

#[test]
fn unknown_flags_and_workloads_are_rejected() {
    let (code, _, stderr) = bench(&["api-count", "--event", "10"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unexpected argument '--event'"), "{stderr}");
    let (code, _, stderr) = bench(&["wordcount"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("invalid value 'wordcount'"), "{stderr}");
    let (code, _, stderr) = bench(&["join", "--parallelism", "0"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--parallelism"), "{stderr}");
}

#[test]
fn nexmark_queries_give_the_same_results_at_any_parallelism_and_on_both_backends() {
    for query in ["q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8"] {
        let run = |p: &str, backend: &str| {
            let (code, stdout, stderr) =
                bench(&["nexmark", "--query", query, "--events", "200000", "--parallelism", p, "--backend", backend]);
            assert_eq!(code, 0, "{query}: {stderr}");
            last_line_checksum(&stdout).to_string()
        };
        let reference = run("1", "heap");
        assert_ne!(reference, "0", "{query} has output");
        assert_eq!(run("2", "heap"), reference, "{query} at parallelism 2");
        assert_eq!(run("3", "rocksdb"), reference, "{query} on RocksDB at parallelism 3");
    }
    let (code, _, stderr) = bench(&["nexmark", "--events", "1000"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("nexmark needs --query"), "{stderr}");
}

#[test]
fn a_rocksdb_run_removes_the_directories_that_killed_runs_left_behind() {
    // No process has this id (above Linux's largest pid); a live run's directory stays.
    let tmp = std::env::temp_dir();
    let dead = tmp.join("eddy-bench-rocksdb-4000000000");
    let live = tmp.join(format!("eddy-bench-rocksdb-{}", std::process::id()));
    for dir in [&dead, &live] {
        std::fs::create_dir_all(dir.join("job")).unwrap();
    }
    let (code, _, stderr) = bench(&["api-count", "--events", "1000", "--backend", "rocksdb"]);
    let (dead_left, live_left) = (dead.exists(), live.exists());
    let _ = std::fs::remove_dir_all(&live);
    assert_eq!(code, 0, "{stderr}");
    if std::path::Path::new("/proc/self").exists() {
        assert!(!dead_left, "the dead run's directory is removed");
    }
    assert!(live_left, "a live process's directory is kept");
}
