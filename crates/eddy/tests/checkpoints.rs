//! Checkpoint storage from a job's point of view: corrupt files, fallback to an older
//! checkpoint, memory storage limits, restart strategies, inspection.

use common::{assert_counts_continue, counting_job, temp_dir, Count};
use eddy::checkpoint::restart::RestartStrategy;
use eddy::checkpoint::CheckpointConfig;
use eddy::prelude::*;
use std::path::{Path, PathBuf};

mod common;
use std::process::Command;

/// The completed checkpoints under the checkpoint directory `dir`, in its job directories.
fn checkpoint_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = common::job_dirs(dir)
        .iter()
        .flat_map(|job| std::fs::read_dir(job).unwrap().flatten().map(|e| e.path()))
        .filter(|p| p.join("_metadata").exists())
        .collect();
    dirs.sort_by_key(|p| p.file_name().unwrap().to_string_lossy()[4..].parse::<u64>().unwrap());
    dirs
}

fn corrupt_one_state_file(checkpoint: &Path) -> PathBuf {
    let file = std::fs::read_dir(checkpoint)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("count"))
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&file, bytes).unwrap();
    file
}

#[test]
fn a_corrupt_newest_checkpoint_falls_back_to_the_older_one_and_is_named() {
    let dir = temp_dir("fallback");
    let env = Env::new();
    env.set_parallelism(2);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 30,
        retained: 2,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(&dir);
    counting_job(&env, 20_000, CollectSink::new());
    let first = env.execute("count").unwrap();
    assert!(first.checkpoints_completed >= 3, "{first:?}");
    let retained = checkpoint_dirs(&dir);
    assert_eq!(retained.len(), 2, "two retained checkpoints: {retained:?}");
    let newest = retained.last().unwrap().clone();
    let broken = corrupt_one_state_file(&newest);

    // Restoring that exact checkpoint fails and names the file.
    let env = Env::new();
    env.set_parallelism(2);
    env.restore_from(&newest);
    counting_job(&env, 20_000, CollectSink::new());
    let message = format!("{:?}", env.execute("count").unwrap_err());
    assert!(
        message.contains(&broken.file_name().unwrap().to_string_lossy().to_string()) && message.contains("checksum"),
        "{message}"
    );

    // Restoring the latest falls back to the older one, which resumes mid-stream.
    let env = Env::new();
    env.set_parallelism(2);
    env.restore_latest_from(&dir);
    let sink = CollectSink::new();
    counting_job(&env, 20_000, sink.clone());
    let resumed = env.execute("count").unwrap();
    assert!(
        resumed.warnings.iter().any(|w| w.contains("skipping checkpoint") && w.contains("checksum")),
        "{:?}",
        resumed.warnings
    );
    let emitted = sink.take();
    assert!(emitted.len() < 20_000, "resumed from the older checkpoint, not from scratch: {}", emitted.len());
    assert_counts_continue(&emitted, 2_000);

    // Inspection shows the corrupt file and exits 1.
    let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["checkpoint", "inspect", newest.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("CORRUPT: ") && stdout.contains("checksum mismatch"), "{stdout}");
    let older = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(["checkpoint", "inspect", retained[0].to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&older.stdout);
    assert_eq!(older.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("keyed state 'count': key groups [0, 63]") && stdout.ends_with("all checksums ok\n"),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A job whose keyed state outgrows a JobManager memory storage capped at 200 bytes per
/// task, checkpointing every 20 ms (its restart strategy left to the caller).
fn big_state_job() -> Env {
    let env = Env::new();
    env.set_parallelism(1);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 20,
        memory_state_bytes_max: 200,
        ..CheckpointConfig::default()
    });
    env.from_sequence(0, 50_000)
        .map(|i| {
            if i % 100 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            i
        })
        .key_by(|i: &u64| *i)
        .process(Count::default())
        .add_sink(CollectSink::new());
    env
}

#[test]
fn memory_storage_refuses_state_above_its_cap_clearly() {
    let env = big_state_job();
    env.set_restart_strategy(RestartStrategy::None);
    let message = env.execute("big state").unwrap_err().to_string();
    assert!(message.contains("above the JobManager memory storage cap of 200 bytes"), "{message}");
}

/// Issue 18: a checkpoint above the memory storage's cap fails the same way after every
/// restart (the restore goes back to the same state), so under the default restart
/// strategy the job restarted for minutes with growing delays. It must fail at once,
/// naming the cap.
#[test]
fn a_checkpoint_that_cannot_fit_its_storage_fails_the_job_at_once_despite_restarts() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let env = big_state_job();
        let _ = done_tx.send(env.execute("big state").map(|r| r.restarts));
    });
    let outcome = done_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the job ends, not a restart loop");
    let message = outcome.unwrap_err().to_string();
    assert!(message.contains("above the JobManager memory storage cap of 200 bytes"), "{message}");
    assert!(message.contains("cannot be stored"), "{message}");
}

