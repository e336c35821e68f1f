//! `ValueState<T>`: one value per key.

use super::{declare, with_table, StateId};
use crate::descriptor::{StateKind, ValueStateDescriptor};
use crate::error::StateError;
use crate::StateValue;
use std::marker::PhantomData;
use std::sync::Arc;

/// One value per key (Flink's `ValueState`). A small handle: clone it freely.
pub struct ValueState<T> {
    id: StateId,
    name: Arc<str>,
    default: Option<T>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Clone> Clone for ValueState<T> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), default: self.default.clone(), _type: PhantomData }
    }
}

impl<T: StateValue> ValueState<T> {
    /// Declares the state on the keyed backend of this thread's subtask.
    pub fn declare(descriptor: &ValueStateDescriptor<T>) -> Result<Self, StateError> {
        let (id, name) = declare::<T>(&descriptor.name, StateKind::Value, descriptor.ttl)?;
        Ok(Self { id, name, default: descriptor.default.clone(), _type: PhantomData })
    }

    /// The current key's value, or the descriptor's default, or `None`.
    pub fn value(&self) -> Result<Option<T>, StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| {
            Ok(table.get(key)?.cloned().or_else(|| self.default.clone()))
        })
    }

    /// Reads the current key's value in place (not the default), without the clone
    /// `value()` makes: for a large value read on every record. `read` must not use keyed
    /// state (the backend is borrowed while it runs).
    pub fn with_value<R>(&self, read: impl FnOnce(Option<&T>) -> R) -> Result<R, StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| Ok(read(table.get(key)?)))
    }

    /// Changes the current key's value in place if it has one (`None` if not; nothing is
    /// inserted). `change` must not use keyed state.
    pub fn update_existing<R>(&self, change: impl FnOnce(&mut T) -> R) -> Result<Option<R>, StateError>
    where
        T: Default,
    {
        with_table::<T, _>(self.id, &self.name, |key, table| table.modify_existing(key, change))
    }

    /// Sets the current key's value.
    pub fn update(&self, value: T) -> Result<(), StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| table.put(key, value))
    }

    /// Changes the current key's value in place, inserting `init()` first when absent, and
    /// returns the new value. Saves the second lookup of a `value()` + `update()` pair.
    pub fn update_with<R>(&self, init: impl FnOnce() -> T, f: impl FnOnce(&mut T) -> R) -> Result<R, StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| table.modify(key, init, f))
    }

    /// Removes the current key's value and returns it (not the default): a read and a
    /// clear in one lookup.
    pub fn take(&self) -> Result<Option<T>, StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| table.remove(key))
    }

    /// Removes the current key's value.
    pub fn clear(&self) -> Result<(), StateError> {
        with_table::<T, _>(self.id, &self.name, |key, table| table.remove(key).map(|_| ()))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
