//! The state backend a job chooses: makes each keyed subtask's RocksDB instance, fresh or
//! restored.

use crate::native::{clipped_store, read_key_groups, restore_store, BACKEND};
use crate::store::{error, RocksDbRawStore, SlotMemory};
use eddy_state::keyed::{
    remove_orphans, BackendInstance, KeyedBackendFactory, KeyedStateBackend, KeyedStateSnapshot, LocalFiles,
};
use eddy_state::{StateError, StateErrorKind, TableKeyedStateBackend};
use eddy_types::{KeyGroupRange, MaxParallelism, RunSeed};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How the working directories of instances begin (what a sweep for orphans looks at).
const INSTANCE_DIR_PREFIX: &str = "eddy-rocksdb-";

/// Chooses RocksDB as the keyed state backend of a job: `env.set_state_backend(...)`
/// (Flink's `EmbeddedRocksDBStateBackend`).
#[derive(Debug, Clone)]
pub struct RocksDbStateBackend {
    working_dir: PathBuf,
    memory_bytes: usize,
    cache_entries: usize,
    incremental: bool,
    /// The memory of each slot (by subtask index), shared by its instances.
    slots: Arc<Mutex<HashMap<u32, SlotMemory>>>,
}

impl RocksDbStateBackend {
    /// Values per state cached on the heap unless [`Self::with_cache_entries`] says
    /// otherwise (about 100 MB for small values).
    pub const DEFAULT_CACHE_ENTRIES: usize = 1_000_000;
    /// Memory per slot (block cache + write buffers) unless
    /// [`Self::with_memory_per_slot`] says otherwise.
    pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024 * 1024;

    /// Working directories under `working_dir`, default memory budget and cache, full
    /// checkpoints.
    pub fn new(working_dir: impl Into<PathBuf>) -> Self {
        Self {
            working_dir: working_dir.into(),
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            cache_entries: Self::DEFAULT_CACHE_ENTRIES,
            incremental: false,
            slots: Arc::default(),
        }
    }

    /// Checkpoints upload only the files that changed since the last one (Flink's
    /// `state.backend.incremental`; off by default, as there). Savepoints are always full
    /// and canonical.
    pub fn with_incremental_checkpoints(mut self, incremental: bool) -> Self {
        self.incremental = incremental;
        self
    }

    /// RocksDB's memory per slot (block cache + write buffers; Flink's managed memory),
    /// shared by the keyed operators whose subtasks run in the slot.
    pub fn with_memory_per_slot(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self.slots = Arc::default();
        self
    }

    /// Values per state kept on the heap in front of RocksDB (the write-back cache of hot
    /// keys); the rest is read from RocksDB when used.
    pub fn with_cache_entries(mut self, entries: usize) -> Self {
        self.cache_entries = entries;
        self
    }

    /// A backend for one subtask's key groups, in a fresh working directory.
    pub fn create_backend(
        &self,
        name: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        let seed = RunSeed::draw();
        self.create(&BackendInstance { name, subtask: 0, range, max_parallelism: max, seed, ttl_clock: None }, None)
    }

    /// A working directory no other instance uses. Local only, so it need not be
    /// reproducible: a fresh random part besides the instance's seed keeps a run with the
    /// seed of a killed one (whose directory stayed) or of one running beside it apart.
    fn instance_dir(&self, instance: &BackendInstance<'_>) -> PathBuf {
        let safe: String = instance.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        self.working_dir.join(format!("{INSTANCE_DIR_PREFIX}{safe}-{}-{}", instance.seed.hex(), RunSeed::draw().hex()))
    }

    /// The memory of slot `subtask`, created with the first instance in it.
    fn slot_memory(&self, subtask: u32) -> Result<SlotMemory, StateError> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(memory) = slots.get(&subtask) {
            return Ok(memory.clone());
        }
        let memory = SlotMemory::new(self.memory_bytes)?;
        slots.insert(subtask, memory.clone());
        Ok(memory)
    }
}

