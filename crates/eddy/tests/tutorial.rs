//! The README's tutorial, run: its job (`examples/page_views.rs`, which the README shows as
//! a job crate's `src/main.rs`, checked equal here) on the click log its command makes,
//! locally; then SIGKILLed mid-run and started again with the same command line and
//! `--restore latest` at another parallelism: the committed counts are exactly the
//! log's, every time.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

/// The README, as a newcomer reads it.
fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap()
}

/// The fenced block of the README that follows the line `marker`.
fn block_after(readme: &str, marker: &str) -> String {
    let rest = &readme[readme.find(marker).unwrap_or_else(|| panic!("the README has `{marker}`"))..];
    let start = rest.find("```").unwrap();
    let body = &rest[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("\n```").unwrap() + 1].to_string()
}

/// The click log the tutorial's command makes: `lines` lines, ten a second.
fn click_log(dir: &Path, lines: u64) -> std::path::PathBuf {
    let command = block_after(&readme(), "<!-- the click log -->");
    let command = command.trim().replace("599999", &(lines - 1).to_string());
    let status = Command::new("sh").arg("-c").arg(&command).current_dir(dir).status().unwrap();
    assert!(status.success(), "{command}");
    dir.join("clicks.csv")
}

/// Views per (minute, page) of the log, as the job must count them.
fn expected(log: &Path) -> BTreeMap<(i64, String), u64> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let fields: Vec<&str> = line.split(',').collect();
        let time: i64 = fields[0].parse().unwrap();
        *counts.entry((time - time.rem_euclid(60_000), fields[2].to_string())).or_insert(0) += 1;
    }
    counts
}

/// The committed output: views per (minute, page); a line written twice would show.
fn committed(out: &Path) -> BTreeMap<(i64, String), u64> {
    let mut counts = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("part-") {
            continue;
        }
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let fields: Vec<&str> = line.split(',').collect();
            let key = (fields[0].parse().unwrap(), fields[1].to_string());
            assert!(counts.insert(key, fields[2].parse::<u64>().unwrap()).is_none(), "{line} twice");
        }
    }
    counts
}

#[test]
fn the_readme_shows_the_tutorials_job_as_it_is() {
    let shown = block_after(&readme(), "<!-- src/main.rs -->");
    let job = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/page_views.rs")).unwrap();
    // The example's own header (how to run it from the repository) is not the crate's.
    let job = &job[job.find("use clap::Parser;").unwrap()..];
    assert_eq!(shown, job, "the README's src/main.rs and examples/page_views.rs differ");
}

#[test]
fn the_tutorials_job_counts_every_click_once_also_after_a_sigkill() {
    let dir = common::temp_dir("tutorial");
    std::fs::create_dir_all(&dir).unwrap();
    let log = click_log(&dir, 60_000);
    let reference = expected(&log);
    assert_eq!(reference.len(), 100 * 13, "100 minutes of 13 pages");
    let run = |out: &str, extra: &[&str]| {
        let mut command = Command::new(common::example("page_views"));
        command.args(["--input", log.to_str().unwrap(), "--output", out, "--checkpoints", "chk"]);
        command.args(extra).current_dir(&dir).stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    };
    let done = run("out", &[]).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    assert!(String::from_utf8_lossy(&done.stdout).starts_with("done: "));
    assert_eq!(committed(&dir.join("out")), reference);

    // The same command line starts and resumes: killed once a checkpoint completed, then
    // again with --restore latest (fresh the first time), at parallelism 3.
    let restore = ["--restore", "latest", "--rate", "20000"];
    let mut first = run("resumed", &restore).spawn().unwrap();
    let started = Instant::now();
    while !common_checkpoint_completed(&dir.join("chk")) {
        assert!(started.elapsed() < Duration::from_secs(30), "no checkpoint completed");
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let partial = committed(&dir.join("resumed"));
    assert!(partial.len() < reference.len(), "killed mid-run: {} of {}", partial.len(), reference.len());
    let resumed = run("resumed", &[&restore[..], &["-p", "3"]].concat()).output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(committed(&dir.join("resumed")), reference, "exactly once across the kill");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether a job directory under `chk` holds a completed checkpoint.
fn common_checkpoint_completed(chk: &Path) -> bool {
    let Ok(jobs) = std::fs::read_dir(chk) else { return false };
    jobs.flatten().any(|job| {
        std::fs::read_dir(job.path())
            .into_iter()
            .flatten()
            .flatten()
            .any(|c| c.file_name().to_string_lossy().starts_with("chk-") && c.path().join("_metadata").exists())
    })
}
