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
fn join_checksum_matches_workloads_md() {
    for p in ["1", "2"] {
        let (code, stdout, stderr) = bench(&["join", "--events", "1000000", "--keys", "10000", "--parallelism", p]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(last_line_checksum(&stdout), "11989892871960818329", "parallelism {p}");
        assert!(stdout.contains("emitted="), "{stdout}");
    }
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