#[test]
fn without_a_restart_strategy_the_first_failure_fails_the_job() {
    let env = Env::new();
    env.set_parallelism(1);
    env.enable_checkpointing(10);
    env.set_restart_strategy(RestartStrategy::None);
    env.from_sequence(0, 1_000).map(|i| if i == 500 { panic!("boom") } else { i }).add_sink(CollectSink::new());
    let message = env.execute("no restarts").unwrap_err().to_string();
    assert!(message.contains("boom"), "{message}");
}

#[test]
fn fixed_delay_gives_up_after_its_attempts() {
    let env = Env::new();
    env.set_parallelism(1);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 2, delay_ms: 1 });
    env.from_sequence(0, 10).map(|i| if i == 5 { panic!("always") } else { i }).add_sink(CollectSink::new());
    let message = env.execute("flaky").unwrap_err().to_string();
    assert!(message.contains("always"), "{message}");
}

/// A job restored from the oldest of several checkpoints of another run, checkpointing
/// into the same directory, that fails before it completed a checkpoint of its own,
/// restarts from what it started from: never from the other run's newer checkpoints.
/// Another run of the counting job into `dir` that keeps its last `retained` checkpoints
/// (taken every `interval_ms`); their directories, oldest first.
fn earlier_run(dir: &Path, parallelism: u32, interval_ms: u64, retained: usize) -> Vec<PathBuf> {
    let env = Env::new();
    env.set_parallelism(parallelism);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms,
        retained,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(dir);
    counting_job(&env, 20_000, CollectSink::new());
    env.execute("count").unwrap();
    checkpoint_dirs(dir)
}

#[test]
fn a_failover_restores_the_jobs_own_checkpoints_only() {
    let dir = temp_dir("failover-own");
    let earlier = earlier_run(&dir, 2, 30, 3);
    assert_eq!(earlier.len(), 3);

    let env = Env::new();
    env.set_parallelism(2);
    env.set_checkpoint_config(CheckpointConfig { interval_ms: 60_000, ..CheckpointConfig::default() });
    env.set_checkpoint_dir(&dir);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 3, delay_ms: 1 });
    env.restore_from(&earlier[0]);
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let resumed = CollectSink::new();
    env.from_sequence(0, 19_999)
        .uid("numbers")
        .map(move |i| {
            if !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                panic!("injected failure");
            }
            i
        })
        .uid("slow")
        .key_by(|i: &u64| i % 10)
        .process(Count::default())
        .uid("count")
        .add_sink(resumed.clone())
        .uid("sink");
    let result = env.execute("count").unwrap();
    assert_eq!(result.restarts, 1, "{:?}", result.warnings);
    let started_from = earlier[0].file_name().unwrap().to_string_lossy().into_owned();
    let restart = result.warnings.iter().find(|w| w.starts_with("restart 1 after")).unwrap();
    assert!(restart.ends_with(&format!("/{started_from}")), "restarted from the checkpoint it started from: {restart}");
    assert_counts_continue(&resumed.take(), 2_000);
    assert_eq!(checkpoint_dirs(&dir), earlier, "the other run's checkpoints stay");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_restart_without_any_checkpoint_starts_over_exactly_once() {
    let dir = temp_dir("no-checkpoint");
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let env = Env::new();
    env.set_parallelism(2);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 1, delay_ms: 1 });
    let flag = failed.clone();
    env.from_sequence(0, 9_999)
        .map(move |i| {
            if i == 7_000 && !flag.swap(true, std::sync::atomic::Ordering::SeqCst) {
                panic!("once");
            }
            i.to_string()
        })
        .add_sink(eddy::sink::ExactlyOnceFileSink::<String>::new_in(&dir));
    let result = env.execute("restart").unwrap();
    assert_eq!(result.restarts, 1);
    let mut lines: Vec<u64> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        assert!(!entry.file_name().to_string_lossy().starts_with('.'));
        lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(|l| l.parse::<u64>().unwrap()));
    }
    lines.sort();
    assert_eq!(lines, (0..10_000).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn state_of_operators_the_job_lacks_fails_the_restore_unless_allowed() {
    let savepoints = temp_dir("allow");
    let env = Env::new();
    env.set_parallelism(1);
    env.stop_with_savepoint_after(&savepoints, 50);
    counting_job(&env, 1_000_000, CollectSink::new());
    let savepoint = env.execute("count").unwrap().savepoint.expect("a savepoint");

    // The same pipeline without the `count` operator.
    let without_count = |allow: bool| {
        let env = Env::new();
        env.set_parallelism(1);
        env.restore_from(&savepoint).set_allow_non_restored_state(allow);
        let sink = CollectSink::new();
        env.from_sequence(0, 999_999).uid("numbers").map(|i| i).uid("slow").add_sink(sink.clone()).uid("sink");
        (env.execute("trimmed"), sink)
    };
    let (refused, _) = without_count(false);
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("state for operator uid 'count'") && message.contains("allow-non-restored-state"),
        "{message}"
    );
    let (allowed, sink) = without_count(true);
    allowed.unwrap();
    let resumed = sink.take();
    assert!(
        !resumed.is_empty() && resumed.len() < 1_000_000,
        "the source resumed from the savepoint: {}",
        resumed.len()
    );
    std::fs::remove_dir_all(&savepoints).unwrap();
}

