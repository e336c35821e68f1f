//! Fault injection: W1 (requests per path) with an operator that panics at seeded points
//! while processing, while snapshotting and while restoring; checkpoints every 50–200 ms;
//! output through the exactly-once file sink. The committed output must equal the
//! failure-free run record for record, and the final state must too. In AT_LEAST_ONCE
//! mode nothing may be lost. With the `rocksdb` feature the same runs go through RocksDB
//! with full and with incremental checkpoints.

use eddy::checkpoint::restart::RestartStrategy;
use eddy::checkpoint::storage::{CheckpointStorage, DirectoryStorage};
use eddy::checkpoint::{CheckpointConfig, CheckpointingMode};
use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[allow(dead_code)]
#[path = "../examples/order_state_machine.rs"]
mod order_state_machine;

const EVENTS: u64 = 60_000;
const KEYS: u64 = 97;

/// Where failures happen, shared by every attempt (counters only grow).
struct ChaosPlan {
    processed: AtomicU64,
    snapshots: AtomicU64,
    restores: AtomicU64,
    process_failures_at: BTreeSet<u64>,
    snapshot_failures_at: BTreeSet<u64>,
    restore_failures_at: BTreeSet<u64>,
    injected: AtomicU64,
}

impl ChaosPlan {
    fn seeded(seed: u64, process_failures: usize) -> Arc<Self> {
        let mut x = seed;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Spaced so that each failure gets its own restart (a point reached while the
        // previous failure is still cancelling the job would fold into that restart), and
        // below EVENTS so that every run reaches all of them.
        let process_failures_at: BTreeSet<u64> =
            (0..process_failures as u64).map(|k| 1_000 + k * 2_500 + next() % 1_000).collect();
        assert!(process_failures_at.iter().all(|p| *p < EVENTS));
        Arc::new(Self {
            processed: AtomicU64::new(0),
            snapshots: AtomicU64::new(0),
            restores: AtomicU64::new(0),
            process_failures_at,
            snapshot_failures_at: [3, 8].into_iter().collect(),
            restore_failures_at: [2, 5].into_iter().collect(),
            injected: AtomicU64::new(0),
        })
    }

    fn hit(&self, counter: &AtomicU64, points: &BTreeSet<u64>, what: &str) {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        if points.contains(&n) {
            self.injected.fetch_add(1, Ordering::SeqCst);
            panic!("injected failure in {what} #{n}");
        }
    }
}

/// A pass-through map that fails as the plan says.
#[derive(Clone)]
struct Chaos(Arc<ChaosPlan>);

impl RichFunction for Chaos {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        if ctx.operator_state().is_restored() {
            self.0.hit(&self.0.restores, &self.0.restore_failures_at, "restore");
        }
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        // Something to restore, so that restores of this operator happen.
        ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new("alive"))?.update(vec![1]);
        if ctx.checkpoint_id().is_some() {
            self.0.hit(&self.0.snapshots, &self.0.snapshot_failures_at, "snapshot");
        }
        Ok(())
    }
}

impl RichMapFunction<u64, u64> for Chaos {
    fn map(&mut self, i: u64) -> FunctionResult<u64> {
        self.0.hit(&self.0.processed, &self.0.process_failures_at, "processing");
        // Slow enough that many checkpoints happen during the run.
        if i.is_multiple_of(100) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(i)
    }
}

#[derive(Clone, Default)]
struct CountPerPath {
    count: Option<ValueState<u64>>,
}

