//! The keyed-state conformance suite on RocksDB, with a heap cache far smaller than the
//! state so that reads really come from RocksDB.

use eddy_state::conformance::run_all;
use eddy_state_rocksdb::RocksDbStateBackend;

#[test]
fn rocksdb_backend_passes_the_conformance_suite() {
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-conformance-{}", std::process::id()));
    let backend = RocksDbStateBackend::new(&dir).with_cache_entries(64);
    run_all(&|range, max| backend.create_backend("conformance", range, max).unwrap());
    let left: Vec<_> = std::fs::read_dir(&dir).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(left.is_empty(), "working directories are removed when backends close: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rocksdb_backend_expires_state_with_a_time_to_live() {
    use eddy_state::TableKeyedStateBackend;
    use eddy_state_rocksdb::RocksDbRawStore;
    use eddy_types::{KeyGroupRange, MaxParallelism};
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-ttl-{}", std::process::id()));
    let counter = std::sync::atomic::AtomicU64::new(0);
    eddy_state::conformance::run_ttl(&|clock| {
        let max = MaxParallelism::default();
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let store = RocksDbRawStore::open(&dir.join(n.to_string()), 8 << 20).unwrap();
        // A cache of 8 values: most reads and expiries go through RocksDB.
        Box::new(
            TableKeyedStateBackend::new(KeyGroupRange::all(max), max)
                .with_raw_store(Box::new(store), 8)
                .with_clock(clock),
        )
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compactions_drop_expired_values_of_ttl_states_only() {
    use eddy_state::keyed::{RawLayout, RawStore};
    use eddy_state_rocksdb::RocksDbRawStore;
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-compaction-{}", std::process::id()));
    let mut store = RocksDbRawStore::open(&dir, 8 << 20).unwrap();
    let mut with_ttl = store.table("ttl", RawLayout::ValuesWithTtl).unwrap();
    let mut without = store.table("plain", RawLayout::Values).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for k in 0..100u32 {
        let expiry = if k % 2 == 0 { now - 1_000 } else { now + 3_600_000 };
        let mut value = expiry.to_be_bytes().to_vec();
        value.push(7);
        with_ttl.put(k % 128, &k.to_be_bytes(), &value).unwrap();
        // A plain value whose first bytes look like an old expiry must stay.
        without.put(k % 128, &k.to_be_bytes(), &(now - 1_000).to_be_bytes()).unwrap();
    }
    assert_eq!(store.count_values(), 200);
    store.compact().unwrap();
    assert_eq!(store.count_values(), 150, "the 50 expired values of the TTL state are gone");
    drop((with_ttl, without, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn list_appends_are_merged_by_rocksdb_in_order() {
    use eddy_state::keyed::{RawLayout, RawStore};
    use eddy_state_rocksdb::RocksDbRawStore;
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-append-{}", std::process::id()));
    let mut store = RocksDbRawStore::open(&dir, 8 << 20).unwrap();
    let mut list = store.table("list", RawLayout::Values).unwrap();
    list.put(5, b"k", &postcard::to_allocvec(&vec![1u64, 2]).unwrap()).unwrap();
    assert!(list.append_list(5, b"k", &postcard::to_allocvec(&vec![3u64]).unwrap()).unwrap());
    assert!(list.append_list(5, b"k", &postcard::to_allocvec(&vec![4u64, 500]).unwrap()).unwrap());
    // A list that did not exist starts with the appended elements.
    assert!(list.append_list(6, b"new", &postcard::to_allocvec(&vec![9u64]).unwrap()).unwrap());
    let read = |kg: u32, key: &[u8]| postcard::from_bytes::<Vec<u64>>(&list.get(kg, key).unwrap().unwrap()).unwrap();
    assert_eq!(read(5, b"k"), vec![1, 2, 3, 4, 500]);
    assert_eq!(read(6, b"new"), vec![9]);
    store.compact().unwrap();
    assert_eq!(read(5, b"k"), vec![1, 2, 3, 4, 500], "the same after compaction merged the operands");
    drop((list, store));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn map_state_keeps_one_rocksdb_entry_per_user_key() {
    use eddy_state::keyed::{canonical_key_group, CurrentKey, MapEntriesTable, RawLayout, RawStore, TableSpec};
    use eddy_state_rocksdb::RocksDbRawStore;
    use std::collections::HashMap;
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-map-entries-{}", std::process::id()));
    let mut store = RocksDbRawStore::open(&dir, 8 << 20).unwrap();
    let raw = store.table("m", RawLayout::MapEntries).unwrap();
    let spec = TableSpec {
        first_key_group: 0,
        group_count: 128,
        raw: None,
        layout: RawLayout::MapEntries,
        cache_entries_max: 0,
        clock: std::sync::Arc::new(eddy_types::WallClock),
    };
    let mut map = MapEntriesTable::<String, u64>::new("m", raw, &spec);
    let key = |name: &str| CurrentKey {
        bytes: name.as_bytes().to_vec(),
        hash: 0,
        key_hash: 0,
        key_len: name.len(),
        key_group: 7,
        local_group: 7,
        is_set: true,
        epoch: 0,
        inline: eddy_state::keyed::InlineKey::of(name.as_bytes()),
        namespace: eddy_state::keyed::NamespaceForm::of(&[]),
    };
    let entries = vec![("x".to_string(), 1), ("y".to_string(), 2), ("z".to_string(), 3)];
    map.put_all(&key("a"), entries.clone()).unwrap();
    map.put_all(&key("b"), vec![("x".to_string(), 9)]).unwrap();
    assert_eq!(store.count_values(), 4, "one RocksDB entry per user key");
    assert_eq!(map.get(&key("a"), &"y".to_string()).unwrap(), Some(2));
    assert_eq!(map.remove(&key("a"), &"y".to_string()).unwrap(), Some(2));
    assert_eq!(store.count_values(), 3);
    // The canonical form groups a key's entries into one map, as the heap writes it.
    let reader = store.table("m", RawLayout::MapEntries).unwrap();
    let bytes = canonical_key_group(reader.as_ref(), 7, RawLayout::MapEntries, 0).unwrap().unwrap();
    let maps: Vec<(Vec<u8>, HashMap<String, u64>)> = postcard::from_bytes(&bytes).unwrap();
    let expected_a: HashMap<String, u64> = [("x".to_string(), 1), ("z".to_string(), 3)].into_iter().collect();
    let expected_b: HashMap<String, u64> = [("x".to_string(), 9)].into_iter().collect();
    assert_eq!(maps, vec![(b"a".to_vec(), expected_a), (b"b".to_vec(), expected_b)]);
    map.clear(&key("a")).unwrap();
    assert!(map.is_empty(&key("a")).unwrap() && !map.is_empty(&key("b")).unwrap());
    drop((map, reader, store));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A value created and removed between two write-backs never reaches RocksDB (a window's
/// contents); one removed after a write-back is deleted there and stays gone, also once
/// the cache no longer holds the key.
#[test]
fn values_that_live_between_write_backs_never_touch_rocksdb_and_removals_stick() {
    use eddy_state::keyed::{install_backend, take_backend, with_backend};
    use eddy_state::{TableKeyedStateBackend, ValueState, ValueStateDescriptor};
    use eddy_state_rocksdb::RocksDbRawStore;
    use eddy_types::{stable_hash, KeyGroupRange, MaxParallelism};
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-short-lived-{}", std::process::id()));
    let max = MaxParallelism::default();
    let store = RocksDbRawStore::open(&dir, 8 << 20).unwrap();
    let backend = TableKeyedStateBackend::new(KeyGroupRange::all(max), max).with_raw_store(Box::new(store), 4);
    install_backend(Box::new(backend)).unwrap();
    let enter = |key: &str| {
        with_backend("test", |b| b.set_current_key(key.as_bytes(), stable_hash(key.as_bytes())).map(|_| ())).unwrap()
    };
    let count = ValueState::<u64>::declare(&ValueStateDescriptor::new("count")).unwrap();
    // Written back (a snapshot), then removed: the removal must reach RocksDB.
    enter("kept-then-removed");
    count.update_with(|| 0, |c| *c += 1).unwrap();
    with_backend("test", |b| b.snapshot().map(|_| ())).unwrap();
    enter("kept-then-removed");
    assert_eq!(count.take().unwrap(), Some(1));
    // Short-lived values: created and removed before any write-back.
    for i in 0..100 {
        enter(&format!("short-{i}"));
        count.update_with(|| 0, |c| *c += 1).unwrap();
        assert_eq!(count.take().unwrap(), Some(1));
    }
    // Many other keys push everything out of the 4-entry cache (written back on the way).
    for i in 0..50 {
        enter(&format!("filler-{i}"));
        count.update(i).unwrap();
    }
    enter("kept-then-removed");
    assert_eq!(count.value().unwrap(), None, "a removal after a write-back stays removed");
    enter("short-7");
    assert_eq!(count.value().unwrap(), None);
    let snapshot = with_backend("test", |b| b.snapshot()).unwrap();
    let entries: usize = snapshot.states.iter().flat_map(|s| &s.key_groups).count();
    assert!(entries <= 50, "only the fillers are left: {entries} key groups");
    drop(take_backend());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process killed with SIGKILL cannot remove its instances' working directories: the
/// next instance created in the same working directory removes them, and a live
/// process's (another one's, or its own) stay.
#[test]
fn working_directories_a_killed_process_left_are_removed_by_the_next_instance() {
    use eddy_types::{KeyGroupRange, MaxParallelism};
    const CHILD: &str = "EDDY_TEST_ROCKSDB_ORPHANS";
    let max = MaxParallelism::default();
    if let Ok(dir) = std::env::var(CHILD) {
        // The child: one instance and a checkpoint of it not uploaded yet (its files
        // hard-linked in a directory beside the instance's), then it waits to be killed.
        use eddy_state::keyed::{install_backend, take_backend, ValueState};
        let backend = RocksDbStateBackend::new(&dir).with_incremental_checkpoints(true);
        let instance = backend.create_backend("killed", KeyGroupRange::all(max), max).unwrap();
        install_backend(instance).unwrap();
        let count = ValueState::declare(&eddy_state::ValueStateDescriptor::<u64>::new("count")).unwrap();
        for key in 0..100u64 {
            eddy_state::conformance::set_key(&key);
            count.update(key).unwrap();
        }
        let mut instance = take_backend().unwrap();
        let mut snapshot = instance.snapshot_for_checkpoint(eddy_types::CheckpointId(1), false).unwrap();
        snapshot.complete_deferred().unwrap();
        println!("created");
        std::thread::sleep(std::time::Duration::from_secs(120));
        return;
    }
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-orphans-{}", std::process::id()));
    let test = "working_directories_a_killed_process_left_are_removed_by_the_next_instance";
    let mut child = eddy_state::conformance::spawn_child_test(test, CHILD, &dir, "created");
    let entries = || {
        let mut names: Vec<String> =
            std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let backend = RocksDbStateBackend::new(&dir);
    let first = backend.create_backend("ours", KeyGroupRange::all(max), max).unwrap();
    assert_eq!(entries().len(), 3, "the child's instance and checkpoint, alive, stay beside ours: {:?}", entries());
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    assert_eq!(entries().len(), 3, "a killed process removes nothing itself");
    let second = backend.create_backend("ours again", KeyGroupRange::all(max), max).unwrap();
    let names = entries();
    assert!(names.len() == 2 && names.iter().all(|n| n.contains("ours")), "the killed one's went: {names:?}");
    drop((first, second));
    assert!(entries().is_empty(), "{:?}", entries());
    let _ = std::fs::remove_dir_all(&dir);
}
