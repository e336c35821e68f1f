//! A backend's own snapshot format, beside the canonical key-group form: RocksDB's files,
//! for incremental checkpoints (Flink's `IncrementalRemoteKeyedStateHandle`).
//!
//! A native snapshot is a set of files in a local directory (for RocksDB: a checkpoint of
//! hard links, which may still be in the making when the synchronous part returns; see
//! [`NativeSnapshot::pending`]). The checkpoint storage uploads them, the immutable
//! ones (SST files) into a shared area where later checkpoints reference them instead of
//! uploading them again, the others into the checkpoint's own directory. A restore fetches
//! them into a local directory again. The bytes are the backend's business; the runtime
//! and the storage only move files.

use crate::error::{StateError, StateErrorKind};
use eddy_types::KeyGroupRange;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// One subtask's keyed state as the backend's own files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeSnapshot {
    /// Which backend can read the files (`rocksdb`).
    pub backend: String,
    pub key_group_range: KeyGroupRange,
    /// The declared states and their table ids inside the files.
    pub tables: Vec<NativeTable>,
    pub files: Vec<NativeFile>,
    /// Where the files are on this machine: the snapshot's directory before the upload,
    /// the fetched copy on restore. Not part of the stored form.
    #[serde(skip)]
    pub local: Unstored<Option<LocalFiles>>,
    /// On restore: whether the job owns the files (its own checkpoint, or told to claim
    /// it), so that its next checkpoints may reference them instead of uploading copies.
    #[serde(skip)]
    pub owned: bool,
    /// Set when the snapshot must be canonical (a savepoint, a full checkpoint) and the
    /// backend took its files only to read the canonical form out of them later, off the
    /// task thread ([`super::KeyedStateSnapshot::complete_deferred`]).
    #[serde(skip)]
    pub deferred_canonical: Unstored<Option<ReadCanonicalFn>>,
    /// Set while the files are still being made off the task thread (RocksDB's checkpoint
    /// created while the task goes on): `files` and `local` come from it in the
    /// asynchronous part ([`super::KeyedStateSnapshot::complete_deferred`]).
    #[serde(skip)]
    pub pending: Unstored<Option<super::SharedWork<NativeFiles>>>,
}

/// The files of a native snapshot, once made.
#[derive(Debug, Clone)]
pub struct NativeFiles {
    pub files: Vec<NativeFile>,
    pub local: LocalFiles,
}

/// Reads the key groups of a range out of a native snapshot's local files into the
/// canonical form.
pub type ReadCanonicalFn = fn(&NativeSnapshot, KeyGroupRange, &mut super::KeyedStateSnapshot) -> Result<(), StateError>;

/// What travels with a snapshot on this machine but is not part of what the snapshot is
/// (local files, work still to do): never stored, never compared.
#[derive(Clone, Default)]
pub struct Unstored<T>(pub T);

impl<T> PartialEq for Unstored<T> {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl<T> Eq for Unstored<T> {}

impl<T> std::fmt::Debug for Unstored<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(unstored)")
    }
}

/// A declared state inside a native snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeTable {
    pub name: String,
    pub id: u16,
    pub layout: super::RawLayout,
}

/// One file of a native snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeFile {
    /// The file's name in the backend's directory (`000012.sst`, `MANIFEST-000005`).
    pub name: String,
    /// Immutable files go to the shared area, under this name, and are referenced by every
    /// checkpoint that still contains them; `None`: the file belongs to one checkpoint.
    pub shared_name: Option<String>,
    /// Where the storage put it, relative to the checkpoint storage's root (set on upload).
    pub location: String,
    pub bytes: u64,
    pub crc32: u32,
}

impl NativeFile {
    /// The file's name, if it is one plain name: it comes from a checkpoint, and a name
    /// such as `../x` or `/etc/x` would have a restore write or copy a file anywhere.
    pub fn checked_name(&self) -> Result<&str, StateError> {
        let mut parts = std::path::Path::new(&self.name).components();
        match (parts.next(), parts.next()) {
            (Some(std::path::Component::Normal(_)), None) => Ok(&self.name),
            _ => Err(StateError::from(StateErrorKind::Backend(format!(
                "the snapshot names a native file '{}', which is not a plain file name (a corrupt or crafted \
                    checkpoint)",
                self.name
            )))),
        }
    }
}

impl NativeSnapshot {
    /// The local directory with the files, or an error naming the backend.
    pub fn local_dir(&self) -> Result<&Path, StateError> {
        self.local.0.as_ref().map(|l| l.path()).ok_or_else(|| {
            StateError::from(StateErrorKind::Backend(format!(
                "the {} snapshot of key groups {} has no local files (internal error, please report)",
                self.backend, self.key_group_range
            )))
        })
    }

