//! What one operator instance contributes to a checkpoint.

use eddy_state::{KeyedStateSnapshot, OperatorStateSnapshot};
use serde::{Deserialize, Serialize};

pub use eddy_types::CheckpointId;

/// A checkpoint the system takes, or a savepoint the user asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SnapshotKind {
    Checkpoint,
    Savepoint,
}

/// The state of one operator instance (one subtask of one operator) at a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorSnapshot {
    /// The operator's uid: how a restore finds its state.
    pub uid: String,
    pub name: String,
    pub subtask: u32,
    pub parallelism: u32,
    /// Keyed state, for operators after a `key_by`.
    pub keyed: Option<KeyedStateSnapshot>,
    pub operator: OperatorStateSnapshot,
    /// How long the synchronous part took on the task thread, µs (for statistics; not
    /// stored).
    #[serde(skip)]
    pub sync_micros: u64,
    /// How long the task waited for its state backend's snapshots since the previous
    /// snapshot, outside synchronous parts, µs (for statistics; not stored).
    #[serde(skip)]
    pub wait_micros: u64,
}