impl RichFunction for CountPerPath {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.count = Some(ctx.get_state(&ValueStateDescriptor::new("count"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<String, String, String> for CountPerPath {
    fn process_element(
        &mut self,
        path: String,
        _: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, String>,
    ) -> FunctionResult {
        let count = self.count.as_ref().ok_or("no state")?;
        let next = count.value()?.unwrap_or(0) + 1;
        count.update(next)?;
        out.collect(format!("{path} {next}"));
        Ok(())
    }
}

fn path_of(i: u64) -> String {
    format!("/api/{}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % KEYS)
}

fn reference() -> (Vec<String>, BTreeMap<String, u64>) {
    let mut counts = BTreeMap::new();
    let mut lines = Vec::new();
    for i in 0..EVENTS {
        let c = counts.entry(path_of(i)).or_insert(0);
        *c += 1;
        lines.push(format!("{} {c}", path_of(i)));
    }
    lines.sort();
    (lines, counts)
}

/// This process's directory `name` under the system's temporary directory.
fn scratch_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("eddy-fault-{name}-{}", std::process::id()))
}

/// [`scratch_path`], emptied of what an earlier test of the same name left.
fn temp_dir(name: &str) -> PathBuf {
    let dir = scratch_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn committed_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("part-") {
            lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from));
        }
    }
    lines.sort();
    lines
}

/// Compares sorted line lists, printing only what differs.
fn assert_same_lines(got: Vec<String>, expected: Vec<String>, what: &str) {
    if got == expected {
        return;
    }
    let (got_set, expected_set): (BTreeSet<_>, BTreeSet<_>) = (got.iter().collect(), expected.iter().collect());
    let missing: Vec<_> = expected_set.difference(&got_set).take(10).collect();
    let extra: Vec<_> = got_set.difference(&expected_set).take(10).collect();
    panic!("{what}: {} lines, expected {}; missing {missing:?}; unexpected {extra:?}", got.len(), expected.len());
}

/// The keyed state backend of a run.
#[derive(Clone, Copy)]
enum Backend {
    Heap,
    /// The heap with incremental checkpoints (a chain of a base and deltas).
    HeapIncremental,
    #[cfg(feature = "rocksdb")]
    RocksDb {
        incremental: bool,
    },
}

impl Backend {
    fn apply(self, env: &Env, name: &str) {
        // Only RocksDB's directory is named after the run.
        #[cfg(not(feature = "rocksdb"))]
        let _ = name;
        match self {
            Backend::Heap => {}
            Backend::HeapIncremental => {
                env.set_state_backend(eddy::state::HeapStateBackend::new().with_incremental_checkpoints(true));
            }
            #[cfg(feature = "rocksdb")]
            Backend::RocksDb { incremental } => {
                // A cache far smaller than the 97 keys' state: reads go through RocksDB.
                let backend = RocksDbStateBackend::new(temp_dir(&format!("{name}-rocksdb"))).with_cache_entries(16);
                env.set_state_backend(backend.with_incremental_checkpoints(incremental));
            }
        }
    }
}

fn run_on(
    backend: Backend,
    plan: &Arc<ChaosPlan>,
    mode: CheckpointingMode,
    interval_ms: u64,
    name: &str,
) -> (JobResult, PathBuf, PathBuf) {
    run_beside(backend, plan, mode, interval_ms, name, |_| {})
}

/// [`run_on`] with more pipelines in the same job, added by `beside`.
fn run_beside(
    backend: Backend,
    plan: &Arc<ChaosPlan>,
    mode: CheckpointingMode,
    interval_ms: u64,
    name: &str,
    beside: impl FnOnce(&Env),
) -> (JobResult, PathBuf, PathBuf) {
    let output = temp_dir(&format!("{name}-out"));
    let checkpoints = temp_dir(&format!("{name}-chk"));
    let env = Env::new();
    env.set_parallelism(2);
    backend.apply(&env, name);
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms,
        mode,
        retained: 2,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(&checkpoints);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 100, delay_ms: 5 });
    env.from_sequence(0, EVENTS - 1)
        .rich_map(Chaos(plan.clone()))
        .uid("chaos")
        .map(path_of)
        .key_by(|p: &String| p.clone())
        .process(CountPerPath::default())
        .uid("count")
        .add_sink(ExactlyOnceFileSink::<String>::new_in(&output))
        .uid("sink");
    beside(&env);
    let result = env.execute("w1 with failures").expect("the job survives its failures");
    // RocksDB's working directory is the job's own (the checkpoints hold its state).
    let _ = std::fs::remove_dir_all(scratch_path(&format!("{name}-rocksdb")));
    (result, output, checkpoints)
}

