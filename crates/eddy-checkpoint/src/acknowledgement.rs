//! What a subtask tells the coordinator once its part of a checkpoint is written: a small,
//! serializable handle (Flink's `TaskStateSnapshot` in an `AcknowledgeCheckpoint`),
//! never the state itself. The coordinator writes `_metadata` from these, and counts the
//! shared files they reference.

use crate::metadata::TaskStateEntry;
use crate::snapshot::SnapshotKind;
use serde::{Deserialize, Serialize};

/// A file in the shared area that a subtask's state needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedFileRef {
    /// The backend's name for the file (the same immutable file in every checkpoint).
    pub name: String,
    /// Relative to the checkpoint storage's root (`shared/…`); unique per upload, so that
    /// deleting what an aborted checkpoint uploaded never removes another's copy.
    pub location: String,
    pub bytes: u64,
    pub crc32: u32,
    /// Written for this checkpoint; otherwise referenced from an earlier completed one,
    /// which the coordinator must still hold.
    pub uploaded_now: bool,
}

/// One subtask's written part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAcknowledgement {
    /// A checkpoint's or a savepoint's part: which storage holds it.
    pub kind: SnapshotKind,
    /// Where the state is, and which operators it holds: goes into `_metadata` as is.
    pub entry: TaskStateEntry,
    /// Shared files the state references (its own file too, for a finished task's).
    pub shared_files: Vec<SharedFileRef>,
    /// Every byte the state needs, shared files included.
    pub bytes: u64,
    /// Bytes written for this checkpoint.
    pub written_bytes: u64,
    /// The synchronous part on the task thread, µs.
    pub sync_micros: u64,
    /// Time the task waited for its state backend's snapshots since the previous
    /// snapshot, outside synchronous parts, µs.
    pub wait_micros: u64,
    /// The asynchronous part (finishing, serializing and writing the state), µs.
    pub async_micros: u64,
}