/// Sleeps in its first snapshot, longer than the checkpoint timeout, and records which
/// checkpoints it hears were aborted or completed.
#[derive(Clone)]
struct SlowFirstSnapshot(std::sync::Arc<std::sync::Mutex<(u32, Vec<String>)>>);

impl RichFunction for SlowFirstSnapshot {
    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        let first = {
            let mut log = self.0.lock().unwrap();
            log.0 += 1;
            log.0 == 1
        };
        if first && ctx.checkpoint_id().is_some() {
            std::thread::sleep(std::time::Duration::from_millis(150));
        }
        Ok(())
    }
    fn notify_checkpoint_aborted(&mut self, id: CheckpointId) -> FunctionResult {
        self.0.lock().unwrap().1.push(format!("aborted {id}"));
        Ok(())
    }
    fn notify_checkpoint_complete(&mut self, id: CheckpointId) -> FunctionResult {
        self.0.lock().unwrap().1.push(format!("completed {id}"));
        Ok(())
    }
}

impl RichMapFunction<u64, u64> for SlowFirstSnapshot {
    fn map(&mut self, v: u64) -> FunctionResult<u64> {
        if v.is_multiple_of(50) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(v)
    }
}

#[test]
fn a_checkpoint_that_times_out_is_aborted_and_tasks_are_told() {
    let log = std::sync::Arc::new(std::sync::Mutex::new((0, Vec::new())));
    let env = Env::new();
    env.set_parallelism(1);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 20,
        timeout_ms: 60,
        tolerable_failures: 5,
        ..CheckpointConfig::default()
    });
    let sink = CollectSink::new();
    env.from_sequence(0, 19_999).rich_map(SlowFirstSnapshot(log.clone())).add_sink(sink.clone());
    let result = env.execute("timeouts").unwrap();
    let events = log.lock().unwrap().1.clone();
    assert_eq!(events.first().map(String::as_str), Some("aborted 1"), "{events:?}");
    assert!(events.iter().any(|e| e.starts_with("completed")), "{events:?}");
    assert!(result.checkpoints_completed >= 1);
    assert_eq!(sink.take().len(), 20_000);
}

