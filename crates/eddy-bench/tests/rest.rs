//! The REST API, `/metrics` and the dashboard, tried from outside as an operator would:
//! a JobManager with `--rest-bind`, two TaskManagers, W2 (the join) across them; every
//! REST path checked against what the job does, every process's `/metrics` parsed as
//! Prometheus parses it, the dashboard loaded in headless Chromium, a savepoint taken
//! through REST and restored at another parallelism with exactly the failure-free output,
//! and requests without the cluster's secret refused. Then a local job's own server.

mod common;

use common::http::{get, get_json, request, request_as, scrape, values};
use common::output;
use common::process::{field, run_local, Cluster, Proc, SECRET};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The URL a process printed after `prefix`.
fn printed(process: &Proc, prefix: &str) -> String {
    process.wait_for(prefix, 1, Duration::from_secs(20));
    process.lines().iter().find_map(|l| l.strip_prefix(prefix).map(String::from)).unwrap()
}

/// Polls `f` until it gives `Some`, for up to `timeout`.
fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Polls an asynchronous savepoint or stop until it completed: its location.
fn completed_savepoint(base: &str, job: &str, trigger: &str, token: Option<&str>) -> String {
    eventually("the savepoint completed", Duration::from_secs(60), || {
        let status = get_json(&format!("{base}/jobs/{job}/savepoints/{trigger}"), token);
        match status["status"]["id"].as_str() {
            Some("COMPLETED") => {
                let location = status["operation"]["location"].as_str();
                Some(location.unwrap_or_else(|| panic!("the savepoint failed: {status}")).to_string())
            }
            Some("IN_PROGRESS") => None,
            other => panic!("unexpected status {other:?}: {status}"),
        }
    })
}

