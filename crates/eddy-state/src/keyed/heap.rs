//! The heap keyed state backend: every declared state is a [`HeapTable`], one hash table
//! per key group, holding Rust values as they are (no serialization until a snapshot).
//!
//! Lookups reuse the key's stable hash, computed once per record for routing, so a state
//! access hashes nothing.

use super::backend::{CurrentKey, KeyedStateBackend, KeyedStateEntries, KeyedStateSnapshot, KeyedTable, StateId};
use crate::descriptor::StateMeta;
use crate::error::StateError;
use crate::StateValue;
use eddy_types::{assign_to_key_group, KeyGroup, KeyGroupRange, KeyHash, MaxParallelism};
use hashbrown::HashTable;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);

struct Entry<S> {
    key: Box<[u8]>,
    hash: u64,
    value: S,
}

/// The values of one state, per key group and key.
pub struct HeapTable<S> {
    name: String,
    groups: Vec<HashTable<Entry<S>>>,
}

impl<S: StateValue> HeapTable<S> {
    pub fn new(name: &str, group_count: usize) -> Self {
        Self { name: name.to_string(), groups: (0..group_count).map(|_| HashTable::new()).collect() }
    }

    pub fn get(&self, key: &CurrentKey) -> Option<&S> {
        self.groups[key.local_group].find(key.hash, |e| *e.key == *key.bytes).map(|e| &e.value)
    }

    pub fn get_mut(&mut self, key: &CurrentKey) -> Option<&mut S> {
        self.groups[key.local_group].find_mut(key.hash, |e| *e.key == *key.bytes).map(|e| &mut e.value)
    }

    /// The value of the current key, inserted with `init` when absent.
    pub fn get_or_insert_with(&mut self, key: &CurrentKey, init: impl FnOnce() -> S) -> &mut S {
        let entry = self.groups[key.local_group].entry(key.hash, |e| *e.key == *key.bytes, |e| e.hash);
        let occupied =
            entry.or_insert_with(|| Entry { key: key.bytes.as_slice().into(), hash: key.hash, value: init() });
        &mut occupied.into_mut().value
    }

    pub fn put(&mut self, key: &CurrentKey, value: S) {
        match self.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                self.groups[key.local_group].insert_unique(
                    key.hash,
                    Entry { key: key.bytes.as_slice().into(), hash: key.hash, value },
                    |e| e.hash,
                );
            }
        }
    }

    pub fn remove(&mut self, key: &CurrentKey) -> Option<S> {
        match self.groups[key.local_group].find_entry(key.hash, |e| *e.key == *key.bytes) {
            Ok(entry) => Some(entry.remove().0.value),
            Err(_) => None,
        }
    }

    /// Every (encoded key, value) of one key group, for tests and tools.
    pub fn entries_of_group(&self, local_group: usize) -> impl Iterator<Item = (&[u8], &S)> {
        self.groups[local_group].iter().map(|e| (&*e.key, &e.value))
    }
}

impl<S: StateValue> KeyedTable for HeapTable<S> {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn key_count(&self) -> usize {
        self.groups.iter().map(HashTable::len).sum()
    }

    fn key_count_in_group(&self, local_group: usize) -> usize {
        self.groups[local_group].len()
    }

    fn snapshot_key_group(&self, local_group: usize) -> Result<Vec<u8>, StateError> {
        let entries: Vec<(&[u8], &S)> = self.entries_of_group(local_group).collect();
        postcard::to_allocvec(&entries)
            .map_err(|e| StateError::Serialize { state: self.name.clone(), message: e.to_string() })
    }

    fn restore_key_group(&mut self, local_group: usize, bytes: &[u8]) -> Result<(), StateError> {
        let entries: Vec<(Vec<u8>, S)> = postcard::from_bytes(bytes)
            .map_err(|e| StateError::Deserialize { state: self.name.clone(), message: e.to_string() })?;
        let table = &mut self.groups[local_group];
        for (key, value) in entries {
            let hash = eddy_types::stable_hash(&key).0;
            table.insert_unique(hash, Entry { key: key.into(), hash, value }, |e| e.hash);
        }
        Ok(())
    }

    fn clear_all(&mut self) {
        self.groups.iter_mut().for_each(HashTable::clear);
    }
}

struct Declared {
    meta: StateMeta,
    table: Box<dyn KeyedTable>,
}