/// Tasks write their own part of a checkpoint: one that expires while a task still
/// writes must not leave that task's files behind when its acknowledgement comes late.
#[test]
fn an_expired_checkpoint_leaves_no_files_of_late_acknowledgements() {
    let dir = temp_dir("late-acks");
    let log = std::sync::Arc::new(std::sync::Mutex::new((0, Vec::new())));
    let env = Env::new();
    env.set_parallelism(1);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 20,
        timeout_ms: 60,
        tolerable_failures: 5,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(&dir);
    let sink = CollectSink::new();
    env.from_sequence(0, 19_999).rich_map(SlowFirstSnapshot(log.clone())).add_sink(sink.clone());
    env.execute("late acknowledgements").unwrap();
    let events = log.lock().unwrap().1.clone();
    assert_eq!(events.first().map(String::as_str), Some("aborted 1"), "{events:?}");
    let leftovers: Vec<_> = std::fs::read_dir(common::job_dir(&dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("chk-") && !p.join("_metadata").exists())
        .collect();
    assert!(leftovers.is_empty(), "directories of checkpoints that never completed: {leftovers:?}");
    assert!(!checkpoint_dirs(&dir).is_empty(), "the final checkpoint is kept");
    assert_eq!(sink.take().len(), 20_000);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_savepoint_on_demand_leaves_the_job_running_and_restores_mid_stream() {
    let savepoints = temp_dir("on-demand");
    let env = Env::new();
    env.set_parallelism(2);
    env.trigger_savepoint_after(&savepoints, 30);
    let sink = CollectSink::new();
    counting_job(&env, 20_000, sink.clone());
    let result = env.execute("count").unwrap();
    assert_eq!(sink.take().len(), 20_000, "the job ran to its end");
    let savepoint = result.savepoint.expect("a savepoint was taken");
    let env = Env::new();
    env.set_parallelism(2);
    env.restore_from(&savepoint);
    let resumed = CollectSink::new();
    counting_job(&env, 20_000, resumed.clone());
    env.execute("count").unwrap();
    let resumed = resumed.take();
    assert!(!resumed.is_empty() && resumed.len() < 20_000, "{}", resumed.len());
    assert_counts_continue(&resumed, 2_000);
    std::fs::remove_dir_all(&savepoints).unwrap();
}

/// The `count` state of operator `uid` in the checkpoint at `location`, per key.
fn counts_in(location: &Path, uid: &str) -> std::collections::BTreeMap<u64, u64> {
    use eddy::checkpoint::storage::{CheckpointStorage, DirectoryStorage};
    let storage = DirectoryStorage::local(location.parent().unwrap()).unwrap();
    let checkpoint = storage.load(&location.to_string_lossy()).unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for op in checkpoint.operators.iter().filter(|o| o.uid == uid) {
        for state in op.keyed.iter().flat_map(|k| &k.states).filter(|s| s.name == "count") {
            for (_, bytes) in &state.key_groups {
                let entries: Vec<(Vec<u8>, u64)> = postcard::from_bytes(bytes).unwrap();
                for (key, count) in entries {
                    counts.insert(eddy::types::decode_whole_key::<u64>(&key).unwrap(), count);
                }
            }
        }
    }
    counts
}

/// A bounded keyed pipeline (three words, counted per word) beside the slow counting job:
/// the bounded one finishes at once, the other keeps checkpointing.
fn finished_beside_running(env: &Env, words_uid: &str, sink: CollectSink<(u64, u64)>) {
    env.from_collection(vec![1u64, 2, 1])
        .uid(words_uid)
        .key_by(|w: &u64| *w)
        .process(Count::default())
        .uid("finished-count")
        .add_sink(sink)
        .uid("words-sink");
}

/// A finished task's keyed state stands in for it in every later checkpoint, not only in
/// the first one written after it finished (its deferred snapshot used to be built once,
/// leaving later checkpoints without the state).
#[test]
fn a_finished_tasks_keyed_state_is_in_every_later_checkpoint() {
    let dir = temp_dir("finished-task");
    let env = Env::new();
    env.set_parallelism(1);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 30,
        retained: 20,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(&dir);
    finished_beside_running(&env, "words", CollectSink::new());
    counting_job(&env, 20_000, CollectSink::new());
    let result = env.execute("finished beside running").unwrap();
    let checkpoints = checkpoint_dirs(&dir);
    assert!(checkpoints.len() >= 4, "{result:?}");
    let expected: std::collections::BTreeMap<u64, u64> = [(1, 2), (2, 1)].into();
    // The words are counted within milliseconds, long before the second checkpoint.
    for checkpoint in &checkpoints[1..] {
        assert_eq!(counts_in(checkpoint, "finished-count"), expected, "{}", checkpoint.display());
    }
    // Restored from the second and the third checkpoint, the count goes on from there.
    for checkpoint in &checkpoints[1..3] {
        let env = Env::new();
        env.set_parallelism(1);
        env.restore_from(checkpoint);
        env.set_allow_non_restored_state(true);
        let sink = CollectSink::new();
        // Under a new uid the words source starts from the beginning again.
        finished_beside_running(&env, "words-again", sink.clone());
        env.execute("finished, restored").unwrap();
        let mut emitted = sink.take();
        emitted.sort();
        assert_eq!(emitted, vec![(1, 3), (1, 4), (2, 2)], "restored from {}", checkpoint.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_directory_that_cannot_be_listed_stops_the_job_before_it_reuses_an_id() {
    use std::os::unix::ffi::OsStrExt;
    let dir = temp_dir("unlistable");
    let earlier = earlier_run(&dir, 1, 20, 1);
    assert_eq!(earlier.len(), 1);
    let metadata = std::fs::read(earlier[0].join("_metadata")).unwrap();
    // A name the store cannot list (not UTF-8): the next run cannot tell which ids exist.
    std::fs::write(common::job_dir(&dir).join(std::ffi::OsStr::from_bytes(b"stray-\xff")), b"x").unwrap();

    // Restored from it, the job goes on in the same job directory.
    let env = Env::new();
    env.set_checkpoint_config(CheckpointConfig { interval_ms: 20, ..CheckpointConfig::default() });
    env.set_checkpoint_dir(&dir);
    env.restore_from(&earlier[0]);
    counting_job(&env, 20_000, CollectSink::new());
    let error = format!("{:?}", env.execute("count").unwrap_err());
    assert!(error.contains("cannot list") && error.contains("non-unicode"), "{error}");
    assert_eq!(checkpoint_dirs(&dir), earlier);
    assert_eq!(std::fs::read(earlier[0].join("_metadata")).unwrap(), metadata, "the earlier checkpoint is untouched");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One stuck task must not stall the coordinator: its mailbox fills with checkpoint
/// notifications, and a coordinator that waited for room there would stop counting
/// timeouts (and handling failures) until the task moved again.
#[test]
fn a_stuck_task_does_not_stall_the_coordinators_timeouts() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    const STUCK: Duration = Duration::from_secs(6);
    let env = Env::new();
    env.set_parallelism(1);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 5,
        timeout_ms: 20,
        // More timeouts than a mailbox holds notifications (64).
        tolerable_failures: 80,
        ..CheckpointConfig::default()
    });
    // Too many failed checkpoints fail the job over; without restarts it ends there.
    env.set_restart_strategy(RestartStrategy::None);
    let stuck_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    env.from_sequence(0, 10)
        .uid("stuck-numbers")
        .key_by(|i: &u64| *i)
        .map(move |i| {
            if !stuck_once.swap(true, Ordering::SeqCst) {
                std::thread::sleep(STUCK);
            }
            i
        })
        .uid("stuck")
        .add_sink(CollectSink::new())
        .uid("stuck-sink");
    // Beside it, a pipeline that runs until the job is cancelled: it stops when the
    // coordinator gives up on the checkpoints.
    let started = Instant::now();
    let last_ms = Arc::new(AtomicU64::new(0));
    let seen = last_ms.clone();
    env.from_sequence(0, 1_000_000)
        .uid("ticks")
        .map(move |i| {
            std::thread::sleep(Duration::from_millis(1));
            seen.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
            i
        })
        .uid("tick")
        .add_sink(CollectSink::new())
        .uid("tick-sink");
    let error = env.execute("stuck").unwrap_err().to_string();
    assert!(error.contains("timed out"), "{error}");
    let stopped_ms = last_ms.load(Ordering::SeqCst);
    assert!(
        stopped_ms < STUCK.as_millis() as u64 - 1_500,
        "the job was failed {stopped_ms} ms in, while the stuck task slept {} ms",
        STUCK.as_millis()
    );
}

/// The coordinator reads and waits for time through the executor's clock: on a clock
/// driven by hand, an hour's restart delay passes at once and the job's duration is the
/// clock's.
#[test]
fn restart_delays_and_durations_follow_the_executors_clock() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let env = Env::new();
        env.set_parallelism(1);
        env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 1, delay_ms: 3_600_000 });
        let failed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sink = CollectSink::new();
        env.from_sequence(0, 99)
            .map(move |i| {
                if i == 50 && !failed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    panic!("injected failure");
                }
                i
            })
            .add_sink(sink.clone());
        let graph = env.stream_graph("clocked").unwrap();
        let clock = std::sync::Arc::new(eddy::types::ManualClock::new(0));
        let result = eddy_jobmaster::LocalExecutor::with_clock(clock).execute(graph);
        let _ = done_tx.send((result, sink.take().len()));
    });
    let (result, records) =
        done_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the hour's delay passed on the job's clock");
    let result = result.unwrap();
    assert_eq!(result.restarts, 1);
    assert!(result.duration >= std::time::Duration::from_secs(3_600), "{:?}", result.duration);
    assert!(records >= 100, "the second attempt ran to the end");
}

