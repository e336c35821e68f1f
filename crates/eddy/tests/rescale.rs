//! Rescaling through savepoints, as a property: along random parallelism chains, a
//! counting job stopped with a savepoint at each step and restored at the next
//! parallelism commits exactly the output of an uninterrupted run.

use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use std::collections::BTreeMap;
use std::path::Path;

mod common;

const EVENTS: u64 = 40_000;
const KEYS: u64 = 13;

fn job(env: &Env, out: &Path) {
    env.from_sequence(0, EVENTS - 1)
        .uid("numbers")
        .map(|i| {
            if i.is_multiple_of(200) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            i
        })
        .uid("slow")
        .key_by(|i: &u64| i % KEYS)
        .process(common::Count::default())
        .uid("count")
        .map(|(key, count)| format!("{key} {count}"))
        .uid("format")
        .add_sink(ExactlyOnceFileSink::<String>::new_in(out))
        .uid("sink");
}

fn committed(out: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        assert!(!entry.file_name().to_string_lossy().starts_with('.'), "uncommitted file left");
        lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from));
    }
    lines.sort();
    lines
}

/// Where a step of a chain keeps its keyed state.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Heap,
    /// RocksDB, taking incremental checkpoints every 15 ms while it runs (savepoints stay
    /// canonical, so the next step may use any backend).
    #[cfg(feature = "rocksdb")]
    RocksDbIncremental,
}

fn run_chain(chain: &[u32], name: &str) {
    let steps: Vec<(u32, Backend)> = chain.iter().map(|&p| (p, Backend::Heap)).collect();
    run_chain_on(&steps, name);
}

fn run_chain_on(chain: &[(u32, Backend)], name: &str) {
    let dir = common::temp_dir(name);
    let out = dir.join("out");
    let mut savepoint: Option<String> = None;
    for (step, &(parallelism, backend)) in chain.iter().enumerate() {
        let env = Env::new();
        env.set_parallelism(parallelism).set_max_parallelism(32);
        match backend {
            Backend::Heap => {}
            #[cfg(feature = "rocksdb")]
            Backend::RocksDbIncremental => {
                let rocksdb = RocksDbStateBackend::new(dir.join("rocksdb")).with_cache_entries(4);
                env.set_state_backend(rocksdb.with_incremental_checkpoints(true));
                env.enable_checkpointing(15);
                env.set_checkpoint_dir(dir.join(format!("chk-{step}")));
            }
        }
        if let Some(path) = &savepoint {
            env.restore_from(path);
        }
        let last = step + 1 == chain.len();
        if !last {
            env.stop_with_savepoint_after(dir.join(format!("sp-{step}")), 40);
        }
        job(&env, &out);
        let result =
            env.execute("rescale").unwrap_or_else(|e| panic!("{name} step {step} (p={parallelism}, {backend:?}): {e}"));
        if !last {
            savepoint = Some(
                result.savepoint.unwrap_or_else(|| panic!("{name} step {step}: no savepoint: {:?}", result.warnings)),
            );
        }
    }
    let mut expected = Vec::new();
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for i in 0..EVENTS {
        let c = counts.entry(i % KEYS).or_default();
        *c += 1;
        expected.push(format!("{} {c}", i % KEYS));
    }
    expected.sort();
    assert_eq!(committed(&out), expected, "{name}: chain {chain:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn random_parallelism_chains_keep_output_exactly_once() {
    let mut x = 0x5EED_u64;
    for round in 0..4 {
        let chain: Vec<u32> = (0..3)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 4) as u32 + 1
            })
            .collect();
        run_chain(&chain, &format!("random-{round}"));
    }
}

/// Random chains of parallelism and backend: heap ↔ RocksDB through canonical savepoints,
/// RocksDB steps checkpointing incrementally meanwhile.
#[cfg(feature = "rocksdb")]
#[test]
fn random_chains_switching_backends_keep_output_exactly_once() {
    let mut x = 0xB0CC_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..3 {
        let chain: Vec<(u32, Backend)> = (0..4)
            .map(|_| {
                let p = (next() % 4) as u32 + 1;
                (p, if next() % 2 == 0 { Backend::Heap } else { Backend::RocksDbIncremental })
            })
            .collect();
        run_chain_on(&chain, &format!("backends-{round}"));
    }
}

#[test]
fn max_parallelism_cannot_change_on_restore() {
    let dir = common::temp_dir("max-p");
    let env = Env::new();
    env.set_parallelism(2).set_max_parallelism(32);
    env.stop_with_savepoint_after(dir.join("sp"), 40);
    job(&env, &dir.join("out"));
    let savepoint = env.execute("max").unwrap().savepoint.expect("a savepoint");
    let env = Env::new();
    env.set_parallelism(2).set_max_parallelism(64);
    env.restore_from(&savepoint);
    job(&env, &dir.join("out"));
    let message = env.execute("max").unwrap_err().to_string();
    assert!(message.contains("max parallelism 32, the job has 64; max parallelism cannot change"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Flink's `DataGeneratorSource`: records made from their index at a capped rate; stopped
/// with a savepoint at parallelism 1 and resumed at 3, it generates every index once; and
/// the rate cap holds.
#[test]
fn data_generator_source_keeps_its_rate_and_rescales_exactly() {
    use eddy::source::DataGeneratorSource;
    let dir = common::temp_dir("data-generator");
    let out = dir.join("out");
    let run = |parallelism: u32, restore: Option<&str>, stop_after_ms: Option<u64>| {
        let env = Env::new();
        env.set_parallelism(parallelism);
        if let Some(savepoint) = restore {
            env.restore_from(savepoint);
        }
        if let Some(ms) = stop_after_ms {
            env.stop_with_savepoint_after(dir.join("savepoints"), ms);
        }
        env.add_parallel_source(DataGeneratorSource::new(3_000, 4_000, |i| format!("record {i}")))
            .uid("generator")
            .add_sink(ExactlyOnceFileSink::<String>::new_in(&out))
            .uid("sink");
        env.execute("data generator").unwrap()
    };
    // The cap alone: 2,000 records at 4,000 a second over two subtasks take half a second.
    let capped = std::time::Instant::now();
    let env = Env::new();
    env.set_parallelism(2);
    env.add_parallel_source(DataGeneratorSource::new(2_000, 4_000, |i| i)).add_sink(CollectSink::new());
    env.execute("data generator rate").unwrap();
    assert!(capped.elapsed() >= std::time::Duration::from_millis(480), "the rate cap was not kept");
    let first = run(1, None, Some(300));
    let savepoint = first.savepoint.expect("stopped with a savepoint");
    let partial = committed(&out).len();
    assert!(partial > 0 && partial < 3_000, "the first run should stop part-way, it wrote {partial}");
    run(3, Some(&savepoint), None);
    let mut expected: Vec<String> = (0..3_000).map(|i| format!("record {i}")).collect();
    expected.sort();
    assert_eq!(committed(&out), expected);
    let _ = std::fs::remove_dir_all(&dir);
}
