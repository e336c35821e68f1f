//! `eddy-bench join-replay` against Apache Flink: every case of `tests/fixtures/join-replay`
//! (two inputs with what Flink 2.3 produced for their window join, full outer window join
//! or interval join) must give the same lines, sorted: at parallelism 1 and 4, on the heap
//! and on RocksDB, and inner window joins through `join().apply` as well as `co_group`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/join-replay")
}

fn cases() -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".args").map(String::from))
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "fixtures present: {cases:?}");
    cases
}

fn args_of(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.args"))).unwrap().trim().to_string()
}

/// Replays `case` at `parallelism` on `backend`; the sorted output lines.
fn replay(case: &str, parallelism: u32, backend: &str, extra: &[&str]) -> Vec<String> {
    let dir = fixtures();
    let output = std::env::temp_dir().join(format!(
        "eddy-join-replay-{case}-{parallelism}-{backend}-{}-{}",
        extra.len(),
        std::process::id()
    ));
    let status = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(["join-replay", "--input"])
        .arg(dir.join(format!("{case}.left")))
        .arg("--right-input")
        .arg(dir.join(format!("{case}.right")))
        .args(["--join", &args_of(case), "--parallelism", &parallelism.to_string(), "--backend", backend])
        .args(extra)
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    assert!(status.status.success(), "{case} on {backend}: {}", String::from_utf8_lossy(&status.stderr));
    let mut lines: Vec<String> = std::fs::read_to_string(&output).unwrap().lines().map(String::from).collect();
    lines.sort();
    let _ = std::fs::remove_file(&output);
    lines
}

fn expected(case: &str) -> Vec<String> {
    let text = std::fs::read_to_string(fixtures().join(format!("{case}.expected"))).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.sort();
    assert!(!lines.is_empty(), "{case} expects some output");
    lines
}

#[test]
fn every_case_gives_flinks_output_at_parallelism_1_and_4_on_the_heap() {
    for case in cases() {
        for parallelism in [1, 4] {
            assert_eq!(replay(&case, parallelism, "heap", &[]), expected(&case), "{case} at p={parallelism}");
        }
    }
}

#[test]
fn every_case_gives_flinks_output_at_parallelism_1_and_4_on_rocksdb() {
    for case in cases() {
        for parallelism in [1, 4] {
            assert_eq!(replay(&case, parallelism, "rocksdb", &[]), expected(&case), "{case} at p={parallelism}");
        }
    }
}

/// A join (`apply`, pairs without their windows) gives the coGroup's inner rows: a pair
/// once per window it shares.
#[test]
fn inner_window_joins_through_apply_give_flinks_pairs() {
    let inner: Vec<String> = cases().into_iter().filter(|c| args_of(c).ends_with("inner")).collect();
    assert!(inner.len() >= 2, "{inner:?}");
    for case in inner {
        let mut pairs: Vec<String> =
            expected(&case).iter().map(|line| line.splitn(4, ',').take(3).collect::<Vec<_>>().join(",")).collect();
        pairs.sort();
        assert_eq!(replay(&case, 2, "heap", &["--pairs-only"]), pairs, "{case}");
    }
}
