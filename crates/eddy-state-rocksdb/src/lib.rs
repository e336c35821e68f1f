//! eddy's RocksDB state backend: keyed state in embedded RocksDB (linked to the system's
//! librocksdb), with the hot keys cached on the heap in front of it (write-back).
//!
//! - [`store`]: one RocksDB instance per subtask in its own working directory (removed
//!   when the subtask ends), one key space for all states: table id + key group + key.
//! - [`native`]: checkpoints as RocksDB's own files: a RocksDB checkpoint (hard links),
//!   made off the task thread while [`write_gate`] holds writes; for incremental
//!   checkpoints its SST files are shared between checkpoints; restoring opens the files
//!   directly, or reads the key groups of a new range out of them when rescaling.
//! - [`backend`]: [`RocksDbStateBackend`], what a job sets with `env.set_state_backend`.
//!
//! Depends on `eddy-state` (the backend traits) and the `rocksdb` crate; nothing else in
//! eddy sees RocksDB.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

mod backend;
mod native;
mod store;
mod write_gate;

pub use backend::RocksDbStateBackend;
pub use store::{RocksDbRawStore, SlotMemory};
