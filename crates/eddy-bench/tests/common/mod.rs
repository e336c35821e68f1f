//! What the process tests share: reading what an exactly-once file sink committed, the
//! processes they start (`process`), and a network they partition (`partition`).

pub mod etcd;
pub mod http;
pub mod partition;
pub mod process;

use std::path::Path;

/// Every committed line of an output directory, sorted; no uncommitted (hidden) file may
/// remain.
#[allow(dead_code)] // not every test binary reads a file sink
pub fn output(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with('.'), "uncommitted file left: {name}");
        lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from));
    }
    lines.sort();
    lines
}

/// The job directories under a checkpoint directory (one per job run into it).
#[allow(dead_code)]
pub fn job_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Whether the job directory `job` holds a complete checkpoint.
#[allow(dead_code)]
pub fn holds_checkpoint(job: &Path) -> bool {
    std::fs::read_dir(job).map(|d| d.flatten().any(|e| e.path().join("_metadata").exists())).unwrap_or(false)
}

/// Whether a job wrote a complete checkpoint under the checkpoint directory `dir`.
#[allow(dead_code)]
pub fn has_complete_checkpoint(dir: &Path) -> bool {
    job_dirs(dir).iter().any(|job| holds_checkpoint(job))
}
