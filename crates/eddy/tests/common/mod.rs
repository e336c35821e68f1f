//! Helpers shared by the tests: a slow counting job, temporary directories, and the
//! examples' binaries started as cluster processes.

#![allow(dead_code)]

pub mod late_windows;

use eddy::prelude::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary of example `name`, built beside the tests.
pub fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<this test> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join(name)
}

/// Processes killed when dropped, also when a test panics before its end.
pub struct KillOnDrop(pub Vec<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for process in &mut self.0 {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

/// Starts `binary` as a JobManager on a free port of loopback, its log to `log`; the
/// process and its address.
pub fn start_jobmanager(binary: &Path, secret: &str, log: Stdio) -> (std::process::Child, String) {
    let mut jobmanager = Command::new(binary)
        .args(["jobmanager", "--bind", "127.0.0.1:0", "--secret-file", secret])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(jobmanager.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let address = first.trim().strip_prefix("jobmanager listening on ").unwrap().to_string();
    (jobmanager, address)
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Counts records per key in a `ValueState` and emits `(key, count)`.
#[derive(Clone, Default)]
pub struct Count {
    count: Option<ValueState<u64>>,
}

impl RichFunction for Count {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.count = Some(ctx.get_state(&ValueStateDescriptor::new("count"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, u64, (u64, u64)> for Count {
    fn process_element(
        &mut self,
        _v: u64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, (u64, u64)>,
    ) -> FunctionResult {
        let state = self.count.as_ref().ok_or("no state")?;
        let next = state.value()?.unwrap_or(0) + 1;
        state.update(next)?;
        out.collect((*ctx.current_key(), next));
        Ok(())
    }
}

/// A slow counting job: 10 keys, `events` records, about 2 ms per 100 records.
pub fn counting_job(env: &Env, events: u64, sink: CollectSink<(u64, u64)>) {
    env.from_sequence(0, events - 1)
        .uid("numbers")
        .map(|i| {
            if i.is_multiple_of(100) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            i
        })
        .uid("slow")
        .key_by(|i: &u64| i % 10)
        .process(Count::default())
        .uid("count")
        .add_sink(sink)
        .uid("sink");
}

/// Every key of a resumed counting job ends at the full count: the state continued.
pub fn assert_counts_continue(resumed: &[(u64, u64)], per_key: u64) {
    for key in 0..10 {
        if let Some(last) = resumed.iter().filter(|(k, _)| *k == key).map(|(_, c)| *c).max() {
            assert_eq!(last, per_key, "key {key}");
        }
    }
}

/// The job directories under the checkpoint directory `dir` (each job writes its
/// checkpoints into a directory of its own there), oldest name first.
pub fn job_dirs(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// The one job directory under the checkpoint directory `dir`.
pub fn job_dir(dir: &std::path::Path) -> PathBuf {
    let dirs = job_dirs(dir);
    assert_eq!(dirs.len(), 1, "one job directory under {}: {dirs:?}", dir.display());
    dirs[0].clone()
}
