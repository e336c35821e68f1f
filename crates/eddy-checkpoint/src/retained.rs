//! The completed checkpoints a job owns, and the shared files they reference (Flink's
//! `CompletedCheckpointStore` with its `SharedStateRegistry`), as pure bookkeeping.
//!
//! Incremental checkpoints reference SST files that earlier checkpoints uploaded. A shared
//! file is counted once per checkpoint that references it; dropping a checkpoint releases
//! its references, and only a file nobody references any more may be deleted. Checkpoints
//! the job did not write (the one a job was started from, Flink's NO_CLAIM mode) are never
//! in here, so nothing of them is ever deleted.

use crate::snapshot::CheckpointId;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// A file in the shared area and the checkpoints that reference it.
#[derive(Debug, Clone)]
struct SharedFile {
    bytes: u64,
    crc32: u32,
    users: BTreeSet<CheckpointId>,
}

#[derive(Debug)]
pub struct RetainedCheckpoints {
    max_retained: usize,
    /// Completed checkpoints kept, oldest first.
    retained: VecDeque<CheckpointId>,
    shared: HashMap<String, SharedFile>,
}

impl RetainedCheckpoints {
    /// Keeps the newest `max_retained` completed checkpoints (at least one).
    pub fn new(max_retained: usize) -> Self {
        Self { max_retained: max_retained.max(1), retained: VecDeque::new(), shared: HashMap::new() }
    }

    /// Size and checksum of a shared file some checkpoint uploaded, if one did.
    pub fn shared_file(&self, location: &str) -> Option<(u64, u32)> {
        self.shared.get(location).map(|f| (f.bytes, f.crc32))
    }

    /// Checkpoint `id` (completed or still being written) references a shared file.
    pub fn reference(&mut self, id: CheckpointId, location: &str, bytes: u64, crc32: u32) {
        self.shared
            .entry(location.to_string())
            .or_insert_with(|| SharedFile { bytes, crc32, users: BTreeSet::new() })
            .users
            .insert(id);
    }

    /// Checkpoint `id` completed; returns the older ones beyond the retained count, which
    /// the caller deletes with [`RetainedCheckpoints::release`].
    pub fn add(&mut self, id: CheckpointId) -> Vec<CheckpointId> {
        self.retained.push_back(id);
        let mut beyond = Vec::new();
        while self.retained.len() > self.max_retained {
            beyond.extend(self.retained.pop_front());
        }
        beyond
    }

    /// Forgets checkpoint `id` (deleted, or failed while being written) and returns the
    /// shared files no checkpoint references any more: those may be deleted.
    pub fn release(&mut self, id: CheckpointId) -> Vec<String> {
        self.retained.retain(|r| *r != id);
        let mut unused = Vec::new();
        self.shared.retain(|location, file| {
            file.users.remove(&id);
            if file.users.is_empty() {
                unused.push(location.clone());
                false
            } else {
                true
            }
        });
        unused.sort();
        unused
    }

    /// Whether the job wrote and still keeps checkpoint `id`.
    pub fn owns(&self, id: CheckpointId) -> bool {
        self.retained.contains(&id)
    }

    /// The checkpoints kept, oldest first.
    pub fn ids(&self) -> Vec<CheckpointId> {
        self.retained.iter().copied().collect()
    }

    /// Number of references to a shared file (0 when unknown), for tests and tools.
    pub fn reference_count(&self, location: &str) -> usize {
        self.shared.get(location).map_or(0, |f| f.users.len())
    }

    /// Every shared file referenced, sorted.
    pub fn shared_locations(&self) -> Vec<String> {
        let mut all: Vec<String> = self.shared.keys().cloned().collect();
        all.sort();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_keeps_the_newest() {
        let mut r = RetainedCheckpoints::new(2);
        assert!(r.add(CheckpointId(1)).is_empty());
        assert!(r.add(CheckpointId(2)).is_empty());
        assert_eq!(r.add(CheckpointId(3)), vec![CheckpointId(1)]);
        assert_eq!(r.ids(), vec![CheckpointId(2), CheckpointId(3)]);
    }

    #[test]
    fn a_shared_file_goes_only_when_no_checkpoint_references_it() {
        let mut r = RetainedCheckpoints::new(2);
        // chk 1: a, b; chk 2: b, c (a was compacted away); chk 3: c, d.
        for (id, files) in [(1, ["a", "b"]), (2, ["b", "c"]), (3, ["c", "d"])] {
            for f in files {
                r.reference(CheckpointId(id), f, 10, 0);
            }
        }
        assert_eq!(r.reference_count("b"), 2);
        assert!(r.add(CheckpointId(1)).is_empty());
        assert!(r.add(CheckpointId(2)).is_empty());
        let beyond = r.add(CheckpointId(3));
        assert_eq!(beyond, vec![CheckpointId(1)]);
        assert_eq!(r.release(CheckpointId(1)), vec!["a".to_string()], "b is still used by chk 2");
        assert_eq!(r.release(CheckpointId(2)), vec!["b".to_string()]);
        assert_eq!(r.shared_locations(), vec!["c".to_string(), "d".to_string()]);
        assert!(!r.owns(CheckpointId(2)) && r.owns(CheckpointId(3)));
    }

    #[test]
    fn a_failed_checkpoint_releases_only_what_it_alone_uploaded() {
        let mut r = RetainedCheckpoints::new(1);
        r.reference(CheckpointId(1), "a", 1, 0);
        r.add(CheckpointId(1));
        r.reference(CheckpointId(2), "a", 1, 0);
        r.reference(CheckpointId(2), "new", 1, 0);
        assert_eq!(r.release(CheckpointId(2)), vec!["new".to_string()]);
        assert_eq!(r.reference_count("a"), 1);
    }
}
