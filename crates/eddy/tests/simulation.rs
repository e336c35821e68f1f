//! Deterministic simulation: seeds, each with seeded faults (task failures, storage
//! write, torn-write, metadata and read faults), across a W1-shaped count per key (also
//! with unaligned checkpoints), event-time windows with late records under unaligned
//! checkpoints, and the order state machine of seed 004. Every run must commit exactly the output of a
//! sequential run, no record lost or doubled, and the same seed must leave the same trace.

#![allow(dead_code)]

#[path = "../examples/order_state_machine.rs"]
mod order_state_machine;

use eddy::checkpoint::restart::RestartStrategy;
use eddy::checkpoint::CheckpointConfig;
use eddy::prelude::*;
use eddy::sink::{TransactionalSink, TwoPhaseCommitSink};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

mod common;
use common::late_windows::{differences, expected_lines, timed_event, EveryRecord, WINDOW_MS};

/// An in-memory transactional system that behaves like a real one: a transaction carries
/// its records; pre-committing prepares it; committing files its records under its
/// (subtask, sequence), once (committing again changes nothing); aborting the leftovers of
/// a subtask drops what an earlier attempt prepared and did not commit, and such a transaction can never be
/// committed any more (its commit fails the job: output was lost). Only committed
/// transactions are visible.
#[derive(Clone)]
struct Committed<T>(Arc<Mutex<Transactions<T>>>, u64);

struct Transactions<T> {
    /// Prepared transactions by (subtask, sequence), with the attempt that prepared them.
    prepared: BTreeMap<(u32, u64), u64>,
    committed: BTreeMap<(u32, u64), Vec<T>>,
}

impl<T: Data> Committed<T> {
    fn new() -> Self {
        Self(Arc::new(Mutex::new(Transactions { prepared: BTreeMap::new(), committed: BTreeMap::new() })), 0)
    }

    fn records(&self) -> Vec<T> {
        self.0.lock().unwrap().committed.values().flatten().cloned().collect()
    }
}

impl<T: Data + Sync> TransactionalSink<T> for Committed<T> {
    type Transaction = (u32, u64, Vec<T>);

    fn begin(&mut self, subtask: SubtaskIndex, sequence: u64) -> FunctionResult<Self::Transaction> {
        Ok((subtask.0, sequence, Vec::new()))
    }

    fn write(&mut self, transaction: &mut Self::Transaction, value: T) -> FunctionResult {
        transaction.2.push(value);
        Ok(())
    }

    fn pre_commit(&mut self, transaction: &mut Self::Transaction) -> FunctionResult {
        self.0.lock().unwrap().prepared.insert((transaction.0, transaction.1), self.1);
        Ok(())
    }

    fn commit(&mut self, (subtask, sequence, records): Self::Transaction) -> FunctionResult {
        let mut system = self.0.lock().unwrap();
        if system.committed.contains_key(&(subtask, sequence)) {
            return Ok(());
        }
        if system.prepared.remove(&(subtask, sequence)).is_none() {
            return Err(format!("transaction {sequence} of subtask {subtask} was aborted: its output is lost").into());
        }
        system.committed.insert((subtask, sequence), records);
        Ok(())
    }

    fn abort(&mut self, (subtask, sequence, _): Self::Transaction) -> FunctionResult {
        self.0.lock().unwrap().prepared.remove(&(subtask, sequence));
        Ok(())
    }

    fn start_attempt(&mut self, attempt: u64) {
        self.1 = attempt;
    }

    fn abort_leftovers(&mut self, subtask: SubtaskIndex, parallelism: u32) -> FunctionResult {
        let attempt = self.1;
        let mut system = self.0.lock().unwrap();
        system.prepared.retain(|(s, _), prepared_by| s % parallelism != subtask.0 || *prepared_by == attempt);
        Ok(())
    }
}

/// Counts per key in a `ValueState` and emits `(key, count)` after every record (W1);
/// with `ttl_ms`, an entry lives that long after its last write.
#[derive(Clone, Default)]
struct CountPerKey {
    ttl_ms: Option<u64>,
    count: Option<ValueState<u64>>,
}

