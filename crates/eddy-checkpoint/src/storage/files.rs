//! Checkpoints as files under a root, wherever the files live (Flink's
//! `FileSystemCheckpointStorage`): one directory per checkpoint (`chk-<n>/`,
//! `savepoint-<n>/`) with `_metadata` and one state file per task, and the files of native
//! snapshots under `shared/`. `_metadata` is written last and atomically (every [`Files`]
//! writes a file whole or not at all), so a directory without it is an unfinished
//! checkpoint that a crash left behind, never mistaken for a complete one.
//!
//! [`FileCheckpointStorage`] is that layout and its checks, once; a [`Files`] is where the
//! files go: a local directory ([`super::LocalFiles`], here), or an object store (the
//! `eddy-checkpoint-object` crate, which brings `object_store` and its S3 client).

use super::{directory_name, fetch_native_files, CheckpointStorage, CompletedCheckpoint};
use crate::error::CheckpointError;
use crate::metadata::{self, CheckpointMetadata, StateHandle, TaskStateEntry, METADATA_FILE};
use crate::snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
use std::path::Path;

/// Where a checkpoint storage's files live. Paths are relative to the root, `/`-separated.
pub trait Files: Send + Sync {
    /// The root, as locations and messages show it.
    fn root(&self) -> &str;
    /// Writes a file whole, or not at all (a reader never sees half of it).
    fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<(), CheckpointError>;
    /// A file's bytes; `None` if there is no such file.
    fn get(&self, relative: &str) -> Result<Option<Vec<u8>>, CheckpointError>;
    /// Whether the file exists.
    fn exists(&self, relative: &str) -> Result<bool, CheckpointError>;
    /// Deletes a file; one gone already is fine.
    fn delete(&self, relative: &str) -> Result<(), CheckpointError>;
    /// Deletes the directory `dir` and everything in it; gone already is fine.
    fn delete_dir(&self, dir: &str) -> Result<(), CheckpointError>;
    /// The names of the directories at the root.
    fn directories(&self) -> Result<Vec<String>, CheckpointError>;
    /// Places the local file `source` at `relative` (a native snapshot's file, never
    /// written again); its size and CRC-32. By default read and [`Files::put`].
    fn place(&self, relative: &str, source: &Path) -> Result<(u64, u32), CheckpointError> {
        let bytes = std::fs::read(source).map_err(|e| io(&source.display().to_string(), e))?;
        let placed = (bytes.len() as u64, crc32fast::hash(&bytes));
        self.put(relative, bytes)?;
        Ok(placed)
    }
}

/// The files of native snapshots that `operators`' state references (a heap chain's
/// segments, RocksDB's SSTs).
pub fn native_files(operators: &[OperatorSnapshot]) -> impl Iterator<Item = &eddy_state::keyed::NativeFile> {
    operators.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native).flat_map(|n| &n.files)
}

/// A storage I/O failure at `path`.
pub fn io(path: &str, e: impl std::error::Error + Send + Sync + 'static) -> CheckpointError {
    CheckpointError::Io { path: path.to_string(), source: eddy_types::Cause::new(e) }
}

/// Checkpoints as files in `F`.
pub struct FileCheckpointStorage<F> {
    files: F,
}

impl<F: Files> FileCheckpointStorage<F> {
    pub fn new(files: F) -> Self {
        Self { files }
    }

    /// Where the files live.
    pub fn files(&self) -> &F {
        &self.files
    }

    /// A location this storage gave out, relative to its root.
    fn relative<'a>(&self, location: &'a str) -> &'a str {
        location.strip_prefix(&format!("{}/", self.files.root())).unwrap_or(location)
    }

    /// The location of `relative`, as this storage gives it out.
    pub fn full(&self, relative: &str) -> String {
        format!("{}/{relative}", self.files.root())
    }

    /// A file the checkpoint needs; one that is gone makes the checkpoint damaged, as a
    /// wrong checksum does, not the storage unavailable.
    fn get(&self, relative: &str) -> Result<Vec<u8>, CheckpointError> {
        self.files.get(relative)?.ok_or_else(|| CheckpointError::Corrupt {
            path: self.full(relative),
            message: "the file is missing".into(),
        })
    }

    /// Reads a file and checks its size and CRC-32 against what the metadata recorded.
    pub fn read_verified(&self, relative: &str, bytes: u64, crc32: u32) -> Result<Vec<u8>, CheckpointError> {
        let data = self.get(relative)?;
        let corrupt = |message: String| CheckpointError::Corrupt { path: self.full(relative), message };
        if data.len() as u64 != bytes {
            return Err(corrupt(format!("{} bytes, the checkpoint's metadata says {bytes}", data.len())));
        }
        let actual = crc32fast::hash(&data);
        if actual != crc32 {
            return Err(corrupt(format!("checksum mismatch: recorded {crc32:08x}, computed {actual:08x}")));
        }
        Ok(data)
    }

    /// The `_metadata` of the checkpoint directory `dir` (relative to the root).
    pub fn read_metadata(&self, dir: &str) -> Result<CheckpointMetadata, CheckpointError> {
        let metadata_path = format!("{dir}/{METADATA_FILE}");
        let shown = self.full(&metadata_path);
        let bytes = self.get(&metadata_path)?;
        metadata::decode_metadata(&shown, &bytes)
    }

    /// Reads and verifies one task's state: framing, checksum in the file and in `_metadata`.
    pub fn read_task(&self, dir: &str, task: &TaskStateEntry) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
        let (name, payload) = match &task.handle {
            StateHandle::File { name, .. } => {
                let relative = format!("{dir}/{name}");
                (self.full(&relative), self.get(&relative)?)
            }
            StateHandle::Inline { payload } => (format!("{}/{METADATA_FILE}", self.full(dir)), payload.clone()),
        };
        let (version, body) = metadata::unframe_versioned(&name, &payload)?;
        if let StateHandle::File { crc32, .. } = &task.handle {
            if crc32fast::hash(body) != *crc32 {
                return Err(CheckpointError::Corrupt {
                    path: name,
                    message: "file does not match the checksum in _metadata".into(),
                });
            }
        }
        metadata::decode_task_state(&name, version, body)
    }

    fn load_dir(&self, dir: &str) -> Result<CompletedCheckpoint, CheckpointError> {
        let metadata = self.read_metadata(dir)?;
        let mut operators = Vec::new();
        for task in &metadata.tasks {
            operators.extend(self.read_task(dir, task)?);
        }
        fetch_native_files(self, &mut operators)?;
        Ok(CompletedCheckpoint { location: self.full(dir), metadata, operators })
    }
}

