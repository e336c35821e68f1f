//! Choosing the keyed state backend of a job: a factory that makes one backend per keyed
//! operator instance. The heap is the default; RocksDB lives in its own crate.

use super::backend::{KeyedStateBackend, KeyedStateSnapshot};
use super::heap_chain::{read_heap_chains, HeapChain};
use super::table_backend::TableKeyedStateBackend;
use crate::error::{StateError, StateErrorKind};
use eddy_types::{KeyGroupRange, MaxParallelism, RunSeed};

/// The keyed operator instance a backend is made for.
#[derive(Clone)]
pub struct BackendInstance<'a> {
    /// Uid and subtask, for directory names and messages.
    pub name: &'a str,
    /// The subtask index: also the slot the instance runs in (subtask i of every operator
    /// shares slot i, as with Flink's slot sharing), whose memory budget it uses.
    pub subtask: u32,
    pub range: KeyGroupRange,
    pub max_parallelism: MaxParallelism,
    /// The seed of this instance in this attempt of the run: what it names its files by.
    pub seed: RunSeed,
    /// The clock state time-to-live reads, instead of the wall clock (a simulation's).
    pub ttl_clock: Option<std::sync::Arc<dyn eddy_types::Clock>>,
}

impl std::fmt::Debug for BackendInstance<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendInstance")
            .field("name", &self.name)
            .field("subtask", &self.subtask)
            .field("range", &self.range)
            .field("seed", &self.seed)
            .field("ttl_clock", &self.ttl_clock.as_ref().map(|_| "simulated"))
            .finish()
    }
}

/// Makes the keyed backend of each keyed operator instance.
pub trait KeyedBackendFactory: Send + Sync + std::fmt::Debug {
    /// For messages and reports: `heap`, `rocksdb`.
    fn name(&self) -> &'static str;
    /// A backend for `instance`, starting from `restored` if given (canonical key groups
    /// and/or native files, of any ranges).
    fn create(
        &self,
        instance: &BackendInstance<'_>,
        restored: Option<KeyedStateSnapshot>,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError>;
}

/// The error for native files a backend cannot read.
fn unreadable_native(backend: &str, instance: &str, snapshot: &KeyedStateSnapshot) -> Option<StateError> {
    let native = snapshot.native.first()?;
    Some(StateError::from(StateErrorKind::Backend(format!(
        "cannot restore '{instance}' on the {backend} backend: its state was checkpointed in {}'s own format (an \
         incremental checkpoint); restore it with the {} backend, or take a savepoint (canonical, \
         backend-independent) to switch backends",
        native.backend, native.backend
    ))))
}

/// All keyed state as Rust values on the heap (Flink's `HashMapStateBackend`).
///
/// With incremental checkpoints (`HeapStateBackend::new().with_incremental_checkpoints(true)`,
/// Flink's changelog idea), a checkpoint writes only what changed since the one before,
/// as a chain of files in the checkpoint storage's shared area (see `heap_chain.rs`);
/// savepoints stay canonical.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapStateBackend {
    incremental: bool,
}

impl HeapStateBackend {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checkpoints write only the changes since the last one (they need a checkpoint
    /// directory: the JobManager's memory storage keeps no files).
    pub fn with_incremental_checkpoints(mut self, incremental: bool) -> Self {
        self.incremental = incremental;
        self
    }
}

impl KeyedBackendFactory for HeapStateBackend {
    fn name(&self) -> &'static str {
        "heap"
    }

    fn create(
        &self,
        instance: &BackendInstance<'_>,
        restored: Option<KeyedStateSnapshot>,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        let mut backend = TableKeyedStateBackend::new(instance.range, instance.max_parallelism);
        if let Some(clock) = &instance.ttl_clock {
            backend = backend.with_clock(clock.clone());
        }
        if self.incremental {
            let chain = HeapChain::new(&std::env::temp_dir(), &instance.seed.hex())?;
            backend = backend.with_heap_chain(chain);
        }
        if let Some(mut snapshot) = restored {
            read_heap_chains(&mut snapshot, instance.range)?;
            if let Some(error) = unreadable_native(self.name(), instance.name, &snapshot) {
                return Err(error);
            }
            backend.set_restored(snapshot);
        }
        Ok(Box::new(backend))
    }
}
