//! [`TableKeyedStateBackend`]: the keyed state backend of both kinds. Every declared state
//! is a [`HeapTable`]: all values on the heap (the heap backend), or a write-back cache
//! over a raw store (RocksDB, which passes its store in). Snapshots are by key group in
//! the canonical form, or the raw store's native files.

use super::backend::TableSpec;
use super::backend::{
    CurrentKey, DeferredState, KeyedStateBackend, KeyedStateEntries, KeyedStateSnapshot, KeyedTable, NamespaceForm,
    StateId, StateType,
};
use super::canonical::canonical_key_group;
use super::heap_chain::{ChangedState, HeapChain};
use super::native::Unstored;
use super::raw::{RawLayout, RawStore};
use crate::descriptor::{StateKind, StateMeta};
use crate::error::{StateError, StateErrorKind};
use eddy_types::CheckpointId;
use eddy_types::{assign_to_key_group, stable_hash, KeyGroup, KeyGroupRange, KeyHash, MaxParallelism};
use eddy_types::{Clock, WallClock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);

/// Prefetching the keys of a batch pays when the tables a record uses hold at least this
/// many bytes of entries: a quarter of a core's L2 cache (the records and their batches
/// stream through the rest). Below it, most lookups hit the cache anyway and the probes
/// cost more than they save. (While the next key was encoded and hashed ahead one record
/// at a time only to prefetch it, that paid only from about 1 MB; W1's 10 000 keys,
/// 560 KB of entries, lost 15 % of the keyed thread's samples to the entries' misses.)
const PREFETCH_BYTES_MIN: usize = 256 << 10;

/// Every key group of one declared state of `range`, in the canonical form.
fn canonical_entries(range: KeyGroupRange, declared: &Declared) -> Result<KeyedStateEntries, StateError> {
    let key_groups = declared.table.snapshot_all_key_groups(range.start, range.len() as usize)?;
    Ok(KeyedStateEntries { name: declared.meta.name.clone(), ttl: declared.meta.ttl.is_some(), key_groups })
}

struct Declared {
    meta: StateMeta,
    table: Box<dyn KeyedTable>,
}

/// Keyed state for the key groups of one subtask: on the heap, or cached on the heap
/// over a raw store.
pub struct TableKeyedStateBackend {
    id: u64,
    range: KeyGroupRange,
    max_parallelism: MaxParallelism,
    current: CurrentKey,
    states: Vec<Declared>,
    /// Restored key groups of states not declared yet; applied when they are declared
    /// (the value types are only known then), carried into snapshots until then.
    restored: Vec<KeyedStateEntries>,
    /// The declared types of the restored states, checked when each is declared again and
    /// carried into snapshots while it is not.
    restored_types: Vec<StateType>,
    /// Where values live when they do not all fit on the heap (RocksDB).
    raw_store: Option<Box<dyn RawStore>>,
    cache_entries_max: usize,
    clock: Arc<dyn Clock>,
    /// On the heap with incremental checkpoints: the segments written so far.
    chain: Option<HeapChain>,
}

impl TableKeyedStateBackend {
    pub fn new(range: KeyGroupRange, max_parallelism: MaxParallelism) -> Self {
        Self {
            id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
            range,
            max_parallelism,
            current: CurrentKey::default(),
            states: Vec::new(),
            restored: Vec::new(),
            restored_types: Vec::new(),
            raw_store: None,
            cache_entries_max: 0,
            clock: Arc::new(WallClock),
            chain: None,
        }
    }

    /// Checkpoints (not savepoints) of this heap backend write what changed since the
    /// last one into `chain` (see [`super::heap_chain`]).
    pub fn with_heap_chain(mut self, chain: HeapChain) -> Self {
        self.chain = Some(chain);
        self
    }

