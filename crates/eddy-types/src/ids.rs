//! Ids as newtypes, so that a node id is never mistaken for a subtask index or a
//! checkpoint id.

use std::fmt;

/// A node of the logical graph: one operator the user wrote (a source, a map, a sink…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Checkpoints of a job are numbered from 1; savepoints share the numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct CheckpointId(pub u64);

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The index of one parallel instance of an operator, `0..parallelism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubtaskIndex(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node-{}", self.0)
    }
}

impl fmt::Display for SubtaskIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The seed a run of a job derives its ids and file names from, instead of wall time,
/// process ids or process-wide counters: given (simulation, tests) or drawn once when the
/// job starts, and logged. Two runs writing into one checkpoint directory (a restore in
/// NO_CLAIM mode) have different seeds, so their names never collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunSeed(pub u64);

impl RunSeed {
    /// A fresh seed from the operating system's randomness (std's hash keys).
    pub fn draw() -> Self {
        use std::hash::{BuildHasher, Hasher};
        RunSeed(std::collections::hash_map::RandomState::new().build_hasher().finish())
    }

    /// The seed of a part of the run (an attempt, an operator instance) named by `part`.
    pub fn derive(self, part: &[u8]) -> RunSeed {
        RunSeed(xxhash_rust::xxh3::xxh3_64_with_seed(part, self.0))
    }

    /// As names show it: 16 hex digits.
    pub fn hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_derive_the_same_names_every_time_and_different_ones_per_part() {
        let seed = RunSeed(7);
        assert_eq!(seed.derive(b"count-0"), RunSeed(7).derive(b"count-0"));
        assert_ne!(seed.derive(b"count-0"), seed.derive(b"count-1"));
        assert_ne!(seed.derive(b"count-0"), RunSeed(8).derive(b"count-0"));
        assert_eq!(seed.hex().len(), 16);
        assert_ne!(RunSeed::draw(), RunSeed::draw());
    }
}