impl RichFunction for CountPerKey {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let mut descriptor = ValueStateDescriptor::new("count");
        if let Some(ttl_ms) = self.ttl_ms {
            descriptor = descriptor.with_ttl(eddy::state::StateTtlConfig::new(ttl_ms));
        }
        self.count = Some(ctx.get_state(&descriptor)?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, u64, (u64, u64)> for CountPerKey {
    fn process_element(
        &mut self,
        _event: u64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, (u64, u64)>,
    ) -> FunctionResult {
        let state = self.count.as_ref().ok_or("count state not declared")?;
        let count = state.value()?.unwrap_or(0) + 1;
        state.update(count)?;
        out.collect((*ctx.current_key(), count));
        Ok(())
    }
}

const W1_EVENTS: u64 = 100_000;
const W1_KEYS: u64 = 97;
const FAULTS: u32 = 8;

fn key_of(event: u64) -> u64 {
    event.wrapping_mul(0x9e37_79b9_7f4a_7c15) % W1_KEYS
}

/// A simulated environment: parallelism 1 or 2, checkpoints every 10 simulated ms, and
/// for some seeds filesystem checkpoint storage (torn files are real files there).
fn simulated_env(seed: u64, dir: Option<&std::path::Path>) -> Env {
    let env = Env::new();
    env.set_parallelism(1 + (seed % 2) as u32);
    env.set_checkpoint_config(CheckpointConfig { interval_ms: 10, ..CheckpointConfig::default() });
    // Enough restarts for every fault (some cost two), not for a failure that repeats.
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 4 * FAULTS, delay_ms: 100 });
    if let Some(dir) = dir {
        env.set_checkpoint_dir(dir);
    }
    env.simulate(seed, FAULTS);
    env
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs W1 under seed `seed`; returns the committed output and the trace.
fn run_w1(seed: u64) -> (Vec<(u64, u64)>, Vec<String>, u32) {
    run_w1_from(seed, false)
}

/// W1 from `from_sequence`, or from the split-based `NumberSequenceSource` (its split
/// enumerator with the JobMaster, readers asking it for splits).
fn run_w1_from(seed: u64, split_based: bool) -> (Vec<(u64, u64)>, Vec<String>, u32) {
    let (committed, trace, restarts, _) = run_w1_with(seed, split_based, false);
    (committed, trace, restarts)
}

/// [`run_w1_from`], with unaligned checkpoints if `unaligned`; also the in-flight bytes
/// the last attempt's checkpoints stored.
fn run_w1_with(seed: u64, split_based: bool, unaligned: bool) -> (Vec<(u64, u64)>, Vec<String>, u32, u64) {
    let dir = seed.is_multiple_of(10).then(|| temp_dir(&format!("w1-{seed}")));
    let env = simulated_env(seed, dir.as_deref());
    if unaligned {
        env.enable_unaligned_checkpoints();
    }
    let committed = Committed::new();
    let events = if split_based {
        env.add_parallel_source(eddy::source::NumberSequenceSource::new(0, W1_EVENTS - 1))
    } else {
        env.from_sequence(0, W1_EVENTS - 1)
    };
    events
        .uid("events")
        .key_by(|e: &u64| key_of(*e))
        .process(CountPerKey::default())
        .uid("count-per-key")
        .add_sink(TwoPhaseCommitSink::new(committed.clone()))
        .uid("sink");
    let result = env.execute("W1 simulated").unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let in_flight = result.accumulators.get(eddy::IN_FLIGHT_BYTES).copied().unwrap_or(0);
    (committed.records(), result.trace, result.restarts, in_flight)
}

/// Every running count of every key, exactly once: what a sequential run emits.
fn w1_expected() -> Vec<(u64, u64)> {
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let mut out: Vec<(u64, u64)> = (0..W1_EVENTS)
        .map(|e| {
            let count = counts.entry(key_of(e)).or_default();
            *count += 1;
            (key_of(e), *count)
        })
        .collect();
    out.sort();
    out
}

/// Runs the order state machine under seed `seed`; returns outcomes and invalid events.
fn run_orders(seed: u64, events: &[order_state_machine::OrderEvent]) -> (Vec<String>, Vec<String>, Vec<String>) {
    use order_state_machine::*;
    let dir = seed.is_multiple_of(10).then(|| temp_dir(&format!("orders-{seed}")));
    let env = simulated_env(seed, dir.as_deref());
    let (outcomes, invalid) = (Committed::new(), Committed::new());
    let processed = env
        .from_collection(events.to_vec())
        .uid("orders")
        .key_by(|e: &OrderEvent| e.order)
        .process(StateMachine::default())
        .uid("order-state-machine");
    processed.side_output(&invalid_tag()).add_sink(TwoPhaseCommitSink::new(invalid.clone())).uid("invalid-sink");
    processed.add_sink(TwoPhaseCommitSink::new(outcomes.clone())).uid("outcome-sink");
    let result = env.execute("orders simulated").unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    (sorted(shown(outcomes.records())), sorted(shown(invalid.records())), result.trace)
}

fn shown<T: std::fmt::Debug>(records: Vec<T>) -> Vec<String> {
    records.into_iter().map(|r| format!("{r:?}")).collect()
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// The order state machine run sequentially: outcomes and invalid events.
fn orders_expected(events: &[order_state_machine::OrderEvent]) -> (Vec<String>, Vec<String>) {
    use order_state_machine::*;
    let mut states: HashMap<u64, Option<OrderState>> = HashMap::new();
    let (mut outcomes, mut invalid) = (Vec::new(), Vec::new());
    for e in events {
        let state = states.entry(e.order).or_default();
        match transition(*state, e.action) {
            Transition::To(next) => *state = Some(next),
            Transition::Finished => {
                *state = None;
                let outcome =
                    if e.action == Action::Cancel { Outcome::Cancelled(e.order) } else { Outcome::Completed(e.order) };
                outcomes.push(format!("{outcome:?}"));
            }
            Transition::Invalid => invalid.push(format!("{e:?}")),
        }
    }
    (sorted(outcomes), sorted(invalid))
}

/// Runs `check` for seeds `seeds` on both cores.
fn for_seeds(seeds: std::ops::Range<u64>, check: impl Fn(u64) + Sync) {
    let seeds: Vec<u64> = seeds.collect();
    std::thread::scope(|scope| {
        for half in seeds.chunks(seeds.len().div_ceil(2)) {
            let check = &check;
            scope.spawn(move || half.iter().for_each(|seed| check(*seed)));
        }
    });
}

#[test]
fn w1_under_100_seeds_with_faults_commits_every_count_exactly_once() {
    let expected = w1_expected();
    let restarts = std::sync::atomic::AtomicU32::new(0);
    for_seeds(0..100, |seed| {
        let (committed, trace, restarted) = run_w1(seed);
        assert_eq!(sorted(committed), expected, "seed {seed}: committed output differs; trace: {trace:#?}");
        restarts.fetch_add(restarted, std::sync::atomic::Ordering::Relaxed);
    });
    // The faults did strike: most of them fail the job over.
    let restarts = restarts.into_inner();
    assert!(restarts >= 100 * FAULTS / 2, "{restarts} restarts: too few for the faults injected");
}

/// The split enumerator's state and the readers' are taken at the same cut: under faults
/// and restores, every number is read exactly once.
#[test]
fn w1_from_a_split_based_source_under_40_seeds_with_faults_commits_every_count_exactly_once() {
    let expected = w1_expected();
    let restarts = std::sync::atomic::AtomicU32::new(0);
    for_seeds(300..340, |seed| {
        let (committed, trace, restarted) = run_w1_from(seed, true);
        assert_eq!(sorted(committed), expected, "seed {seed}: committed output differs; trace: {trace:#?}");
        restarts.fetch_add(restarted, std::sync::atomic::Ordering::Relaxed);
    });
    let restarts = restarts.into_inner();
    assert!(restarts >= 40 * FAULTS / 2, "{restarts} restarts: too few for the faults injected");
}

/// Unaligned checkpoints under the same faults: a consumer snapshots at the first
/// announcement, with the producers' queues full of records it then records, and every
/// restore replays them: still every count exactly once.
#[test]
fn w1_with_unaligned_checkpoints_under_60_seeds_with_faults_commits_every_count_exactly_once() {
    let expected = w1_expected();
    let restarts = std::sync::atomic::AtomicU32::new(0);
    let in_flight = std::sync::atomic::AtomicU64::new(0);
    for_seeds(400..460, |seed| {
        let (committed, trace, restarted, bytes) = run_w1_with(seed, false, true);
        assert_eq!(sorted(committed), expected, "seed {seed}: committed output differs; trace: {trace:#?}");
        restarts.fetch_add(restarted, std::sync::atomic::Ordering::Relaxed);
        in_flight.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    });
    let restarts = restarts.into_inner();
    assert!(restarts >= 60 * FAULTS / 2, "{restarts} restarts: too few for the faults injected");
    let in_flight = in_flight.into_inner();
    assert!(in_flight > 0, "the checkpoints stored in-flight records: {in_flight} bytes");
    println!("in-flight bytes over the seeds' last attempts: {in_flight}");
}

const WINDOW_EVENTS: u64 = 20_000;

/// Per-key counts of 100 ms event-time windows at parallelism 1, late records to a side
/// output, with unaligned checkpoints, under seed `seed`: the committed lines, the trace,
/// the restarts and the in-flight bytes of the last attempt's checkpoints.
fn run_windows(seed: u64) -> (Vec<String>, Vec<String>, u32, u64) {
    use eddy::time::WatermarkStrategy;
    use eddy::window::{window_function, TimeWindow, TumblingEventTimeWindows};
    let env = simulated_env(seed, None);
    env.set_parallelism(1);
    env.enable_unaligned_checkpoints();
    let committed = Committed::new();
    let late = OutputTag::<(u64, i64)>::new("late");
    let windows = env
        .from_sequence(0, WINDOW_EVENTS - 1)
        .uid("events")
        .map(timed_event)
        .uid("timed")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_generator(|| EveryRecord(i64::MIN)).with_timestamp_assigner(|e: &(u64, i64)| e.1),
        )
        .uid("timestamps")
        .key_by(|e: &(u64, i64)| e.0)
        .window(TumblingEventTimeWindows::of(std::time::Duration::from_millis(WINDOW_MS)))
        .side_output_late_data(&late)
        .process(window_function(
            |key: &u64,
             w: &TimeWindow,
             events: &mut dyn Iterator<Item = (u64, i64)>,
             out: &mut Collector<'_, String>| {
                out.collect(format!("W {key} {} {}", w.start, events.count()));
            },
        ))
        .uid("windows");
    let dropped = windows.side_output(&late).map(|(key, t)| format!("L {key} {t}")).uid("late");
    windows.union(&[dropped]).add_sink(TwoPhaseCommitSink::new(committed.clone())).uid("sink");
    let result = env.execute("windows simulated").unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let in_flight = result.accumulators.get(eddy::IN_FLIGHT_BYTES).copied().unwrap_or(0);
    (committed.records(), result.trace, result.restarts, in_flight)
}

