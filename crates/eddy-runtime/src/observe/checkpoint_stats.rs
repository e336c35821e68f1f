//! What a completed checkpoint cost: the JobMaster records it, the board shows it, and a
//! job's result lists it.

use eddy_checkpoint::CheckpointId;

/// Size and duration of a completed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStats {
    pub id: CheckpointId,
    /// Full size: every file the checkpoint needs, shared ones included.
    pub bytes: u64,
    /// Bytes written for this checkpoint (less than `bytes` when it is incremental).
    pub incremental_bytes: u64,
    /// The longest synchronous part of an operator (on its task thread, while its input
    /// waits).
    pub sync_ms: u64,
    /// The asynchronous part: writing (and uploading) the state, off the task threads.
    pub async_ms: u64,
    /// From trigger to stored metadata.
    pub duration_ms: u64,
    /// The longest time an operator's task waited for its state backend's snapshots
    /// since the previous checkpoint, outside synchronous parts (RocksDB writes held
    /// while a checkpoint is being made off the task thread).
    pub wait_ms: u64,
    pub location: String,
    /// The task state files written for it, by name (in the metadata when inline).
    pub files: Vec<String>,
}
