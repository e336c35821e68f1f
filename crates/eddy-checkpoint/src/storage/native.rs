//! Moving the files of native snapshots (RocksDB's, for incremental checkpoints) between
//! a subtask's local directory and checkpoint storage.
//!
//! Shared files (immutable SSTs) live in `shared/` under the storage root, named by the
//! backend instance that wrote them; a checkpoint uploads one only if no checkpoint the job
//! keeps holds it already, and otherwise just references it. The other files go into the
//! checkpoint's own directory. Locations are relative to the storage root.

use super::{directory_name, CheckpointStorage};
use crate::error::CheckpointError;
use crate::retained::RetainedCheckpoints;
use crate::snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_state::keyed::{LocalFiles, Unstored};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The folder of shared files under the storage root.
pub const SHARED_DIR: &str = "shared";

/// Uploads the files of every native snapshot in `operators` for checkpoint `id`, records
/// the shared ones as referenced by `id`, and removes the local directories. Returns the
/// bytes uploaded now (files already in storage are referenced, not uploaded).
pub fn upload_native_files(
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
    id: CheckpointId,
    kind: SnapshotKind,
    operators: &mut [OperatorSnapshot],
) -> Result<u64, CheckpointError> {
    let mut uploaded = 0;
    for operator in operators.iter_mut() {
        let Some(keyed) = operator.keyed.as_mut() else { continue };
        for native in &mut keyed.native {
            let Some(local) = native.local.0.take() else { continue };
            for file in &mut native.files {
                let source = local.path().join(&file.name);
                match &file.shared_name {
                    Some(shared) => {
                        let location = format!("{SHARED_DIR}/{shared}");
                        let (bytes, crc32) = match retained.shared_file(&location) {
                            Some(known) => known,
                            None => {
                                let written = storage.upload_file(&location, &source)?;
                                uploaded += written.0;
                                written
                            }
                        };
                        retained.reference(id, &location, bytes, crc32);
                        (file.bytes, file.crc32, file.location) = (bytes, crc32, location);
                    }
                    None => {
                        let location = format!(
                            "{}/{}-{}/{}",
                            directory_name(id, kind),
                            file_safe(&operator.uid),
                            operator.subtask,
                            file.name
                        );
                        let (bytes, crc32) = storage.upload_file(&location, &source)?;
                        uploaded += bytes;
                        (file.bytes, file.crc32, file.location) = (bytes, crc32, location);
                    }
                }
            }
        }
    }
    Ok(uploaded)
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
                storage.download_file(&file.location, &dir.join(&file.name), file.bytes, file.crc32)?;
            }
            native.local = Unstored(Some(local));
        }
    }
    Ok(())
}

fn local_io(path: &std::path::Path, e: std::io::Error) -> CheckpointError {
    CheckpointError::Io { path: PathBuf::from(path).display().to_string(), message: e.to_string() }
}

/// A uid as a file name.
pub fn file_safe(uid: &str) -> String {
    uid.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}
