//! Moving the files of native snapshots (RocksDB's, for incremental checkpoints) between
//! a subtask's local directory and checkpoint storage.
//!
//! Shared files (immutable SSTs) live in `shared/` under the storage root, named by the
//! backend instance that wrote them; a subtask uploads one only if its last completed
//! checkpoint does not hold it already, and otherwise just references it. The other files
//! go into the checkpoint's own directory. Locations are relative to the storage root.

use super::CheckpointStorage;
use crate::acknowledgement::SharedFileRef;
use crate::error::CheckpointError;
use crate::snapshot::OperatorSnapshot;
use eddy_state::keyed::{LocalFiles, Unstored};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The folder of shared files under the storage root.
pub const SHARED_DIR: &str = "shared";

/// Shared files already in storage, by the backend's name: location, size, CRC-32.
pub type KnownFiles = HashMap<String, (String, u64, u32)>;

/// Uploads the files of every native snapshot in `operators` and returns the bytes
/// uploaded and the shared files the snapshots reference. A shared file in `known` (by its
/// backend's name: an earlier completed checkpoint holds it) is referenced, not uploaded
/// again; a new one goes to `shared/<upload>-<name>`, a name no other upload uses (two
/// checkpoints in flight may both upload the same new file). The other files go into the
/// checkpoint's directory `dir`, as `<dir>/<uid>-<subtask>/<name>`. The local directories
/// are removed.
pub fn upload_native_files(
    storage: &dyn CheckpointStorage,
    known: &KnownFiles,
    dir: &str,
    upload: &str,
    operators: &mut [OperatorSnapshot],
) -> Result<(u64, Vec<SharedFileRef>), CheckpointError> {
    let mut uploaded = 0;
    let mut shared = Vec::new();
    for operator in operators.iter_mut() {
        let Some(keyed) = operator.keyed.as_mut() else { continue };
        for native in &mut keyed.native {
            let Some(local) = native.local.0.take() else { continue };
            for file in &mut native.files {
                let source = local.path().join(&file.name);
                let owner = format!("{}-{}", file_safe(&operator.uid), operator.subtask);
                let known_file = file.shared_name.as_ref().and_then(|name| known.get(name).cloned());
                let (location, bytes, crc32) = match (&file.shared_name, known_file.clone()) {
                    (Some(_), Some(known)) => known,
                    (Some(name), None) => {
                        let location = format!("{SHARED_DIR}/{upload}-{name}");
                        let (bytes, crc32) = storage.upload_file(&location, &source)?;
                        uploaded += bytes;
                        (location, bytes, crc32)
                    }
                    (None, _) => {
                        let location = format!("{dir}/{owner}/{}", file.name);
                        let (bytes, crc32) = storage.upload_file(&location, &source)?;
                        uploaded += bytes;
                        (location, bytes, crc32)
                    }
                };
                if let Some(name) = &file.shared_name {
                    let uploaded_now = known_file.is_none();
                    shared.push(SharedFileRef {
                        name: name.clone(),
                        location: location.clone(),
                        bytes,
                        crc32,
                        uploaded_now,
                    });
                }
                (file.bytes, file.crc32, file.location) = (bytes, crc32, location);
            }
        }
    }
    Ok((uploaded, shared))
}

/// Fetches the files of every native snapshot in `operators` into a new local directory
/// each, verifying sizes and checksums.
pub fn fetch_native_files(
    storage: &dyn CheckpointStorage,
    operators: &mut [OperatorSnapshot],
) -> Result<(), CheckpointError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    for operator in operators.iter_mut() {
        let Some(keyed) = operator.keyed.as_mut() else { continue };
        for native in &mut keyed.native {
            let dir = std::env::temp_dir().join(format!(
                "eddy-restore-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| local_io(&dir, e))?;
            let local = LocalFiles::new(dir.clone());
            for file in &native.files {
                let name = file.checked_name().map_err(|e| CheckpointError::Corrupt {
                    path: file.location.clone(),
                    message: eddy_types::chain(&e),
                })?;
                storage.download_file(&file.location, &dir.join(name), file.bytes, file.crc32)?;
            }
            native.local = Unstored(Some(local));
        }
    }
    Ok(())
}

fn local_io(path: &std::path::Path, e: std::io::Error) -> CheckpointError {
    CheckpointError::Io { path: PathBuf::from(path).display().to_string(), source: e.into() }
}

/// A uid as a file name.
pub fn file_safe(uid: &str) -> String {
    uid.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}
