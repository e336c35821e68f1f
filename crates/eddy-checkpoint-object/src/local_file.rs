//! A local file into checkpoint storage that is a local directory: linked in, or copied
//! by the kernel, never read into memory and written out again.
//!
//! What is uploaded this way are the files of native snapshots (a heap chain's segments,
//! RocksDB's SSTs), tens of MB each second for a large state: read into a buffer and
//! `put`, each cost the snapshot thread a fresh buffer's page faults and the I/O thread a
//! second copy (W4 on the heap with 1 s checkpoints: about 8 % of all samples). Such a
//! file is never written again once made, and its local copy is removed after the upload,
//! so a hard link is the file itself; across file systems it is copied.

use crate::io;
use crate::CheckpointError;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Places `source` at `relative` under `store`'s root (`shown` in messages) and returns its
/// size and CRC-32. Staged under another name and renamed, as `put` writes, so that nobody
/// reads half a file at `relative`.
pub(crate) fn place(
    store: &LocalFileSystem,
    relative: &str,
    shown: &str,
    source: &Path,
) -> Result<(u64, u32), CheckpointError> {
    static STAGED: AtomicU64 = AtomicU64::new(0);
    let target = store.path_to_filesystem(&ObjectPath::from(relative)).map_err(|e| io(shown, e))?;
    let display = |path: &Path| path.display().to_string();
    let written = size_and_crc32(source)?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io(&display(parent), e))?;
    }
    // A name of its own: a staged file is never someone else's (another process's, with
    // the same pid in another container, say).
    let staged = loop {
        let mut staged = target.clone().into_os_string();
        staged.push(format!("#eddy-{}-{}", std::process::id(), STAGED.fetch_add(1, Ordering::Relaxed)));
        let staged = PathBuf::from(staged);
        match std::fs::hard_link(source, &staged) {
            Ok(()) => break staged,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            // Another file system (or no links there): a copy, made by the kernel.
            Err(_) => match std::fs::OpenOptions::new().write(true).create_new(true).open(&staged) {
                Ok(_) => match std::fs::copy(source, &staged) {
                    Ok(_) => break staged,
                    Err(e) => {
                        let _ = std::fs::remove_file(&staged);
                        return Err(io(shown, format!("copying {}: {e}", display(source))));
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(shown, format!("staging {}: {e}", display(&staged)))),
            },
        }
    };
    let renamed = std::fs::rename(&staged, &target);
    // Also after a rename: onto a link to the same file, it does nothing and leaves it.
    let _ = std::fs::remove_file(&staged);
    renamed.map_err(|e| io(shown, e))?;
    Ok(written)
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
