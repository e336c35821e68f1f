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

/// The tutorial's commands, run. (The JobManager serves the dashboard: the example needs
/// eddy's `web` feature, which the workspace's test run has.)
#[cfg(feature = "web")]
mod commands {
    use super::*;

    /// The fenced blocks between the lines `from` and `to` of the README, with their tags.
    fn blocks_between(readme: &str, from: &str, to: &str) -> Vec<(String, String)> {
        let start = readme.find(from).unwrap_or_else(|| panic!("the README has `{from}`"));
        let section = &readme[start..start + readme[start..].find(to).unwrap()];
        let mut blocks = Vec::new();
        let mut rest = section;
        while let Some(open) = rest.find("```") {
            let after = &rest[open + 3..];
            let (tag, body) = after.split_once('\n').unwrap();
            let end = body.find("\n```").unwrap();
            blocks.push((tag.to_string(), body[..end + 1].to_string()));
            rest = &body[end + 4..];
        }
        blocks
    }

    /// A free port on loopback.
    fn free_port() -> String {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
    }

    /// Runs `line` with bash in `dir`, `$J` set: its exit, and what it printed on standard
    /// output then on standard error.
    fn sh(dir: &Path, j: &str, line: &str) -> (bool, String) {
        let out =
            Command::new("bash").arg("-c").arg(line).current_dir(dir).env("J", j).env("PWD", dir).output().unwrap();
        let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), printed)
    }

    /// What `line` printed on standard output alone.
    fn stdout_of(dir: &Path, line: &str) -> String {
        let out = Command::new("bash").arg("-c").arg(line).current_dir(dir).env("PWD", dir).output().unwrap();
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `line` until it succeeds, as a person does while the job is not running yet (or
    /// restarts): what it printed the time it did.
    fn sh_until_ok(dir: &Path, j: &str, line: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (ok, printed) = sh(dir, j, line);
            if ok {
                return printed;
            }
            assert!(Instant::now() < deadline, "`{line}` kept failing: {printed}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Steps 3 to 5 of the tutorial, their shell blocks run as written (in a directory where
    /// `./target/release/page-views` is the example's binary, `cargo run --release --` that
    /// binary, on free ports instead of 6123 and 8081, with a shorter click log), waiting where
    /// a person waits: the local run prints what the README shows; the cluster takes the job
    /// detached, its savepoint, rescale, a TaskManager killed and another started, the stop,
    /// and the restore at another parallelism; the cluster's output equals the log's counts.
    #[test]
    fn the_tutorials_commands_work_as_written() {
        tutorial_commands("tutorial-commands", true);
    }

    /// The same at machine speed: each command as soon as the last one returned (a
    /// savepoint, a rescale, a TaskManager killed and a stop within half a second of the
    /// job's start). It found a loss of one sink subtask's output (2 runs in 6): after the
    /// restore at parallelism 3, new subtask 0 removed as a leftover the pending file of old
    /// subtask 3 before new subtask 2, which restored its handle, committed it. Fixed
    /// (leftovers go once a checkpoint completed); 8 of 8 runs since. Kept to run by hand
    /// (`--ignored`): its timing depends on the machine.
    #[test]
    #[ignore = "machine-speed timing; run by hand after a change to the two-phase-commit sink"]
    fn the_tutorials_commands_at_machine_speed_lose_nothing() {
        tutorial_commands("tutorial-commands-fast", false);
    }

    /// Steps 3 to 5 of the tutorial; `paced`: a command waits for a checkpoint completed
    /// since the one before, as a person types them seconds apart.
    fn tutorial_commands(name: &str, paced: bool) {
        let readme = readme();
        let dir = common::temp_dir(name);
        std::fs::create_dir_all(dir.join("target/release")).unwrap();
        std::os::unix::fs::symlink(common::example("page_views"), dir.join("target/release/page-views")).unwrap();
        // 60 s of reading at the README's 2,000 lines a second: time for every step under load.
        let log = click_log(&dir, 120_000);
        let reference = expected(&log);
        let (jm, rest) = (free_port(), free_port());
        let written = |line: &str| {
            line.replace("cargo run --release --", "./target/release/page-views")
                .replace("127.0.0.1:6123", &format!("127.0.0.1:{jm}"))
                .replace("127.0.0.1:8081", &format!("127.0.0.1:{rest}"))
        };

        // 3. The local run prints what the README shows.
        let local = blocks_between(&readme, "### 3. A click log", "### 4. A cluster");
        let (run, shown) = (&local[1].1, &local[2].1);
        let printed = stdout_of(&dir, &written(run));
        assert!(printed.ends_with(shown.as_str()), "the README shows\n{shown}\nthe run printed\n{printed}");

        // 4. The cluster: the secret, then the JobManager and two TaskManagers in the background.
        let steps = blocks_between(&readme, "### 4. A cluster", "## API overview");
        let mut processes = common::KillOnDrop(Vec::new());
        let mut lines = steps[0].1.lines();
        assert!(sh(&dir, "", lines.next().unwrap()).0);
        for (n, line) in lines.enumerate() {
            let log = std::fs::File::create(dir.join(format!("process-{n}.log"))).unwrap();
            let child = Command::new("bash")
                .arg("-c")
                .arg(format!("exec {}", written(line)))
                .current_dir(&dir)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            processes.0.push(child);
        }
        let started = Instant::now();
        while std::fs::read_to_string(dir.join("process-0.log")).unwrap().matches("TaskManager joined").count() < 2 {
            assert!(started.elapsed() < Duration::from_secs(30), "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        let submit: Vec<&str> = steps[1].1.lines().collect();
        let j = written(submit[0]).strip_prefix("J=\"").unwrap().trim_end_matches('"').to_string();
        let (ok, printed) = sh(&dir, &j, &written(submit[1]));
        assert!(ok && printed.contains(steps[2].1.trim()), "{printed}");

        // 5. Operate it: each command as a person types it, again while the job is not running.
        let mut savepoint = String::new();
        let completed = |dir: &Path| -> Option<u64> {
            let (_, status) = sh(dir, &j, "./target/release/page-views status 1 $J");
            status.split(" checkpoints completed").next()?.rsplit(' ').next()?.parse().ok()
        };
        let mut seen = 0;
        for line in steps[3].1.lines().map(&written) {
            // (A TaskManager started is not waited for: the job waits for it.)
            if paced && !line.split('#').next().unwrap().trim().ends_with('&') {
                let deadline = Instant::now() + Duration::from_secs(60);
                while completed(&dir).is_none_or(|n| n <= seen) {
                    assert!(Instant::now() < deadline, "no checkpoint completed before `{line}`");
                    std::thread::sleep(Duration::from_millis(200));
                }
                seen = completed(&dir).unwrap_or(seen);
            }
            if let Some(background) = line.split('#').next().unwrap().trim().strip_suffix('&') {
                let child = Command::new("bash")
                    .arg("-c")
                    .arg(format!("exec {background}"))
                    .current_dir(&dir)
                    .env("J", &j)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                processes.0.push(child);
                continue;
            }
            if line.starts_with("kill") {
                let (killed, printed) = sh(&dir, &j, &line);
                assert!(killed, "`{line}`: {printed}");
                let jobmanager = dir.join("process-0.log");
                let started = Instant::now();
                while !std::fs::read_to_string(&jobmanager).unwrap().contains("TaskManager lost") {
                    assert!(started.elapsed() < Duration::from_secs(30), "`{line}` killed no TaskManager");
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            }
            let printed = sh_until_ok(&dir, &j, &line);
            if line.contains(" stop ") {
                savepoint = printed.lines().find_map(|l| l.strip_prefix("savepoint=")).unwrap().to_string();
            }
        }
        assert!(!savepoint.is_empty());
        // The rest of the log faster than a person would read it.
        let restore =
            written(&steps[4].1).replace("<the savepoint= path>", &savepoint).replace("--rate 2000", "--rate 20000");
        let (ok, printed) = sh(&dir, &j, &restore);
        assert!(ok && printed.contains("Job has been submitted with JobID 2"), "{printed}");
        let list = format!("./target/release/page-views list {j}");
        let deadline = Instant::now() + Duration::from_secs(120);
        while !sh(&dir, &j, &list).1.lines().any(|l| l.trim_start().starts_with("2 ") && l.contains("FINISHED")) {
            assert!(Instant::now() < deadline, "job 2 did not finish: {}", sh(&dir, &j, &list).1);
            std::thread::sleep(Duration::from_millis(300));
        }
        assert_eq!(committed(&dir.join("out-cluster")), reference, "the cluster's output is the log's counts, once");
        drop(processes);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
