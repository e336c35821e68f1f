//! Checkpoints in a local directory, through `std::fs` alone: what every job can use
//! without the object-store crate (`s3://` locations need `eddy-checkpoint-object`, which
//! the `eddy` facade's `object-store` feature brings).
//!
//! A file is written under a name of its own and renamed into place, so nobody reads half
//! of it. The files of native snapshots (a heap chain's segments, RocksDB's SSTs), tens of
//! MB each second for a large state, are linked in, or copied by the kernel, never read
//! into memory and written out again: read into a buffer and written, each cost the
//! snapshot thread a fresh buffer's page faults and the I/O thread a second copy (W4 on
//! the heap with 1 s checkpoints: about 8 % of all samples). Such a file is never written
//! again once made, and its local copy is removed after the upload, so a hard link is the
//! file itself; across file systems it is copied.

use super::files::{io, native_files, FileCheckpointStorage, Files};
use super::{CheckpointStorage, CompletedCheckpoint, OpenStorage, SHARED_DIR};
use crate::error::CheckpointError;
use crate::metadata::{CheckpointMetadata, TaskStateEntry, METADATA_FILE};
use crate::snapshot::OperatorSnapshot;
use eddy_state::keyed::NativeFile;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Checkpoints under a local directory.
pub type DirectoryStorage = FileCheckpointStorage<LocalFiles>;

/// The files of a local directory.
#[derive(Debug)]
pub struct LocalFiles {
    root: PathBuf,
    shown: String,
}

