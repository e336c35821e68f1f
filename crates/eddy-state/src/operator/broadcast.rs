//! Broadcast state: a map every instance of a broadcast-connected operator holds alike.

use std::collections::HashMap;
use std::hash::Hash;

/// Writable broadcast state, given to `process_broadcast_element`. Every instance sees the
/// same broadcast elements, so writing the same way in each keeps them identical.
pub struct BroadcastState<'a, K, V> {
    map: &'a mut HashMap<K, V>,
}

impl<'a, K: Eq + Hash + Clone, V: Clone> BroadcastState<'a, K, V> {
    pub(crate) fn new(map: &'a mut HashMap<K, V>) -> Self {
        Self { map }
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    pub fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    pub fn put(&mut self, key: K, value: V) {
        self.map.insert(key, value);
    }

    pub fn put_all(&mut self, entries: impl IntoIterator<Item = (K, V)>) {
        self.map.extend(entries);
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.map.remove(key)
    }

    pub fn entries(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn clear(&mut self) {
        self.map.clear();
    }
}

/// Read-only broadcast state, given to `process_element`.
pub struct ReadOnlyBroadcastState<'a, K, V> {
    map: &'a HashMap<K, V>,
}

impl<'a, K: Eq + Hash, V> ReadOnlyBroadcastState<'a, K, V> {
    pub(crate) fn new(map: &'a HashMap<K, V>) -> Self {
        Self { map }
    }

    pub fn get(&self, key: &K) -> Option<&'a V> {
        self.map.get(key)
    }

    pub fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    pub fn entries(&self) -> impl Iterator<Item = (&'a K, &'a V)> {
        self.map.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
