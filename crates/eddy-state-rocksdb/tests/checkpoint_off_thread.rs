//! RocksDB checkpoints are made off the task thread while the task goes on: whatever the
//! task writes after the barrier, through its cache (which must neither write nor evict
//! then) or straight into RocksDB (map entries), must not be in the checkpoint, and
//! everything before it must.

use eddy_state::conformance::set_key;
use eddy_state::keyed::{install_backend, take_backend, BackendInstance, KeyedBackendFactory, MapState, ValueState};
use eddy_state::{MapStateDescriptor, ValueStateDescriptor};
use eddy_state_rocksdb::RocksDbStateBackend;
use eddy_types::{KeyGroupRange, MaxParallelism};
use std::collections::BTreeMap;

const KEYS: u64 = 2_000;

fn write_round(round: u64, count: &ValueState<u64>, seen: &MapState<u64, u64>) {
    for key in 0..KEYS {
        set_key(&key);
        count.update(round * 1_000_000 + key).unwrap();
        seen.put(round, key).unwrap();
    }
}

/// Per key: its count and its map entries.
type KeyStates = BTreeMap<u64, (Option<u64>, Vec<(u64, u64)>)>;

/// Every key's states as the backend on this thread holds them.
fn read_all(count: &ValueState<u64>, seen: &MapState<u64, u64>) -> KeyStates {
    (0..KEYS)
        .map(|key| {
            set_key(&key);
            let mut entries = seen.entries().unwrap();
            entries.sort();
            (key, (count.value().unwrap(), entries))
        })
        .collect()
}

#[test]
fn writes_after_the_barrier_stay_out_of_a_checkpoint_made_off_the_task_thread() {
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-off-thread-{}", std::process::id()));
    for incremental in [true, false] {
        // A cache of a tenth of the keys: rounds evict, so values are read back from RocksDB.
        let factory = RocksDbStateBackend::new(&dir).with_cache_entries(200).with_incremental_checkpoints(incremental);
        let max = MaxParallelism::default();
        let instance = BackendInstance {
            name: "off-thread",
            subtask: 0,
            range: KeyGroupRange::all(max),
            max_parallelism: max,
            seed: eddy_types::RunSeed(1),
            ttl_clock: None,
        };
        install_backend(factory.create(&instance, None).unwrap()).unwrap();
        let count = ValueState::declare(&ValueStateDescriptor::<u64>::new("count")).unwrap();
        let seen = MapState::declare(&MapStateDescriptor::<u64, u64>::new("seen")).unwrap();
        write_round(1, &count, &seen);
        let at_barrier = read_all(&count, &seen);

        let mut backend = take_backend().unwrap();
        let mut snapshot = backend.snapshot_for_checkpoint(eddy_types::CheckpointId(1), false).unwrap();
        install_backend(backend).unwrap();
        // While the checkpoint is being made: every value changes, the cache overflows,
        // map entries go straight to RocksDB.
        write_round(2, &count, &seen);
        let after = read_all(&count, &seen);
        assert_ne!(after, at_barrier);
        drop(take_backend());

        // The asynchronous part, then a restore.
        snapshot.complete_deferred().unwrap();
        let restored = factory.create(&instance, Some(snapshot)).unwrap();
        install_backend(restored).unwrap();
        let count = ValueState::declare(&ValueStateDescriptor::<u64>::new("count")).unwrap();
        let seen = MapState::declare(&MapStateDescriptor::<u64, u64>::new("seen")).unwrap();
        assert_eq!(read_all(&count, &seen), at_barrier, "incremental: {incremental}");
        drop(take_backend());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Changes handed to a checkpoint count as written; when writing them fails, the instance
/// refuses every later access (naming the cause) so that the task restores, instead of
/// going on without them.
#[test]
fn a_failed_handed_over_write_fails_the_checkpoint_and_every_later_access() {
    use eddy_state::keyed::{KeyedStateSnapshot, RawLayout, RawStore};
    use eddy_state::{StateError, StateErrorKind};
    use eddy_state_rocksdb::RocksDbRawStore;
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-failed-hold-{}", std::process::id()));
    let max = MaxParallelism::default();
    let mut store = RocksDbRawStore::open(&dir, 8 << 20).unwrap().with_native_snapshots(KeyGroupRange::all(max), true);
    let mut table = store.table("count", RawLayout::Values).unwrap();
    table.put(3, b"key", b"value").unwrap();
    store.prepare_snapshot();
    assert!(table.holds_writes());
    table
        .hold(Box::new(|_put| {
            Err(StateError::from(StateErrorKind::Serialize { state: "count".into(), message: "no".into() }))
        }))
        .unwrap();
    let native = store.native_snapshot(eddy_types::CheckpointId(1), false).unwrap().unwrap();
    let mut snapshot = KeyedStateSnapshot { native: vec![native], ..KeyedStateSnapshot::default() };
    let message = eddy_types::chain(&snapshot.complete_deferred().unwrap_err());
    assert!(message.contains("cannot serialize state 'count'"), "{message}");
    let later = eddy_types::chain(&table.get(3, b"key").unwrap_err());
    assert!(later.contains("cannot serialize state 'count'") && later.contains("restore"), "{later}");
    assert!(
        store.native_snapshot(eddy_types::CheckpointId(2), false).is_err(),
        "no checkpoint without the lost changes"
    );
    drop((table, store));
    let _ = std::fs::remove_dir_all(&dir);
}
