//! `MapState<K, V>`: a map of user keys to values, per key.
//!
//! On the heap a key's map is one value in a [`HeapTable`]; in a raw store (RocksDB) each
//! user key is an entry of its own ([`MapEntriesTable`]), so one user key is read or
//! written without the rest of the map. With a time to live every entry has its own
//! expiry, kept beside its value in a map that is one value per key on either backend.

use super::backend::{with_backend, CurrentKey, TableSpec};
use super::map_entries::MapEntriesTable;
use super::raw::RawLayout;
use super::{HeapTable, KeyedTable, StateId};
use crate::descriptor::{MapStateDescriptor, StateKind, StateMeta, StateTtlConfig, TtlUpdateType};
use crate::error::{StateError, StateErrorKind};
use crate::{MapKey, StateValue};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

/// A map per key (Flink's `MapState`). Iteration order is unspecified.
pub struct MapState<K, V> {
    id: StateId,
    name: Arc<str>,
    ttl: Option<StateTtlConfig>,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for MapState<K, V> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), ttl: self.ttl, _types: PhantomData }
    }
}

/// What a MapState does with the current key's map, whichever table holds it.
trait MapOps<K, V> {
    fn get(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError>;
    fn put_all(&mut self, key: &CurrentKey, entries: &mut dyn Iterator<Item = (K, V)>) -> Result<(), StateError>;
    fn remove(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError>;
    fn entries(&mut self, key: &CurrentKey) -> Result<Vec<(K, V)>, StateError>;
    fn is_empty(&mut self, key: &CurrentKey) -> Result<bool, StateError>;
    fn clear(&mut self, key: &CurrentKey) -> Result<(), StateError>;
}

impl<K: MapKey, V: StateValue> MapOps<K, V> for HeapTable<HashMap<K, V>> {
    fn get(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        Ok(HeapTable::get(self, key)?.and_then(|m| m.get(user_key).cloned()))
    }

    fn put_all(&mut self, key: &CurrentKey, entries: &mut dyn Iterator<Item = (K, V)>) -> Result<(), StateError> {
        self.modify(key, HashMap::new, |map| map.extend(entries))
    }

    /// The key's map goes away with its last entry.
    fn remove(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        if HeapTable::get(self, key)?.is_none() {
            return Ok(None);
        }
        let (removed, now_empty) = self.modify(key, HashMap::new, |map| {
            let removed = map.remove(user_key);
            (removed, map.is_empty())
        })?;
        if now_empty {
            HeapTable::remove(self, key)?;
        }
        Ok(removed)
    }

    fn entries(&mut self, key: &CurrentKey) -> Result<Vec<(K, V)>, StateError> {
        let map = HeapTable::get(self, key)?;
        Ok(map.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default())
    }

    fn is_empty(&mut self, key: &CurrentKey) -> Result<bool, StateError> {
        Ok(HeapTable::get(self, key)?.is_none_or(HashMap::is_empty))
    }

    fn clear(&mut self, key: &CurrentKey) -> Result<(), StateError> {
        HeapTable::remove(self, key).map(|_| ())
    }
}

impl<K: MapKey, V: StateValue> MapOps<K, V> for MapEntriesTable<K, V> {
    fn get(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        MapEntriesTable::get(self, key, user_key)
    }

    fn put_all(&mut self, key: &CurrentKey, entries: &mut dyn Iterator<Item = (K, V)>) -> Result<(), StateError> {
        MapEntriesTable::put_all(self, key, entries)
    }

    fn remove(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        MapEntriesTable::remove(self, key, user_key)
    }

    fn entries(&mut self, key: &CurrentKey) -> Result<Vec<(K, V)>, StateError> {
        MapEntriesTable::entries(self, key)
    }

    fn is_empty(&mut self, key: &CurrentKey) -> Result<bool, StateError> {
        MapEntriesTable::is_empty(self, key)
    }

    fn clear(&mut self, key: &CurrentKey) -> Result<(), StateError> {
        MapEntriesTable::clear(self, key)
    }
}

/// A map whose entries each have their own expiry (wall-clock ms), as in Flink: putting
/// one entry does not keep the others alive. The key's own expiry is its newest entry's.
struct ExpiringMap<'a, K, V> {
    table: &'a mut HeapTable<HashMap<K, (u64, V)>>,
    ttl: StateTtlConfig,
}

impl<K: MapKey, V: StateValue> ExpiringMap<'_, K, V> {
    fn renews_on_read(&self) -> bool {
        self.ttl.update_type == TtlUpdateType::OnReadAndWrite
    }

