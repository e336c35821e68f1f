//! Issue 21: no single process can lose a job. Real processes on loopback, killed with
//! SIGKILL: the job's own process (its JobMaster) is taken over by a JobMaster the cluster
//! starts again on a TaskManager, and the committed output equals a failure-free run's;
//! a job whose JobManager is gone for good fails with a clear message.

use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::etcd::Etcd;
use common::http::{get, get_json};
use common::output;
use common::process::{field, w1_exactly_once, Cluster, Proc, SECRET};

/// W1 into the exactly-once file sink at 60 000 events a second, checkpointed every
/// 100 ms; the failure-free reference is written to `dir/reference`.
fn w1_args(dir: &Path, reference_events: &str) -> Vec<String> {
    w1_exactly_once(dir, reference_events, "60000").0
}

/// The state `list` shows for job `id`.
fn job_state(cluster: &Cluster, id: &str) -> String {
    let (code, list) = cluster.control(&["list"]);
    list.lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .and_then(|l| {
            ["INITIALIZING", "CREATED", "DEPLOYING", "RUNNING", "FINISHED", "FAILED", "LOST"]
                .into_iter()
                .find(|s| l.contains(s))
        })
        .map(str::to_string)
        // What `list` said instead, for the failure's message.
        .unwrap_or_else(|| format!("? (`list` exited with {code}: {list})"))
}

/// Every log of the cluster and the job, for a failure's message.
fn logs(cluster: &Cluster, job: &Proc) -> String {
    let mut all = Vec::new();
    for (name, proc) in [("jobmanager", &cluster.jobmanager), ("job", job)]
        .into_iter()
        .chain(cluster.standby.iter().map(|p| ("standby", p)))
        .chain(cluster.task_managers.iter().map(|p| ("taskmanager", p)))
    {
        all.push(format!("--- {name} {}", proc.child.id()));
        all.extend(proc.lines().into_iter().filter(|l| !l.contains("checkpoint")));
    }
    all.join("\n")
}

