//! Checkpoints in a filesystem or object store, through the `object_store` crate: one
//! directory per checkpoint (`chk-<n>/`, `savepoint-<n>/`) with `_metadata` and one state
//! file per task. `_metadata` is written last and atomically (the store's put writes a
//! temporary object and renames it), so a directory without it is an unfinished checkpoint
//! that a crash left behind, never mistaken for a complete one.
//!
//! A leaf crate: `object_store`, tokio and the S3 client stay out of `eddy-checkpoint`
//! (the protocol and formats) and of the runtime, which open storage through
//! [`OpenStorage`] ([`ObjectStorageOpener`] here).

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

mod local_file;

use eddy_checkpoint::metadata::{self, CheckpointMetadata, StateHandle, TaskStateEntry, METADATA_FILE};
use eddy_checkpoint::storage::{
    directory_name, fetch_native_files, CheckpointStorage, CompletedCheckpoint, OpenStorage, SHARED_DIR,
};
use eddy_checkpoint::{CheckpointError, CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_state::keyed::NativeFile;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Checkpoint storage on an object store; [`ObjectCheckpointStorage::local`] for a
/// directory (Flink's `FileSystemCheckpointStorage`).
pub struct ObjectCheckpointStorage {
    store: Arc<dyn ObjectStore>,
    /// Drives the store's async calls; the coordinator itself is synchronous.
    runtime: tokio::runtime::Runtime,
    /// Human-readable root, also the prefix of returned locations.
    root: String,
    /// For local directories: the real path, to remove emptied directories.
    local_root: Option<PathBuf>,
    /// For local directories: the store itself, where files are linked in.
    local_fs: Option<Arc<LocalFileSystem>>,
}

/// A small runtime for the object store's I/O.
fn io_runtime(root: &str) -> Result<tokio::runtime::Runtime, CheckpointError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| io(root, e))
}

fn io(path: &str, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Io { path: path.to_string(), message: e.to_string() }
}

