//! eddy's vocabulary, with no I/O: ids as newtypes, key groups and their math (exactly
//! Flink's `KeyGroupRangeAssignment`), the stable key encoding and hash, and the clock
//! trait through which every other crate reads time, the codec of records that leave
//! the process, and the cause under an error kept as it was ([`Cause`], [`chain`]).
//!
//! Everything here is plain data and pure functions so that the checkpoint coordinator,
//! the runtime and the state backends agree on the same facts without depending on each
//! other.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod cause;
pub mod clock;
pub mod codec;
pub mod error;
pub mod ids;
pub mod key;
pub mod key_group;
pub mod text;
pub mod watermark;

pub use cause::{chain, Cause};
pub use clock::{Clock, ManualClock, SystemClock, WallClock};
pub use error::TypesError;
pub use ids::{CheckpointId, NodeId, RunSeed, SubtaskIndex};
pub use key::{decode_whole_key, stable_hash, Key, KeyHash};
pub use key_group::{
    assign_to_key_group, compute_key_group_for_hash, key_group_range_for_subtask, operator_index_for_key_group,
    KeyGroup, KeyGroupRange, MaxParallelism, DEFAULT_MAX_PARALLELISM, UPPER_BOUND_MAX_PARALLELISM,
};
pub use watermark::{Watermark, WatermarkStatus};