impl LocalFiles {
    /// The directory `dir`, created if missing.
    pub fn new(dir: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| io(&dir.display().to_string(), e))?;
        let root = dir.canonicalize().map_err(|e| io(&dir.display().to_string(), e))?;
        Ok(Self { shown: root.display().to_string(), root })
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The path of `relative` under the root; an error for one that would leave it (an
    /// absolute path or `..`: only a damaged or crafted checkpoint names such a file).
    fn path_of(&self, relative: &str) -> Result<PathBuf, CheckpointError> {
        let path = Path::new(relative);
        let inside = path.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside {
            return Err(CheckpointError::Corrupt {
                path: self.shown(relative),
                message: "a file outside the checkpoint directory".into(),
            });
        }
        Ok(self.root.join(path))
    }

    fn shown(&self, relative: &str) -> String {
        format!("{}/{relative}", self.shown)
    }

    /// A name beside `target` that is nobody else's (another process's, with the same pid
    /// in another container, say): where a file is made before it is renamed into place.
    fn staging_name(target: &Path) -> PathBuf {
        static STAGED: AtomicU64 = AtomicU64::new(0);
        let mut staged = target.as_os_str().to_owned();
        staged.push(format!("#eddy-{}-{}", std::process::id(), STAGED.fetch_add(1, Ordering::Relaxed)));
        PathBuf::from(staged)
    }

    fn parent_made(&self, target: &Path, shown: &str) -> Result<(), CheckpointError> {
        match target.parent() {
            Some(parent) => std::fs::create_dir_all(parent).map_err(|e| io(shown, e)),
            None => Ok(()),
        }
    }
}

/// `Ok(None)` for a file that is not there.
fn not_found_is_none<T>(result: std::io::Result<T>) -> std::io::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Files for LocalFiles {
    fn root(&self) -> &str {
        &self.shown
    }

    fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<(), CheckpointError> {
        let (target, shown) = (self.path_of(relative)?, self.shown(relative));
        self.parent_made(&target, &shown)?;
        loop {
            let staged = Self::staging_name(&target);
            let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&staged) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(&shown, e)),
            };
            let written = std::io::Write::write_all(&mut file, &bytes).and_then(|()| std::fs::rename(&staged, &target));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&staged);
                return Err(io(&shown, e));
            }
            return Ok(());
        }
    }

    fn get(&self, relative: &str) -> Result<Option<Vec<u8>>, CheckpointError> {
        not_found_is_none(std::fs::read(self.path_of(relative)?)).map_err(|e| io(&self.shown(relative), e))
    }

    fn exists(&self, relative: &str) -> Result<bool, CheckpointError> {
        let found = not_found_is_none(std::fs::metadata(self.path_of(relative)?));
        Ok(found.map_err(|e| io(&self.shown(relative), e))?.is_some())
    }

    fn delete(&self, relative: &str) -> Result<(), CheckpointError> {
        not_found_is_none(std::fs::remove_file(self.path_of(relative)?)).map_err(|e| io(&self.shown(relative), e))?;
        Ok(())
    }

    fn delete_dir(&self, dir: &str) -> Result<(), CheckpointError> {
        not_found_is_none(std::fs::remove_dir_all(self.path_of(dir)?)).map_err(|e| io(&self.shown(dir), e))?;
        Ok(())
    }

    fn directories(&self) -> Result<Vec<String>, CheckpointError> {
        let failed = |e: std::io::Error| io(&self.shown, e);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(failed)? {
            let entry = entry.map_err(failed)?;
            // A name that is not UTF-8 could hide what the storage must see (which ids
            // exist): refused rather than read in part.
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                let shown = entry.file_name().to_string_lossy().into_owned();
                let why = format!("cannot list it: the name {shown:?} is not UTF-8 (non-unicode)");
                return Err(CheckpointError::Io { path: self.shown.clone(), source: eddy_types::Cause::message(why) });
            };
            if entry.file_type().map_err(failed)?.is_dir() {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// Linked in, or copied by the kernel across file systems; staged under another name
    /// and renamed, as [`Files::put`] writes.
    fn place(&self, relative: &str, source: &Path) -> Result<(u64, u32), CheckpointError> {
        let (target, shown) = (self.path_of(relative)?, self.shown(relative));
        let written = size_and_crc32(source)?;
        self.parent_made(&target, &shown)?;
        let staged = loop {
            let staged = Self::staging_name(&target);
            match std::fs::hard_link(source, &staged) {
                Ok(()) => break staged,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                // Another file system (or no links there): a copy, made by the kernel.
                Err(_) => match std::fs::OpenOptions::new().write(true).create_new(true).open(&staged) {
                    Ok(_) => match std::fs::copy(source, &staged) {
                        Ok(_) => break staged,
                        Err(e) => {
                            let _ = std::fs::remove_file(&staged);
                            return Err(io(&shown, e));
                        }
                    },
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(io(&shown, e)),
                },
            }
        };
        let renamed = std::fs::rename(&staged, &target);
        // Also after a rename: onto a link to the same file, it does nothing and leaves it.
        let _ = std::fs::remove_file(&staged);
        renamed.map_err(|e| io(&shown, e))?;
        Ok(written)
    }
}

/// A file's size and CRC-32, read through one small buffer.
fn size_and_crc32(path: &Path) -> Result<(u64, u32), CheckpointError> {
    let failed = |e: std::io::Error| io(&path.display().to_string(), e);
    let mut file = std::fs::File::open(path).map_err(failed)?;
    let mut buffer = vec![0u8; 256 * 1024];
    let (mut bytes, mut crc) = (0u64, crc32fast::Hasher::new());
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return Ok((bytes, crc.finalize())),
            Ok(read) => {
                bytes += read as u64;
                crc.update(&buffer[..read]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed(e)),
        }
    }
}

