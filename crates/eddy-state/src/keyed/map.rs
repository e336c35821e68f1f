//! `MapState<K, V>`: a map of user keys to values, per key.

use super::{declare, with_table, StateId};
use crate::descriptor::{MapStateDescriptor, StateKind};
use crate::error::StateError;
use crate::{MapKey, StateValue};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

/// A map per key (Flink's `MapState`). Iteration order is unspecified.
pub struct MapState<K, V> {
    id: StateId,
    name: Arc<str>,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for MapState<K, V> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), _types: PhantomData }
    }
}

impl<K: MapKey, V: StateValue> MapState<K, V> {
    pub fn declare(descriptor: &MapStateDescriptor<K, V>) -> Result<Self, StateError> {
        let (id, name) = declare::<HashMap<K, V>>(&descriptor.name, StateKind::Map, descriptor.ttl)?;
        Ok(Self { id, name, _types: PhantomData })
    }

    fn read<R>(&self, f: impl FnOnce(Option<&HashMap<K, V>>) -> R) -> Result<R, StateError> {
        with_table::<HashMap<K, V>, _>(self.id, &self.name, |key, table| Ok(f(table.get(key)?)))
    }

    pub fn get(&self, user_key: &K) -> Result<Option<V>, StateError> {
        self.read(|map| map.and_then(|m| m.get(user_key).cloned()))
    }

    pub fn contains(&self, user_key: &K) -> Result<bool, StateError> {
        self.read(|map| map.is_some_and(|m| m.contains_key(user_key)))
    }

    pub fn put(&self, user_key: K, value: V) -> Result<(), StateError> {
        with_table::<HashMap<K, V>, _>(self.id, &self.name, |key, table| {
            table.modify(key, HashMap::new, |map| {
                map.insert(user_key, value);
            })
        })
    }

    pub fn put_all(&self, entries: impl IntoIterator<Item = (K, V)>) -> Result<(), StateError> {
        with_table::<HashMap<K, V>, _>(self.id, &self.name, |key, table| {
            table.modify(key, HashMap::new, |map| map.extend(entries))
        })
    }

    /// Removes one user key; the key's map goes away with its last entry.
    pub fn remove(&self, user_key: &K) -> Result<Option<V>, StateError> {
        with_table::<HashMap<K, V>, _>(self.id, &self.name, |key, table| {
            if table.get(key)?.is_none() {
                return Ok(None);
            }
            let (removed, now_empty) = table.modify(key, HashMap::new, |map| {
                let removed = map.remove(user_key);
                (removed, map.is_empty())
            })?;
            if now_empty {
                table.remove(key)?;
            }
            Ok(removed)
        })
    }

    /// All entries of the current key's map, copied out.
    pub fn entries(&self) -> Result<Vec<(K, V)>, StateError> {
        self.read(|map| map.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default())
    }

    /// Same as [`MapState::entries`], under Flink's name.
    pub fn iter(&self) -> Result<std::vec::IntoIter<(K, V)>, StateError> {
        Ok(self.entries()?.into_iter())
    }

    pub fn keys(&self) -> Result<Vec<K>, StateError> {
        self.read(|map| map.map(|m| m.keys().cloned().collect()).unwrap_or_default())
    }

    pub fn values(&self) -> Result<Vec<V>, StateError> {
        self.read(|map| map.map(|m| m.values().cloned().collect()).unwrap_or_default())
    }

    pub fn is_empty(&self) -> Result<bool, StateError> {
        self.read(|map| map.is_none_or(HashMap::is_empty))
    }

    pub fn clear(&self) -> Result<(), StateError> {
        with_table::<HashMap<K, V>, _>(self.id, &self.name, |key, table| table.remove(key).map(|_| ()))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