/// What a state value must be, here.
trait Stored: serde::Serialize + serde::de::DeserializeOwned + Clone + Send + Sync + Default + 'static {}
impl<T: serde::Serialize + serde::de::DeserializeOwned + Clone + Send + Sync + Default + 'static> Stored for T {}

/// A keyed running total in a `ValueState<T>` named "total".
#[derive(Clone, Default)]
struct Total<T: Stored> {
    total: Option<ValueState<T>>,
}

impl<T: Stored> RichFunction for Total<T> {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.total = Some(ctx.get_state(&ValueStateDescriptor::new("total"))?);
        Ok(())
    }
}

impl<T: Stored> KeyedProcessFunction<u64, u64, u64> for Total<T> {
    fn process_element(
        &mut self,
        v: u64,
        _ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, u64>,
    ) -> FunctionResult {
        let total = self.total.as_ref().ok_or("state not declared")?;
        let now = total.value()?.unwrap_or_default();
        total.update(now)?;
        out.collect(v);
        Ok(())
    }
}

/// Runs `first` with a checkpoint retained, then restores from it a job that `second`
/// builds, and returns why that job failed: it must fail within seconds, not restart in a
/// loop. `first` and `second` also add their operators after `numbers`, keyed by `v % 10`.
fn restore_fails_at_once(
    dir: &Path,
    first: impl Fn(&Env, KeyedStream<u64, u64>),
    second: impl FnOnce(&Env, KeyedStream<u64, u64>) + Send + 'static,
) -> String {
    let env = Env::new();
    env.set_checkpoint_config(CheckpointConfig { interval_ms: 20, retain_on_cancel: true, ..Default::default() });
    env.set_checkpoint_dir(dir);
    first(&env, env.from_sequence(1, 2_000).uid("numbers").key_by(|v: &u64| v % 10));
    env.execute("restored").unwrap();
    let checkpoint = checkpoint_dirs(dir).pop().expect("a retained checkpoint");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let env = Env::new();
        env.enable_checkpointing(20);
        env.restore_from(&checkpoint);
        second(&env, env.from_sequence(1, 2_000).uid("numbers").key_by(|v: &u64| v % 10));
        let _ = done_tx.send(env.execute("restored").map(|r| r.restarts));
    });
    let outcome = done_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the job ends, not a restart loop");
    outcome.unwrap_err().to_string()
}