/// Waits until `done`, or panics with every log after `timeout`.
fn wait_until(cluster: &Cluster, job: &Proc, timeout: Duration, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within {timeout:?}:\n{}", logs(cluster, job));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number in the last `checkpoint=N` a log line with `pattern` names.
fn last_checkpoint(lines: &[String], pattern: &str) -> u64 {
    lines
        .iter()
        .rev()
        .filter(|l| l.contains(pattern))
        .find_map(|l| l.split("checkpoint=").nth(1)?.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The job as the JobManager's REST API shows it: `/jobs/1` and its exceptions.
fn rest_job(base: &str) -> (serde_json::Value, serde_json::Value) {
    (get_json(&format!("{base}/jobs/1"), Some(SECRET)), get_json(&format!("{base}/jobs/1/exceptions"), Some(SECRET)))
}

/// The failover tells one story on every screen: the dashboard's REST API and `status`
/// show the JobMaster's loss as an exception and a restart, with the job's start time and
/// its checkpoints from before kept, and one attempt numbering (the log's, `status`'s and
/// REST's, from 1).
#[test]
fn a_sigkilled_jobmaster_is_taken_over_and_the_job_finishes_with_the_failure_free_output() {
    let cluster = Cluster::start_with("jm-takeover", &[1, 1, 1], &[], &["--rest-bind", "127.0.0.1:0"]);
    cluster.jobmanager.wait_for("rest listening on ", 1, Duration::from_secs(10));
    let base = cluster.jobmanager.lines().iter().find_map(|l| l.strip_prefix("rest listening on ").map(String::from));
    let base = base.unwrap();
    let args = w1_args(&cluster.dir, "300000");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, Duration::from_secs(60));
    assert_eq!(job.count("attempt=1 "), job.lines().iter().filter(|l| l.contains("attempt=")).count(), "from 1");
    job.wait_for("checkpoint completed", 3, Duration::from_secs(60));
    // A view with the checkpoints reaches the JobManager about once a second.
    let deadline = Instant::now() + Duration::from_secs(20);
    let shown_checkpoints = || {
        let (status, body) = get(&format!("{base}/jobs/1/checkpoints"), Some(SECRET));
        let counts = serde_json::from_str::<serde_json::Value>(&body).ok().filter(|_| status == 200);
        counts.and_then(|c| c["counts"]["completed"].as_u64()).unwrap_or(0)
    };
    while shown_checkpoints() < 1 {
        assert!(Instant::now() < deadline, "no checkpoint shown");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (shown, _) = rest_job(&base);
    assert_eq!((shown["attempt"].as_u64(), shown["restarts"].as_u64()), (Some(1), Some(0)), "{shown}");
    let started = shown["start-time"].as_u64().unwrap();
    let (code, status) = cluster.control(&["status", "1"]);
    assert_eq!(code, 0, "{status}");
    assert!(status.contains("attempt 1, 0 restarts,") && status.contains("running since 20"), "{status}");
    let history_before = get_json(&format!("{base}/jobs/1/checkpoints"), Some(SECRET))["history"].clone();
    let last_shown = history_before.as_array().unwrap().iter().filter_map(|c| c["id"].as_u64()).max().unwrap();
    let before = last_checkpoint(&job.lines(), "checkpoint completed");
    let killed_at = Instant::now();
    job.child.kill().unwrap();
    // Its JobMaster, started again on a TaskManager, logs there.
    let running_again = loop {
        if cluster.task_managers.iter().any(|tm| tm.count("attempt running on the cluster") >= 1) {
            break killed_at.elapsed();
        }
        assert!(killed_at.elapsed() < Duration::from_secs(60), "{}", cluster.jobmanager.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(5));
    };
    println!("JobMaster SIGKILL to running again: {} ms", running_again.as_millis());
    let deadline = Instant::now() + Duration::from_secs(120);
    while job_state(&cluster, "1") != "FINISHED" {
        assert!(Instant::now() < deadline, "{}", cluster.jobmanager.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(200));
    }
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
    let (shown, exceptions) = rest_job(&base);
    assert_eq!(shown["restarts"].as_u64(), Some(1), "the JobMaster's loss is a restart: {shown}");
    assert_eq!(shown["start-time"].as_u64(), Some(started), "the job's start time is kept: {shown}");
    let attempt = shown["attempt"].as_u64().unwrap();
    assert!(attempt >= 2, "attempts go on after the lost JobMaster's: {shown}");
    let entries = exceptions["exceptionHistory"]["entries"].as_array().unwrap();
    let loss = entries.iter().find(|e| e["stacktrace"].as_str().unwrap().contains("the job's JobMaster was lost"));
    let loss = loss.unwrap_or_else(|| panic!("the loss is among the exceptions: {exceptions}"));
    assert_eq!((loss["attempt"].as_u64(), loss["restarted"].as_bool()), (Some(1), Some(true)), "{loss}");
    let history = get_json(&format!("{base}/jobs/1/checkpoints"), Some(SECRET))["history"].clone();
    let ids: Vec<u64> = history.as_array().unwrap().iter().filter_map(|c| c["id"].as_u64()).collect();
    assert!(ids.iter().any(|id| *id <= last_shown), "the checkpoints from before the loss are kept: {ids:?}");
    let taken_log: Vec<String> = cluster.task_managers.iter().flat_map(|tm| tm.lines()).collect();
    let attempts: Vec<u64> = taken_log
        .iter()
        .filter(|l| l.contains("attempt running on the cluster"))
        .filter_map(|l| l.split("attempt=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(attempts.last(), Some(&attempt), "the log and REST number attempts alike: {attempts:?}");
    let jm = cluster.jobmanager.lines().join("\n");
    assert!(jm.contains("starting it again on a TaskManager") && jm.contains("job taken back"), "{jm}");
    // Checkpoint numbers never go back: the new JobMaster's go on after the old one's.
    let taken: Vec<String> = cluster.task_managers.iter().flat_map(|tm| tm.lines()).collect();
    let after = last_checkpoint(&taken, "checkpoint completed");
    assert!(after > before, "checkpoints after the takeover ({after}) must come after {before}");
    assert!(taken.iter().any(|l| l.contains("job starting") && l.contains("chk-")), "it restored a checkpoint");
}

/// `--detached` (Flink's `-d`): the submitting process prints the job's id and returns;
/// the job runs on, its JobMaster on a TaskManager, to the failure-free output.
#[test]
fn a_job_submitted_detached_prints_its_id_returns_and_runs_to_the_failure_free_output() {
    let cluster = Cluster::start("detached", &[1, 1, 1]);
    let mut args = w1_args(&cluster.dir, "100000");
    args.push("--detached".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let submitted = Instant::now();
    let (code, printed) = cluster.submit(&args).finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("Job has been submitted with JobID 1"), "{printed}");
    assert!(!printed.contains("events="), "the job's result is not the submitter's to print: {printed}");
    println!("detached submission returned after {} ms", submitted.elapsed().as_millis());
    let deadline = Instant::now() + Duration::from_secs(120);
    while job_state(&cluster, "1") != "FINISHED" {
        assert!(Instant::now() < deadline, "{}", cluster.jobmanager.lines().join("\n"));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(output(&cluster.dir.join("out")), output(&cluster.dir.join("reference")));
    let jm = cluster.jobmanager.lines().join("\n");
    assert!(jm.contains("job submitted detached") && !jm.contains("JobMaster is gone"), "{jm}");
    let tms: Vec<String> = cluster.task_managers.iter().flat_map(|tm| tm.lines()).collect();
    assert!(tms.iter().any(|l| l.contains("JobMaster of a job submitted detached starting")), "{}", tms.join("\n"));
    // A local job runs in its process: --detached without a cluster is refused.
    let (code, printed) = Proc::start(&["api-count", "--events", "10", "--detached"]).finish(Duration::from_secs(30));
    assert_eq!(code, 1);
    assert!(printed.contains("--detached needs --jobmanager or --ha"), "{printed}");
}

#[test]
fn a_job_whose_jobmanager_and_taskmanagers_are_killed_fails_with_a_clear_message() {
    let heartbeats = ["--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1000"];
    let mut cluster = Cluster::start_with("jm-lost", &[1, 1], &[], &heartbeats);
    let args = w1_args(&cluster.dir, "1000");
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args[2] = "100000000";
    let job = cluster.submit(&args);
    job.wait_for("checkpoint completed", 1, Duration::from_secs(60));
    let killed_at = Instant::now();
    cluster.jobmanager.child.kill().unwrap();
    for tm in &mut cluster.task_managers {
        tm.child.kill().unwrap();
    }
    let (code, log) = job.finish(Duration::from_secs(30));
    println!("JobManager SIGKILL to the job failing: {} ms", killed_at.elapsed().as_millis());
    assert_ne!(code, 0, "{log}");
    assert!(log.contains("lost the JobManager") && log.contains("no JobManager can take the job back"), "{log}");
}

#[test]
fn two_jobmanagers_on_etcd_the_leader_sigkilled_mid_run_the_job_finishes_with_the_failure_free_output() {
    let etcd = Etcd::start("ha-leader-kill");
    let heartbeats = ["--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1000"];
    let mut cluster = Cluster::start_ha("ha-leader-kill", &etcd.url, 2, &[1, 1, 1], &heartbeats);
    let args = w1_args(&cluster.dir, "300000");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, Duration::from_secs(60));
    job.wait_for("checkpoint completed", 3, Duration::from_secs(60));
    let killed_at = Instant::now();
    cluster.jobmanager.child.kill().unwrap();
    let standby = &cluster.standby[0];
    standby.wait_for("this JobManager leads", 1, Duration::from_secs(30));
    let new_leader = killed_at.elapsed();
    let again = || job.count("attempt running on the cluster") >= 2;
    wait_until(&cluster, &job, Duration::from_secs(60), "attempt running again", again);
    let running_again = killed_at.elapsed();
    println!(
        "leader SIGKILL to a new leader: {} ms; to the job running again: {} ms",
        new_leader.as_millis(),
        running_again.as_millis()
    );
    let (code, log) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("the job is back with the leading JobManager"), "{log}");
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
    let standby_log = standby.lines().join("\n");
    assert!(standby_log.contains("job from the job store waits for its JobMaster"), "{standby_log}");
    assert!(standby_log.contains("job taken back by its JobMaster"), "{standby_log}");
    // The TaskManagers followed the leader; the CLI finds it through etcd.
    assert_eq!(cluster.task_managers.iter_mut().map(|tm| tm.running()).filter(|running| *running).count(), 3);
    assert_eq!(job_state(&cluster, "1"), "FINISHED");
}

/// A JobManager standing by answers its REST API with 503 and the leader's REST address,
/// not with an empty cluster (whoever reaches it, a load balancer or a person, learns where
/// to go); once it leads, after the leader was SIGKILLed, it answers for the cluster.
#[test]
fn a_standby_jobmanagers_rest_api_names_the_leaders_and_answers_once_it_leads() {
    let etcd = Etcd::start("ha-rest");
    let servers = ["--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1000", "--rest-bind", "127.0.0.1:0"];
    let mut cluster = Cluster::start_ha("ha-rest", &etcd.url, 2, &[1], &servers);
    let rest = |p: &Proc| {
        p.wait_for("rest listening on ", 1, Duration::from_secs(10));
        p.lines().iter().find_map(|l| l.strip_prefix("rest listening on ").map(String::from)).unwrap()
    };
    let (leader, standby) = (rest(&cluster.jobmanager), rest(&cluster.standby[0]));
    let token = Some(SECRET);
    assert_eq!(get_json(&format!("{leader}/overview"), token)["taskmanagers"].as_u64(), Some(1));
    // The standby reads the leader's address from etcd about twice a second.
    let named = format!("stands by (high availability); the leader's REST API is at {leader}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !get(&format!("{standby}/overview"), token).1.contains(&named) {
        assert!(Instant::now() < deadline, "the standby never named the leader's REST API");
        std::thread::sleep(Duration::from_millis(100));
    }
    for path in ["/overview", "/jobs", "/jobs/1/exceptions", "/taskmanagers"] {
        let (status, body) = get(&format!("{standby}{path}"), token);
        assert_eq!(status, 503, "{path}: {body}");
        assert!(body.contains(&named), "{body}");
    }
    // Its own process is still shown, and the secret still asked for.
    assert_eq!(get(&format!("{standby}/metrics"), token).0, 200);
    assert_eq!(get(&format!("{standby}/jobs"), Some("not-the-secret")).0, 401);

    cluster.jobmanager.child.kill().unwrap();
    cluster.standby[0].wait_for("this JobManager leads", 1, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = get(&format!("{standby}/overview"), token);
        if status == 200 && body.contains("\"taskmanagers\":1") {
            break;
        }
        assert!(Instant::now() < deadline, "the new leader's REST API never showed the cluster: {status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// etcd frozen for 5 s twice, 4 s apart, while a job runs on two JobManagers: each
/// freeze outlasts the leader's lease, so the leader loses its leadership; it starts anew
/// and stands by instead of exiting, so that two JobManagers remain and one always takes
/// the job back. The job ends with exactly the failure-free output.
#[test]
fn with_etcd_frozen_twice_both_jobmanagers_stay_and_the_job_finishes_exactly() {
    let etcd = Etcd::start("ha-freeze");
    let heartbeats = ["--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1000"];
    let mut cluster = Cluster::start_ha("ha-freeze", &etcd.url, 2, &[1, 1, 1], &heartbeats);
    let args = w1_args(&cluster.dir, "1200000");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, Duration::from_secs(60));
    job.wait_for("checkpoint completed", 3, Duration::from_secs(60));
    for _ in 0..2 {
        etcd.freeze();
        std::thread::sleep(Duration::from_secs(5));
        etcd.thaw();
        std::thread::sleep(Duration::from_secs(4));
    }
    let lost = |p: &Proc| p.count("lost its leadership");
    assert!(lost(&cluster.jobmanager) + lost(&cluster.standby[0]) >= 1, "{}", logs(&cluster, &job));
    let (code, log) = job.finish(Duration::from_secs(180));
    assert_eq!(code, 0, "{log}");
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
    assert!(cluster.jobmanager.running() && cluster.standby[0].running(), "both JobManagers stay");
    assert_eq!(job_state(&cluster, "1"), "FINISHED");
}

#[test]
fn with_the_leader_and_the_jobs_own_process_both_killed_the_new_leader_takes_the_job_over() {
    let etcd = Etcd::start("ha-both-kill");
    let heartbeats = ["--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1000"];
    let mut cluster = Cluster::start_ha("ha-both-kill", &etcd.url, 2, &[1, 1, 1], &heartbeats);
    let args = w1_args(&cluster.dir, "300000");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut job = cluster.submit(&args);
    job.wait_for("checkpoint completed", 3, Duration::from_secs(60));
    cluster.jobmanager.child.kill().unwrap();
    job.child.kill().unwrap();
    let standby = &cluster.standby[0];
    standby.wait_for("this JobManager leads", 1, Duration::from_secs(30));
    standby.wait_for("starting it again on a TaskManager", 1, Duration::from_secs(30));
    let finished = || job_state(&cluster, "1") == "FINISHED";
    wait_until(&cluster, &job, Duration::from_secs(120), "finished job", finished);
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
}

/// The `pause_ms` of the `n`th rescale in a JobMaster's log.
fn rescale_pause(lines: &[String], n: usize) -> u64 {
    let line = lines.iter().filter(|l| l.contains("rescaled: every subtask runs")).nth(n).expect("a rescale");
    line.split("pause_ms=").nth(1).and_then(|v| v.split_whitespace().next()?.parse().ok()).expect("its pause")
}

/// W1 with exactly-once file output on a cluster of three one-slot TaskManagers, rescaled
/// 2 → 3 → 1 while it runs with `eddy rescale`: the committed output equals a
/// failure-free run's, and each rescale's pause is printed.
fn rescale_w1(name: &str, backend: &[&str]) {
    let cluster = Cluster::start(name, &[1, 1, 1]);
    let mut args = w1_args(&cluster.dir, "400000");
    args.push("--backend".to_string());
    args.extend(backend.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = cluster.submit(&args);
    job.wait_for("checkpoint completed", 3, Duration::from_secs(60));
    let mut pauses = Vec::new();
    for (n, parallelism) in ["3", "1"].into_iter().enumerate() {
        let (code, answer) = cluster.control(&["rescale", "1", "--parallelism", parallelism]);
        assert_eq!(code, 0, "{answer}");
        assert!(answer.contains(&format!("to {parallelism} from checkpoint")), "{answer}");
        let rescaled = || job.count("rescaled: every subtask runs") > n;
        wait_until(&cluster, &job, Duration::from_secs(60), "rescale", rescaled);
        pauses.push(rescale_pause(&job.lines(), n));
        let slots = cluster.jobmanager.lines().into_iter().rev().find(|l| l.contains("slots allocated")).unwrap();
        assert!(slots.contains(&format!("slots={parallelism}")), "{slots}");
        job.wait_for("checkpoint completed", 3 + 2 * (n + 1), Duration::from_secs(60));
    }
    println!("{backend:?}: rescale 2 → 3 → 1 pauses (records stop to every subtask running again), ms: {pauses:?}");
    let (code, log) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");
    assert_eq!(field(&log, "restarts"), "0", "a rescale is no restart: {log}");
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
}

#[test]
fn rescaling_a_running_job_2_3_1_on_the_heap_gives_the_failure_free_output() {
    rescale_w1("rescale-heap", &["heap"]);
}

#[test]
fn rescaling_a_running_job_2_3_1_on_rocksdb_gives_the_failure_free_output() {
    rescale_w1("rescale-rocksdb", &["rocksdb"]);
}

/// Incremental checkpoints are RocksDB's own files: a rescale opens the snapshot sharing
/// the most key groups as it is, clipped, and copies in only the rest.
#[test]
fn rescaling_a_running_job_2_3_1_on_rocksdb_with_incremental_checkpoints_gives_the_failure_free_output() {
    rescale_w1("rescale-rocksdb-incremental", &["rocksdb", "--incremental"]);
}

#[test]
fn in_reactive_mode_the_job_grows_when_a_taskmanager_joins_and_shrinks_when_one_is_killed() {
    let mut cluster = Cluster::start("reactive", &[1, 1]);
    let mut args = w1_args(&cluster.dir, "400000");
    args.push("--reactive".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = cluster.submit(&args);
    job.wait_for("checkpoint completed", 2, Duration::from_secs(60));
    let allocated = |cluster: &Cluster| {
        let lines = cluster.jobmanager.lines();
        lines.iter().rev().find(|l| l.contains("slots allocated")).map(|l| l.contains("slots=3")).unwrap_or(false)
    };
    assert!(!allocated(&cluster), "two slots first");
    cluster.add_task_manager(1);
    wait_until(&cluster, &job, Duration::from_secs(60), "growth to 3", || {
        job.count("rescaled: every subtask runs") >= 1
    });
    assert!(allocated(&cluster), "{}", logs(&cluster, &job));
    job.wait_for("checkpoint completed", 6, Duration::from_secs(60));
    let victim = cluster.allocated()[2];
    cluster.task_manager_by_id(victim).child.kill().unwrap();
    let shrunk = || job.count("reactive mode: the attempt takes the slots available") >= 1;
    wait_until(&cluster, &job, Duration::from_secs(60), "shrinking to 2", shrunk);
    let (code, log) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");
    let last = cluster.jobmanager.lines().into_iter().rev().find(|l| l.contains("slots allocated")).unwrap();
    assert!(last.contains("slots=2"), "{last}");
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
}

/// The autoscaler, on the embedded runtime: W1 with a per-record cost (a sleep, so that
/// more subtasks take more even on two cores) and an input rate that steps up past what
/// one subtask can take and back down. The job must grow, then shrink, in a bounded
/// number of rescales, with exactly the failure-free output.
#[test]
fn the_autoscaler_grows_the_job_under_a_rate_step_and_shrinks_it_after_with_exact_output() {
    let dir = std::env::temp_dir().join(format!("eddy-autoscale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (args, local) = w1_exactly_once(&dir, "380000", "0");
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args[6] = "1"; // --parallelism 1
    args.extend([
        "--cost-us",
        "60",
        "--rate-steps",
        "2000:3,30000:13,5000:600",
        "--autoscale",
        "1:4",
        "--autoscale-window-ms",
        "1500",
        "--autoscale-cooldown-ms",
        "3000",
    ]);
    let (code, log) = Proc::start(&args).finish(Duration::from_secs(240));
    assert_eq!(code, 0, "{log}");
    let decisions: Vec<&str> = log.lines().filter(|l| l.contains("autoscaler: rescaling")).collect();
    println!("autoscaler decisions:\n{}", decisions.join("\n"));
    let moves: Vec<(u32, u32)> = decisions
        .iter()
        .filter_map(|l| {
            let decision = l.split("decision=").nth(1)?;
            let (from, rest) = decision.split_once(" -> ")?;
            Some((from.trim().parse().ok()?, rest.split(':').next()?.trim().parse().ok()?))
        })
        .collect();
    assert!(moves.iter().any(|(from, to)| to > from), "the job grew: {moves:?}\n{log}");
    let grown = moves.iter().position(|(from, to)| to > from).unwrap();
    assert!(moves[grown..].iter().any(|(from, to)| to < from), "and then shrank: {moves:?}\n{log}");
    assert!(moves.len() <= 5, "a bounded number of rescales: {moves:?}");
    assert_eq!(field(&log, "restarts"), "0", "a rescale is no restart: {log}");
    assert_eq!(field(&log, "checksum"), field(&local, "checksum"));
    assert_eq!(output(&dir.join("out")), output(&dir.join("reference")), "the committed output differs");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A leader paused (SIGSTOP) past its lease while a job runs: the standby leads and the
/// job comes back to it; resumed (SIGCONT), the old leader learns it lost its leadership and
/// stands by again, and nothing it does after waking reaches the job store (each write is
/// conditioned on its lease): the store ends with the successor's FINISHED record, the
/// output is exactly the failure-free run's, and both JobManagers stay.
#[test]
fn a_leader_paused_past_its_lease_and_resumed_writes_nothing_and_stands_by() {
    use eddy_rpc::ha::HaServices;
    use eddy_rpc::{JobId, JobState};
    let etcd = Etcd::start("ha-paused");
    let heartbeats = ["--heartbeat-interval-ms", "200", "--heartbeat-timeout-ms", "1000"];
    let mut cluster = Cluster::start_ha("ha-paused", &etcd.url, 2, &[1, 1, 1], &heartbeats);
    let args = w1_args(&cluster.dir, "600000");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, Duration::from_secs(60));
    job.wait_for("checkpoint completed", 3, Duration::from_secs(60));
    cluster.jobmanager.pause();
    cluster.standby[0].wait_for("this JobManager leads", 1, Duration::from_secs(30));
    job.wait_for("the job is back with the leading JobManager", 1, Duration::from_secs(60));
    // Well past its lease (2 s), with the job running under its successor.
    std::thread::sleep(Duration::from_secs(2));
    let ha = HaServices::parse(&etcd.url).unwrap();
    let successors = ha.jobs().unwrap();
    assert_eq!(successors.len(), 1, "the successor's record of the running job");
    cluster.jobmanager.resume();
    cluster.jobmanager.wait_for("lost its leadership", 1, Duration::from_secs(30));
    // Whatever the old leader did on waking (its view is seconds old), the record is the
    // successor's, as the successor wrote it.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(ha.jobs().unwrap(), successors, "the old leader wrote into its successor's job store");
    let (code, log) = job.finish(Duration::from_secs(180));
    assert_eq!(code, 0, "{log}");
    let reference = output(&cluster.dir.join("reference"));
    assert_eq!(output(&cluster.dir.join("out")), reference, "the committed output differs from a failure-free run's");
    assert_eq!(job_state(&cluster, "1"), "FINISHED");
    // The successor removes the finished job from the store; nothing brings it back.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<(JobId, JobState)> = ha.jobs().unwrap().iter().map(|r| (r.id, r.state)).collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the finished job stays in the store: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cluster.jobmanager.running() && cluster.standby[0].running(), "both JobManagers stay");
}

/// The job store takes a leader's writes only while its lease holds the leader key: once
/// its lease is gone (a leader paused past it, as etcd sees it) and a successor leads, the
/// old leader's writes and deletes are refused, saying so, and the store keeps the
/// successor's record.
#[test]
fn a_leader_whose_lease_is_gone_writes_nothing_to_the_job_store() {
    use eddy_rpc::ha::{HaServices, JobRecord};
    use eddy_rpc::{JobId, JobState};
    let etcd = Etcd::start("ha-fenced");
    let ha = HaServices::parse(&etcd.url).unwrap();
    let record = |name: &str| JobRecord {
        id: JobId(1),
        name: name.to_string(),
        args: Vec::new(),
        parallelism: 1,
        job_dir: None,
        slot_timeout_ms: 1_000,
        next_attempt: 0,
        operator_parallelism: Vec::new(),
        generation: 0,
        state: JobState::Running,
        exclusive_resources: Vec::new(),
        binary: String::new(),
        detached: false,
    };
    let first = ha.campaign("127.0.0.1:1", Box::new(|_| {})).unwrap();
    let old = first.lease();
    ha.put_job(&record("the first leader's"), old).unwrap();
    // Its lease ends (dropping the leadership revokes it), and another JobManager leads.
    drop(first);
    let second = ha.campaign("127.0.0.1:2", Box::new(|_| {})).unwrap();
    ha.put_job(&record("the successor's"), second.lease()).unwrap();
    let refused = ha.put_job(&record("the first leader's again"), old).unwrap_err().to_string();
    assert!(refused.contains("no longer leads"), "{refused}");
    assert!(ha.remove_job(JobId(1), old).is_err(), "nor can it delete");
    let names: Vec<String> = ha.jobs().unwrap().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["the successor's"]);
    drop(second);
}
