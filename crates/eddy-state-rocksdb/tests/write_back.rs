//! A write-back of the cache that fails leaves its changes dirty: a later write-back
//! writes them, instead of their being dropped with an evicted key group. The failure is
//! a value that refuses to be serialized, the one failure of a write-back a test can
//! cause on a real RocksDB.

use eddy_state::conformance::set_key;
use eddy_state::keyed::{install_backend, take_backend, BackendInstance, KeyedBackendFactory, ValueState};
use eddy_state::ValueStateDescriptor;
use eddy_state_rocksdb::RocksDbStateBackend;
use eddy_types::{KeyGroupRange, MaxParallelism};
use std::sync::atomic::{AtomicBool, Ordering};

static REFUSE: AtomicBool = AtomicBool::new(false);

/// A number that cannot be serialized while `REFUSE` is set.
#[derive(Debug, Clone, PartialEq)]
struct Flaky(u64);

impl serde::Serialize for Flaky {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if REFUSE.load(Ordering::SeqCst) {
            return Err(serde::ser::Error::custom("refused"));
        }
        serializer.serialize_u64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Flaky {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        u64::deserialize(deserializer).map(Flaky)
    }
}

#[test]
fn a_failed_write_back_keeps_its_changes_for_the_next_one() {
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-write-back-{}", std::process::id()));
    let factory = RocksDbStateBackend::new(&dir).with_cache_entries(100);
    let max = MaxParallelism::default();
    let instance = BackendInstance {
        name: "write-back",
        subtask: 0,
        range: KeyGroupRange::all(max),
        max_parallelism: max,
        seed: eddy_types::RunSeed(1),
        ttl_clock: None,
    };
    install_backend(factory.create(&instance, None).unwrap()).unwrap();
    let value = ValueState::declare(&ValueStateDescriptor::<Flaky>::new("value")).unwrap();
    // A full cache of changed values.
    for key in 0..100u64 {
        set_key(&key);
        value.update(Flaky(key)).unwrap();
    }
    // The next key needs room: the write-back fails.
    REFUSE.store(true, Ordering::SeqCst);
    set_key(&100u64);
    let error = value.update(Flaky(100)).unwrap_err().to_string();
    assert!(error.contains("cannot serialize state 'value'"), "{error}");
    // It works again: many more keys, write-backs and evictions.
    REFUSE.store(false, Ordering::SeqCst);
    for key in 100..2_000u64 {
        set_key(&key);
        value.update(Flaky(key)).unwrap();
    }
    for key in 0..2_000u64 {
        set_key(&key);
        assert_eq!(value.value().unwrap(), Some(Flaky(key)), "key {key}");
    }
    drop(take_backend());
    let _ = std::fs::remove_dir_all(&dir);
}
