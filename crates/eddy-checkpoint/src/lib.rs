//! eddy's checkpoints, apart from the runtime that takes them.
//!
//! - [`acknowledgement`]: the handle a subtask acknowledges a checkpoint with, once it
//!   wrote its part itself (through the task view of [`storage`]).
//! - [`config`]: Flink's checkpoint settings (interval, mode, min pause, timeout, max
//!   concurrent, tolerable failures, retained count, cleanup on cancel).
//! - [`snapshot`]: what one operator instance contributes to a checkpoint.
//! - [`metadata`]: the versioned `_metadata` of a checkpoint and the checksummed encoding
//!   of every file.
//! - [`storage`]: where checkpoints go: the JobManager's memory (capped per task) or
//!   files (a local directory through `std::fs` here; an object store through
//!   `eddy-checkpoint-object`, one layout for both); the coordinator's view (metadata,
//!   listing, discarding) and the task view ([`storage::TaskStateWriter`]); every job's
//!   checkpoints in a job directory of its own, locked while it runs
//!   ([`storage::JobDirLock`]), and which job a restore of "the latest" reads.
//! - [`coordinator`]: the checkpoint protocol as pure decisions (trigger, acknowledge,
//!   complete, subsume, expire, retain), no threads and no I/O.
//! - [`retained`]: the completed checkpoints a job keeps and the reference counts of the
//!   shared files of incremental checkpoints.
//! - [`rescale`]: a new subtask's share of old subtasks' state on a restore at another
//!   parallelism (key groups by range, operator state redistributed).
//! - [`restart`]: restart strategies with Flink's defaults, as pure back-off state.
//!
//! Depends on `eddy-types` and `eddy-state` (whose snapshot forms it stores).

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod acknowledgement;
pub mod config;
pub mod coordinator;
pub mod error;
mod legacy;
pub mod metadata;
pub mod rescale;
pub mod restart;
pub mod retained;
pub mod snapshot;
pub mod storage;

pub use config::{CheckpointConfig, CheckpointingMode};
pub use error::CheckpointError;
pub use snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
