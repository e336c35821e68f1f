//! `eddy-bench window-replay` against Apache Flink: every case of
//! `tests/fixtures/window-replay` (inputs with the output Flink 2.3 printed for them) must
//! give the same lines, sorted, on the heap and on RocksDB (whose windows take different
//! paths), counted incrementally and over all elements.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/window-replay")
}

fn cases() -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".input").map(String::from))
        .collect();
    cases.sort();
    assert!(cases.len() >= 15, "fixtures present: {cases:?}");
    cases
}

/// Replays `case` on `backend`; the sorted output lines.
fn replay(case: &str, backend: &str) -> Vec<String> {
    replay_with(case, backend, &[])
}

fn replay_with(case: &str, backend: &str, extra: &[&str]) -> Vec<String> {
    let dir = fixtures();
    let args = std::fs::read_to_string(dir.join(format!("{case}.args"))).unwrap();
    let [window, out_of_orderness, lateness] = args.split_whitespace().collect::<Vec<_>>()[..] else {
        panic!("{case}.args: {args}")
    };
    let output = std::env::temp_dir().join(format!("eddy-replay-{case}-{backend}-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(["window-replay", "--input"])
        .arg(dir.join(format!("{case}.input")))
        .args(["--window", window, "--out-of-orderness", out_of_orderness, "--allowed-lateness", lateness])
        .args(["--backend", backend])
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
    lines
}

#[test]
fn every_case_gives_flinks_output_on_the_heap() {
    for case in cases() {
        assert_eq!(replay(&case, "heap"), expected(&case), "{case}");
    }
}

/// Every case counted over all elements (a window function over the list of them, not an
/// incremental count): sliding windows then keep their own records instead of sharing
/// panes, and tumbling ones hold lists instead of counts; both must give Flink's lines.
#[test]
fn every_case_counted_over_all_elements_gives_flinks_output() {
    for case in cases() {
        assert_eq!(replay_with(&case, "heap", &["--all-elements"]), expected(&case), "{case}, all elements");
    }
}

/// On RocksDB windows keep their contents in the backend and fire by timers, where the heap
/// fires windows of the default trigger from its own ordered structure; sessions merge by
/// moving state between namespaces, which each backend stores its own way.
#[test]
fn every_case_gives_flinks_output_on_rocksdb() {
    for case in cases() {
        assert_eq!(replay(&case, "rocksdb"), expected(&case), "{case}");
    }
}

#[test]
fn bad_replay_input_is_named_with_its_line() {
    let input = std::env::temp_dir().join(format!("eddy-replay-bad-{}", std::process::id()));
    std::fs::write(&input, "a,1\nb,x\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(["window-replay", "--window", "tumbling:10", "--input"])
        .arg(&input)
        .args(["--output", "/dev/null"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains(":2: the timestamp 'x' is not a whole number"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_eddy-bench"))
        .args(["window-replay", "--window", "hopping:10", "--input"])
        .arg(&input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("expected tumbling:SIZE, sliding:SIZE:SLIDE or session:GAP"), "{stderr}");
    let _ = std::fs::remove_file(&input);
}
