//! The `eddy` binary: clear errors and exit codes.

use std::process::Command;

fn eddy(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_eddy")).args(args).output().expect("eddy runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_flags_are_rejected_with_usage() {
    let (code, _, stderr) = eddy(&["key-group", "a", "--paralelism", "2"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unexpected argument '--paralelism'"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn key_group_uses_flinks_assignment() {
    let (code, stdout, _) = eddy(&["key-group", "/api/42", "--parallelism", "4"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("key=\"/api/42\" key_group="), "{stdout}");
    let (code, _, stderr) = eddy(&["key-group", "a", "--parallelism", "200"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("above its max parallelism 128"), "{stderr}");
}

#[test]
fn a_failing_job_exits_non_zero_naming_operator_and_subtask() {
    let (code, _, stderr) = eddy(&["example", "word-count", "--input", "/no/such/dir", "--parallelism", "1"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("operator 'Text File Source /no/such/dir' (subtask 1/1)"), "{stderr}");
    assert!(stderr.contains("No such file or directory"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn word_count_example_counts_a_file() {
    let dir = std::env::temp_dir().join(format!("eddy-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("in.txt");
    std::fs::write(&file, "b a b\nc b\n").unwrap();
    let (code, stdout, stderr) =
        eddy(&["example", "word-count", "--input", file.to_str().unwrap(), "--parallelism", "2"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "a 1\nb 3\nc 1\n");
}
