//! Choosing the keyed state backend of a job: a factory that makes one backend per keyed
//! operator instance. The heap is the default; RocksDB lives in its own crate.

use super::backend::{KeyedStateBackend, KeyedStateSnapshot};
use super::heap::HeapKeyedStateBackend;
use crate::error::StateError;
use eddy_types::{KeyGroupRange, MaxParallelism};

/// Makes the keyed backend of each keyed operator instance.
pub trait KeyedBackendFactory: Send + Sync + std::fmt::Debug {
    /// For messages and reports: `heap`, `rocksdb`.
    fn name(&self) -> &'static str;
    /// A backend for `range` of operator instance `instance` (uid and subtask), starting
    /// from `restored` if given (canonical key groups and/or native files, any ranges).
    fn create(
        &self,
        instance: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
        restored: Option<KeyedStateSnapshot>,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError>;
}

/// The error for native files a backend cannot read.
pub fn unreadable_native(backend: &str, instance: &str, snapshot: &KeyedStateSnapshot) -> Option<StateError> {
    let native = snapshot.native.first()?;
    Some(StateError::Backend(format!(
        "cannot restore '{instance}' on the {backend} backend: its state was checkpointed in {}'s own format (an incremental checkpoint); restore it with the {} backend, or take a savepoint (canonical, backend-independent) to switch backends",
        native.backend, native.backend
    )))
}

/// All keyed state as Rust values on the heap (Flink's `HashMapStateBackend`).
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapStateBackend;

impl KeyedBackendFactory for HeapStateBackend {
    fn name(&self) -> &'static str {
        "heap"
    }

    fn create(
        &self,
        instance: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
        restored: Option<KeyedStateSnapshot>,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        let mut backend = HeapKeyedStateBackend::new(range, max);
        if let Some(snapshot) = restored {
            if let Some(error) = unreadable_native(self.name(), instance, &snapshot) {
                return Err(error);
            }
            backend.set_restored(snapshot);
        }
        Ok(Box::new(backend))
    }
}