    /// An incremental heap checkpoint: the tables' changes go into the chain's next
    /// segment, written off the task thread; timers, and restored states not declared
    /// yet, travel beside it in the canonical form.
    fn chained_snapshot(&mut self, checkpoint_id: CheckpointId) -> Result<KeyedStateSnapshot, StateError> {
        let base = self.chain.as_ref().is_some_and(HeapChain::base_due);
        // First what may fail, before any table hands over its changes (which moves its
        // epoch on): timers, whole, built off the task thread as in a full snapshot.
        let (mut states, mut deferred) = (self.restored.clone(), Vec::new());
        for declared in self.states.iter_mut().filter(|d| d.meta.kind == StateKind::Timers) {
            match declared.table.deferred_snapshot() {
                Some(build) => {
                    deferred.push(DeferredState::new(&declared.meta.name, declared.meta.ttl.is_some(), build))
                }
                None => states.push(canonical_entries(self.range, declared)?),
            }
        }
        let chain = self.chain.as_mut().expect("called with a chain");
        let mut changed = Vec::new();
        for declared in self.states.iter_mut().filter(|d| d.meta.kind != StateKind::Timers) {
            let Some(changes) = declared.table.deferred_changes(base) else {
                // Tables before it handed over their changes: only a base is whole again.
                chain.mark_broken();
                return Err(StateError::from(StateErrorKind::Backend(format!(
                    "state '{}' cannot take part in an incremental heap checkpoint (internal error, please report)",
                    declared.meta.name
                ))));
            };
            let (name, ttl) = (declared.meta.name.clone(), declared.meta.ttl.is_some());
            changed.push(ChangedState { name, ttl, changes });
        }
        let native = chain.segment(checkpoint_id.0, self.range, base, changed);
        Ok(KeyedStateSnapshot {
            key_group_range: Some(self.range),
            states,
            native: vec![native],
            state_types: self.state_types(),
            deferred: Unstored(deferred),
        })
    }

    /// Reads time-to-live time from `clock` (tests pass a manual clock).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Keeps every value in `store` and at most `cache_entries_max` per state on the heap
    /// (a write-back cache of the hot keys).
    pub fn with_raw_store(mut self, store: Box<dyn RawStore>, cache_entries_max: usize) -> Self {
        self.raw_store = Some(store);
        self.cache_entries_max = cache_entries_max;
        self
    }

    /// Starts from `snapshot`: key groups outside this backend's range are skipped, so a
    /// snapshot of a larger or overlapping range can be given.
    pub fn with_restored(mut self, snapshot: KeyedStateSnapshot) -> Self {
        self.set_restored(snapshot);
        self
    }

    /// A heap backend for `range` that starts from `snapshot`.
    pub fn restored(range: KeyGroupRange, max_parallelism: MaxParallelism, snapshot: KeyedStateSnapshot) -> Self {
        Self::new(range, max_parallelism).with_restored(snapshot)
    }
}

impl TableKeyedStateBackend {
    /// Writes what only the heap holds to the raw store.
    fn flush_all(&mut self) -> Result<(), StateError> {
        self.states.iter_mut().try_for_each(|d| d.table.flush())
    }

    /// The current key's bytes took a new namespace whose hash (with the key) is `hash`.
    fn namespace_set(&mut self, hash: u64) {
        let current = &mut self.current;
        // As for keys: a timer's hash must be the one its table rehashes the bytes to.
        debug_assert_eq!(hash, stable_hash(&current.bytes).0, "the hash is the stable hash of key and namespace");
        current.hash = hash;
        current.inline.set(&current.bytes);
        current.namespace.set(&current.bytes[current.key_len..]);
        current.epoch = current.epoch.wrapping_add(1).max(1);
    }

    /// A declared state's key groups in the canonical form, taken now.
    /// The declared type of every state: those declared in this run, and the restored
    /// ones not declared again (their data travels on, and so does their type).
    fn state_types(&self) -> Vec<StateType> {
        let mut snapshot = KeyedStateSnapshot::default();
        // Timers are the operator's own (one internal type), covered by the format version.
        let declared: Vec<StateType> = self
            .states
            .iter()
            .filter(|d| d.meta.kind != StateKind::Timers)
            .map(|d| StateType {
                name: d.meta.name.clone(),
                declared_as: d.meta.declared_as(),
                ttl: d.meta.ttl.is_some(),
            })
            .collect();
        snapshot.add_state_types(&declared);
        snapshot.add_state_types(&self.restored_types);
        snapshot.state_types
    }

