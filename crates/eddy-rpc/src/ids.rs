//! The cluster's ids as newtypes: a job, an attempt of it, a task executor of an attempt,
//! a TaskManager. Each prints as its number, as `list` and the logs show it.

use serde::{Deserialize, Serialize};

macro_rules! id {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        pub struct $name(pub $inner);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

id!(
    /// A job, as numbered by its JobManager (from 1).
    JobId(u64)
);
id!(
    /// One attempt (deployment) of a job: every restart is a new attempt.
    AttemptId(u32)
);
id!(
    /// A task executor among an attempt's, by its place in the slot allocation (from 0).
    ExecutorIndex(u32)
);
id!(
    /// A TaskManager, as numbered by its JobManager at registration (from 1).
    TaskManagerId(u32)
);

impl AttemptId {
    /// The attempt after this one.
    pub fn next(self) -> Self {
        AttemptId(self.0.wrapping_add(1))
    }
}

impl ExecutorIndex {
    /// As an index into the allocation's executors.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}
