//! Application mode's guards: a TaskManager runs the job's arguments with its own binary.
//! A job is given only the slots of TaskManagers of its binary (by name), and refused at
//! once, naming both binaries and what to do, when no TaskManager runs it; a binary of
//! the job's name that builds another graph from its arguments is refused before anything
//! runs, with the first difference.

use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{example, start_jobmanager};

/// A Flink user starts the TaskManagers from the generic `eddy` binary: the job is refused
/// at once (not after the slot timeout, not with a task executor's usage error), naming
/// both binaries and the command that starts the right TaskManagers.
#[test]
fn a_job_whose_taskmanagers_run_another_binary_is_refused_naming_both_and_what_to_do() {
    let dir = common::temp_dir("cluster-binary");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "the-secret-of-the-binary-test").unwrap();
    let secret = secret.to_str().unwrap();
    let eddy = std::path::PathBuf::from(env!("CARGO_BIN_EXE_eddy"));
    let (jobmanager, address) = start_jobmanager(&eddy, secret, Stdio::null());
    let taskmanager = Command::new(&eddy)
        .args(["taskmanager", "--jobmanager", &address, "--slots", "2", "--secret-file", secret])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _processes = common::KillOnDrop(vec![taskmanager, jobmanager]);
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let job = Command::new(example("api_count"))
        .args(["--jobmanager", &address, "--secret-file", secret, "--slot-timeout-ms", "20000"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&job.stderr);
    assert!(!job.status.success(), "{stderr}");
    assert!(
        stderr.contains("job 'api count' is of binary 'api_count', and TaskManager 1 runs 'eddy' (")
            && stderr.contains("`api_count taskmanager --jobmanager HOST:PORT --secret-file FILE`"),
        "{stderr}"
    );
    assert!(!stderr.contains("unexpected argument"), "no task executor was started: {stderr}");
    assert!(took < Duration::from_secs(15), "refused at once, not after the slot timeout: {took:?}");
}

#[test]
fn a_taskmanager_whose_binary_builds_another_graph_is_refused_with_the_difference() {
    let dir = common::temp_dir("cluster-graph");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "the-secret-of-the-graph-test").unwrap();
    let secret = secret.to_str().unwrap();
    // The `dedup` example under the job's binary name: it passes the name check and builds
    // another graph from the job's arguments.
    let impostor = dir.join("api_count");
    std::fs::copy(example("dedup"), &impostor).unwrap();
    let (mut jobmanager, address) = start_jobmanager(&impostor, secret, Stdio::null());
    let mut taskmanager = Command::new(&impostor)
        .args(["taskmanager", "--jobmanager", &address, "--slots", "2", "--secret-file", secret])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let job = Command::new(example("api_count"))
        .args(["--jobmanager", &address, "--secret-file", secret, "--slot-timeout-ms", "20000"])
        .output()
        .unwrap();
    for process in [&mut taskmanager, &mut jobmanager] {
        let _ = process.kill();
        let _ = process.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&job.stderr);
    assert!(!job.status.success(), "{stderr}");
    assert!(stderr.contains("builds a different graph from the job's arguments"), "{stderr}");
    assert!(
        stderr.contains("job 'api count'") && stderr.contains("job 'dedup'"),
        "the first difference is named: {stderr}"
    );
}

/// Issue 18: a record type whose `Serialize` fails on an edge between two TaskManagers
/// panicked a connection thread, and the job ended "cancelled" with the cause only on a
/// task executor's stderr. Now the job fails at once (checkpoints on, so the default
/// restart strategy would restart it), naming the type.
#[test]
fn a_record_type_that_cannot_serialize_on_a_cluster_edge_fails_the_job_naming_it() {
    let dir = common::temp_dir("cluster-unsendable");
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "the-secret-of-the-unsendable-test").unwrap();
    let secret = secret.to_str().unwrap();
    let binary = example("unserializable_record");
    let (mut jobmanager, address) = start_jobmanager(&binary, secret, Stdio::null());
    let mut taskmanagers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&binary)
                .args(["taskmanager", "--jobmanager", &address, "--slots", "1", "--secret-file", secret])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = std::time::Instant::now();
    let job = Command::new(&binary)
        .args(["--jobmanager", &address, "--secret-file", secret, "--slot-timeout-ms", "20000"])
        .output()
        .unwrap();
    let took = started.elapsed();
    for process in taskmanagers.iter_mut().chain([&mut jobmanager]) {
        let _ = process.kill();
        let _ = process.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&job.stderr);
    assert_eq!(job.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Error: job 'unserializable record' failed")
            && stderr.contains("a record of type `unserializable_record::Unsendable` cannot be serialized"),
        "the job's error names the type: {stderr}"
    );
    assert!(!stderr.contains("restarting") && !stderr.contains("panicked"), "{stderr}");
    assert!(took < Duration::from_secs(20), "failed at once, not after restarts: {took:?}");
}
