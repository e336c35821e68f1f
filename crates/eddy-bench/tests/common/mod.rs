//! What the process tests share: reading what an exactly-once file sink committed, and
//! the processes they start (`process`).

pub mod etcd;
pub mod http;
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
