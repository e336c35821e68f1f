//! Where records go: key groups decide the subtask of a key (Flink's formulas), and the
//! partitionings deliver every record exactly as they promise.

use eddy::prelude::*;
use eddy::types::{assign_to_key_group, operator_index_for_key_group, stable_hash, Key, MaxParallelism};
use std::collections::{BTreeMap, BTreeSet};

/// Emits `(record, subtask index)`.
#[derive(Clone, Default)]
struct WhereAmI {
    subtask: u32,
}

impl RichFunction for WhereAmI {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.subtask = ctx.index_of_this_subtask().0;
        Ok(())
    }
}

impl<T: Clone + Send + Sync + 'static> RichMapFunction<T, (T, u32)> for WhereAmI {
    fn map(&mut self, value: T) -> FunctionResult<(T, u32)> {
        Ok((value, self.subtask))
    }
}

impl KeyedProcessFunction<String, String, (String, u32)> for WhereAmI {
    fn process_element(
        &mut self,
        value: String,
        ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, (String, u32)>,
    ) -> FunctionResult {
        assert_eq!(ctx.current_key(), &value);
        out.collect((value, self.subtask));
        Ok(())
    }
}

fn expected_subtask(key: &String, parallelism: u32, max: u32) -> u32 {
    let mut bytes = Vec::new();
    key.encode_key(&mut bytes);
    let max = MaxParallelism::new(max).unwrap();
    operator_index_for_key_group(max, parallelism, assign_to_key_group(stable_hash(&bytes), max))
}

#[test]
fn every_record_of_a_key_reaches_the_subtask_that_owns_its_key_group() {
    for max in [128, 7] {
        for p in 1..=4u32.min(max) {
            let env = Env::new();
            env.set_parallelism(p).set_max_parallelism(max);
            let sink = CollectSink::new();
            env.from_sequence(0, 9_999)
                .map(|i| format!("key-{}", i % 500))
                .key_by(|k: &String| k.clone())
                .process(WhereAmI::default())
                .add_sink(sink.clone());
            env.execute("routing").unwrap();
            let got = sink.take();
            assert_eq!(got.len(), 10_000);
            let mut owner: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
            for (key, subtask) in got {
                owner.entry(key).or_default().insert(subtask);
            }
            assert_eq!(owner.len(), 500);
            for (key, subtasks) in owner {
                assert_eq!(subtasks.len(), 1, "key {key} seen by several subtasks at p={p}");
                assert_eq!(*subtasks.first().unwrap(), expected_subtask(&key, p, max), "key {key} p={p} max={max}");
            }
        }
    }
}

fn run_partitioned(partition: impl Fn(DataStream<u64>) -> DataStream<u64>, source_p: u32, p: u32) -> Vec<(u64, u32)> {
    let env = Env::new();
    env.set_parallelism(p);
    let sink = CollectSink::new();
    let source = env.from_sequence(0, 999).set_parallelism(source_p);
    partition(source).rich_map(WhereAmI::default()).add_sink(sink.clone());
    env.execute("partitioning").unwrap();
    let mut got = sink.take();
    got.sort();
    got
}

fn per_subtask(records: &[(u64, u32)]) -> BTreeMap<u32, usize> {
    let mut counts = BTreeMap::new();
    for (_, s) in records {
        *counts.entry(*s).or_default() += 1;
    }
    counts
}

#[test]
fn rebalance_spreads_round_robin_and_loses_nothing() {
    let got = run_partitioned(|s| s.rebalance(), 1, 3);
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), (0..1000).collect::<Vec<_>>());
    let counts = per_subtask(&got);
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), vec![334, 333, 333]);
}

#[test]
fn shuffle_delivers_every_record_once_to_all_subtasks() {
    let got = run_partitioned(|s| s.shuffle(), 1, 4);
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), (0..1000).collect::<Vec<_>>());
    assert_eq!(per_subtask(&got).len(), 4);
}

#[test]
fn broadcast_copies_every_record_to_every_subtask() {
    let got = run_partitioned(|s| s.broadcast(), 1, 3);
    assert_eq!(got.len(), 3000);
    assert_eq!(per_subtask(&got).values().copied().collect::<Vec<_>>(), vec![1000, 1000, 1000]);
}

#[test]
fn forward_keeps_each_subtask_on_its_own_range() {
    // The sequence splits 0..=999 into [0,333], [334,666], [667,999]: forward keeps them.
    let got = run_partitioned(|s| s.forward().disable_chaining(), 3, 3);
    for (value, subtask) in got {
        let expected = if value <= 333 {
            0
        } else if value <= 666 {
            1
        } else {
            2
        };
        assert_eq!(subtask, expected, "value {value}");
    }
}

#[test]
fn union_merges_all_inputs() {
    let env = Env::new();
    env.set_parallelism(2);
    let sink = CollectSink::new();
    let a = env.from_sequence(0, 99);
    let b = env.from_sequence(100, 199);
    let c = env.from_collection((200..300).collect::<Vec<u64>>());
    a.union(&[b, c]).map(|x| x * 2).add_sink(sink.clone());
    env.execute("union").unwrap();
    let mut got = sink.take();
    got.sort();
    assert_eq!(got, (0..300).map(|x| x * 2).collect::<Vec<_>>());
}

#[test]
fn a_stream_read_by_two_operators_feeds_both() {
    let env = Env::new();
    env.set_parallelism(2);
    let (evens, odds) = (CollectSink::new(), CollectSink::new());
    let numbers = env.from_sequence(0, 999);
    numbers.filter(|x| x % 2 == 0).add_sink(evens.clone());
    numbers.filter(|x| x % 2 == 1).add_sink(odds.clone());
    env.execute("fan out").unwrap();
    assert_eq!(evens.take().len(), 500);
    assert_eq!(odds.take().len(), 500);
}

#[test]
fn operators_of_equal_parallelism_and_forward_edges_are_chained() {
    let env = Env::new();
    env.set_parallelism(2);
    env.from_sequence(0, 9).map(|x| x + 1).filter(|x| x % 2 == 0).key_by(|x: &u64| *x).map(|x| x).print();
    let plan = env.explain("plan").unwrap();
    assert!(plan.contains("Sequence Source -> Map -> Filter (parallelism 2)"), "{plan}");
    assert!(plan.contains("--HASH--> Map -> Print to Std. Out"), "{plan}");
}

#[test]
fn sequence_source_splits_like_flink_from_sequence() {
    use eddy::source::SequenceSource;
    // The split matches WORKLOADS.md: the first (count mod p) ranges are one longer.
    assert_eq!(SequenceSource::split(0, 9, 0, 3), Some((0, 3)));
    assert_eq!(SequenceSource::split(0, 9, 1, 3), Some((4, 6)));
    assert_eq!(SequenceSource::split(0, 9, 2, 3), Some((7, 9)));
    assert_eq!(SequenceSource::split(0, 1, 2, 3), None);
}