/// The `count` state of the newest checkpoint in `dir`, per path.
fn final_counts(dir: &Path) -> BTreeMap<String, u64> {
    final_counts_of(dir, "count")
}

/// The `count` state of operator `uid` in the newest checkpoint in the checkpoint
/// directory `dir` (in the one job directory there), per path.
fn final_counts_of(dir: &Path, uid: &str) -> BTreeMap<String, u64> {
    let jobs = DirectoryStorage::local(dir).unwrap().subdirectories().unwrap();
    assert_eq!(jobs.len(), 1, "one job directory: {jobs:?}");
    let storage = DirectoryStorage::local(&jobs[0]).unwrap();
    let latest = storage.load(&storage.completed().unwrap()[0]).unwrap();
    let mut counts = BTreeMap::new();
    for op in latest.operators.iter().filter(|o| o.uid == uid) {
        let keyed = canonical(op.keyed.clone().unwrap());
        for state in keyed.states.iter().filter(|s| s.name == "count") {
            for (_, bytes) in &state.key_groups {
                let entries: Vec<(Vec<u8>, u64)> = postcard::from_bytes(bytes).unwrap();
                for (key, count) in entries {
                    counts.insert(eddy::types::decode_whole_key::<String>(&key).unwrap(), count);
                }
            }
        }
    }
    counts
}

/// Keyed state in the canonical form: native (RocksDB) files are read by restoring them
/// into a RocksDB backend and taking a canonical snapshot of it.
fn canonical(keyed: eddy::state::KeyedStateSnapshot) -> eddy::state::KeyedStateSnapshot {
    if keyed.native.is_empty() {
        return keyed;
    }
    if keyed.native.iter().all(|n| n.backend == "heap") {
        // The heap's chains of segments: read back by a heap backend restored from them.
        let instance = eddy::state::BackendInstance {
            name: "verify",
            subtask: 0,
            range: keyed.key_group_range.unwrap(),
            max_parallelism: eddy::types::MaxParallelism::default(),
            seed: eddy::types::RunSeed::draw(),
            ttl_clock: None,
        };
        let mut restored = eddy::state::HeapStateBackend::new().create(&instance, Some(keyed)).unwrap();
        return restored.snapshot().unwrap();
    }
    #[cfg(feature = "rocksdb")]
    {
        let range = keyed.key_group_range.unwrap();
        let max = eddy::types::MaxParallelism::default();
        let seed = eddy::types::RunSeed::draw();
        // One directory per call: tests on RocksDB read their checkpoints back at once.
        let dir = temp_dir(&format!("canonical-{}", seed.hex()));
        let backend = RocksDbStateBackend::new(dir.clone());
        let instance = eddy::state::BackendInstance {
            name: "verify",
            subtask: 0,
            range,
            max_parallelism: max,
            seed,
            ttl_clock: None,
        };
        let snapshot = backend.create(&instance, Some(keyed)).unwrap().snapshot().unwrap();
        let _ = std::fs::remove_dir_all(dir);
        snapshot
    }
    #[cfg(not(feature = "rocksdb"))]
    panic!("native snapshot without the rocksdb feature")
}

#[test]
fn exactly_once_output_and_state_survive_injected_failures() {
    exactly_once_survives(Backend::Heap, 0xE0D1, "eo");
}

#[test]
fn exactly_once_on_the_heap_with_incremental_checkpoints_survives_injected_failures() {
    exactly_once_survives(Backend::HeapIncremental, 0x4EA9, "eo-heap-incremental");
}

#[cfg(feature = "rocksdb")]
#[test]
fn exactly_once_on_rocksdb_with_full_checkpoints_survives_injected_failures() {
    exactly_once_survives(Backend::RocksDb { incremental: false }, 0xF011, "eo-rocks-full");
}

#[cfg(feature = "rocksdb")]
#[test]
fn exactly_once_on_rocksdb_with_incremental_checkpoints_survives_injected_failures() {
    exactly_once_survives(Backend::RocksDb { incremental: true }, 0x1C4E, "eo-rocks-incremental");
}