    /// Drops the key's map when no entry is left.
    fn drop_if_empty(&mut self, key: &CurrentKey) -> Result<(), StateError> {
        if HeapTable::get(self.table, key)?.is_some_and(HashMap::is_empty) {
            HeapTable::remove(self.table, key)?;
        }
        Ok(())
    }
}

impl<K: MapKey, V: StateValue> MapOps<K, V> for ExpiringMap<'_, K, V> {
    fn get(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        let now = self.table.now_ms();
        if self.renews_on_read() {
            let renewed = now.saturating_add(self.ttl.ttl_ms);
            let found = self.table.modify_existing(key, |map| match map.get_mut(user_key) {
                Some((expiry, value)) if *expiry > now => {
                    *expiry = renewed;
                    Some(value.clone())
                }
                _ => None,
            })?;
            return Ok(found.flatten());
        }
        let map = HeapTable::get(self.table, key)?;
        Ok(map.and_then(|m| m.get(user_key)).filter(|(expiry, _)| *expiry > now).map(|(_, v)| v.clone()))
    }

    fn put_all(&mut self, key: &CurrentKey, entries: &mut dyn Iterator<Item = (K, V)>) -> Result<(), StateError> {
        let now = self.table.now_ms();
        let expiry = now.saturating_add(self.ttl.ttl_ms);
        self.table.modify(key, HashMap::new, |map| {
            map.retain(|_, (e, _)| *e > now);
            map.extend(entries.map(|(k, v)| (k, (expiry, v))));
        })
    }

    fn remove(&mut self, key: &CurrentKey, user_key: &K) -> Result<Option<V>, StateError> {
        let now = self.table.now_ms();
        let removed = self.table.modify_existing(key, |map| map.remove(user_key))?.flatten();
        self.drop_if_empty(key)?;
        Ok(removed.filter(|(expiry, _)| *expiry > now).map(|(_, v)| v))
    }

    fn entries(&mut self, key: &CurrentKey) -> Result<Vec<(K, V)>, StateError> {
        let now = self.table.now_ms();
        let renewed = self.renews_on_read().then(|| now.saturating_add(self.ttl.ttl_ms));
        let live = self.table.modify_existing(key, |map| {
            map.retain(|_, (e, _)| *e > now);
            map.iter_mut()
                .map(|(k, (expiry, v))| {
                    if let Some(renewed) = renewed {
                        *expiry = renewed;
                    }
                    (k.clone(), v.clone())
                })
                .collect::<Vec<_>>()
        })?;
        self.drop_if_empty(key)?;
        Ok(live.unwrap_or_default())
    }

    fn is_empty(&mut self, key: &CurrentKey) -> Result<bool, StateError> {
        let now = self.table.now_ms();
        let map = HeapTable::get(self.table, key)?;
        Ok(map.is_none_or(|m| m.values().all(|(expiry, _)| *expiry <= now)))
    }

    fn clear(&mut self, key: &CurrentKey) -> Result<(), StateError> {
        HeapTable::remove(self.table, key).map(|_| ())
    }
}