    /// Tables of the raw store that no state declared (restored from native files).
    fn undeclared_raw_tables(&self) -> Vec<(String, RawLayout)> {
        let Some(store) = &self.raw_store else { return Vec::new() };
        store.tables().into_iter().filter(|(name, _)| !self.states.iter().any(|d| d.meta.name == *name)).collect()
    }
}

impl KeyedStateBackend for TableKeyedStateBackend {
    fn key_group_range(&self) -> KeyGroupRange {
        self.range
    }

    fn max_parallelism(&self) -> MaxParallelism {
        self.max_parallelism
    }

    fn set_current_key(&mut self, encoded_key: &[u8], hash: KeyHash) -> Result<KeyGroup, StateError> {
        // Tables hash a key's bytes again when they grow: any other hash would lose it.
        debug_assert_eq!(hash, stable_hash(encoded_key), "the key's hash is the stable hash of its bytes");
        let key_group = assign_to_key_group(hash, self.max_parallelism);
        if !self.range.contains(key_group) {
            return Err(StateError::from(StateErrorKind::KeyGroupOutOfRange {
                key_group: key_group.0,
                range: self.range.to_string(),
            }));
        }
        let current = &mut self.current;
        current.bytes.clear();
        current.bytes.extend_from_slice(encoded_key);
        current.inline.set(encoded_key);
        current.namespace.set(&[]);
        current.hash = hash.0;
        current.key_hash = hash.0;
        current.key_len = encoded_key.len();
        current.key_group = key_group.0;
        current.local_group = (key_group.0 - self.range.start) as usize;
        current.is_set = true;
        current.epoch = current.epoch.wrapping_add(1).max(1);
        for declared in &mut self.states {
            declared.table.resolve_ahead(&self.current);
        }
        Ok(key_group)
    }

    fn prefetch_key(&self, hash: KeyHash) -> bool {
        let key_group = assign_to_key_group(hash, self.max_parallelism);
        if !self.range.contains(key_group) {
            return false;
        }
        let local_group = (key_group.0 - self.range.start) as usize;
        let used: usize = self.states.iter().map(|declared| declared.table.prefetch(local_group, hash.0)).sum();
        // Elsewhere the prefetch is a no-op: the probes would not pay.
        cfg!(target_arch = "x86_64") && used >= PREFETCH_BYTES_MIN
    }

    fn prefetch_entry(&self, key_group: KeyGroup, hash: u64, namespace: &[u8]) {
        if cfg!(target_arch = "x86_64") && self.range.contains(key_group) {
            let local_group = (key_group.0 - self.range.start) as usize;
            let form = NamespaceForm::of(namespace);
            for declared in &self.states {
                declared.table.prefetch_namespaced(local_group, hash, namespace, &form);
            }
        }
    }

    fn set_current_namespace(&mut self, namespace: &[u8]) {
        let current = &mut self.current;
        if current.bytes[current.key_len..] == *namespace {
            return;
        }
        current.bytes.truncate(current.key_len);
        current.bytes.extend_from_slice(namespace);
        let hash = if namespace.is_empty() { current.key_hash } else { stable_hash(&current.bytes).0 };
        self.namespace_set(hash);
    }

    fn set_current_namespace_hashed(&mut self, namespace: &[u8], hash: u64) {
        let current = &mut self.current;
        if current.bytes[current.key_len..] == *namespace {
            return;
        }
        current.bytes.truncate(current.key_len);
        current.bytes.extend_from_slice(namespace);
        self.namespace_set(hash);
    }

    fn clear_current_key(&mut self) {
        self.current.is_set = false;
    }