/// Event-time windows with unaligned checkpoints under faults: every restore replays the
/// watermarks in flight with the records, so a record late behind one is late again and
/// no window counts it or fires twice: the committed output is a run's without failure.
#[test]
fn windows_with_unaligned_checkpoints_under_40_seeds_with_faults_keep_late_records_late() {
    let expected = expected_lines(WINDOW_EVENTS);
    let restarts = std::sync::atomic::AtomicU32::new(0);
    let in_flight = std::sync::atomic::AtomicU64::new(0);
    for_seeds(600..640, |seed| {
        let (committed, trace, restarted, bytes) = run_windows(seed);
        if let Some(differences) = differences(&sorted(committed), &expected) {
            panic!("seed {seed}: {differences}; trace: {trace:#?}");
        }
        restarts.fetch_add(restarted, std::sync::atomic::Ordering::Relaxed);
        in_flight.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    });
    let restarts = restarts.into_inner();
    assert!(restarts >= 40 * FAULTS / 2, "{restarts} restarts: too few for the faults injected");
    let in_flight = in_flight.into_inner();
    assert!(in_flight > 0, "the checkpoints stored in-flight records: {in_flight} bytes");
    println!("window runs: {restarts} restarts, {in_flight} in-flight bytes over the seeds' last attempts");
}