impl ObjectCheckpointStorage {
    /// Checkpoints under a local directory, created if missing.
    pub fn local(dir: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| io(&dir.display().to_string(), e))?;
        let dir = dir.canonicalize().map_err(|e| io(&dir.display().to_string(), e))?;
        let store = Arc::new(LocalFileSystem::new_with_prefix(&dir).map_err(|e| io(&dir.display().to_string(), e))?);
        let runtime = io_runtime(&dir.display().to_string())?;
        let root = dir.display().to_string();
        Ok(Self { store: store.clone(), runtime, root, local_root: Some(dir), local_fs: Some(store) })
    }

    /// Checkpoints in any object store (an S3 client, say), under `root` for messages.
    pub fn new(store: Arc<dyn ObjectStore>, root: impl Into<String>) -> Result<Self, CheckpointError> {
        let root = root.into();
        let runtime = io_runtime(&root)?;
        Ok(Self { store, runtime, root, local_root: None, local_fs: None })
    }

    /// Checkpoints at a location: `s3://bucket/prefix` for an S3-compatible store (endpoint,
    /// region and credentials from the usual `AWS_*` environment variables, e.g.
    /// `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`), anything else a local directory.
    pub fn open(location: &str) -> Result<Self, CheckpointError> {
        let Some(rest) = location.strip_prefix("s3://") else {
            return Self::local(location.strip_prefix("file://").unwrap_or(location));
        };
        let invalid = |message: String| CheckpointError::InvalidLocation { location: location.to_string(), message };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid("no bucket name".into()));
        }
        let s3 = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        let store: Arc<dyn ObjectStore> = match prefix.trim_matches('/') {
            "" => Arc::new(s3),
            prefix => Arc::new(object_store::prefix::PrefixStore::new(s3, prefix)),
        };
        Self::new(store, location.trim_end_matches('/'))
    }

    /// A location this storage gave out, relative to its root.
    fn relative<'a>(&self, location: &'a str) -> &'a str {
        location.strip_prefix(&format!("{}/", self.root)).unwrap_or(location)
    }

    fn full(&self, relative: &str) -> String {
        format!("{}/{relative}", self.root)
    }

    fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<(), CheckpointError> {
        self.runtime
            .block_on(self.store.put(&ObjectPath::from(relative), PutPayload::from(bytes)))
            .map_err(|e| io(&self.full(relative), e))?;
        Ok(())
    }

    fn get(&self, relative: &str) -> Result<Vec<u8>, CheckpointError> {
        let path = ObjectPath::from(relative);
        self.runtime.block_on(async { self.store.get(&path).await?.bytes().await }).map(|b| b.to_vec()).map_err(|e| {
            match e {
                // A file the checkpoint needs is gone: the checkpoint is damaged, as with a
                // wrong checksum, not the storage unavailable.
                object_store::Error::NotFound { .. } => {
                    CheckpointError::Corrupt { path: self.full(relative), message: "the file is missing".into() }
                }
                e => io(&self.full(relative), e),
            }
        })
    }

    /// Reads a file and checks its size and CRC-32 against what the metadata recorded.
    fn read_verified(&self, relative: &str, bytes: u64, crc32: u32) -> Result<Vec<u8>, CheckpointError> {
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

    fn read_metadata(&self, dir: &str) -> Result<CheckpointMetadata, CheckpointError> {
        let metadata_path = format!("{dir}/{METADATA_FILE}");
        let shown = self.full(&metadata_path);
        let bytes = self.get(&metadata_path)?;
        metadata::decode_metadata(&shown, &bytes)
    }

    /// Reads and verifies one task's state: framing, checksum in the file and in `_metadata`.
    fn read_task(&self, dir: &str, task: &TaskStateEntry) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
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

/// One task of an inspected checkpoint: its entry in `_metadata` and whether its state
/// file reads back intact.
#[derive(Debug)]
pub struct TaskInspection {
    pub entry: TaskStateEntry,
    pub state: Result<Vec<OperatorSnapshot>, CheckpointError>,
    /// The files of native (incremental) snapshots the state references, each checked.
    pub native_files: Vec<(String, Result<(), CheckpointError>)>,
}

/// Reads a checkpoint or savepoint directory for `eddy checkpoint inspect`: the metadata,
/// and every task's state with its own verdict, so one corrupt file does not hide the rest.
pub fn inspect_checkpoint_dir(
    dir: impl AsRef<Path>,
) -> Result<(CheckpointMetadata, Vec<TaskInspection>), CheckpointError> {
    let (storage, name) = open_parent(dir.as_ref())?;
    let metadata = storage.read_metadata(&name)?;
    let tasks = metadata
        .tasks
        .iter()
        .map(|entry| {
            let state = storage.read_task(&name, entry);
            let natives = state.iter().flatten().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
            let native_files = natives
                .flat_map(|n| &n.files)
                .map(|f| (f.location.clone(), storage.read_verified(&f.location, f.bytes, f.crc32).map(|_| ())))
                .collect();
            TaskInspection { entry: entry.clone(), state, native_files }
        })
        .collect();
    Ok((metadata, tasks))
}

/// Shared files (`shared/…`, relative to `dir`) that no complete checkpoint in the
/// checkpoint directory `dir` references: left behind by a checkpoint that was being
/// written when its process died. Fails, naming it, if a checkpoint cannot be read (what
/// it references would be unknown). Only meaningful while no job writes into `dir`.
pub fn unreferenced_shared_files(dir: impl AsRef<Path>) -> Result<Vec<String>, CheckpointError> {
    let dir = dir.as_ref();
    let shown = dir.display().to_string();
    let storage = ObjectCheckpointStorage::local(dir)?;
    let mut referenced = std::collections::BTreeSet::new();
    for location in storage.completed()? {
        let name = location.rsplit('/').next().unwrap_or(&location).to_string();
        let metadata = storage.read_metadata(&name)?;
        for task in &metadata.tasks {
            for operator in storage.read_task(&name, task)? {
                let natives = operator.keyed.iter().flat_map(|k| &k.native);
                let in_shared = |f: &&NativeFile| f.location.starts_with(&format!("{}/", SHARED_DIR));
                for file in natives.flat_map(|n| &n.files).filter(in_shared) {
                    referenced.insert(file.location.clone());
                }
            }
        }
    }
    let shared = dir.join(SHARED_DIR);
    let mut unreferenced = Vec::new();
    if shared.is_dir() {
        for entry in std::fs::read_dir(&shared).map_err(|e| io(&shown, e))? {
            let entry = entry.map_err(|e| io(&shown, e))?;
            let location = format!("{}/{}", SHARED_DIR, entry.file_name().to_string_lossy());
            if !referenced.contains(&location) {
                unreferenced.push(location);
            }
        }
    }
    unreferenced.sort();
    Ok(unreferenced)
}

/// Storage rooted at a checkpoint directory's parent, and the directory's name in it.
fn open_parent(dir: &Path) -> Result<(ObjectCheckpointStorage, String), CheckpointError> {
    let shown = dir.display().to_string();
    if !dir.join(METADATA_FILE).is_file() {
        return Err(CheckpointError::InvalidLocation {
            location: shown,
            message: format!("no {METADATA_FILE} file: not a completed checkpoint or savepoint directory"),
        });
    }
    let dir = dir.canonicalize().map_err(|e| io(&shown, e))?;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir.file_name().ok_or_else(|| CheckpointError::InvalidLocation {
        location: shown.clone(),
        message: "not a directory name".into(),
    })?;
    Ok((ObjectCheckpointStorage::local(parent)?, name.to_string_lossy().into_owned()))
}

impl CheckpointStorage for ObjectCheckpointStorage {
    fn describe(&self) -> String {
        self.root.clone()
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
        self.put(&format!("{}/{name}", directory_name(id, kind)), framed)?;
        Ok(StateHandle::File { name, bytes, crc32 })
    }

    fn commit(&self, metadata_value: &CheckpointMetadata) -> Result<String, CheckpointError> {
        let dir = directory_name(metadata_value.checkpoint_id, metadata_value.kind);
        self.put(&format!("{dir}/{METADATA_FILE}"), metadata::frame(&metadata::encode(metadata_value)?))?;
        Ok(self.full(&dir))
    }

    fn discard(&self, id: CheckpointId, kind: SnapshotKind) -> Result<(), CheckpointError> {
        let dir = directory_name(id, kind);
        let prefix = ObjectPath::from(dir.as_str());
        // `_metadata` first: a half-deleted checkpoint must never look complete.
        let metadata_path = ObjectPath::from(format!("{dir}/{METADATA_FILE}"));
        // Gone already is fine (an earlier discard stopped half-way); any other failure
        // stops here, leaving the checkpoint whole and usable.
        match self.runtime.block_on(self.store.delete(&metadata_path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(io(&self.full(metadata_path.as_ref()), e)),
        }
        let objects: Vec<_> = self.runtime.block_on(self.store.list(Some(&prefix)).collect::<Vec<_>>());
        for object in objects {
            let object = object.map_err(|e| io(&self.full(&dir), e))?;
            self.runtime
                .block_on(self.store.delete(&object.location))
                .map_err(|e| io(&self.full(object.location.as_ref()), e))?;
        }
        if let Some(root) = &self.local_root {
            let _ = std::fs::remove_dir_all(root.join(&dir));
        }
        Ok(())
    }

    fn completed(&self) -> Result<Vec<String>, CheckpointError> {
        let listing = self.runtime.block_on(self.store.list_with_delimiter(None)).map_err(|e| io(&self.root, e))?;
        let mut ids: Vec<u64> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.as_ref().strip_prefix("chk-").and_then(|n| n.parse().ok()))
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let mut complete = Vec::new();
        for id in ids {
            let dir = directory_name(CheckpointId(id), SnapshotKind::Checkpoint);
            let path = ObjectPath::from(format!("{dir}/{METADATA_FILE}"));
            match self.runtime.block_on(self.store.head(&path)) {
                Ok(_) => complete.push(self.full(&dir)),
                // Unfinished: a crash left it behind.
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(io(&self.full(path.as_ref()), e)),
            }
        }
        Ok(complete)
    }

    fn subdirectories(&self) -> Result<Vec<String>, CheckpointError> {
        let listing = self.runtime.block_on(self.store.list_with_delimiter(None)).map_err(|e| io(&self.root, e))?;
        let mut dirs: Vec<String> = listing.common_prefixes.iter().map(|p| self.full(p.as_ref())).collect();
        dirs.sort();
        Ok(dirs)
    }

    fn load(&self, location: &str) -> Result<CompletedCheckpoint, CheckpointError> {
        self.load_dir(self.relative(location))
    }

    fn verify(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        let dir = self.relative(location);
        let metadata = self.read_metadata(dir)?;
        for task in &metadata.tasks {
            let operators = self.read_task(dir, task)?;
            let natives = operators.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
            for file in natives.flat_map(|n| &n.files) {
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
        if let Some(local) = &self.local_fs {
            return local_file::place(local, relative, &self.full(relative), source);
        }
        let bytes = std::fs::read(source).map_err(|e| io(&source.display().to_string(), e))?;
        let written = (bytes.len() as u64, crc32fast::hash(&bytes));
        self.put(relative, bytes)?;
        Ok(written)
    }

    fn download_file(&self, relative: &str, target: &Path, bytes: u64, crc32: u32) -> Result<(), CheckpointError> {
        let data = self.read_verified(relative, bytes, crc32)?;
        std::fs::write(target, data).map_err(|e| io(&target.display().to_string(), e))
    }

    fn delete_file(&self, relative: &str) -> Result<(), CheckpointError> {
        match self.runtime.block_on(self.store.delete(&ObjectPath::from(relative))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io(&self.full(relative), e)),
        }
    }
}

/// Reads the checkpoint or savepoint in a directory (it may have been moved: the metadata
/// names its files relative to it), local or `s3://bucket/…/chk-7`.
pub fn load_checkpoint_dir(dir: impl AsRef<Path>) -> Result<CompletedCheckpoint, CheckpointError> {
    let (storage, location) = open_checkpoint_dir(dir)?;
    storage.load(&location)
}

/// Storage rooted at the parent of a checkpoint or savepoint directory (local or
/// `s3://bucket/…/chk-7`), and the directory's location in it: what a restore reads from.
pub fn open_checkpoint_dir(dir: impl AsRef<Path>) -> Result<(ObjectCheckpointStorage, String), CheckpointError> {
    let shown = dir.as_ref().to_string_lossy().into_owned();
    let (storage, name) = if shown.starts_with("s3://") {
        let trimmed = shown.trim_end_matches('/');
        let (parent, name) = trimmed.rsplit_once('/').ok_or_else(|| CheckpointError::InvalidLocation {
            location: shown.clone(),
            message: "expected s3://bucket/path/chk-N".into(),
        })?;
        (ObjectCheckpointStorage::open(parent)?, name.to_string())
    } else {
        open_parent(dir.as_ref())?
    };
    let location = storage.full(&name);
    Ok((storage, location))
}

/// Opens [`ObjectCheckpointStorage`] for the runtime: directories and `s3://` URLs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ObjectStorageOpener;

impl OpenStorage for ObjectStorageOpener {
    fn open(&self, location: &str) -> Result<Arc<dyn CheckpointStorage>, CheckpointError> {
        Ok(Arc::new(ObjectCheckpointStorage::open(location)?))
    }

    fn open_checkpoint_dir(&self, dir: &Path) -> Result<(Arc<dyn CheckpointStorage>, String), CheckpointError> {
        let (storage, location) = open_checkpoint_dir(dir)?;
        Ok((Arc::new(storage), location))
    }
}