    fn register(
        &mut self,
        meta: StateMeta,
        create: &mut dyn FnMut(TableSpec) -> Box<dyn KeyedTable>,
    ) -> Result<StateId, StateError> {
        if let Some(index) = self.states.iter().position(|d| d.meta.name == meta.name) {
            let first = &self.states[index].meta;
            if first.kind != meta.kind || first.stored_type_id != meta.stored_type_id || first.ttl != meta.ttl {
                return Err(StateError::from(StateErrorKind::IncompatibleDeclaration {
                    name: meta.name.clone(),
                    first: first.describe(),
                    second: meta.describe(),
                }));
            }
            return Ok(StateId { backend_id: self.id, index: index as u32 });
        }
        // Checked before the store creates a table under the name.
        let with = |ttl: bool| if ttl { "with a time to live" } else { "without a time to live" };
        if let Some(restored) = self.restored_types.iter().find(|r| r.name == meta.name) {
            if restored.ttl != meta.ttl.is_some() {
                return Err(StateError::from(StateErrorKind::IncompatibleDeclaration {
                    name: meta.name.clone(),
                    first: format!("restored state {}", with(restored.ttl)),
                    second: meta.describe(),
                }));
            }
            if restored.declared_as != meta.declared_as() {
                return Err(StateError::from(StateErrorKind::RestoredTypeChanged {
                    name: meta.name.clone(),
                    restored: restored.declared_as.clone(),
                    declared: meta.declared_as(),
                }));
            }
        }
        if let Some(restored) = self.restored.iter().find(|r| r.name == meta.name) {
            if restored.ttl != meta.ttl.is_some() {
                return Err(StateError::from(StateErrorKind::IncompatibleDeclaration {
                    name: meta.name.clone(),
                    first: format!("restored state {}", with(restored.ttl)),
                    second: meta.describe(),
                }));
            }
        }
        let layout = RawLayout::of(&meta);
        let raw = match self.raw_store.as_mut() {
            // Timers stay on the heap on every backend (see `timers.rs`).
            Some(store) if meta.kind != StateKind::Timers => Some(store.table(&meta.name, layout)?),
            _ => None,
        };
        let spec = TableSpec {
            layout,
            first_key_group: self.range.start,
            group_count: self.range.len() as usize,
            raw,
            cache_entries_max: self.cache_entries_max,
            clock: self.clock.clone(),
        };
        let mut table = create(spec);
        if let Some(pos) = self.restored.iter().position(|r| r.name == meta.name) {
            for (key_group, bytes) in self.restored.swap_remove(pos).key_groups {
                table.restore_key_group((key_group - self.range.start) as usize, &bytes)?;
            }
        }
        self.states.push(Declared { meta, table });
        Ok(StateId { backend_id: self.id, index: (self.states.len() - 1) as u32 })
    }