#[test]
fn the_order_state_machine_under_100_seeds_with_faults_matches_a_sequential_run() {
    let events = order_state_machine::sample_events(4_000);
    let (outcomes, invalid) = orders_expected(&events);
    for_seeds(100..200, |seed| {
        let (got_outcomes, got_invalid, trace) = run_orders(seed, &events);
        assert_eq!(got_outcomes, outcomes, "seed {seed}: outcomes differ; trace: {trace:#?}");
        assert_eq!(got_invalid, invalid, "seed {seed}: invalid events differ; trace: {trace:#?}");
    });
}

#[test]
fn the_same_seed_leaves_the_same_trace_and_other_seeds_other_traces() {
    let (first_output, first, _) = run_w1(7);
    let (second_output, second, _) = run_w1(7);
    assert_eq!(first, second, "same seed, same trace");
    assert_eq!(first_output, second_output, "same seed, same committed transactions");
    assert!(first.iter().any(|e| e.starts_with("fault ")), "faults are in the trace: {first:#?}");
    assert!(first.iter().any(|e| e.contains("completed at")), "completed checkpoints are in the trace: {first:#?}");
    let others: std::collections::BTreeSet<Vec<String>> = [3, 5, 9, 11, 13].into_iter().map(|s| run_w1(s).1).collect();
    assert_eq!(others.len(), 5, "five other seeds, five traces");
    assert!(!others.contains(&first));
}

