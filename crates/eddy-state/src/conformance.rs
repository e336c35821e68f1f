//! The keyed-state conformance suite: the semantics every [`KeyedStateBackend`] must have.
//! Each backend's tests call [`run_all`] with a factory for that backend (TiKV's
//! `engine_traits_tests` habit: one suite, every engine).

use crate::descriptor::*;
use crate::keyed::*;
use eddy_types::{key_group_range_for_subtask, stable_hash, Key, KeyGroupRange, MaxParallelism};

/// Builds a fresh backend for a key-group range.
pub type BackendFactory<'a> = &'a dyn Fn(KeyGroupRange, MaxParallelism) -> Box<dyn KeyedStateBackend>;

/// For a test of what a process killed with SIGKILL leaves: runs the test `test` of this
/// test binary again, as a child process with the environment variable `var` set to
/// `value` (the test's child branch), and returns the child once it printed a line with
/// `ready` in it.
pub fn spawn_child_test(test: &str, var: &str, value: &std::path::Path, ready: &str) -> std::process::Child {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(var, value)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the test binary runs again");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    assert!(lines.any(|l| l.is_ok_and(|l| l.contains(ready))), "the child test printed {ready:?}");
    child
}

/// Makes `key` the current key of this thread's backend.
pub fn set_key<K: Key>(key: &K) {
    let mut bytes = Vec::new();
    key.encode_key(&mut bytes);
    with_backend("test", |b| b.set_current_key(&bytes, stable_hash(&bytes)).map(|_| ())).expect("key in range");
}

fn with_installed(factory: BackendFactory<'_>, test: impl FnOnce()) {
    let max = MaxParallelism::default();
    install_backend(factory(KeyGroupRange::all(max), max)).expect("no backend installed yet");
    test();
    take_backend();
}

/// Runs every conformance check; panics on the first violation.
pub fn run_all(factory: BackendFactory<'_>) {
    with_installed(factory, value_state);
    with_installed(factory, list_state);
    with_installed(factory, map_state);
    with_installed(factory, reducing_state);
    with_installed(factory, aggregating_state);
    with_installed(factory, redeclaration);
    with_installed(factory, no_current_key);
    out_of_range_key(factory);
    no_backend_installed();
    snapshot_by_key_group(factory);
    restore_by_key_group_range(factory);
    cache_smaller_than_state(factory);
    maps_survive_snapshots(factory);
    declared_types_survive_snapshots(factory);
    states_of_one_function(factory);
}