impl FileCheckpointStorage<LocalFiles> {
    /// Checkpoints under the local directory `dir`, created if missing.
    pub fn local(dir: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Ok(Self::new(LocalFiles::new(dir)?))
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
            let native_files = native_files(state.as_deref().unwrap_or_default())
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
    let storage = DirectoryStorage::local(dir)?;
    let mut referenced = std::collections::BTreeSet::new();
    for location in storage.completed()? {
        let name = location.rsplit('/').next().unwrap_or(&location).to_string();
        let metadata = storage.read_metadata(&name)?;
        for task in &metadata.tasks {
            let in_shared = |f: &&NativeFile| f.location.starts_with(&format!("{}/", SHARED_DIR));
            for file in native_files(&storage.read_task(&name, task)?).filter(in_shared) {
                referenced.insert(file.location.clone());
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
fn open_parent(dir: &Path) -> Result<(DirectoryStorage, String), CheckpointError> {
    // Flink takes a savepoint's `_metadata` file as well as its directory.
    let dir = match dir.file_name() {
        Some(name) if name == METADATA_FILE && dir.is_file() => {
            dir.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."))
        }
        _ => dir,
    };
    let shown = dir.display().to_string();
    if !dir.join(METADATA_FILE).is_file() {
        return Err(CheckpointError::InvalidLocation { location: shown, message: not_a_checkpoint_dir(dir) });
    }
    let dir = dir.canonicalize().map_err(|e| io(&shown, e))?;
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let name = dir.file_name().ok_or_else(|| CheckpointError::InvalidLocation {
        location: shown.clone(),
        message: "not a directory name".into(),
    })?;
    Ok((DirectoryStorage::local(parent)?, name.to_string_lossy().into_owned()))
}

/// Why `dir` is no checkpoint or savepoint directory, and what is there instead.
fn not_a_checkpoint_dir(dir: &Path) -> String {
    /// The checkpoints and savepoints directly in `dir`, newest first, at most a few.
    fn snapshots_in(dir: &Path) -> String {
        let mut found: Vec<(u64, String)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.path().join(METADATA_FILE).is_file())
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let number = name.rsplit('-').next()?.parse().ok()?;
                Some((number, name))
            })
            .collect();
        found.sort_by(|a, b| b.cmp(a));
        let shown: Vec<String> = found.iter().take(5).map(|(_, name)| name.clone()).collect();
        match found.len() {
            0 => String::new(),
            n if n > shown.len() => format!("{} and {} more", shown.join(", "), n - shown.len()),
            _ => shown.join(", "),
        }
    }
    if !dir.exists() {
        let parent = dir.ancestors().skip(1).find(|p| p.is_dir() && !p.as_os_str().is_empty());
        let nearby = parent.map(|p| (p, snapshots_in(p))).filter(|(_, s)| !s.is_empty());
        return match nearby {
            Some((parent, snapshots)) => format!(
                "it does not exist; {} holds {snapshots}: name one of those directories (a `savepoint=` line names \
                 a savepoint's)",
                parent.display()
            ),
            None => "it does not exist: name a savepoint's directory (the `savepoint=` line of a stop or a \
                     savepoint names it) or a retained checkpoint's (`chk-N`)"
                .into(),
        };
    }
    match snapshots_in(dir) {
        found if !found.is_empty() => format!(
            "it holds no {METADATA_FILE} file itself, but {found}: name one of them, or restore the newest checkpoint \
             of a checkpoint directory with `--restore DIR`"
        ),
        _ => format!(
            "it holds no {METADATA_FILE} file: not a completed checkpoint or savepoint directory (a checkpoint \
             directory's job directories hold `chk-N` ones; `--restore DIR` restores the newest of them)"
        ),
    }
}

/// Storage rooted at the parent of the local checkpoint or savepoint directory `dir`, and
/// the directory's location in it: what a restore reads from.
pub fn open_checkpoint_dir(dir: impl AsRef<Path>) -> Result<(DirectoryStorage, String), CheckpointError> {
    let (storage, name) = open_parent(dir.as_ref())?;
    let location = storage.full(&name);
    Ok((storage, location))
}

/// Reads the checkpoint or savepoint in a local directory (it may have been moved: the
/// metadata names its files relative to it).
pub fn load_checkpoint_dir(dir: impl AsRef<Path>) -> Result<CompletedCheckpoint, CheckpointError> {
    let (storage, location) = open_checkpoint_dir(dir)?;
    storage.load(&location)
}

/// What `s3://` needs, said where such a location is refused.
const NO_OBJECT_STORE: &str = "an object store location needs eddy's `object-store` feature \
                               (eddy = { features = [\"object-store\"] }); this program has local directories only";

/// Opens local directories (`file://` or a path); an object store's location is refused,
/// naming the feature that brings it.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectoryOpener;

impl DirectoryOpener {
    /// The local path of `location`, or why it is none.
    pub fn local_path(location: &str) -> Result<&str, CheckpointError> {
        if location.contains("://") && !location.starts_with("file://") {
            return Err(CheckpointError::InvalidLocation {
                location: location.into(),
                message: NO_OBJECT_STORE.into(),
            });
        }
        Ok(location.strip_prefix("file://").unwrap_or(location))
    }
}

impl OpenStorage for DirectoryOpener {
    fn open(&self, location: &str) -> Result<Arc<dyn CheckpointStorage>, CheckpointError> {
        Ok(Arc::new(DirectoryStorage::local(Self::local_path(location)?)?))
    }

    fn open_checkpoint_dir(&self, dir: &Path) -> Result<(Arc<dyn CheckpointStorage>, String), CheckpointError> {
        let local = Self::local_path(&dir.to_string_lossy())?.to_string();
        let (storage, location) = open_checkpoint_dir(local)?;
        Ok((Arc::new(storage), location))
    }
}