    fn current_key_and_table(
        &mut self,
        id: StateId,
        name: &str,
    ) -> Result<(&CurrentKey, &mut dyn KeyedTable), StateError> {
        if id.backend_id != self.id {
            return Err(StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() }));
        }
        if !self.current.is_set {
            return Err(StateError::from(StateErrorKind::NoCurrentKey { state: name.to_string() }));
        }
        let declared = self
            .states
            .get_mut(id.index as usize)
            .ok_or_else(|| StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() }))?;
        Ok((&self.current, declared.table.as_mut()))
    }

    fn table_by_id_mut(&mut self, id: StateId, name: &str) -> Result<&mut dyn KeyedTable, StateError> {
        if id.backend_id != self.id {
            return Err(StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() }));
        }
        match self.states.get_mut(id.index as usize) {
            Some(declared) => Ok(declared.table.as_mut()),
            None => Err(StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() })),
        }
    }

    fn state_names(&self) -> Vec<String> {
        self.states.iter().map(|d| d.meta.name.clone()).collect()
    }

    fn table_by_name(&self, name: &str) -> Option<&dyn KeyedTable> {
        self.states.iter().find(|d| d.meta.name == name).map(|d| d.table.as_ref())
    }

    fn set_restored(&mut self, snapshot: KeyedStateSnapshot) {
        self.restored_types = snapshot.state_types;
        let range = self.range;
        self.restored = snapshot
            .states
            .into_iter()
            .map(|mut s| {
                s.key_groups.retain(|(kg, _)| range.contains(KeyGroup(*kg)));
                s
            })
            .collect();
    }

    fn snapshot(&mut self) -> Result<KeyedStateSnapshot, StateError> {
        self.flush_all()?;
        let mut states = self.restored.clone();
        for declared in &self.states {
            states.push(canonical_entries(self.range, declared)?);
        }
        // Tables restored from native files and not declared since: read from the store.
        let now = self.clock.now_ms();
        for (name, layout) in self.undeclared_raw_tables() {
            let store = self.raw_store.as_mut().expect("undeclared raw tables come from a raw store");
            let table = store.table(&name, layout)?;
            let mut key_groups = Vec::new();
            for key_group in self.range.iter() {
                if let Some(bytes) = canonical_key_group(table.as_ref(), key_group.0, layout, now)? {
                    key_groups.push((key_group.0, bytes));
                }
            }
            states.push(KeyedStateEntries { name, ttl: layout.has_ttl(), key_groups });
        }
        let state_types = self.state_types();
        Ok(KeyedStateSnapshot {
            key_group_range: Some(self.range),
            states,
            state_types,
            ..KeyedStateSnapshot::default()
        })
    }

    fn snapshot_for_checkpoint(
        &mut self,
        checkpoint_id: CheckpointId,
        canonical: bool,
    ) -> Result<KeyedStateSnapshot, StateError> {
        if let Some(store) = self.raw_store.as_mut() {
            store.prepare_snapshot();
        }
        if let Err(e) = self.flush_all() {
            if let Some(store) = self.raw_store.as_mut() {
                store.abort_snapshot()?;
            }
            return Err(e);
        }
        let native = match self.raw_store.as_mut() {
            Some(store) => store.native_snapshot(checkpoint_id, canonical)?,
            None => None,
        };
        if let Some(native) = native {
            // Restored canonical states not declared yet cannot go into the store (their
            // types are unknown), so they travel beside its files, and so do the states
            // that live on the heap only (timers).
            let mut states = self.restored.clone();
            for declared in self.states.iter().filter(|d| d.meta.kind == StateKind::Timers) {
                states.push(canonical_entries(self.range, declared)?);
            }
            return Ok(KeyedStateSnapshot {
                key_group_range: Some(self.range),
                states,
                native: vec![native],
                state_types: self.state_types(),
                deferred: Unstored::default(),
            });
        }
        if self.raw_store.is_some() {
            return self.snapshot();
        }
        if self.chain.is_some() && !canonical {
            return self.chained_snapshot(checkpoint_id);
        }
        // On the heap: copies of the values now, serialized in the asynchronous part.
        let mut deferred = Vec::with_capacity(self.states.len());
        for declared in &mut self.states {
            match declared.table.deferred_snapshot() {
                Some(build) => {
                    deferred.push(DeferredState::new(&declared.meta.name, declared.meta.ttl.is_some(), build))
                }
                None => return self.snapshot(),
            }
        }
        Ok(KeyedStateSnapshot {
            key_group_range: Some(self.range),
            states: self.restored.clone(),
            native: Vec::new(),
            state_types: self.state_types(),
            deferred: Unstored(deferred),
        })
    }

    fn take_snapshot_wait_micros(&mut self) -> u64 {
        self.raw_store.as_mut().map_or(0, |store| store.take_write_wait_micros())
    }

    fn table_by_name_mut(&mut self, name: &str) -> Option<&mut dyn KeyedTable> {
        match self.states.iter_mut().find(|d| d.meta.name == name) {
            Some(d) => Some(d.table.as_mut()),
            None => None,
        }
    }
}
