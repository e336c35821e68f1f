//! `ListState<T>`: a list of values per key.
//!
//! With a time to live, every element has its own expiry (as in Flink): an element added
//! later does not keep older ones alive. Such lists are stored as `(expiry, element)`
//! pairs; the key's own expiry is the newest element's, so a key whose elements all
//! expired goes away whole (and RocksDB's compaction filter drops it).

use super::{declare, with_table, StateId};
use crate::descriptor::{ListStateDescriptor, StateKind, StateTtlConfig, TtlUpdateType};
use crate::error::StateError;
use crate::StateValue;
use std::marker::PhantomData;
use std::sync::Arc;

/// A list per key (Flink's `ListState`). `add` appends without reading the list back.
pub struct ListState<T> {
    id: StateId,
    name: Arc<str>,
    ttl: Option<StateTtlConfig>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for ListState<T> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), ttl: self.ttl, _type: PhantomData }
    }
}

/// An element with its expiry (wall-clock ms).
type Expiring<T> = (u64, T);

impl<T: StateValue> ListState<T> {
    pub fn declare(descriptor: &ListStateDescriptor<T>) -> Result<Self, StateError> {
        let (id, name) = match descriptor.ttl {
            None => declare::<Vec<T>>(&descriptor.name, StateKind::List, None)?,
            Some(ttl) => declare::<Vec<Expiring<T>>>(&descriptor.name, StateKind::List, Some(ttl))?,
        };
        Ok(Self { id, name, ttl: descriptor.ttl, _type: PhantomData })
    }

    /// The current key's list (its live elements); empty when it has none.
    pub fn get(&self) -> Result<Vec<T>, StateError> {
        let Some(ttl) = self.ttl else {
            return with_table::<Vec<T>, _>(self.id, &self.name, |key, table| {
                Ok(table.get(key)?.cloned().unwrap_or_default())
            });
        };
        with_table::<Vec<Expiring<T>>, _>(self.id, &self.name, |key, table| {
            let now = table.now_ms();
            if ttl.update_type == TtlUpdateType::OnReadAndWrite {
                // Every element read lives another `ttl` from now.
                let renewed = table.modify_existing(key, |list| {
                    list.retain(|(expiry, _)| *expiry > now);
                    list.iter_mut()
                        .map(|(expiry, value)| {
                            *expiry = now.saturating_add(ttl.ttl_ms);
                            value.clone()
                        })
                        .collect()
                })?;
                let renewed: Vec<T> = renewed.unwrap_or_default();
                if renewed.is_empty() {
                    table.remove(key)?;
                }
                return Ok(renewed);
            }
            let list = table.get(key)?;
            Ok(list
                .map(|l| l.iter().filter(|(expiry, _)| *expiry > now).map(|(_, v)| v.clone()).collect())
                .unwrap_or_default())
        })
    }

    pub fn add(&self, value: T) -> Result<(), StateError> {
        self.add_all(std::iter::once(value))
    }

    pub fn add_all(&self, values: impl IntoIterator<Item = T>) -> Result<(), StateError> {
        let mut values = values.into_iter().peekable();
        // Nothing to add must not leave an empty list behind.
        if values.peek().is_none() {
            return Ok(());
        }
        let Some(ttl) = self.ttl else {
            return with_table::<Vec<T>, _>(self.id, &self.name, |key, table| table.append(key, values));
        };
        with_table::<Vec<Expiring<T>>, _>(self.id, &self.name, |key, table| {
            let now = table.now_ms();
            let expiry = now.saturating_add(ttl.ttl_ms);
            table.modify(key, Vec::new, |list| {
                list.retain(|(e, _)| *e > now);
                list.extend(values.map(|v| (expiry, v)));
            })
        })
    }

    /// Replaces the current key's list; an empty list clears it.
    pub fn update(&self, values: Vec<T>) -> Result<(), StateError> {
        if values.is_empty() {
            return self.clear();
        }
        let Some(ttl) = self.ttl else {
            return with_table::<Vec<T>, _>(self.id, &self.name, |key, table| table.put(key, values));
        };
        with_table::<Vec<Expiring<T>>, _>(self.id, &self.name, |key, table| {
            let expiry = table.now_ms().saturating_add(ttl.ttl_ms);
            table.put(key, values.into_iter().map(|v| (expiry, v)).collect())
        })
    }

    pub fn clear(&self) -> Result<(), StateError> {
        match self.ttl {
            None => with_table::<Vec<T>, _>(self.id, &self.name, |key, table| table.remove(key).map(|_| ())),
            Some(_) => {
                with_table::<Vec<Expiring<T>>, _>(self.id, &self.name, |key, table| table.remove(key).map(|_| ()))
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
