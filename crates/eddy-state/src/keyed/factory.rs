//! Choosing the keyed state backend of a job: a factory that makes one backend per keyed
//! operator instance. The heap is the default; RocksDB lives in its own crate.

use super::backend::KeyedStateBackend;
use super::heap::HeapKeyedStateBackend;
use crate::error::StateError;
use eddy_types::{KeyGroupRange, MaxParallelism};

/// Makes the keyed backend of each keyed operator instance.
pub trait KeyedBackendFactory: Send + Sync + std::fmt::Debug {
    /// For messages and reports: `heap`, `rocksdb`.
    fn name(&self) -> &'static str;
    /// A backend for `range` of operator instance `instance` (uid and subtask).
    fn create(
        &self,
        instance: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError>;
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
        _instance: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        Ok(Box::new(HeapKeyedStateBackend::new(range, max)))
    }
}