/// Headless Chromium, as the machine's `chromium` runs it.
fn chromium(args: &[&str]) -> std::process::Output {
    let binary = Path::new("/usr/bin/chromium");
    assert!(binary.exists(), "headless Chromium is needed: run scripts/install-deps.sh (Debian `chromium`)");
    let profile = std::env::temp_dir().join(format!("eddy-chromium-{}-{}", std::process::id(), args.len()));
    let mut all = vec![
        "--headless".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        format!("--user-data-dir={}", profile.display()),
        "--virtual-time-budget=5000".into(),
        "--window-size=1440,1100".into(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let out = std::process::Command::new(binary).args(&all).output().expect("chromium runs");
    let _ = std::fs::remove_dir_all(profile);
    out
}

#[test]
fn the_jobmanagers_rest_api_metrics_and_dashboard_show_w2_across_two_taskmanagers() {
    let cluster = Cluster::start_with("rest", &[1, 1], &[], &["--rest-bind", "127.0.0.1:0"]);
    let base = printed(&cluster.jobmanager, "rest listening on ");
    let token = Some(SECRET);
    let dir = cluster.dir.clone();

    let w2 = ["join", "--events", "300000", "--keys", "1000"];
    let mut local = w2.to_vec();
    local.extend(["--parallelism", "2"]);
    let reference = run_local(&local);

    let checkpoints = dir.join("checkpoints");
    let mut args = w2.to_vec();
    args.extend(["--parallelism", "2", "--rate", "30000", "--checkpoint-ms", "300"]);
    args.extend(["--checkpoint-dir", checkpoints.to_str().unwrap()]);
    let job = cluster.submit(&args);
    job.wait_for("attempt running on the cluster", 1, Duration::from_secs(60));
    job.wait_for("checkpoint completed", 2, Duration::from_secs(60));

    // Without the secret, nothing is shown or changed; each refusal is logged with the peer.
    for (method, path) in
        [("GET", "/overview"), ("GET", "/jobs/1"), ("GET", "/metrics"), ("PATCH", "/jobs/1?mode=cancel")]
    {
        let (status, body) = request(method, &format!("{base}{path}"), None, None);
        assert_eq!(status, 401, "{method} {path}: {body}");
        assert!(body.contains("errors"), "{body}");
        let (status, _) = request(method, &format!("{base}{path}"), Some("not-the-secret"), None);
        assert_eq!(status, 401);
    }
    cluster.jobmanager.wait_for("HTTP request refused", 8, Duration::from_secs(10));
    assert!(cluster
        .jobmanager
        .lines()
        .iter()
        .any(|l| l.contains("HTTP request refused") && l.contains("peer=127.0.0.1:")));

    let overview = get_json(&format!("{base}/overview"), token);
    assert_eq!((overview["taskmanagers"].as_u64(), overview["slots-total"].as_u64()), (Some(2), Some(2)), "{overview}");
    assert_eq!(overview["slots-available"].as_u64(), Some(0), "{overview}");
    assert_eq!(overview["jobs-running"].as_u64(), Some(1), "{overview}");
    let jobs = get_json(&format!("{base}/jobs"), token);
    assert_eq!(jobs["jobs"], serde_json::json!([{ "id": "1", "status": "RUNNING" }]));
    let listed = get_json(&format!("{base}/jobs/overview"), token);
    assert_eq!(listed["jobs"][0]["name"], "W2 join", "{listed}");

    // The job: both sources and the join, each at parallelism 2, the join fed by both.
    let job_json = eventually("the job's view", Duration::from_secs(20), || {
        let (status, body) = get(&format!("{base}/jobs/1"), token);
        (status == 200).then(|| serde_json::from_str::<Value>(&body).unwrap())
    });
    let vertices = job_json["vertices"].as_array().unwrap();
    let names: Vec<&str> = vertices.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["events-1 -> generate-1", "events-2 -> generate-2", "join -> count"], "{job_json}");
    assert!(vertices.iter().all(|v| v["parallelism"] == 2), "{job_json}");
    let join = vertices[2]["id"].as_str().unwrap().to_string();
    let join_node = job_json["plan"]["nodes"].as_array().unwrap().iter().find(|n| n["id"] == join.as_str()).unwrap();
    let inputs: Vec<&str> = join_node["inputs"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(inputs, [vertices[0]["id"].as_str().unwrap(), vertices[1]["id"].as_str().unwrap()]);

    // Records grow while it runs, on both TaskManagers.
    let read = |job_json: &Value| job_json["vertices"][2]["metrics"]["read-records"].as_u64().unwrap();
    let first = read(&job_json);
    let later = eventually("the join's records grow", Duration::from_secs(20), || {
        let now = read(&get_json(&format!("{base}/jobs/1"), token));
        (now > first).then_some(now)
    });
    assert!(later > first);
    // Half of each source's records cross to the other TaskManager: bytes on the network.
    let counted = get_json(&format!("{base}/jobs/1"), token);
    for (vertex, metric) in [(0, "write-bytes"), (1, "write-bytes"), (2, "read-bytes")] {
        let bytes = counted["vertices"][vertex]["metrics"][metric].as_u64().unwrap();
        assert!(bytes > 0, "vertex {vertex} {metric}: {counted}");
    }
    let vertex = eventually("the join's rates", Duration::from_secs(20), || {
        let v = get_json(&format!("{base}/jobs/1/vertices/{join}"), token);
        let rates =
            v["subtasks"].as_array().unwrap().iter().all(|s| s["records-in-per-second"].as_f64().unwrap() > 0.0);
        rates.then_some(v)
    });
    let subtasks = vertex["subtasks"].as_array().unwrap();
    let mut on: Vec<u64> = subtasks.iter().map(|s| s["taskmanager-id"].as_u64().unwrap()).collect();
    on.sort();
    assert_eq!(on, [1, 2], "one subtask per TaskManager: {vertex}");
    for s in subtasks {
        let shares = ["busy-ms-per-second", "backpressured-ms-per-second", "idle-ms-per-second"]
            .iter()
            .map(|k| s[*k].as_f64().unwrap())
            .sum::<f64>();
        assert!((shares - 1000.0).abs() < 1.0, "busy + backpressured + idle make a second: {s}");
    }
    // The join aligns barriers from four channels: the last alignment took some time.
    eventually("the join's alignment time", Duration::from_secs(20), || {
        let v = get_json(&format!("{base}/jobs/1/vertices/{join}"), token);
        let took = v["subtasks"].as_array().unwrap().iter().map(|s| s["checkpoint-alignment-ms"].as_f64().unwrap());
        took.fold(0.0, f64::max).gt(&0.0).then_some(())
    });
    let pressure = get_json(&format!("{base}/jobs/1/vertices/{join}/backpressure"), token);
    let levels = pressure["subtasks"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{pressure}");
    assert!(levels.iter().all(|s| ["ok", "low", "high"].contains(&s["backpressure-level"].as_str().unwrap())));
    assert!(levels.iter().all(|s| (0.0..=1.0).contains(&s["ratio"].as_f64().unwrap())));
    // W2 has no event time: no watermark yet, in Flink's shape (an array).
    let watermarks = get_json(&format!("{base}/jobs/1/vertices/{join}/watermarks"), token);
    assert_eq!(watermarks, serde_json::json!([]));
    let (status, body) = get(&format!("{base}/jobs/1/vertices/999"), token);
    assert_eq!(status, 404, "{body}");
    let (status, body) = get(&format!("{base}/jobs/7"), token);
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no job '7'"), "{body}");

    let stats = get_json(&format!("{base}/jobs/1/checkpoints"), token);
    assert!(stats["counts"]["completed"].as_u64().unwrap() >= 2, "{stats}");
    let latest = stats["latest"]["completed"]["external_path"].as_str().unwrap();
    assert!(latest.starts_with(checkpoints.to_str().unwrap()), "{stats}");
    assert!(Path::new(latest).join("_metadata").exists(), "{latest}");
    assert!(stats["history"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["status"] == "COMPLETED" && c["state_size"].as_u64() > Some(0)));
    let config = get_json(&format!("{base}/jobs/1/checkpoints/config"), token);
    assert_eq!((config["interval"].as_u64(), config["mode"].as_str()), (Some(300), Some("exactly once")), "{config}");
    let exceptions = get_json(&format!("{base}/jobs/1/exceptions"), token);
    assert_eq!(exceptions["exceptionHistory"]["entries"], serde_json::json!([]), "{exceptions}");
    let tms = get_json(&format!("{base}/taskmanagers"), token);
    let tms = tms["taskmanagers"].as_array().unwrap();
    assert_eq!(tms.len(), 2);
    assert!(tms.iter().all(|t| t["slotsNumber"] == 1 && t["freeSlots"] == 0), "{tms:?}");
    // Each holds one subtask of each of the three vertices (slot sharing).
    assert!(tms.iter().all(|t| t["subtasks"] == 3 && t["jobs"][0]["name"] == "W2 join"), "{tms:?}");

    // /metrics of every process: the JobManager, both TaskManagers, both task executors.
    let jm = scrape(&format!("{base}/metrics"), token);
    assert_eq!(values(&jm, "eddy_jobmanager_task_managers", &[]), [2.0]);
    assert!(values(&jm, "eddy_job_checkpoints_completed_total", &[("job_id", "1")])[0] >= 2.0);
    let join_in = values(&jm, "eddy_task_records_in_total", &[("job_id", "1"), ("vertex", "join -> count")]);
    assert_eq!(join_in.len(), 2, "one series per subtask");
    assert!(join_in.iter().all(|&n| n > 0.0), "{join_in:?}");
    assert!(values(&jm, "process_resident_memory_bytes", &[])[0] > 0.0);
    for tm in tms {
        let address = tm["metrics-address"].as_str().expect("each TaskManager serves /metrics");
        let scraped = scrape(&format!("http://{address}/metrics"), token);
        assert_eq!(values(&scraped, "eddy_taskmanager_task_slots", &[]), [1.0]);
        // A TaskManager idles while its task executors work: its CPU may still read 0.
        assert!(values(&scraped, "process_cpu_seconds_total", &[])[0] >= 0.0);
        assert!(values(&scraped, "process_resident_memory_bytes", &[])[0] > 0.0);
        assert_eq!(get(&format!("http://{address}/metrics"), None).0, 401, "TaskManagers ask for the secret too");
    }
    let executors = get_json(&format!("{base}/jobs/1"), token)["task-executors"].as_array().unwrap().clone();
    assert_eq!(executors.len(), 2, "{executors:?}");
    for executor in executors {
        let address = executor["metrics_address"].as_str().expect("each task executor serves /metrics");
        let scraped = scrape(&format!("http://{address}/metrics"), token);
        let out = values(&scraped, "eddy_task_records_out_total", &[("vertex", "events-1 -> generate-1")]);
        assert_eq!(out.len(), 1, "its own subtask only");
        assert!(out[0] > 0.0);
    }

    // The dashboard, as a browser draws it: the graph with both sources and the join,
    // and live numbers.
    let page = format!("{base}/#/jobs/1/overview/{join}?token={SECRET}");
    let dom = chromium(&["--dump-dom", &page]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    for name in ["events-1 -&gt; generate-1", "events-2 -&gt; generate-2", "join -&gt; count", "job graph"] {
        assert!(dom.contains(name), "the dashboard shows {name}:\n{dom}");
    }
    assert!(dom.contains("Parallelism 2") && dom.contains("/s") && dom.contains("RUNNING"), "{dom}");
    assert!(!dom.contains("Sign in</h2>") || dom.contains("overlay hidden"), "signed in by the link");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-job-graph.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[&format!("--screenshot={}", shot.display()), &page]);
    assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000), "a screenshot at {}", shot.display());

    // A savepoint through REST, then cancel, then a restore at parallelism 3 elsewhere:
    // exactly the failure-free output.
    let target = dir.join("savepoints");
    let body = format!(r#"{{"target-directory": "{}"}}"#, target.display());
    let (status, answer) = request("POST", &format!("{base}/jobs/1/savepoints"), token, Some(&body));
    assert_eq!(status, 202, "{answer}");
    let trigger = serde_json::from_str::<Value>(&answer).unwrap()["request-id"].as_str().unwrap().to_string();
    let savepoint = completed_savepoint(&base, "1", &trigger, token);
    assert!(Path::new(&savepoint).join("_metadata").exists(), "{savepoint}");
    let (status, body) = request("PATCH", &format!("{base}/jobs/1?mode=cancel"), token, None);
    assert_eq!(status, 202, "{body}");
    let (code, log) = job.finish(Duration::from_secs(60));
    assert_ne!(code, 0, "cancelled: {log}");
    let overview = eventually("the job shows cancelled", Duration::from_secs(10), || {
        let o = get_json(&format!("{base}/overview"), token);
        (o["jobs-cancelled"] == 1).then_some(o)
    });
    assert_eq!(overview["jobs-running"], 0);
    let mut resumed = w2.to_vec();
    resumed.extend(["--parallelism", "3", "--restore", &savepoint]);
    let restored = run_local(&resumed);
    assert_eq!(field(&restored, "checksum"), field(&reference, "checksum"), "restored at parallelism 3: {restored}");
}

/// A local job's own server (`--rest-bind`), without credentials on loopback: stop with a
/// savepoint through REST, and the output after the restore is the failure-free output.
#[test]
fn a_local_job_serves_its_own_rest_api_and_stops_with_a_savepoint_through_it() {
    let dir = std::env::temp_dir().join(format!("eddy-rest-local-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (reference, out) = (dir.join("reference"), dir.join("out"));
    let w1 = ["api-count", "--events", "200000", "--keys", "500"];
    let mut local = w1.to_vec();
    local.extend(["--parallelism", "2", "--output", reference.to_str().unwrap()]);
    run_local(&local);

    let mut args = w1.to_vec();
    let checkpoints = dir.join("checkpoints");
    args.extend(["--parallelism", "2", "--rate", "20000", "--checkpoint-ms", "300", "--rest-bind", "127.0.0.1:0"]);
    args.extend(["--checkpoint-dir", checkpoints.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    let job = Proc::start(&args);
    let line = printed(&job, "eddy: REST API, dashboard and /metrics of 'W1 api-count' at ");
    let base = line.trim().to_string();
    job.wait_for("checkpoint completed", 1, Duration::from_secs(60));

    let jobs = get_json(&format!("{base}/jobs"), None);
    assert_eq!(jobs["jobs"], serde_json::json!([{ "id": "local", "status": "RUNNING" }]));
    // Without credentials, only for a client that asked for a loopback host: a web page
    // elsewhere that rebinds its own name to 127.0.0.1 is refused.
    let (status, body) = request_as("GET", &format!("{base}/jobs"), Some("attacker.example:80"), None, None);
    assert_eq!(status, 403, "{body}");
    let (status, _) = request_as("GET", &format!("{base}/jobs"), Some("localhost"), None, None);
    assert_eq!(status, 200);
    let scraped = scrape(&format!("{base}/metrics"), None);
    assert!(!values(&scraped, "eddy_task_records_in_total", &[("job_id", "local")]).is_empty());
    let (status, body) =
        request("POST", &format!("{base}/jobs/local/stop"), None, Some(r#"{"targetDirectory": "relative"}"#));
    assert_eq!(status, 400, "a relative directory is refused: {body}");

    let target = dir.join("stopped");
    let body = format!(r#"{{"targetDirectory": "{}"}}"#, target.display());
    let (status, answer) = request("POST", &format!("{base}/jobs/local/stop"), None, Some(&body));
    assert_eq!(status, 202, "{answer}");
    let trigger = serde_json::from_str::<Value>(&answer).unwrap()["request-id"].as_str().unwrap().to_string();
    let savepoint = completed_savepoint(&base, "local", &trigger, None);
    let (code, log) = job.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{log}");
    assert_eq!(field(&log, "savepoint"), savepoint);

    let mut resumed = w1.to_vec();
    resumed.extend(["--parallelism", "1", "--restore", &savepoint, "--checkpoint-ms", "300"]);
    resumed.extend(["--checkpoint-dir", checkpoints.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    run_local(&resumed);
    assert_eq!(output(&out), output(&reference), "stop through REST and resume lost or doubled records");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cause survives from the storage to the job's failure: the job directory of a local
/// job is replaced by a file while it runs, so the next checkpoint's write fails with the
/// file system's own error. The job's exceptions on REST and its final error name the
/// path and the operating system's words, each once.
#[test]
fn a_storage_failures_cause_reaches_the_jobs_exceptions_and_its_final_error() {
    let dir = std::env::temp_dir().join(format!("eddy-rest-cause-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let checkpoints = dir.join("checkpoints");
    let mut args = vec!["api-count", "--events", "100000000", "--keys", "500", "--parallelism", "1", "--rate"];
    // One restart, 3 s after the failure: time to read the exceptions while the job waits.
    args.extend(["20000", "--checkpoint-ms", "200", "--rest-bind", "127.0.0.1:0", "--restart-delay-ms", "3000"]);
    args.extend(["--restart-attempts", "1", "--checkpoint-dir", checkpoints.to_str().unwrap()]);
    let job = Proc::start(&args);
    let base = printed(&job, "eddy: REST API, dashboard and /metrics of 'W1 api-count' at ").trim().to_string();
    job.wait_for("checkpoint completed", 1, Duration::from_secs(60));
    let job_dir = std::fs::read_dir(&checkpoints).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    // Moved away, then a file in its place; the job may be recreating the directory for a
    // checkpoint at that moment: again until the file stands.
    let mut moved = 0;
    while !job_dir.is_file() {
        if job_dir.is_dir() {
            let _ = std::fs::rename(&job_dir, dir.join(format!("moved-{moved}")));
            moved += 1;
        }
        let _ = std::fs::write(&job_dir, "a file where the job directory was");
    }

    let exceptions = eventually("the storage failure on /exceptions", Duration::from_secs(30), || {
        let (status, body) = get(&format!("{base}/jobs/local/exceptions"), None);
        (status == 200 && body.contains("os error")).then_some(body)
    });
    assert!(exceptions.contains("checkpoint storage I/O at"), "{exceptions}");
    let (code, log) = job.finish(Duration::from_secs(60));
    assert_ne!(code, 0, "{log}");
    let failure = log.lines().find(|l| l.starts_with("eddy-bench: ")).unwrap_or_else(|| panic!("{log}"));
    // The restart cannot read the job directory either, and says why.
    assert_eq!(failure.matches("(os error").count(), 1, "the cause, once: {failure}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cluster_refuses_to_serve_its_secret_in_clear_beyond_loopback() {
    let dir = std::env::temp_dir().join(format!("eddy-rest-clear-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let args =
        ["jobmanager", "--bind", "127.0.0.1:0", "--secret-file", secret.to_str().unwrap(), "--rest-bind", "0.0.0.0:0"];
    let out = std::process::Command::new(common::process::BENCH).args(args).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("in clear") && said.contains("TLS"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_local_job_refuses_to_serve_beyond_loopback() {
    let out = std::process::Command::new(common::process::BENCH)
        .args(["api-count", "--events", "1000", "--rest-bind", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("loopback"), "{said}");

    // A job submitted to a cluster is served by its JobManager, not by its own binary.
    let secret = std::env::temp_dir().join(format!("eddy-rest-secret-{}", std::process::id()));
    std::fs::write(&secret, SECRET).unwrap();
    let out = std::process::Command::new(common::process::BENCH)
        .args(["api-count", "--events", "1000", "--rest-bind", "127.0.0.1:0", "--jobmanager", "127.0.0.1:1"])
        .args(["--secret-file", secret.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&secret);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("served by its JobManager"), "{said}");
}

/// Metrics a Prometheus user can graph: each vertex's series carry its head operator's
/// uid, and a window operator counts the late records it drops (Flink's
/// `numLateRecordsDropped`): none before the events turn late, then some, never more than
/// were late.
#[test]
fn a_window_operator_counts_the_late_records_it_drops_under_its_uid() {
    let dir = std::env::temp_dir().join(format!("eddy-rest-late-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("out");
    let events = 20_000u64;
    let job = Proc::start(&[
        "late-windows",
        "--events",
        &events.to_string(),
        "--parallelism",
        "2",
        "--slow-sink-us",
        "300",
        "--drop-late",
        "--output",
        out.to_str().unwrap(),
        "--rest-bind",
        "127.0.0.1:0",
    ]);
    let base = printed(&job, "eddy: REST API, dashboard and /metrics of 'late windows' at ").trim().to_string();
    let dropped = eventually("late records dropped", Duration::from_secs(60), || {
        let scraped = scrape(&format!("{base}/metrics"), None);
        let windows = values(&scraped, "eddy_task_late_records_dropped_total", &[("uid", "windows")]);
        let others = values(&scraped, "eddy_task_late_records_dropped_total", &[("uid", "numbers")]);
        assert_eq!(others.iter().sum::<f64>(), 0.0, "only the window operator drops records");
        let sum: f64 = windows.iter().sum();
        (windows.len() == 2 && sum > 0.0).then_some(sum)
    });
    // From event 300 on, two of every ten are late (see `late_windows::timed_event`).
    assert!(dropped <= ((events - 300) / 5) as f64, "{dropped}");
    drop(job);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An ended job stays in the list, the REST API and `/metrics` for the JobManager's
/// retention (Flink's `jobstore.expiration-time`), then its series go.
#[test]
fn an_ended_jobs_series_go_after_the_jobmanagers_retention() {
    // Its own JobManager (with a short retention); the cluster's directory and secret.
    let cluster = Cluster::start("retention", &[]);
    let secret = cluster.secret.to_str().unwrap();
    let jm = Proc::start(&[
        "jobmanager",
        "--bind",
        "127.0.0.1:0",
        "--rest-bind",
        "127.0.0.1:0",
        "--job-retention-ms",
        "10000",
        "--secret-file",
        secret,
    ]);
    let address = printed(&jm, "jobmanager listening on ");
    let base = printed(&jm, "rest listening on ");
    let tm = Proc::start(&["taskmanager", "--jobmanager", &address, "--slots", "1", "--secret-file", secret]);
    jm.wait_for("TaskManager joined", 1, Duration::from_secs(20));
    let job = Proc::start(&["api-count", "--events", "1000", "--jobmanager", &address, "--secret-file", secret]);
    let (code, log) = job.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{log}");
    let ended = Instant::now();
    let series =
        || values(&scrape(&format!("{base}/metrics"), Some(SECRET)), "eddy_job_restarts_total", &[("job_id", "1")]);
    assert_eq!(series().len(), 1, "the ended job's series stay for the retention");
    eventually("the ended job's series to go", Duration::from_secs(30), || series().is_empty().then_some(()));
    assert!(ended.elapsed() >= Duration::from_secs(5), "not before the retention: {:?}", ended.elapsed());
    let list =
        Proc::start(&["list", "--jobmanager", &address, "--secret-file", secret]).finish(Duration::from_secs(30)).1;
    assert!(!list.contains("W1 api-count"), "{list}");
    drop(tm);
}
