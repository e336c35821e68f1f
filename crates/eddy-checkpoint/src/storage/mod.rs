//! Checkpoint storage: where completed checkpoints and savepoints live (Flink's
//! `CheckpointStorage`), apart from the state backend that holds working state.

mod directory;
mod files;
mod job_dir;
mod memory;
mod native;
mod task_writer;

pub use directory::{
    inspect_checkpoint_dir, load_checkpoint_dir, open_checkpoint_dir, unreferenced_shared_files, DirectoryOpener,
    DirectoryStorage, LocalFiles, TaskInspection,
};
pub use files::{io, FileCheckpointStorage, Files};
pub use job_dir::{choose_latest, is_job_dir_of, FoundJob, JobDirId, JobDirLock, JOB_FINISHED_FILE, JOB_LOCK_FILE};
pub use memory::MemoryCheckpointStorage;
pub use native::{fetch_native_files, file_safe, upload_native_files, KnownFiles, SHARED_DIR};
pub use task_writer::{SavepointTargets, TaskStateWriter};

use crate::error::CheckpointError;
use crate::metadata::{CheckpointMetadata, StateHandle, TaskStateEntry};
use crate::snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
use std::path::Path;

/// A completed checkpoint read back, every state file verified.
#[derive(Debug, Clone)]
pub struct CompletedCheckpoint {
    /// Where it is (a directory, or `memory:<id>`).
    pub location: String,
    pub metadata: CheckpointMetadata,
    pub operators: Vec<OperatorSnapshot>,
}

impl CompletedCheckpoint {
    /// The state of subtask `subtask` of the operator with `uid`.
    pub fn state_for(&self, uid: &str, subtask: u32) -> Option<&OperatorSnapshot> {
        self.operators.iter().find(|o| o.uid == uid && o.subtask == subtask)
    }

    /// Uids with state in this checkpoint.
    pub fn uids(&self) -> Vec<&str> {
        let mut uids: Vec<&str> = self.operators.iter().map(|o| o.uid.as_str()).collect();
        uids.sort();
        uids.dedup();
        uids
    }
}

/// The coordinator's view of checkpoint storage.
pub trait CheckpointStorage: Send + Sync {
    /// For messages: where checkpoints go.
    fn describe(&self) -> String;
    /// Writes one task's framed state for checkpoint `id` (the asynchronous part).
    fn write_task_state(
        &self,
        id: CheckpointId,
        kind: SnapshotKind,
        file_stem: &str,
        framed: Vec<u8>,
    ) -> Result<StateHandle, CheckpointError>;
    /// Completes a checkpoint by writing its metadata atomically; returns its location.
    fn commit(&self, metadata: &CheckpointMetadata) -> Result<String, CheckpointError>;
    /// Deletes a checkpoint (completed or not) and its files.
    fn discard(&self, id: CheckpointId, kind: SnapshotKind) -> Result<(), CheckpointError>;
    /// Locations of completed checkpoints (not savepoints), newest first.
    fn completed(&self) -> Result<Vec<String>, CheckpointError>;
    /// Locations of the directories directly under the storage's root (the job
    /// directories under a checkpoint directory); none in memory.
    fn subdirectories(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(Vec::new())
    }
    /// Reads a completed checkpoint and verifies every file; the files of native
    /// snapshots are fetched into local directories.
    fn load(&self, location: &str) -> Result<CompletedCheckpoint, CheckpointError>;
    /// Reads a completed checkpoint's metadata and checks every file it needs (size and
    /// checksum), one file at a time, keeping none: the coordinator's view of a restore.
    fn verify(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError>;
    /// Reads a completed checkpoint's metadata alone, its files unchecked: what a job
    /// checks before it is submitted (whether the checkpoint fits it), cheaply.
    fn metadata(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        self.verify(location)
    }
    /// Reads one task's state of a completed checkpoint, verified, and fetches the files
    /// of its native snapshots into local directories: the task view of a restore.
    fn load_task_state(&self, location: &str, entry: &TaskStateEntry)
        -> Result<Vec<OperatorSnapshot>, CheckpointError>;
    /// Writes the local file `source` at `relative` (to the storage's root); returns its
    /// size and CRC-32. `source` must never change once uploaded: storage in a local
    /// directory links it in rather than copying it (native snapshot files are immutable).
    fn upload_file(&self, relative: &str, source: &Path) -> Result<(u64, u32), CheckpointError>;
    /// Copies the file at `relative` into the local file `target`, verifying its size and
    /// CRC-32.
    fn download_file(&self, relative: &str, target: &Path, bytes: u64, crc32: u32) -> Result<(), CheckpointError>;
    /// Deletes one file (a shared file no retained checkpoint references any more).
    fn delete_file(&self, relative: &str) -> Result<(), CheckpointError>;
}

/// Opens checkpoint storage at a location (a directory, `s3://…`). The runtime opens
/// storage only through this: [`DirectoryOpener`] for local directories, and
/// `eddy-checkpoint-object`'s opener for object stores too, so that `object_store` and
/// its async runtime stay in that leaf crate.
pub trait OpenStorage: Send + Sync + std::fmt::Debug {
    /// Storage rooted at `location`.
    fn open(&self, location: &str) -> Result<std::sync::Arc<dyn CheckpointStorage>, CheckpointError>;
    /// The storage holding the checkpoint or savepoint directory `dir`, and the
    /// directory's location in it.
    fn open_checkpoint_dir(
        &self,
        dir: &Path,
    ) -> Result<(std::sync::Arc<dyn CheckpointStorage>, String), CheckpointError>;
}

/// The directory name of a checkpoint or savepoint.
pub fn directory_name(id: CheckpointId, kind: SnapshotKind) -> String {
    match kind {
        SnapshotKind::Checkpoint => format!("chk-{}", id.0),
        SnapshotKind::Savepoint => format!("savepoint-{}", id.0),
    }
}