impl<K: MapKey, V: StateValue> MapState<K, V> {
    pub fn declare(descriptor: &MapStateDescriptor<K, V>) -> Result<Self, StateError> {
        let name = descriptor.name.clone();
        if let Some(ttl) = descriptor.ttl {
            let mut meta = StateMeta::of::<HashMap<K, (u64, V)>>(&name, StateKind::Map);
            meta.ttl = Some(ttl);
            let id = with_backend(&name, |backend| {
                backend.register(meta, &mut |spec: TableSpec| -> Box<dyn KeyedTable> {
                    Box::new(HeapTable::<HashMap<K, (u64, V)>>::from_spec(&name, spec, Some(ttl)))
                })
            })?;
            return Ok(Self { id, name: Arc::from(name.as_str()), ttl: Some(ttl), _types: PhantomData });
        }
        let ttl = descriptor.ttl;
        let mut meta = StateMeta::of::<HashMap<K, V>>(&name, StateKind::Map);
        meta.ttl = ttl;
        let id = with_backend(&name, |backend| {
            backend.register(meta, &mut |mut spec: TableSpec| -> Box<dyn KeyedTable> {
                match spec.raw.take() {
                    Some(raw) if spec.layout == RawLayout::MapEntries => {
                        Box::new(MapEntriesTable::<K, V>::new(&name, raw, &spec))
                    }
                    raw => {
                        spec.raw = raw;
                        Box::new(HeapTable::<HashMap<K, V>>::from_spec(&name, spec, ttl))
                    }
                }
            })
        })?;
        Ok(Self { id, name: Arc::from(name.as_str()), ttl: None, _types: PhantomData })
    }

    /// Runs `f` on the current key and its map's table.
    fn with_map<R>(
        &self,
        f: impl FnOnce(&CurrentKey, &mut dyn MapOps<K, V>) -> Result<R, StateError>,
    ) -> Result<R, StateError> {
        with_backend(&self.name, |backend| {
            let (key, table) = backend.current_key_and_table(self.id, &self.name)?;
            let table = table.as_any_mut();
            if let Some(ttl) = self.ttl {
                return match table.downcast_mut::<HeapTable<HashMap<K, (u64, V)>>>() {
                    Some(table) => f(key, &mut ExpiringMap { table, ttl }),
                    None => Err(StateError::from(StateErrorKind::ForeignHandle { state: self.name.to_string() })),
                };
            }
            if table.is::<MapEntriesTable<K, V>>() {
                let entries = table.downcast_mut::<MapEntriesTable<K, V>>().expect("checked");
                return f(key, entries);
            }
            match table.downcast_mut::<HeapTable<HashMap<K, V>>>() {
                Some(heap) => f(key, heap),
                None => Err(StateError::from(StateErrorKind::ForeignHandle { state: self.name.to_string() })),
            }
        })
    }

    pub fn get(&self, user_key: &K) -> Result<Option<V>, StateError> {
        self.with_map(|key, map| map.get(key, user_key))
    }

    pub fn contains(&self, user_key: &K) -> Result<bool, StateError> {
        self.with_map(|key, map| Ok(map.get(key, user_key)?.is_some()))
    }

    pub fn put(&self, user_key: K, value: V) -> Result<(), StateError> {
        self.put_all(std::iter::once((user_key, value)))
    }

    pub fn put_all(&self, entries: impl IntoIterator<Item = (K, V)>) -> Result<(), StateError> {
        let mut entries = entries.into_iter();
        self.with_map(|key, map| map.put_all(key, &mut entries))
    }

    /// Removes one user key.
    pub fn remove(&self, user_key: &K) -> Result<Option<V>, StateError> {
        self.with_map(|key, map| map.remove(key, user_key))
    }

    /// All entries of the current key's map, copied out.
    pub fn entries(&self) -> Result<Vec<(K, V)>, StateError> {
        self.with_map(|key, map| map.entries(key))
    }

    /// Same as [`MapState::entries`], under Flink's name.
    pub fn iter(&self) -> Result<std::vec::IntoIter<(K, V)>, StateError> {
        Ok(self.entries()?.into_iter())
    }

    pub fn keys(&self) -> Result<Vec<K>, StateError> {
        Ok(self.entries()?.into_iter().map(|(k, _)| k).collect())
    }

    pub fn values(&self) -> Result<Vec<V>, StateError> {
        Ok(self.entries()?.into_iter().map(|(_, v)| v).collect())
    }

    pub fn is_empty(&self) -> Result<bool, StateError> {
        self.with_map(|key, map| map.is_empty(key))
    }

    pub fn clear(&self) -> Result<(), StateError> {
        self.with_map(|key, map| map.clear(key))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