#[test]
fn a_simulation_refuses_a_backend_other_than_the_heap_before_it_runs() {
    // The simulator cannot run RocksDB; a job asking for both is refused before it runs.
    let env = Env::new();
    env.simulate(1, 0);
    env.set_state_backend(NamedBackend);
    env.from_sequence(0, 9).key_by(|e: &u64| *e).process(CountPerKey::default()).add_sink(CollectSink::new());
    let error = env.execute("refused").unwrap_err().to_string();
    assert!(error.contains("needs the heap state backend, not test-backend"), "{error}");
}

/// A backend that is not the heap one (it is never created: validation refuses first).
#[derive(Debug)]
struct NamedBackend;

impl eddy::state::KeyedBackendFactory for NamedBackend {
    fn name(&self) -> &'static str {
        "test-backend"
    }

    fn create(
        &self,
        _instance: &eddy::state::BackendInstance<'_>,
        _restored: Option<eddy::state::KeyedStateSnapshot>,
    ) -> Result<Box<dyn eddy::state::KeyedStateBackend>, eddy::state::StateError> {
        unreachable!("validation refuses a simulated job on this backend")
    }
}

/// State time-to-live reads the simulated clock: entries expire as the simulated time
/// passes, the same way for the same seed, however fast the machine runs.
#[test]
fn state_time_to_live_follows_the_simulated_clock() {
    let run = || {
        let env = Env::new();
        env.set_parallelism(1);
        env.simulate(11, 0);
        let sink = CollectSink::new();
        env.from_sequence(0, 49_999)
            .key_by(|e: &u64| e % 7)
            .process(CountPerKey { ttl_ms: Some(5), count: None })
            .add_sink(sink.clone());
        let result = env.execute("ttl simulated").unwrap();
        (sorted(sink.take()), result.duration)
    };
    let (first, duration) = run();
    assert!(duration.as_millis() > 50, "simulated time passed: {duration:?}");
    let restarts = first.iter().filter(|(_, count)| *count == 1).count();
    assert!(restarts > 7, "counts started over after expiry: {restarts} ones");
    assert_eq!(run().0, first, "the same seed expires the same entries");
}