/// One step of [`states_of_one_function`]: the next of a fixed pseudo-random sequence.
fn next_step(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What [`states_of_one_function`] expects of one key (in one namespace, or none).
#[derive(Default, Clone, PartialEq, Debug)]
struct FunctionValues {
    a: Option<u64>,
    b: Option<String>,
    sum: Option<u64>,
    list: Vec<u32>,
}

/// The states of one function, read and written in every order through the same key,
/// some in a window's namespace: every read gives what a model says, and every value
/// survives a snapshot. The snapshots, the one taken at a barrier while the values went on
/// changing and the last, are the same bytes as those of a backend that had a key set
/// before the states were declared: a backend may keep the states a function declared
/// before its first key together (one entry per key for all of them), and what it writes
/// must not show it.
fn states_of_one_function(factory: BackendFactory<'_>) {
    use std::collections::HashMap;
    type Model = HashMap<(u64, Option<u64>), FunctionValues>;
    let max = MaxParallelism::default();
    let run = |key_first: bool| -> (KeyedStateSnapshot, KeyedStateSnapshot, Model, Model) {
        install_backend(factory(KeyGroupRange::all(max), max)).unwrap();
        if key_first {
            set_key(&u64::MAX);
        }
        let a = ValueState::declare(&ValueStateDescriptor::<u64>::new("a")).unwrap();
        let b = ValueState::declare(&ValueStateDescriptor::<String>::new("b")).unwrap();
        let sum = ReducingState::declare(&ReducingStateDescriptor::<u64>::new("sum", |x, y| x + y)).unwrap();
        let list = ListState::declare(&ListStateDescriptor::<u32>::new("list")).unwrap();
        let (mut model, mut seed, mut barrier, mut at_barrier) = (Model::new(), 7u64, None, Model::new());
        for step in 0..30_000 {
            let r = next_step(&mut seed);
            let key = r % 400;
            set_key(&key);
            let window = (r >> 20).is_multiple_of(5).then_some((r >> 24) % 3);
            if let Some(window) = window {
                with_backend("test", |b| {
                    b.set_current_namespace(&window.to_be_bytes());
                    Ok(())
                })
                .unwrap();
            }
            let m = model.entry((key, window)).or_default();
            let at = format!("step {step}, key {key}, window {window:?}");
            match (r >> 32) % 10 {
                0 | 9 => {
                    a.update(r).unwrap();
                    m.a = Some(r);
                }
                1 => assert_eq!(a.value().unwrap(), m.a, "{at}"),
                2 => assert_eq!(a.take().unwrap(), m.a.take(), "{at}"),
                3 => {
                    b.update(r.to_string()).unwrap();
                    m.b = Some(r.to_string());
                }
                4 => {
                    assert_eq!(b.value().unwrap(), m.b.take(), "{at}");
                    b.clear().unwrap();
                }
                5 => {
                    sum.add(r % 100).unwrap();
                    m.sum = Some(m.sum.unwrap_or(0) + r % 100);
                }
                6 => assert_eq!(sum.get().unwrap(), m.sum, "{at}"),
                7 => {
                    list.add(r as u32).unwrap();
                    m.list.push(r as u32);
                }
                _ => {
                    assert_eq!(list.get().unwrap(), m.list, "{at}");
                    list.clear().unwrap();
                    m.list.clear();
                }
            }
            if step == 15_000 {
                let id = eddy_types::CheckpointId(1);
                barrier = Some(with_backend("test", |b| b.snapshot_for_checkpoint(id, false)).unwrap());
                at_barrier = model.clone();
            }
        }
        let mut barrier = barrier.expect("taken at step 15 000");
        barrier.complete_deferred().unwrap();
        let last = take_backend().unwrap().snapshot().unwrap();
        (barrier, last, at_barrier, model)
    };
    let (barrier, last, at_barrier, model) = run(false);
    let (separate_barrier, separate_last, _, _) = run(true);
    // The key set before the states were declared has no values: the same snapshots.
    let by_name = |snapshot: &KeyedStateSnapshot| {
        let mut states = snapshot.states.clone();
        states.sort_by(|x, y| x.name.cmp(&y.name));
        states
    };
    assert_eq!(by_name(&barrier), by_name(&separate_barrier), "the snapshots at the barrier");
    assert_eq!(by_name(&last), by_name(&separate_last), "the last snapshots");
    // Every value, restored: the barrier's as they were at the barrier, and the last.
    let restores = |snapshot: KeyedStateSnapshot, mut model: Model, what: &str| {
        model.retain(|_, values| *values != FunctionValues::default());
        let mut fresh = factory(KeyGroupRange::all(max), max);
        fresh.set_restored(snapshot);
        install_backend(fresh).unwrap();
        let a = ValueState::declare(&ValueStateDescriptor::<u64>::new("a")).unwrap();
        let b = ValueState::declare(&ValueStateDescriptor::<String>::new("b")).unwrap();
        let sum = ReducingState::declare(&ReducingStateDescriptor::<u64>::new("sum", |x, y| x + y)).unwrap();
        let list = ListState::declare(&ListStateDescriptor::<u32>::new("list")).unwrap();
        assert!(model.len() > 500, "{what}: {} keys and windows with values", model.len());
        for key in 0..400u64 {
            for window in [None, Some(0u64), Some(1), Some(2)] {
                set_key(&key);
                if let Some(window) = window {
                    with_backend("test", |b| {
                        b.set_current_namespace(&window.to_be_bytes());
                        Ok(())
                    })
                    .unwrap();
                }
                let read = FunctionValues {
                    a: a.value().unwrap(),
                    b: b.value().unwrap(),
                    sum: sum.get().unwrap(),
                    list: list.get().unwrap(),
                };
                let expected = model.get(&(key, window)).cloned().unwrap_or_default();
                assert_eq!(read, expected, "{what}: key {key}, window {window:?}, restored");
            }
        }
        take_backend();
    };
    restores(barrier, at_barrier, "the barrier's snapshot");
    restores(last, model, "the last snapshot");
}

/// A state's declared type travels through snapshots, also through a restore that does
/// not declare it again, and declaring it as another type is refused, naming both.
fn declared_types_survive_snapshots(factory: BackendFactory<'_>) {
    let max = MaxParallelism::default();
    install_backend(factory(KeyGroupRange::all(max), max)).unwrap();
    let counts = ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    for k in 0..20u64 {
        set_key(&k);
        counts.update(k).unwrap();
    }
    let first = take_backend().unwrap().snapshot().unwrap();
    // Restored, not declared, snapshotted again: the type must travel on.
    let mut carried = factory(KeyGroupRange::all(max), max);
    carried.set_restored(first);
    let second = carried.snapshot().unwrap();
    let mut fresh = factory(KeyGroupRange::all(max), max);
    fresh.set_restored(second.clone());
    install_backend(fresh).unwrap();
    let error = ValueState::declare(&ValueStateDescriptor::<String>::new("counts")).err().expect("another type");
    assert!(
        error
            .to_string()
            .contains("state 'counts' was checkpointed as ValueState<u64> and is declared as ValueState<String>"),
        "{error}"
    );
    take_backend();
    let mut fresh = factory(KeyGroupRange::all(max), max);
    fresh.set_restored(second);
    install_backend(fresh).unwrap();
    let counts = ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    set_key(&7u64);
    assert_eq!(counts.value().unwrap(), Some(7), "the same type reads its values");
    take_backend();
}

/// Maps of several entries, some removed, through a snapshot into a fresh backend and
/// into one for half the key groups.
fn maps_survive_snapshots(factory: BackendFactory<'_>) {
    let max = MaxParallelism::default();
    install_backend(factory(KeyGroupRange::all(max), max)).unwrap();
    let m = MapState::declare(&MapStateDescriptor::<u32, String>::new("multi")).unwrap();
    let expected = |k: u64| -> Vec<(u32, String)> {
        (0..4u32).filter(|u| k % 2 == 1 || *u != 2).map(|u| (u, format!("{k}/{u}"))).collect()
    };
    for k in 0..300u64 {
        set_key(&k);
        m.put_all((0..4u32).map(|u| (u, format!("{k}/{u}")))).unwrap();
        if k % 2 == 0 {
            assert_eq!(m.remove(&2).unwrap(), Some(format!("{k}/2")));
        }
    }
    let snapshot = take_backend().unwrap().snapshot().unwrap();
    let half = KeyGroupRange::new(0, max.get() / 2 - 1);
    for range in [KeyGroupRange::all(max), half] {
        let mut fresh = factory(range, max);
        fresh.set_restored(snapshot.clone());
        install_backend(fresh).unwrap();
        let m = MapState::declare(&MapStateDescriptor::<u32, String>::new("multi")).unwrap();
        for k in 0..300u64 {
            let mut bytes = Vec::new();
            k.encode_key(&mut bytes);
            if !range.contains(eddy_types::assign_to_key_group(stable_hash(&bytes), max)) {
                continue;
            }
            set_key(&k);
            let mut entries = m.entries().unwrap();
            entries.sort();
            assert_eq!(entries, expected(k), "key {k} restored into {range}");
        }
        take_backend();
    }
}

/// Restores a snapshot of all key groups into backends of two halves: each half gets
/// exactly its keys, declared lazily after the restore.
fn restore_by_key_group_range(factory: BackendFactory<'_>) {
    let max = MaxParallelism::default();
    install_backend(factory(KeyGroupRange::all(max), max)).unwrap();
    let v = ValueState::declare(&ValueStateDescriptor::<u64>::new("v")).unwrap();
    let l = ListState::declare(&ListStateDescriptor::<String>::new("l")).unwrap();
    for k in 0..300u64 {
        set_key(&k);
        v.update(k + 1).unwrap();
        l.add(format!("x{k}")).unwrap();
    }
    let snapshot = take_backend().unwrap().snapshot().unwrap();
    for half in 0..2 {
        let range = key_group_range_for_subtask(max, 2, half);
        let mut backend = factory(range, max);
        backend.set_restored(snapshot.clone());
        install_backend(backend).unwrap();
        // A backend restored but not yet declared keeps the state in its own snapshot.
        let untouched = with_backend("t", |b| b.snapshot()).unwrap();
        assert_eq!(untouched.states.len(), 2);
        let v = ValueState::declare(&ValueStateDescriptor::<u64>::new("v")).unwrap();
        let l = ListState::declare(&ListStateDescriptor::<String>::new("l")).unwrap();
        let mut owned = 0;
        for k in 0..300u64 {
            let mut bytes = Vec::new();
            k.encode_key(&mut bytes);
            if !range.contains(eddy_types::assign_to_key_group(stable_hash(&bytes), max)) {
                continue;
            }
            owned += 1;
            set_key(&k);
            assert_eq!(v.value().unwrap(), Some(k + 1));
            assert_eq!(l.get().unwrap(), vec![format!("x{k}")]);
        }
        assert!(owned > 100, "each half owns some keys");
        take_backend();
    }
}

fn value_state() {
    let count = ValueState::declare(&ValueStateDescriptor::<u64>::new("count")).unwrap();
    let with_default = ValueState::declare(&ValueStateDescriptor::<u64>::new("d").with_default(7)).unwrap();
    set_key(&"a".to_string());
    assert_eq!(count.value().unwrap(), None);
    assert_eq!(with_default.value().unwrap(), Some(7));
    count.update(1).unwrap();
    set_key(&"b".to_string());
    assert_eq!(count.value().unwrap(), None, "keys are isolated");
    count.update(10).unwrap();
    set_key(&"a".to_string());
    assert_eq!(count.value().unwrap(), Some(1));
    assert_eq!(
        count
            .update_with(
                || 0,
                |c| {
                    *c += 5;
                    *c
                }
            )
            .unwrap(),
        6
    );
    count.clear().unwrap();
    assert_eq!(count.value().unwrap(), None);
    set_key(&"b".to_string());
    assert_eq!(count.value().unwrap(), Some(10), "clear touches only the current key");
}

fn list_state() {
    let list = ListState::declare(&ListStateDescriptor::<String>::new("l")).unwrap();
    set_key(&1u32);
    assert!(list.get().unwrap().is_empty());
    list.add("x".into()).unwrap();
    list.add_all(vec!["y".into(), "z".into()]).unwrap();
    assert_eq!(list.get().unwrap(), vec!["x", "y", "z"]);
    set_key(&2u32);
    assert!(list.get().unwrap().is_empty());
    list.update(vec!["q".into()]).unwrap();
    set_key(&1u32);
    list.update(vec![]).unwrap();
    assert!(list.get().unwrap().is_empty());
    set_key(&2u32);
    assert_eq!(list.get().unwrap(), vec!["q"]);
    list.clear().unwrap();
    assert!(list.get().unwrap().is_empty());
}

fn map_state() {
    let map = MapState::declare(&MapStateDescriptor::<String, i64>::new("m")).unwrap();
    set_key(&(1u8, 2u8));
    assert!(map.is_empty().unwrap());
    map.put("a".into(), 1).unwrap();
    map.put_all(vec![("b".to_string(), 2), ("c".to_string(), 3)]).unwrap();
    assert_eq!(map.get(&"b".into()).unwrap(), Some(2));
    assert!(map.contains(&"c".into()).unwrap());
    assert!(!map.contains(&"z".into()).unwrap());
    let mut keys = map.keys().unwrap();
    keys.sort();
    assert_eq!(keys, vec!["a", "b", "c"]);
    let mut values = map.values().unwrap();
    values.sort();
    assert_eq!(values, vec![1, 2, 3]);
    let mut entries: Vec<_> = map.iter().unwrap().collect();
    entries.sort();
    assert_eq!(entries, vec![("a".to_string(), 1), ("b".to_string(), 2), ("c".to_string(), 3)]);
    set_key(&(1u8, 3u8));
    assert!(map.is_empty().unwrap(), "keys are isolated");
    set_key(&(1u8, 2u8));
    assert_eq!(map.remove(&"a".into()).unwrap(), Some(1));
    assert_eq!(map.remove(&"a".into()).unwrap(), None);
    map.clear().unwrap();
    assert!(map.is_empty().unwrap());
    assert_eq!(map.get(&"b".into()).unwrap(), None);
}

fn reducing_state() {
    let max = ReducingState::declare(&ReducingStateDescriptor::new("max", |a: i32, b: i32| a.max(b))).unwrap();
    set_key(&"k".to_string());
    assert_eq!(max.get().unwrap(), None);
    for v in [3, 9, 4] {
        max.add(v).unwrap();
    }
    assert_eq!(max.get().unwrap(), Some(9));
    set_key(&"j".to_string());
    max.add(-1).unwrap();
    assert_eq!(max.get().unwrap(), Some(-1));
    max.clear().unwrap();
    assert_eq!(max.get().unwrap(), None);
    set_key(&"k".to_string());
    assert_eq!(max.get().unwrap(), Some(9));
}

struct Average;
impl AggregateFunction for Average {
    type In = u32;
    type Acc = (u64, u64);
    type Out = f64;
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, value: u32, acc: (u64, u64)) -> (u64, u64) {
        (acc.0 + u64::from(value), acc.1 + 1)
    }
    fn get_result(&self, acc: &(u64, u64)) -> f64 {
        acc.0 as f64 / acc.1 as f64
    }
    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

fn aggregating_state() {
    let avg = AggregatingState::declare(&AggregatingStateDescriptor::new("avg", Average)).unwrap();
    set_key(&5i64);
    assert_eq!(avg.get().unwrap(), None);
    avg.add(1).unwrap();
    avg.add(2).unwrap();
    assert_eq!(avg.get().unwrap(), Some(1.5));
    set_key(&6i64);
    assert_eq!(avg.get().unwrap(), None);
    avg.add(10).unwrap();
    avg.clear().unwrap();
    assert_eq!(avg.get().unwrap(), None);
    set_key(&5i64);
    assert_eq!(avg.get().unwrap(), Some(1.5));
}

fn redeclaration() {
    let a = ValueState::declare(&ValueStateDescriptor::<u64>::new("s")).unwrap();
    let b = ValueState::declare(&ValueStateDescriptor::<u64>::new("s")).unwrap();
    set_key(&0u8);
    a.update(3).unwrap();
    assert_eq!(b.value().unwrap(), Some(3), "same name, same state");
    let err = ValueState::declare(&ValueStateDescriptor::<String>::new("s")).err().expect("type clash");
    let message = eddy_types::chain(&err);
    assert!(message.contains("'s'") && message.contains("declared twice"), "{message}");
    let err = ListState::declare(&ListStateDescriptor::<u64>::new("s")).err().expect("kind clash");
    assert!(eddy_types::chain(&err).contains("declared twice"), "{err}");
}

fn no_current_key() {
    let v = ValueState::declare(&ValueStateDescriptor::<u64>::new("v")).unwrap();
    let err = v.value().unwrap_err();
    assert!(eddy_types::chain(&err).contains("without a current key"), "{err}");
    set_key(&1u8);
    v.update(1).unwrap();
    with_backend("test", |b| {
        b.clear_current_key();
        Ok(())
    })
    .unwrap();
    assert!(v.update(2).is_err());
}

fn snapshot_by_key_group(factory: BackendFactory<'_>) {
    let max = MaxParallelism::default();
    install_backend(factory(KeyGroupRange::all(max), max)).unwrap();
    let v = ValueState::declare(&ValueStateDescriptor::<u64>::new("v")).unwrap();
    let m = MapState::declare(&MapStateDescriptor::<String, u32>::new("m")).unwrap();
    for k in 0..200u64 {
        set_key(&k);
        v.update(k * 3).unwrap();
        m.put(format!("u{k}"), k as u32).unwrap();
    }
    let mut old = take_backend().unwrap();
    let snapshot = old.snapshot().unwrap();
    // A snapshot in two parts (values copied or files linked now, serialized later) is
    // the same.
    let mut two_parts = old.snapshot_for_checkpoint(eddy_types::CheckpointId(7), true).unwrap();
    // The task goes on before the second part runs: changes, removals and new keys after
    // the barrier are not in the checkpoint, and the task keeps them.
    install_backend(old).unwrap();
    for k in 0..200u64 {
        set_key(&k);
        v.update(k * 5).unwrap();
        m.put(format!("u{k}"), 7).unwrap();
    }
    set_key(&3u64);
    v.clear().unwrap();
    set_key(&1_000u64);
    v.update(1).unwrap();
    let old = take_backend().unwrap();
    two_parts.complete_deferred().unwrap();
    assert!(two_parts == snapshot, "a checkpoint's snapshot in two parts equals the synchronous one");
    install_backend(old).unwrap();
    for k in [0u64, 3, 199, 1_000] {
        set_key(&k);
        let expected = match k {
            3 => None,
            1_000 => Some(1),
            _ => Some(k * 5),
        };
        assert_eq!(v.value().unwrap(), expected, "the task's value of key {k} after the barrier");
    }
    let mut old = take_backend().unwrap();
    old.table_by_name_mut("v").unwrap().clear_all().unwrap();
    drop(old);
    // A fresh backend restored from the snapshot has every value back.
    let mut fresh = factory(KeyGroupRange::all(max), max);
    fresh.set_restored(snapshot.clone());
    install_backend(fresh).unwrap();
    let v = ValueState::declare(&ValueStateDescriptor::<u64>::new("v")).unwrap();
    let m = MapState::declare(&MapStateDescriptor::<String, u32>::new("m")).unwrap();
    for k in 0..200u64 {
        set_key(&k);
        assert_eq!(v.value().unwrap(), Some(k * 3));
        assert_eq!(m.get(&format!("u{k}")).unwrap(), Some(k as u32));
    }
    // Snapshots are canonical: the restored backend writes the same bytes.
    assert!(with_backend("t", |b| b.snapshot()).unwrap() == snapshot, "a restored backend snapshots the same bytes");
    take_backend();
}

fn out_of_range_key(factory: BackendFactory<'_>) {
    let max = MaxParallelism::default();
    let range = key_group_range_for_subtask(max, 4, 1);
    install_backend(factory(range, max)).unwrap();
    let mut rejected = 0;
    for k in 0..100u64 {
        let mut bytes = Vec::new();
        k.encode_key(&mut bytes);
        let hash = stable_hash(&bytes);
        let owned = range.contains(eddy_types::assign_to_key_group(hash, max));
        let result = with_backend("test", |b| b.set_current_key(&bytes, hash));
        assert_eq!(result.is_ok(), owned, "key {k}");
        rejected += usize::from(!owned);
    }
    assert!(rejected > 0);
    take_backend();
}

fn no_backend_installed() {
    assert!(take_backend().is_none());
    let err = ValueState::declare(&ValueStateDescriptor::<u64>::new("x")).err().expect("no keyed context");
    assert!(eddy_types::chain(&err).contains("outside a keyed context"), "{err}");
}

/// Many more keys than a cache of hot keys would hold: every value stays readable and a
/// snapshot holds them all.
fn cache_smaller_than_state(factory: BackendFactory<'_>) {
    let max = MaxParallelism::default();
    install_backend(factory(KeyGroupRange::all(max), max)).unwrap();
    let v = ValueState::declare(&ValueStateDescriptor::<u64>::new("big")).unwrap();
    let l = ListState::declare(&ListStateDescriptor::<u64>::new("lists")).unwrap();
    for round in 0..2u64 {
        for k in 0..20_000u64 {
            set_key(&k);
            v.update_with(|| 0, |c| *c += k).unwrap();
            l.add(round).unwrap();
        }
    }
    for k in (0..20_000u64).step_by(97) {
        set_key(&k);
        assert_eq!(v.value().unwrap(), Some(2 * k));
        assert_eq!(l.get().unwrap(), vec![0, 1]);
    }
    let snapshot = take_backend().unwrap().snapshot().unwrap();
    let entries: usize = snapshot
        .states
        .iter()
        .filter(|s| s.name == "big")
        .flat_map(|s| &s.key_groups)
        .map(|(_, bytes)| postcard::from_bytes::<Vec<(Vec<u8>, u64)>>(bytes).unwrap().len())
        .sum();
    assert_eq!(entries, 20_000);
}

/// Builds a fresh backend for all key groups that reads time-to-live time from a clock.
pub type ClockedBackendFactory<'a> = &'a dyn Fn(std::sync::Arc<dyn eddy_types::Clock>) -> Box<dyn KeyedStateBackend>;

/// Time to live: expired values are never returned and leave snapshots; the update type
/// decides whether reads renew them; a restore keeps their expiry.
pub fn run_ttl(factory: ClockedBackendFactory<'_>) {
    let clock = eddy_types::ManualClock::new(1_000);
    install_backend(factory(std::sync::Arc::new(clock.clone()))).unwrap();
    let written =
        ValueState::declare(&ValueStateDescriptor::<u64>::new("w").with_ttl(StateTtlConfig::new(100))).unwrap();
    let read = ListState::declare(
        &ListStateDescriptor::<u64>::new("r")
            .with_ttl(StateTtlConfig::new(100).with_update_type(TtlUpdateType::OnReadAndWrite)),
    )
    .unwrap();
    for k in 0..50u64 {
        set_key(&k);
        written.update(k).unwrap();
        read.add(k).unwrap();
    }
    clock.advance_ms(60);
    for k in 0..25u64 {
        set_key(&k);
        assert_eq!(written.value().unwrap(), Some(k), "alive before its time");
        assert_eq!(read.get().unwrap(), vec![k], "reading renews it");
    }
    clock.advance_ms(60); // 120 ms after writing, 60 ms after the renewing read
    for k in 0..50u64 {
        set_key(&k);
        assert_eq!(written.value().unwrap(), None, "expired {k}");
        let expected: Vec<u64> = if k < 25 { vec![k] } else { vec![] };
        assert_eq!(read.get().unwrap(), expected, "key {k}");
    }
    let snapshot = with_backend("t", |b| b.snapshot()).unwrap();
    let live =
        |name: &str| snapshot.states.iter().filter(|s| s.name == name).map(|s| s.key_groups.len()).sum::<usize>();
    assert_eq!(live("w"), 0, "expired values leave snapshots");
    assert!(live("r") > 0);
    take_backend();
    // Restored values keep their expiry; declaring the state without its TTL is refused.
    let mut restored = factory(std::sync::Arc::new(clock.clone()));
    restored.set_restored(snapshot);
    install_backend(restored).unwrap();
    let err = ListState::declare(&ListStateDescriptor::<u64>::new("r")).err().expect("TTL differs");
    assert!(eddy_types::chain(&err).contains("declared twice"), "{err}");
    let read = ListState::declare(
        &ListStateDescriptor::<u64>::new("r")
            .with_ttl(StateTtlConfig::new(100).with_update_type(TtlUpdateType::OnReadAndWrite)),
    )
    .unwrap();
    set_key(&3u64);
    assert_eq!(read.get().unwrap(), vec![3]);
    clock.advance_ms(101);
    assert_eq!(read.get().unwrap(), Vec::<u64>::new(), "expires after restore too");
    take_backend();
    ttl_per_element(factory);
    ttl_folds_no_expired_value(factory);
}

/// A reducing or aggregating state's `add` after the value expired starts from nothing,
/// and `take` of an expired value gives nothing (as Flink's TTL states): whether the value
/// is in the heap or, past a small cache, in the store below.
fn ttl_folds_no_expired_value(factory: ClockedBackendFactory<'_>) {
    let clock = eddy_types::ManualClock::new(1_000);
    install_backend(factory(std::sync::Arc::new(clock.clone()))).unwrap();
    let ttl = StateTtlConfig::new(100);
    let sum =
        ReducingState::declare(&ReducingStateDescriptor::new("sum", |a: u64, b: u64| a + b).with_ttl(ttl)).unwrap();
    let avg = AggregatingState::declare(&AggregatingStateDescriptor::new("avg", Average).with_ttl(ttl)).unwrap();
    let value = ValueState::declare(&ValueStateDescriptor::<u64>::new("taken").with_ttl(ttl)).unwrap();
    for k in 0..50u64 {
        set_key(&k);
        sum.add(k).unwrap();
        avg.add(10).unwrap();
        value.update(k).unwrap();
    }
    clock.advance_ms(101);
    for k in 0..50u64 {
        set_key(&k);
        sum.add(1).unwrap();
        avg.add(20).unwrap();
        assert_eq!(sum.get().unwrap(), Some(1), "key {k}: the expired sum is not added to");
        assert_eq!(avg.get().unwrap(), Some(20.0), "key {k}: the expired accumulator is not added to");
        assert_eq!(value.take().unwrap(), None, "key {k}: an expired value is not taken");
        assert_eq!(value.value().unwrap(), None);
    }
    take_backend();
}

/// List elements and map entries expire one by one, as in Flink: a later write does not
/// keep earlier ones alive; a read renews only what it read (OnReadAndWrite).
fn ttl_per_element(factory: ClockedBackendFactory<'_>) {
    let clock = eddy_types::ManualClock::new(1_000);
    install_backend(factory(std::sync::Arc::new(clock.clone()))).unwrap();
    let ttl = StateTtlConfig::new(100);
    let list = ListState::declare(&ListStateDescriptor::<u32>::new("list").with_ttl(ttl)).unwrap();
    let map = MapState::declare(&MapStateDescriptor::<String, u32>::new("map").with_ttl(ttl)).unwrap();
    let renewing = ttl.with_update_type(TtlUpdateType::OnReadAndWrite);
    let read_map = MapState::declare(&MapStateDescriptor::<String, u32>::new("read-map").with_ttl(renewing)).unwrap();
    set_key(&7u64);
    list.add(1).unwrap();
    map.put("a".into(), 1).unwrap();
    read_map.put_all(vec![("a".to_string(), 1), ("b".to_string(), 2)]).unwrap();
    clock.advance_ms(60);
    list.add(2).unwrap();
    map.put("b".into(), 2).unwrap();
    assert_eq!(read_map.get(&"a".into()).unwrap(), Some(1), "read at 60 ms: renewed");
    clock.advance_ms(60); // 120 ms: the first writes expired, the second ones not
    assert_eq!(list.get().unwrap(), vec![2]);
    assert_eq!(map.get(&"a".into()).unwrap(), None);
    assert_eq!(map.entries().unwrap(), vec![("b".to_string(), 2)]);
    assert!(!map.contains(&"a".into()).unwrap() && map.contains(&"b".into()).unwrap());
    assert_eq!(read_map.entries().unwrap(), vec![("a".to_string(), 1)], "b was never read again");
    // Into a snapshot and back: expiries are kept.
    let snapshot = take_backend().unwrap().snapshot().unwrap();
    let mut restored = factory(std::sync::Arc::new(clock.clone()));
    restored.set_restored(snapshot);
    install_backend(restored).unwrap();
    let list = ListState::declare(&ListStateDescriptor::<u32>::new("list").with_ttl(ttl)).unwrap();
    let map = MapState::declare(&MapStateDescriptor::<String, u32>::new("map").with_ttl(ttl)).unwrap();
    set_key(&7u64);
    assert_eq!(list.get().unwrap(), vec![2]);
    assert_eq!(map.keys().unwrap(), vec!["b".to_string()]);
    clock.advance_ms(50); // 170 ms: everything written at 60 ms expired
    assert_eq!(list.get().unwrap(), Vec::<u32>::new());
    assert!(map.is_empty().unwrap());
    take_backend();
}
