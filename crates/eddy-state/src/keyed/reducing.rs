//! `ReducingState<T>`: values folded into one with a reduce function.

use super::{declare, with_table, StateId};
use crate::descriptor::{ReduceFn, ReducingStateDescriptor, StateKind};
use crate::error::StateError;
use crate::StateValue;
use std::sync::Arc;

/// Keeps one value per key; `add(v)` stores `reduce(stored, v)` (Flink's `ReducingState`).
pub struct ReducingState<T> {
    id: StateId,
    name: Arc<str>,
    reduce: ReduceFn<T>,
}

impl<T> Clone for ReducingState<T> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), reduce: self.reduce.clone() }
    }
}

impl<T: StateValue> ReducingState<T> {
    pub fn declare(descriptor: &ReducingStateDescriptor<T>) -> Result<Self, StateError> {
        let (id, name) = declare::<T>(&descriptor.name, StateKind::Reducing, descriptor.ttl)?;
        Ok(Self { id, name, reduce: descriptor.reduce.clone() })
    }

    /// The reduced value of the current key, `None` before the first `add`.
    pub fn get(&self) -> Result<Option<T>, StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| Ok(table.get(key)?.cloned()))
    }

    pub fn add(&self, value: T) -> Result<(), StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| {
            table.replace_with(key, |stored| match stored {
                Some(stored) => (self.reduce)(stored, value),
                None => value,
            })
        })
    }

    pub fn clear(&self) -> Result<(), StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| table.remove(key).map(|_| ()))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