/// Keyed state on the heap, for the key groups of one subtask.
pub struct HeapKeyedStateBackend {
    id: u64,
    range: KeyGroupRange,
    max_parallelism: MaxParallelism,
    current: CurrentKey,
    states: Vec<Declared>,
    /// Restored key groups of states not declared yet; applied when they are declared
    /// (the value types are only known then), carried into snapshots until then.
    restored: Vec<KeyedStateEntries>,
}

impl HeapKeyedStateBackend {
    pub fn new(range: KeyGroupRange, max_parallelism: MaxParallelism) -> Self {
        Self {
            id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
            range,
            max_parallelism,
            current: CurrentKey::default(),
            states: Vec::new(),
            restored: Vec::new(),
        }
    }

    /// A backend for `range` that starts from `snapshot`: key groups outside `range` are
    /// skipped, so a snapshot of a larger or overlapping range can be given.
    pub fn restored(range: KeyGroupRange, max_parallelism: MaxParallelism, snapshot: KeyedStateSnapshot) -> Self {
        let mut backend = Self::new(range, max_parallelism);
        backend.restored = snapshot
            .states
            .into_iter()
            .map(|mut s| {
                s.key_groups.retain(|(kg, _)| range.contains(KeyGroup(*kg)));
                s
            })
            .collect();
        backend
    }
}

impl KeyedStateBackend for HeapKeyedStateBackend {
    fn key_group_range(&self) -> KeyGroupRange {
        self.range
    }

    fn max_parallelism(&self) -> MaxParallelism {
        self.max_parallelism
    }

    fn set_current_key(&mut self, encoded_key: &[u8], hash: KeyHash) -> Result<KeyGroup, StateError> {
        let key_group = assign_to_key_group(hash, self.max_parallelism);
        if !self.range.contains(key_group) {
            return Err(StateError::KeyGroupOutOfRange { key_group: key_group.0, range: self.range.to_string() });
        }
        let current = &mut self.current;
        current.bytes.clear();
        current.bytes.extend_from_slice(encoded_key);
        current.hash = hash.0;
        current.key_group = key_group.0;
        current.local_group = (key_group.0 - self.range.start) as usize;
        current.is_set = true;
        Ok(key_group)
    }

    fn clear_current_key(&mut self) {
        self.current.is_set = false;
    }

    fn register(
        &mut self,
        meta: StateMeta,
        create: &mut dyn FnMut() -> Box<dyn KeyedTable>,
    ) -> Result<StateId, StateError> {
        if let Some(index) = self.states.iter().position(|d| d.meta.name == meta.name) {
            let first = &self.states[index].meta;
            if first.kind != meta.kind || first.stored_type_id != meta.stored_type_id {
                return Err(StateError::IncompatibleDeclaration {
                    name: meta.name.clone(),
                    first: first.describe(),
                    second: meta.describe(),
                });
            }
            return Ok(StateId { backend_id: self.id, index: index as u32 });
        }
        let mut table = create();
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
            return Err(StateError::ForeignHandle { state: name.to_string() });
        }
        if !self.current.is_set {
            return Err(StateError::NoCurrentKey { state: name.to_string() });
        }
        let declared = self
            .states
            .get_mut(id.index as usize)
            .ok_or_else(|| StateError::ForeignHandle { state: name.to_string() })?;
        Ok((&self.current, declared.table.as_mut()))
    }

    fn state_names(&self) -> Vec<String> {
        self.states.iter().map(|d| d.meta.name.clone()).collect()
    }

    fn table_by_name(&self, name: &str) -> Option<&dyn KeyedTable> {
        self.states.iter().find(|d| d.meta.name == name).map(|d| d.table.as_ref())
    }

    fn snapshot(&self) -> Result<KeyedStateSnapshot, StateError> {
        let mut states = self.restored.clone();
        for declared in &self.states {
            let mut key_groups = Vec::new();
            for local in 0..self.range.len() as usize {
                if declared.table.key_count_in_group(local) > 0 {
                    key_groups.push((self.range.start + local as u32, declared.table.snapshot_key_group(local)?));
                }
            }
            states.push(KeyedStateEntries { name: declared.meta.name.clone(), key_groups });
        }
        Ok(KeyedStateSnapshot { key_group_range: Some(self.range), states })
    }

    fn table_by_name_mut(&mut self, name: &str) -> Option<&mut dyn KeyedTable> {
        match self.states.iter_mut().find(|d| d.meta.name == name) {
            Some(d) => Some(d.table.as_mut()),
            None => None,
        }
    }
}