impl KeyedBackendFactory for RocksDbStateBackend {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn create(
        &self,
        instance: &BackendInstance<'_>,
        restored: Option<KeyedStateSnapshot>,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        let (range, memory) = (instance.range, self.slot_memory(instance.subtask)?);
        // What processes killed with SIGKILL left here goes first (their working
        // directories are no longer marked as a live process's).
        remove_orphans(&self.working_dir, INSTANCE_DIR_PREFIX);
        let dir = self.instance_dir(instance);
        let owner = LocalFiles::new(dir.clone());
        owner.create_owned().map_err(|e| {
            error(&format!("cannot create working directory '{}' and mark it as this process's", dir.display()), e)
        })?;
        let mut canonical = KeyedStateSnapshot { key_group_range: Some(range), ..KeyedStateSnapshot::default() };
        let store = match restored {
            None => RocksDbRawStore::open_in_slot(&dir, &memory)?,
            Some(mut snapshot) => {
                // The heap's incremental chains are read into the canonical form.
                eddy_state::keyed::read_heap_chains(&mut snapshot, range)?;
                if let Some(other) = snapshot.native.iter().find(|n| n.backend != BACKEND) {
                    return Err(StateError::from(StateErrorKind::Backend(format!(
                        "cannot restore '{}': its state is in {}'s own format, which RocksDB cannot read",
                        instance.name, other.backend
                    ))));
                }
                canonical.states = snapshot.states;
                canonical.state_types = snapshot.state_types;
                match snapshot.native.as_slice() {
                    // The same key groups: open the files as they are.
                    [native] if native.key_group_range == range => restore_store(&dir, &memory, native)?,
                    // Rescaling (Flink's approach): the snapshot that shares the most key
                    // groups with this subtask is opened as it is (its files hard-linked)
                    // and clipped to the subtask's key groups by range deletions; only the
                    // others' key groups of this subtask are copied in, so the restore
                    // reads the part of the state that moves between subtasks, not all of it.
                    natives => {
                        let shared =
                            |n: &&eddy_state::keyed::NativeSnapshot| n.key_group_range.intersection(&range).len();
                        let base = natives.iter().filter(|n| shared(n) > 0).max_by_key(shared);
                        let store = match base {
                            Some(native) => clipped_store(&dir, &memory, native, range)?,
                            None => RocksDbRawStore::open_in_slot(&dir, &memory)?,
                        };
                        for native in natives.iter().filter(|n| !base.is_some_and(|b| std::ptr::eq(*n, b))) {
                            read_key_groups(native, range, &mut canonical)?;
                        }
                        store
                    }
                }
            }
        };
        let store = store
            .with_native_snapshots(range, self.incremental)
            .with_instance_id(instance.seed.hex())
            .with_owner(owner);
        let mut backend = TableKeyedStateBackend::new(range, instance.max_parallelism)
            .with_raw_store(Box::new(store), self.cache_entries);
        if !canonical.states.is_empty() || !canonical.state_types.is_empty() {
            backend.set_restored(canonical);
        }
        Ok(Box::new(backend))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_of_one_subtask_share_their_slots_memory() {
        let dir = std::env::temp_dir().join(format!("eddy-rocksdb-slots-{}", std::process::id()));
        let backend = RocksDbStateBackend::new(&dir).with_memory_per_slot(16 << 20);
        let max = MaxParallelism::default();
        let instance = |name, subtask| BackendInstance {
            name,
            subtask,
            range: KeyGroupRange::all(max),
            max_parallelism: max,
            seed: RunSeed(7).derive(name.as_bytes()),
            ttl_clock: None,
        };
        let a = backend.create(&instance("a", 0), None).unwrap();
        let b = backend.create(&instance("b", 0), None).unwrap();
        let c = backend.create(&instance("c", 1), None).unwrap();
        assert_eq!(backend.slots.lock().unwrap().len(), 2, "two slots for three instances");
        drop((a, b, c));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
