//! Checkpoints in the JobManager's memory (the seeds' `MemoryStateBackend` setup): fast,
//! gone with the process, and capped per task so that a large state fails clearly instead
//! of exhausting memory.

use super::{CheckpointStorage, CompletedCheckpoint};
use crate::error::CheckpointError;
use crate::metadata::{self, CheckpointMetadata, StateHandle, TaskStateEntry};
use crate::snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

pub struct MemoryCheckpointStorage {
    state_bytes_max: usize,
    completed: Mutex<BTreeMap<u64, CheckpointMetadata>>,
}

impl MemoryCheckpointStorage {
    /// `state_bytes_max`: the cap per task (64 MiB by default, Flink's is 5 MiB).
    pub fn new(state_bytes_max: usize) -> Self {
        Self { state_bytes_max, completed: Mutex::new(BTreeMap::new()) }
    }

    fn completed(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, CheckpointMetadata>> {
        self.completed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl CheckpointStorage for MemoryCheckpointStorage {
    fn describe(&self) -> String {
        "JobManager memory".into()
    }

    fn write_task_state(
        &self,
        _id: CheckpointId,
        _kind: SnapshotKind,
        file_stem: &str,
        framed: Vec<u8>,
    ) -> Result<StateHandle, CheckpointError> {
        if framed.len() > self.state_bytes_max {
            return Err(CheckpointError::StateTooLarge {
                task: file_stem.to_string(),
                bytes: framed.len(),
                cap: self.state_bytes_max,
            });
        }
        Ok(StateHandle::Inline { payload: framed })
    }

    fn commit(&self, metadata: &CheckpointMetadata) -> Result<String, CheckpointError> {
        self.completed().insert(metadata.checkpoint_id.0, metadata.clone());
        Ok(format!("memory:{}", metadata.checkpoint_id.0))
    }

    fn discard(&self, id: CheckpointId, _kind: SnapshotKind) -> Result<(), CheckpointError> {
        self.completed().remove(&id.0);
        Ok(())
    }

    fn completed(&self) -> Result<Vec<String>, CheckpointError> {
        Ok(self.completed().keys().rev().map(|id| format!("memory:{id}")).collect())
    }

    fn load(&self, location: &str) -> Result<CompletedCheckpoint, CheckpointError> {
        let metadata = self.verify(location)?;
        let mut operators = Vec::new();
        for task in &metadata.tasks {
            operators.extend(self.load_task_state(location, task)?);
        }
        Ok(CompletedCheckpoint { location: location.to_string(), metadata, operators })
    }

    fn verify(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        let invalid = || CheckpointError::InvalidLocation {
            location: location.to_string(),
            message: "no such checkpoint in memory".into(),
        };
        let id: u64 = location.strip_prefix("memory:").and_then(|n| n.parse().ok()).ok_or_else(invalid)?;
        let metadata = self.completed().get(&id).cloned().ok_or_else(invalid)?;
        for task in &metadata.tasks {
            if let StateHandle::Inline { payload } = &task.handle {
                metadata::unframe(location, payload)?;
            }
        }
        Ok(metadata)
    }

    fn load_task_state(
        &self,
        location: &str,
        entry: &TaskStateEntry,
    ) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
        match &entry.handle {
            StateHandle::Inline { payload } => {
                let (version, body) = metadata::unframe_versioned(location, payload)?;
                metadata::decode_task_state(location, version, body)
            }
            StateHandle::File { name, .. } => Err(CheckpointError::InvalidLocation {
                location: format!("{location}/{name}"),
                message: "the JobManager memory storage keeps no files".into(),
            }),
        }
    }

    fn upload_file(&self, relative: &str, _source: &Path) -> Result<(u64, u32), CheckpointError> {
        Err(no_files(relative))
    }

    fn download_file(&self, relative: &str, _target: &Path, _bytes: u64, _crc32: u32) -> Result<(), CheckpointError> {
        Err(no_files(relative))
    }

    fn delete_file(&self, _relative: &str) -> Result<(), CheckpointError> {
        Ok(())
    }
}

/// Native snapshots (RocksDB's files) are only taken when the storage keeps files.
fn no_files(relative: &str) -> CheckpointError {
    CheckpointError::InvalidLocation {
        location: relative.to_string(),
        message: "the JobManager memory storage keeps no files; incremental checkpoints need a checkpoint directory"
            .into(),
    }
}
