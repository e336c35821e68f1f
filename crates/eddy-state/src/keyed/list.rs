//! `ListState<T>`: a list of values per key.

use super::{declare, with_table, StateId};
use crate::descriptor::{ListStateDescriptor, StateKind};
use crate::error::StateError;
use crate::StateValue;
use std::marker::PhantomData;
use std::sync::Arc;

/// A list per key (Flink's `ListState`). `add` appends without reading the list back.
pub struct ListState<T> {
    id: StateId,
    name: Arc<str>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for ListState<T> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), _type: PhantomData }
    }
}

impl<T: StateValue> ListState<T> {
    pub fn declare(descriptor: &ListStateDescriptor<T>) -> Result<Self, StateError> {
        let (id, name) = declare::<Vec<T>>(&descriptor.name, StateKind::List, descriptor.ttl)?;
        Ok(Self { id, name, _type: PhantomData })
    }

    /// The current key's list; empty when it has none.
    pub fn get(&self) -> Result<Vec<T>, StateError> {
        with_table::<Vec<T>, _>(self.id, &self.name, |key, table| Ok(table.get(key)?.cloned().unwrap_or_default()))
    }

    pub fn add(&self, value: T) -> Result<(), StateError> {
        with_table::<Vec<T>, _>(self.id, &self.name, |key, table| table.append(key, vec![value]))
    }

    pub fn add_all(&self, values: impl IntoIterator<Item = T>) -> Result<(), StateError> {
        let values: Vec<T> = values.into_iter().collect();
        if values.is_empty() {
            return Ok(());
        }
        with_table::<Vec<T>, _>(self.id, &self.name, |key, table| table.append(key, values))
    }

    /// Replaces the current key's list; an empty list clears it.
    pub fn update(&self, values: Vec<T>) -> Result<(), StateError> {
        with_table::<Vec<T>, _>(self.id, &self.name, |key, table| {
            if values.is_empty() {
                table.remove(key).map(|_| ())
            } else {
                table.put(key, values)
            }
        })
    }

    pub fn clear(&self) -> Result<(), StateError> {
        with_table::<Vec<T>, _>(self.id, &self.name, |key, table| table.remove(key).map(|_| ()))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