#[cfg(feature = "rocksdb")]
#[test]
fn at_least_once_on_rocksdb_with_incremental_checkpoints_loses_nothing() {
    at_least_once_loses_nothing(Backend::RocksDb { incremental: true }, 0xA1C4, "alo-rocks");
}

fn exactly_once_survives(backend: Backend, seed: u64, name: &str) {
    let (expected_lines, expected_counts) = reference();
    let plan = ChaosPlan::seeded(seed, 22);
    let (result, output, checkpoints) = run_on(backend, &plan, CheckpointingMode::ExactlyOnce, 50, name);
    let injected = plan.injected.load(Ordering::SeqCst);
    assert!(injected >= 20, "only {injected} failures were injected");
    // Two subtasks can fail in the same attempt: one restart covers both.
    assert!(
        result.restarts >= 20 && u64::from(result.restarts) <= injected,
        "{} restarts: {:?}",
        result.restarts,
        result.warnings
    );
    assert_same_lines(committed_lines(&output), expected_lines, "W1 output");
    assert_eq!(final_counts(&checkpoints), expected_counts, "final state equals the failure-free run's");
    let hidden: Vec<_> = std::fs::read_dir(&output)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "no in-progress or pending files remain");
    if matches!(backend, Backend::HeapIncremental) {
        let segments = files_named(&checkpoints, ".delta");
        assert!(segments > 0, "the heap's checkpoints wrote deltas");
    }
    std::fs::remove_dir_all(output).unwrap();
    std::fs::remove_dir_all(checkpoints).unwrap();
}

/// How many files under `dir` have names ending in `suffix`.
fn files_named(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| match e.file_type().unwrap().is_dir() {
            true => files_named(&e.path(), suffix),
            false => usize::from(e.file_name().to_string_lossy().ends_with(suffix)),
        })
        .sum()
}