    /// Bytes of all files (the full size of the state).
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// A local directory of snapshot files, removed when the last clone is dropped (after the
/// upload, or when the restored backend has taken its copy).
#[derive(Clone)]
pub struct LocalFiles(Arc<RemoveOnDrop>);

struct RemoveOnDrop {
    dir: PathBuf,
    /// The owner file, locked while the directory is in use (see [`LocalFiles::mark_owned`]);
    /// `None` once the lock could not be taken (a file system that cannot lock), so that it
    /// is tried once per directory.
    owner: OnceLock<Option<File>>,
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(Some(_)) = self.owner.get() {
            owned_here().remove(&self.dir);
        }
    }
}

/// The file a live owner holds locked in its directory.
pub const OWNER_FILE: &str = ".owner";

/// The directories this process marked as its own and still uses: never swept, whatever
/// their lock says (on NFS a lock is a POSIX lock, which the same process takes again).
fn owned_here() -> std::sync::MutexGuard<'static, std::collections::HashSet<PathBuf>> {
    static OWNED: OnceLock<Mutex<std::collections::HashSet<PathBuf>>> = OnceLock::new();
    OWNED.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner())
}

impl LocalFiles {
    /// Takes ownership of `dir`: it is removed when the last clone goes.
    pub fn new(dir: PathBuf) -> Self {
        Self(Arc::new(RemoveOnDrop { dir, owner: OnceLock::new() }))
    }

    pub fn path(&self) -> &Path {
        &self.0.dir
    }

    /// Creates the directory (if missing) and marks it as this process's: see
    /// [`LocalFiles::mark_owned`].
    pub fn create_owned(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.0.dir)?;
        self.mark_owned()
    }

    /// Marks the (existing) directory as this process's while the last clone lives: a file
    /// in it, [`OWNER_FILE`], stays locked until then, and the kernel releases the lock when
    /// the process ends, even killed with SIGKILL, so that [`remove_orphans`] knows what
    /// nobody owns any more. Nothing when marked before.
    ///
    /// The file is locked under another name and renamed: a directory with an owner file
    /// always has its lock taken, so another process's sweep never sees it unlocked while
    /// it is being marked (one without is never swept). Where the file system cannot lock,
    /// the directory stays unmarked, said in the log: it works, and is not swept.
    pub fn mark_owned(&self) -> std::io::Result<()> {
        if self.0.owner.get().is_some() {
            return Ok(());
        }
        let dir = &self.0.dir;
        let locking = dir.join(".owner.locking");
        let owner = File::options().create(true).truncate(false).write(true).open(&locking)?;
        if let Err(e) = owner.try_lock() {
            let _ = std::fs::remove_file(&locking);
            // Said once per process: a checkpoint makes new directories each time.
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(directory = %dir.display(), error = %e, "cannot lock a file in a local state directory; \
                    if the process is killed, its local state directories stay");
            }
            let _ = self.0.owner.set(None);
            return Ok(());
        }
        // Named this process's before its owner file shows: a sweep of this process (which
        // holds the same set while it looks) never takes a lock of its own on it, which on
        // NFS, where a lock is the process's, would succeed, and its closing would drop ours.
        let mut owned = owned_here();
        owned.insert(dir.clone());
        if let Err(e) = std::fs::rename(&locking, dir.join(OWNER_FILE)) {
            owned.remove(dir);
            return Err(e);
        }
        drop(owned);
        let _ = self.0.owner.set(Some(owner));
        Ok(())
    }
}

/// Removes the directories in `parent` whose names start with `prefix` and whose owner
/// process has ended (their owner file is not locked, and this process does not use them;
/// see [`LocalFiles::mark_owned`]): what a killed process left. Directories without an
/// owner file are left alone. Returns how many were removed.
pub fn remove_orphans(parent: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let dir = entry.path();
        // Held while the directory is looked at, so that none of this process's is marked
        // meanwhile (see `mark_owned`).
        let owned = owned_here();
        if owned.contains(&dir) {
            continue;
        }
        let Ok(owner) = File::options().write(true).open(dir.join(OWNER_FILE)) else { continue };
        // Locked by us only now: its owner is gone (a live owner holds it).
        if owner.try_lock().is_ok() && std::fs::remove_dir_all(&dir).is_ok() {
            tracing::info!(directory = %dir.display(), "removed a local state directory its process left behind when it \
                was killed");
            removed += 1;
        }
    }
    removed
}

impl std::fmt::Debug for LocalFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalFiles({})", self.path().display())
    }
}
