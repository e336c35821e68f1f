//! A MapState in a raw store, one entry per user key (Flink's RocksDB layout): reading or
//! writing one user key touches that entry only, however large the key's map is. Nothing
//! is cached on the heap; every access goes to the store.
//!
//! Entries are stored under `varint(key length) + key + user key`, so one key's map is a
//! prefix scan and a snapshot reads whole maps in key order
//! ([`super::canonical_key_group`] turns them into the canonical form).

use super::backend::{CurrentKey, KeyedTable, TableSpec};
use super::canonical::{map_entry_key, map_key_prefix};
use super::raw::RawTable;
use crate::error::{StateError, StateErrorKind};
use crate::{MapKey, StateValue};
use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;

pub struct MapEntriesTable<K, V> {
    name: String,
    raw: Box<dyn RawTable>,
    first_key_group: u32,
    group_count: usize,
    /// Reused buffers: the stored key, and an encoded user key or value.
    stored_key: Vec<u8>,
    scratch: Vec<u8>,
    _types: PhantomData<fn() -> (K, V)>,
}

fn encode<T: serde::Serialize>(name: &str, value: &T, out: &mut Vec<u8>) -> Result<(), StateError> {
    out.clear();
    let bytes = postcard::to_extend(value, std::mem::take(out)).map_err(|e| {
        StateError::from(StateErrorKind::Serialize { state: name.to_string(), message: eddy_types::chain(&e) })
    })?;
    *out = bytes;
    Ok(())
}

fn decode<T: serde::de::DeserializeOwned>(name: &str, bytes: &[u8]) -> Result<T, StateError> {
    postcard::from_bytes(bytes).map_err(|e| {
        StateError::from(StateErrorKind::Deserialize { state: name.to_string(), message: eddy_types::chain(&e) })
    })
}

impl<K: MapKey, V: StateValue> MapEntriesTable<K, V> {
    /// A table of the key groups `spec` names, over `raw` (the store's table).
    pub fn new(name: &str, raw: Box<dyn RawTable>, spec: &TableSpec) -> Self {
        Self {
            name: name.to_string(),
            raw,
            first_key_group: spec.first_key_group,
            group_count: spec.group_count,
            stored_key: Vec::new(),
            scratch: Vec::new(),
            _types: PhantomData,
        }
    }

    /// Points `stored_key` at the entry of `user_key` in the current key's map.
    fn locate(&mut self, key: &CurrentKey, user_key: &K) -> Result<(), StateError> {
        encode(&self.name, user_key, &mut self.scratch)?;
        map_entry_key(&key.bytes, &self.scratch, &mut self.stored_key);
        Ok(())
    }

    pub fn get(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        self.locate(key, user_key)?;
        match self.raw.get(key.key_group, &self.stored_key)? {
            Some(bytes) => Ok(Some(decode(&self.name, &bytes)?)),
            None => Ok(None),
        }
    }

    pub fn put_all(&mut self, key: &CurrentKey, entries: impl IntoIterator<Item = (K, V)>) -> Result<(), StateError> {
        for (user_key, value) in entries {
            self.locate(key, &user_key)?;
            encode(&self.name, &value, &mut self.scratch)?;
            self.raw.put(key.key_group, &self.stored_key, &self.scratch)?;
        }
        Ok(())
    }

    pub fn remove(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        let old = self.get(key, user_key)?;
        if old.is_some() {
            self.raw.delete(key.key_group, &self.stored_key)?;
        }
        Ok(old)
    }

    /// Calls `visit` with every (user key bytes, value bytes) of the current key's map.
    fn scan_map(&mut self, key: &CurrentKey, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), StateError> {
        map_key_prefix(&key.bytes, &mut self.stored_key);
        let prefix_len = self.stored_key.len();
        self.raw.scan_prefix(key.key_group, &self.stored_key, &mut |stored, value| visit(&stored[prefix_len..], value))
    }

    pub fn entries(&mut self, key: &CurrentKey) -> Result<Vec<(K, V)>, StateError> {
        let mut entries = Vec::new();
        let mut failure = None;
        let name = self.name.clone();
        self.scan_map(key, &mut |user_key, value| match decode::<K>(&name, user_key)
            .and_then(|k| Ok((k, decode::<V>(&name, value)?)))
        {
            Ok(entry) => entries.push(entry),
            Err(e) => failure = Some(e),
        })?;
        failure.map_or(Ok(entries), Err)
    }

    pub fn is_empty(&mut self, key: &CurrentKey) -> Result<bool, StateError> {
        let mut empty = true;
        self.scan_map(key, &mut |_, _| empty = false)?;
        Ok(empty)
    }

    pub fn clear(&mut self, key: &CurrentKey) -> Result<(), StateError> {
        let mut user_keys = Vec::new();
        self.scan_map(key, &mut |user_key, _| user_keys.push(user_key.to_vec()))?;
        for user_key in user_keys {
            map_entry_key(&key.bytes, &user_key, &mut self.stored_key);
            self.raw.delete(key.key_group, &self.stored_key)?;
        }
        Ok(())
    }
}

impl<K: MapKey, V: StateValue> KeyedTable for MapEntriesTable<K, V> {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn key_count(&self) -> usize {
        0
    }

    fn flush(&mut self) -> Result<(), StateError> {
        Ok(())
    }

    fn snapshot_key_group(&self, local_group: usize) -> Result<Option<Vec<u8>>, StateError> {
        let key_group = self.first_key_group + local_group as u32;
        super::canonical_key_group(self.raw.as_ref(), key_group, super::RawLayout::MapEntries, 0)
    }

    fn restore_key_group(&mut self, local_group: usize, bytes: &[u8]) -> Result<(), StateError> {
        let maps: Vec<(Vec<u8>, HashMap<K, V>)> = decode(&self.name, bytes)?;
        let key_group = self.first_key_group + local_group as u32;
        let mut stored = Vec::new();
        for (key, map) in &maps {
            for (user_key, value) in map {
                encode(&self.name, user_key, &mut self.scratch)?;
                map_entry_key(key, &self.scratch, &mut self.stored_key);
                encode(&self.name, value, &mut self.scratch)?;
                stored.push((self.stored_key.clone(), self.scratch.clone()));
            }
        }
        self.raw.put_batch(&mut stored.iter().map(|(k, v)| (key_group, k.as_slice(), v.as_slice())))
    }

    fn clear_all(&mut self) -> Result<(), StateError> {
        for local in 0..self.group_count {
            let key_group = self.first_key_group + local as u32;
            let mut keys = Vec::new();
            self.raw.scan(key_group, &mut |stored, _| keys.push(stored.to_vec()))?;
            for stored in keys {
                self.raw.delete(key_group, &stored)?;
            }
        }
        Ok(())
    }
}
