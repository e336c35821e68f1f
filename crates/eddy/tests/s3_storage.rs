//! Checkpoints and savepoints in an S3-compatible object store: a real moto server that
//! this test starts on loopback. It installs moto from PyPI when `moto_server` is missing,
//! so that `cargo test --workspace` needs nothing done by hand.

use common::{assert_counts_continue, counting_job};
use eddy::checkpoint::storage::{ObjectStorageOpener, OpenStorage};
use eddy::checkpoint::CheckpointConfig;
use eddy::prelude::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

struct MotoServer {
    child: Child,
    port: u16,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_moto() -> MotoServer {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let spawn = || {
        Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    let child = match spawn() {
        Ok(child) => child,
        Err(_) => {
            let installed = Command::new("python3").args(["-m", "pip", "install", "--quiet", "moto[server]"]).status();
            assert!(
                installed.is_ok_and(|s| s.success()),
                "moto_server is missing and pip could not install moto[server]"
            );
            spawn().expect("moto_server after installing moto[server]")
        }
    };
    let server = MotoServer { child, port };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "moto_server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// Creates a bucket with a plain HTTP PUT (object_store does not create buckets).
fn create_bucket(port: u16, bucket: &str) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

/// The counting job at parallelism 2 with checkpoints every 40 ms (two retained, kept
/// after the job) into `checkpoints`, stopped with a savepoint into `savepoints`.
fn run_until_savepoint(env: &Env, checkpoints: &str, savepoints: &str, stop_after_ms: u64) -> JobResult {
    env.set_parallelism(2);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 40,
        retained: 2,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(checkpoints);
    env.stop_with_savepoint_after(savepoints, stop_after_ms);
    counting_job(env, 60_000, CollectSink::new());
    env.execute("count").unwrap()
}

/// The counting job restored as `env` says runs the rest of the input, each key's count
/// continuing from the restored state.
fn assert_resumes(env: &Env) {
    let resumed = CollectSink::new();
    counting_job(env, 60_000, resumed.clone());
    env.execute("count").unwrap();
    let resumed = resumed.take();
    assert!(!resumed.is_empty() && resumed.len() < 60_000, "{}", resumed.len());
    assert_counts_continue(&resumed, 6_000);
}

#[test]
fn checkpoints_and_savepoints_live_in_an_s3_compatible_store() {
    let moto = start_moto();
    create_bucket(moto.port, "eddy-test");
    std::env::set_var("AWS_ENDPOINT", format!("http://127.0.0.1:{}", moto.port));
    std::env::set_var("AWS_ALLOW_HTTP", "true");
    std::env::set_var("AWS_ACCESS_KEY_ID", "test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
    std::env::set_var("AWS_REGION", "us-east-1");

    let env = Env::new();
    // Long enough (about 0.6 s) that the savepoint at 150 ms comes before the end.
    let result = run_until_savepoint(&env, "s3://eddy-test/checkpoints", "s3://eddy-test/savepoints", 150);
    assert!(result.checkpoints_completed >= 1, "{result:?}");
    let savepoint = result.savepoint.clone().unwrap_or_else(|| panic!("no savepoint: {result:?}"));
    assert!(savepoint.starts_with("s3://eddy-test/savepoints/savepoint-"), "{savepoint}");

    // In a job directory of its own under the checkpoint directory.
    let jobs = ObjectStorageOpener.open("s3://eddy-test/checkpoints").unwrap().subdirectories().unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let storage = ObjectStorageOpener.open(&jobs[0]).unwrap();
    let completed = storage.completed().unwrap();
    assert!(!completed.is_empty() && completed[0].starts_with(&format!("{}/chk-", jobs[0])), "{completed:?}");
    assert!(storage.load(&completed[0]).unwrap().state_for("count", 0).is_some());

    let env = Env::new();
    env.set_parallelism(2);
    env.restore_from(&savepoint);
    assert_resumes(&env);

    #[cfg(feature = "rocksdb")]
    incremental_rocksdb_checkpoints_in_s3();
}

/// RocksDB's incremental checkpoints in S3 (shared files and all): a later run resumes
/// from the latest one at another parallelism.
#[cfg(feature = "rocksdb")]
fn incremental_rocksdb_checkpoints_in_s3() {
    let working = common::temp_dir("s3-rocksdb");
    let backend = || RocksDbStateBackend::new(&working).with_incremental_checkpoints(true);
    let env = Env::new();
    env.set_state_backend(backend());
    let result = run_until_savepoint(&env, "s3://eddy-test/incremental", "s3://eddy-test/incremental-savepoints", 400);
    // (Uploads to moto are slow: one checkpoint may be all that completes before the stop.)
    assert!(result.checkpoints_completed >= 1, "{result:?}");
    let jobs = ObjectStorageOpener.open("s3://eddy-test/incremental").unwrap().subdirectories().unwrap();
    assert_eq!(jobs.len(), 1, "one job directory: {jobs:?}");
    let storage = ObjectStorageOpener.open(&jobs[0]).unwrap();
    let latest = storage.load(&storage.completed().unwrap()[0]).unwrap();
    let native = latest.state_for("count", 0).and_then(|s| s.keyed.as_ref()).map(|k| k.native.len());
    assert_eq!(native, Some(1), "the checkpoint holds RocksDB's files");

    let env = Env::new();
    env.set_parallelism(3);
    env.set_state_backend(backend());
    env.restore_latest_from("s3://eddy-test/incremental");
    assert_resumes(&env);
    let _ = std::fs::remove_dir_all(&working);
}