/// Issue 18: a state whose type changed between a checkpoint and a restore failed when
/// first read and then restarted forever (every restart reads the same bytes). Each
/// snapshot records every state's declared type: the restore fails at once when the
/// state is declared again, naming the state and both types, on either backend, and at
/// another parallelism (the types cross a rescale).
fn restored_state_of_another_type_fails_at_once(
    name: &str,
    backend: fn(&std::path::Path) -> Option<Backend>,
    restore_parallelism: u32,
) {
    let dir = temp_dir(name);
    let db = dir.clone();
    let message = restore_fails_at_once(
        &dir,
        |env, numbers| {
            if let Some(backend) = backend(&dir) {
                backend.apply(env);
            }
            numbers.process(Total::<u64>::default()).uid("total").add_sink(CollectSink::new());
        },
        move |env, numbers| {
            if let Some(backend) = backend(&db) {
                backend.apply(env);
            }
            env.set_parallelism(restore_parallelism);
            numbers.process(Total::<(String, u64)>::default()).uid("total").add_sink(CollectSink::new());
        },
    );
    assert!(
        message.contains("state 'total' was checkpointed as ValueState<u64>")
            && message.contains("declared as ValueState<(String, u64)>")
            && message.contains("give the operator a new uid in place of 'total'")
            && message.contains("-n/--allow-non-restored-state"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(dir.with_extension("rocksdb"));
}

/// A state backend for a test, set on an `Env`.
enum Backend {
    #[cfg(feature = "rocksdb")]
    RocksDb(std::path::PathBuf),
}

impl Backend {
    #[cfg_attr(not(feature = "rocksdb"), allow(unused_variables))]
    fn apply(self, env: &Env) {
        match self {
            #[cfg(feature = "rocksdb")]
            Backend::RocksDb(dir) => {
                env.set_state_backend(eddy::state::RocksDbStateBackend::new(dir).with_incremental_checkpoints(true));
            }
        }
    }
}

#[test]
fn restored_state_of_another_type_fails_the_job_at_once_naming_the_state_and_both_types() {
    restored_state_of_another_type_fails_at_once("state-type", |_| None, 1);
    restored_state_of_another_type_fails_at_once("state-type-rescaled", |_| None, 2);
}

#[cfg(feature = "rocksdb")]
#[test]
fn on_rocksdb_restored_state_of_another_type_fails_the_job_at_once_naming_both_types() {
    // The database beside the checkpoint directory, not in it; incremental (native) snapshots.
    let backend = |dir: &std::path::Path| Some(Backend::RocksDb(dir.with_extension("rocksdb")));
    restored_state_of_another_type_fails_at_once("state-type-rocksdb", backend, 1);
    restored_state_of_another_type_fails_at_once("state-type-rocksdb-rescaled", backend, 2);
}

/// Keeps a running total, its state declared with a time to live when `ttl_ms` is set.
#[derive(Clone, Default)]
struct TotalWithTtl {
    ttl_ms: Option<u64>,
    total: Option<ValueState<u64>>,
}

impl RichFunction for TotalWithTtl {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let mut descriptor = ValueStateDescriptor::new("total");
        if let Some(ttl_ms) = self.ttl_ms {
            descriptor = descriptor.with_ttl(eddy::state::StateTtlConfig::new(ttl_ms));
        }
        self.total = Some(ctx.get_state(&descriptor)?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, u64, u64> for TotalWithTtl {
    fn process_element(
        &mut self,
        v: u64,
        _ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, u64>,
    ) -> FunctionResult {
        let total = self.total.declared("total")?;
        total.update(total.value()?.unwrap_or_default() + v)?;
        out.collect(v);
        Ok(())
    }
}

/// A restored state declared with a time to live it did not have fails at once, as every
/// restart would declare it the same way (it used to restart for ever).
#[test]
fn a_restored_state_declared_with_another_time_to_live_fails_the_job_at_once() {
    let dir = temp_dir("state-ttl");
    let message = restore_fails_at_once(
        &dir,
        |_, numbers| {
            numbers.process(TotalWithTtl::default()).uid("total").add_sink(CollectSink::new());
        },
        |_, numbers| {
            let with_ttl = TotalWithTtl { ttl_ms: Some(60_000), total: None };
            numbers.process(with_ttl).uid("total").add_sink(CollectSink::new());
        },
    );
    assert!(
        message.contains("state 'total'") && message.contains("restored state without a time to live"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A source of `0..records` that stays running until `consumed` reached `records`: the
/// source of a job under backpressure, whose checkpoints start at it (once every source
/// finished, checkpoints start behind it instead, and no barrier waits behind a backlog).
#[derive(Clone)]
struct HeldOpen {
    next: u64,
    records: u64,
    consumed: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl RichFunction for HeldOpen {}

impl SourceFunction<u64> for HeldOpen {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, u64>) -> FunctionResult<SourceStep> {
        let end = self.records.min(self.next + max_records as u64);
        for i in self.next..end {
            out.collect(i);
        }
        self.next = end;
        if self.next < self.records {
            return Ok(SourceStep::More);
        }
        if self.consumed.load(std::sync::atomic::Ordering::SeqCst) >= self.records {
            return Ok(SourceStep::Finished);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        Ok(SourceStep::Idle)
    }
}

/// A job behind a slow consumer (2 ms per record, 3,000 records over two subtasks),
/// checkpointing every 100 ms: its completed checkpoints, and what it counted.
fn behind_a_slow_consumer(configure: impl Fn(&Env)) -> (eddy::JobResult, Vec<(u64, u64)>) {
    behind_a_consumer_of(3_000, std::time::Duration::from_millis(2), configure)
}

/// [`behind_a_slow_consumer`] with `records` records at `cost` each.
fn behind_a_consumer_of(
    records: u64,
    cost: std::time::Duration,
    configure: impl Fn(&Env),
) -> (eddy::JobResult, Vec<(u64, u64)>) {
    let env = Env::new();
    env.set_parallelism(2);
    env.set_checkpoint_config(CheckpointConfig { interval_ms: 100, ..CheckpointConfig::default() });
    configure(&env);
    let sink = CollectSink::new();
    let consumed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let source = HeldOpen { next: 0, records, consumed: consumed.clone() };
    env.add_source(source)
        .set_parallelism(1)
        .key_by(|i: &u64| i % 10)
        .process(Count::default())
        .map(move |counted| {
            std::thread::sleep(cost);
            consumed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            counted
        })
        .add_sink(sink.clone());
    let result = env.execute("slow consumer").unwrap();
    (result, sink.take())
}

#[test]
fn buffer_debloating_keeps_aligned_checkpoints_short_under_backpressure() {
    // Full batches: every record is queued at once, and the first barrier waits behind
    // all of them (about 3 s).
    let (bloated, counted) = behind_a_slow_consumer(|_| {});
    let longest = |result: &eddy::JobResult| result.checkpoint_history.iter().map(|c| c.duration_ms).max();
    assert!(
        bloated.checkpoint_history.len() < 5 || longest(&bloated) > Some(1_500),
        "without debloating the barriers were expected to wait: {:?}",
        bloated.checkpoint_history.iter().map(|c| c.duration_ms).collect::<Vec<_>>()
    );
    assert_counts_continue(&counted, 300);
    // Debloated to 100 ms: checkpoints keep completing, each well under the backlog.
    let (debloated, counted) = behind_a_slow_consumer(|env| {
        env.enable_buffer_debloating(std::time::Duration::from_millis(100));
    });
    let mut durations: Vec<u64> = debloated.checkpoint_history.iter().map(|c| c.duration_ms).collect();
    durations.sort_unstable();
    // Loose bounds for a loaded machine; without debloating the first alone takes ~3 s.
    assert!(durations.len() >= 4 && durations[durations.len() / 2] <= 1_000, "checkpoint durations: {durations:?}");
    assert_counts_continue(&counted, 300);
    assert_eq!(counted.len(), 3_000, "every record counted once");
}

/// Unaligned checkpoints behind a slow consumer (60,000 records at 50 µs, behind queues of
/// full batches that hold about half of them: an aligned barrier waits ~0.8 s): the
/// barriers overtake the queued records, which go into the checkpoints, so checkpoints
/// take about as long as writing the state; with an aligned-checkpoint timeout they turn
/// unaligned after it.
#[test]
fn unaligned_checkpoints_stay_short_under_backpressure_and_store_the_records_they_overtook() {
    for timeout in [None, Some(std::time::Duration::from_millis(50))] {
        let (result, counted) = behind_a_consumer_of(60_000, std::time::Duration::from_micros(50), |env| {
            env.enable_unaligned_checkpoints();
            if let Some(timeout) = timeout {
                env.set_aligned_checkpoint_timeout(timeout);
            }
        });
        let mut durations: Vec<u64> = result.checkpoint_history.iter().map(|c| c.duration_ms).collect();
        durations.sort_unstable();
        // Loose bounds for a loaded machine; aligned, the first alone takes ~3 s.
        let median = durations.get(durations.len() / 2).copied();
        assert!(durations.len() >= 6 && median <= Some(500), "{timeout:?}: checkpoint durations: {durations:?}");
        let in_flight = result.accumulators.get(eddy::IN_FLIGHT_BYTES).copied().unwrap_or(0);
        assert!(in_flight > 0, "{timeout:?}: the checkpoints stored the records their barriers overtook");
        assert_counts_continue(&counted, 6_000);
        assert_eq!(counted.len(), 60_000, "every record counted once");
    }
}

/// Whether a savepoint under `dir` completed (its `_metadata` is written).
fn holds_completed_savepoint(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|entry| {
        let path = entry.path();
        path.join("_metadata").exists() || (path.is_dir() && holds_completed_savepoint(&path))
    })
}

/// Flink's FLIP-193: a savepoint that does not stop the job commits nothing. A failover
/// restores the latest checkpoint (here: none, the job starts over), so a sink that had
/// committed the savepoint's transaction would write its records twice.
#[test]
fn a_failure_after_a_savepoint_writes_no_record_twice() {
    let savepoints = temp_dir("savepoint-then-failure");
    let out = temp_dir("savepoint-then-failure-out");
    let env = Env::new();
    env.set_parallelism(1);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 1, delay_ms: 1 });
    env.trigger_savepoint_after(&savepoints, 30);
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watched = savepoints.clone();
    env.from_sequence(0, 39_999)
        .map(move |i| {
            if i % 100 == 0 && !failed.load(std::sync::atomic::Ordering::SeqCst) {
                if holds_completed_savepoint(&watched) {
                    // Time for the sink, a task of its own, to hear of the savepoint.
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    failed.store(true, std::sync::atomic::Ordering::SeqCst);
                    panic!("injected failure after the savepoint");
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            i.to_string()
        })
        .add_sink(eddy::sink::ExactlyOnceFileSink::<String>::new_in(&out))
        .disable_chaining();
    let result = env.execute("savepoint then failure").unwrap();
    assert!(result.savepoint.is_some(), "the savepoint was taken");
    assert_eq!(result.restarts, 1, "{:?}", result.warnings);
    let mut lines: Vec<u64> = Vec::new();
    for entry in std::fs::read_dir(&out).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(|l| l.parse::<u64>().unwrap()));
    }
    lines.sort();
    assert_eq!(lines.len(), 40_000, "no record lost or written twice");
    assert_eq!(lines, (0..40_000).collect::<Vec<_>>());
    std::fs::remove_dir_all(&savepoints).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}

/// A checkpoint that holds records in flight from an operator (here the source, by its
/// uid) restores into a job without that operator only as an error: the records have
/// nowhere to go. Every restart would restore the same records, so the job fails at once,
/// naming the uid, rather than restart forever (it did).
#[test]
fn in_flight_records_from_an_operator_the_job_lacks_fail_the_restore_at_once() {
    let dir = temp_dir("in-flight-orphans");
    let env = Env::new();
    env.set_parallelism(2);
    let config = CheckpointConfig { interval_ms: 30, retained: 1_000, retain_on_cancel: true, ..Default::default() };
    env.set_checkpoint_config(config);
    env.enable_unaligned_checkpoints();
    env.set_checkpoint_dir(&dir);
    // A slow consumer behind the source: unaligned barriers overtake the records queued
    // in front of it, which the checkpoints store.
    env.from_sequence(0, 29_999)
        .uid("numbers")
        .set_parallelism(1)
        .key_by(|v: &u64| v % 10)
        .process(Count::default())
        .uid("count")
        .map(|counted| {
            std::thread::sleep(std::time::Duration::from_micros(50));
            counted
        })
        .add_sink(CollectSink::new());
    env.execute("first").unwrap();
    let holds_in_flight = |checkpoint: &Path| {
        let loaded = eddy::checkpoint::storage::load_checkpoint_dir(checkpoint).unwrap();
        let lists = loaded.operators.iter().flat_map(|o| &o.operator.lists);
        // Records, not only watermarks (which restore anywhere): more than a few bytes.
        lists.into_iter().any(|l| l.name == "eddy.in-flight" && l.elements.iter().any(|e| e.len() > 100))
    };
    let checkpoint =
        checkpoint_dirs(&dir).into_iter().find(|c| holds_in_flight(c)).expect("a checkpoint with records in flight");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let env = Env::new();
        env.enable_checkpointing(20);
        env.restore_from(&checkpoint);
        env.set_allow_non_restored_state(true);
        env.from_sequence(0, 99)
            .uid("other numbers")
            .key_by(|v: &u64| v % 10)
            .process(Count::default())
            .uid("count")
            .add_sink(CollectSink::new());
        let _ = done_tx.send(env.execute("without the source").map(|r| r.restarts));
    });
    let outcome = done_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the job ends, not a restart loop");
    let message = outcome.unwrap_err().to_string();
    assert!(
        message.contains("in-flight records from operator uid 'numbers'")
            && message.contains("which this job no longer has"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
