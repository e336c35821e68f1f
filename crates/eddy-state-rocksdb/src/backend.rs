//! The state backend a job chooses: makes each keyed subtask's RocksDB instance, fresh or
//! restored.

use crate::native::{read_key_groups, restore_store, BACKEND};
use crate::store::RocksDbRawStore;
use eddy_state::keyed::{KeyedBackendFactory, KeyedStateBackend, KeyedStateSnapshot};
use eddy_state::{HeapKeyedStateBackend, StateError};
use eddy_types::{KeyGroupRange, MaxParallelism};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default memory budget of one subtask's RocksDB (block cache + write buffers).
pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Default number of values per state cached on the heap (about 100 MB for small values).
pub const DEFAULT_CACHE_ENTRIES: usize = 1_000_000;

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

/// Chooses RocksDB as the keyed state backend of a job: `env.set_state_backend(...)`
/// (Flink's `EmbeddedRocksDBStateBackend`).
#[derive(Debug, Clone)]
pub struct RocksDbStateBackend {
    /// Where subtasks keep their working directories.
    pub working_dir: PathBuf,
    /// Block cache + write buffers per subtask (one slot).
    pub memory_bytes: usize,
    /// Values per state cached on the heap.
    pub cache_entries: usize,
    /// Checkpoints upload only the files that changed since the last one (Flink's
    /// `state.backend.incremental`; off by default, as there). Savepoints are always full
    /// and canonical.
    pub incremental: bool,
}

impl RocksDbStateBackend {
    /// Working directories under `working_dir`, default memory budget and cache, full
    /// checkpoints.
    pub fn new(working_dir: impl Into<PathBuf>) -> Self {
        Self {
            working_dir: working_dir.into(),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            cache_entries: DEFAULT_CACHE_ENTRIES,
            incremental: false,
        }
    }

    /// Turns incremental checkpoints on or off.
    pub fn with_incremental_checkpoints(mut self, incremental: bool) -> Self {
        self.incremental = incremental;
        self
    }

    /// A backend for one subtask's key groups, in a fresh working directory.
    pub fn create_backend(
        &self,
        name: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        self.create(name, range, max, None)
    }

    /// A working directory no other instance uses.
    fn instance_dir(&self, name: &str) -> PathBuf {
        let instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        self.working_dir.join(format!("{safe}-{}-{instance}", std::process::id()))
    }
}

impl KeyedBackendFactory for RocksDbStateBackend {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn create(
        &self,
        instance: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
        restored: Option<KeyedStateSnapshot>,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        let dir = self.instance_dir(instance);
        let mut canonical = KeyedStateSnapshot { key_group_range: Some(range), ..KeyedStateSnapshot::default() };
        let store = match restored {
            None => RocksDbRawStore::open(&dir, self.memory_bytes)?,
            Some(snapshot) => {
                if let Some(other) = snapshot.native.iter().find(|n| n.backend != BACKEND) {
                    return Err(StateError::Backend(format!(
                        "cannot restore '{instance}': its state is in {}'s own format, which RocksDB cannot read",
                        other.backend
                    )));
                }
                canonical.states = snapshot.states;
                match snapshot.native.as_slice() {
                    // The same key groups: open the files as they are.
                    [native] if native.key_group_range == range => restore_store(&dir, self.memory_bytes, native)?,
                    natives => {
                        for native in natives {
                            read_key_groups(native, range, &mut canonical)?;
                        }
                        RocksDbRawStore::open(&dir, self.memory_bytes)?
                    }
                }
            }
        };
        let store = if self.incremental { store.with_incremental_checkpoints(range) } else { store };
        let mut backend = HeapKeyedStateBackend::new(range, max).with_raw_store(Box::new(store), self.cache_entries);
        if !canonical.states.is_empty() {
            backend.set_restored(canonical);
        }
        Ok(Box::new(backend))
    }
}