/// A keyed task that finishes at once (three words, counted per word) beside W1 under
/// failures: every restart restores checkpoints taken after it finished, which must carry
/// its keyed state (they once lost it), so that its final state is still the full count.
fn finished_task_keeps_its_state(backend: Backend, seed: u64, name: &str) {
    let (expected_lines, expected_counts) = reference();
    let plan = ChaosPlan::seeded(seed, 12);
    let words_out = temp_dir(&format!("{name}-words-out"));
    let (result, output, checkpoints) =
        run_beside(backend, &plan, CheckpointingMode::ExactlyOnce, 50, name, |env: &Env| {
            env.from_collection(vec!["a".to_string(), "b".to_string(), "a".to_string()])
                .uid("words")
                .key_by(|w: &String| w.clone())
                .process(CountPerPath::default())
                .uid("finished-count")
                .add_sink(ExactlyOnceFileSink::<String>::new_in(&words_out))
                .uid("words-sink");
        });
    assert!(result.restarts >= 10, "{} restarts: {:?}", result.restarts, result.warnings);
    assert_same_lines(committed_lines(&output), expected_lines, "W1 output");
    assert_eq!(final_counts(&checkpoints), expected_counts, "W1's final state");
    assert_same_lines(committed_lines(&words_out), vec!["a 1".into(), "a 2".into(), "b 1".into()], "words output");
    let words: BTreeMap<String, u64> = [("a".to_string(), 2), ("b".to_string(), 1)].into();
    assert_eq!(final_counts_of(&checkpoints, "finished-count"), words, "the finished task's final state");
    for dir in [output, checkpoints, words_out] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn a_finished_keyed_task_keeps_its_state_through_injected_failures() {
    finished_task_keeps_its_state(Backend::Heap, 0xF1E1, "finished");
    finished_task_keeps_its_state(Backend::HeapIncremental, 0xF1E4, "finished-heap-incremental");
}

#[cfg(feature = "rocksdb")]
#[test]
fn a_finished_keyed_task_on_rocksdb_keeps_its_state_through_injected_failures() {
    finished_task_keeps_its_state(Backend::RocksDb { incremental: false }, 0xF1E2, "finished-rocks");
    finished_task_keeps_its_state(Backend::RocksDb { incremental: true }, 0xF1E3, "finished-rocks-incremental");
}

#[test]
fn at_least_once_loses_nothing_under_injected_failures() {
    at_least_once_loses_nothing(Backend::Heap, 0xA715, "alo");
}

fn at_least_once_loses_nothing(backend: Backend, seed: u64, name: &str) {
    let (expected_lines, _) = reference();
    let plan = ChaosPlan::seeded(seed, 22);
    let (_, output, checkpoints) = run_on(backend, &plan, CheckpointingMode::AtLeastOnce, 120, name);
    assert!(plan.injected.load(Ordering::SeqCst) >= 20);
    let got: BTreeSet<String> = committed_lines(&output).into_iter().collect();
    for line in &expected_lines {
        assert!(got.contains(line), "lost: {line}");
    }
    std::fs::remove_dir_all(output).unwrap();
    std::fs::remove_dir_all(checkpoints).unwrap();
}

/// The order state machine of seed 004 under the same failures: outcomes and invalid
/// transitions (a side output), both through exactly-once file sinks.
#[test]
fn order_state_machine_outcomes_survive_injected_failures_exactly_once() {
    use order_state_machine::{
        invalid_tag, sample_events, transition, Action, OrderEvent, Outcome, StateMachine, Transition,
    };
    let events: Vec<OrderEvent> = sample_events(12_000);
    let total = events.len() as u64;
    // Reference, sequentially.
    let mut states = std::collections::HashMap::new();
    let (mut outcomes, mut invalid) = (Vec::new(), Vec::new());
    for e in &events {
        let state = states.entry(e.order).or_insert(None);
        match transition(*state, e.action) {
            Transition::To(next) => *state = Some(next),
            Transition::Finished => {
                *state = None;
                outcomes.push(format!(
                    "{:?}",
                    if e.action == Action::Cancel { Outcome::Cancelled(e.order) } else { Outcome::Completed(e.order) }
                ));
            }
            Transition::Invalid => invalid.push(format!("{} {:?}", e.order, e.action)),
        }
    }
    outcomes.sort();
    invalid.sort();

    let plan = ChaosPlan::seeded(0x0DE2, 22);
    let (out, bad, checkpoints) = (temp_dir("orders-out"), temp_dir("orders-bad"), temp_dir("orders-chk"));
    let env = Env::new();
    env.set_parallelism(2);
    env.set_checkpoint_config(CheckpointConfig { interval_ms: 80, retained: 2, ..CheckpointConfig::default() });
    env.set_checkpoint_dir(&checkpoints);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 100, delay_ms: 5 });
    let events = Arc::new(events);
    // One source subtask: an order's events must reach the state machine in their order.
    let processed = env
        .from_sequence(0, total - 1)
        .set_parallelism(1)
        .rich_map(Chaos(plan.clone()))
        .uid("chaos")
        .set_parallelism(1)
        .map(move |i| events[i as usize].clone())
        .set_parallelism(1)
        .key_by(|e: &OrderEvent| e.order)
        .process(StateMachine::default())
        .uid("orders");
    processed
        .side_output(&invalid_tag())
        .map(|e| format!("{} {:?}", e.order, e.action))
        .add_sink(ExactlyOnceFileSink::<String>::new_in(&bad))
        .uid("invalid-sink");
    processed.map(|o| format!("{o:?}")).add_sink(ExactlyOnceFileSink::<String>::new_in(&out)).uid("outcome-sink");
    let result = env.execute("orders with failures").expect("the job survives its failures");
    assert!(plan.injected.load(Ordering::SeqCst) >= 20, "{:?}", result.warnings);
    assert_same_lines(committed_lines(&out), outcomes, "outcomes");
    assert_same_lines(committed_lines(&bad), invalid, "invalid transitions");
    for dir in [out, bad, checkpoints] {
        let _ = std::fs::remove_dir_all(dir);
    }
}