impl<F: Files> CheckpointStorage for FileCheckpointStorage<F> {
    fn describe(&self) -> String {
        self.files.root().to_string()
    }

    fn write_task_state(
        &self,
        id: CheckpointId,
        kind: SnapshotKind,
        file_stem: &str,
        framed: Vec<u8>,
    ) -> Result<StateHandle, CheckpointError> {
        let name = format!("{file_stem}.state");
        let crc32 = crc32fast::hash(metadata::unframe(&name, &framed)?);
        let bytes = framed.len() as u64;
        self.files.put(&format!("{}/{name}", directory_name(id, kind)), framed)?;
        Ok(StateHandle::File { name, bytes, crc32 })
    }

    fn commit(&self, metadata_value: &CheckpointMetadata) -> Result<String, CheckpointError> {
        let dir = directory_name(metadata_value.checkpoint_id, metadata_value.kind);
        self.files.put(&format!("{dir}/{METADATA_FILE}"), metadata::frame(&metadata::encode(metadata_value)?))?;
        Ok(self.full(&dir))
    }

    fn discard(&self, id: CheckpointId, kind: SnapshotKind) -> Result<(), CheckpointError> {
        let dir = directory_name(id, kind);
        // `_metadata` first: a half-deleted checkpoint must never look complete. Any
        // failure stops here, leaving the checkpoint whole and usable.
        self.files.delete(&format!("{dir}/{METADATA_FILE}"))?;
        self.files.delete_dir(&dir)
    }

    fn completed(&self) -> Result<Vec<String>, CheckpointError> {
        let mut ids: Vec<u64> = self
            .files
            .directories()?
            .iter()
            .filter_map(|name| name.strip_prefix("chk-").and_then(|n| n.parse().ok()))
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let mut complete = Vec::new();
        for id in ids {
            let dir = directory_name(CheckpointId(id), SnapshotKind::Checkpoint);
            // Without `_metadata`: unfinished, a crash left it behind.
            if self.files.exists(&format!("{dir}/{METADATA_FILE}"))? {
                complete.push(self.full(&dir));
            }
        }
        Ok(complete)
    }

    fn subdirectories(&self) -> Result<Vec<String>, CheckpointError> {
        let mut dirs: Vec<String> = self.files.directories()?.iter().map(|name| self.full(name)).collect();
        dirs.sort();
        Ok(dirs)
    }

    fn load(&self, location: &str) -> Result<CompletedCheckpoint, CheckpointError> {
        self.load_dir(self.relative(location))
    }

    fn metadata(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        self.read_metadata(self.relative(location))
    }

    fn verify(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        let dir = self.relative(location);
        let metadata = self.read_metadata(dir)?;
        for task in &metadata.tasks {
            for file in native_files(&self.read_task(dir, task)?) {
                self.read_verified(&file.location, file.bytes, file.crc32)?;
            }
        }
        Ok(metadata)
    }

    fn load_task_state(
        &self,
        location: &str,
        entry: &TaskStateEntry,
    ) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
        let mut operators = self.read_task(self.relative(location), entry)?;
        fetch_native_files(self, &mut operators)?;
        Ok(operators)
    }

    fn upload_file(&self, relative: &str, source: &Path) -> Result<(u64, u32), CheckpointError> {
        self.files.place(relative, source)
    }

    fn download_file(&self, relative: &str, target: &Path, bytes: u64, crc32: u32) -> Result<(), CheckpointError> {
        let data = self.read_verified(relative, bytes, crc32)?;
        std::fs::write(target, data).map_err(|e| io(&target.display().to_string(), e))
    }

    fn delete_file(&self, relative: &str) -> Result<(), CheckpointError> {
        self.files.delete(relative)
    }
}
