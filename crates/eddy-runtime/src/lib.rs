//! eddy's runtime: how a job graph runs.
//!
//! - [`graph`]: the job graph as the runtime sees it (types erased behind factories), and
//!   the chaining pass that fuses forward-connected operators of equal parallelism.
//! - [`output`]: the [`Output`] trait every chained operator and every record writer
//!   implements (records flow through a chain as plain function calls), and the one
//!   [`Lifecycle`] every chain member answers to.
//! - [`channel`] and [`writer`]: bounded queues of record *batches*, barriers and
//!   watermarks between subtasks (one per producer and consumer), and the writers that
//!   partition records into them (forward, rebalance, shuffle, broadcast, key groups).
//! - [`debloat`]: buffer debloating, batches sized so that a queue drains within a target
//!   time and barriers do not wait behind seconds of records under backpressure;
//! - [`task`]: a subtask's input gates, barrier alignment, watermark valve and mailbox
//!   loop; a step never waits for input ([`task::TaskDriver::step`]; it waits only for room
//!   in a full output queue, backpressure), so a subtask runs on its own
//!   thread or, simulated, beside every other on one. Control messages are taken between
//!   batches, never inside a user callback; snapshots are written off the task thread.
//! - [`deployment`]: one process's part of an attempt, shared by every mode: the channels
//!   between subtasks, which old state each reads on a restore, and the subtasks built and
//!   started;
//! - [`network`]: the data plane between task executors of different processes, with
//!   Flink's credit-based flow control (Flink's `runtime.io.network`);
//! - [`observe`]: what a running job shows of itself (its board: vertices, subtasks'
//!   rates, checkpoints, exceptions), read by REST servers and `/metrics`;
//! - [`cluster`]: what runs the job's code on a cluster: the task executor ⇄ JobMaster
//!   messages and the task executor itself; the wire under them (handshake, TLS, frames,
//!   ids) is `eddy-rpc`'s;
//! - [`error`]: the crate's errors, by who must act, and which failures a restart mends.
//!
//! Depends on `eddy-types`, `eddy-state`, `eddy-checkpoint` (formats, storage interface,
//! coordinator decisions) and `eddy-rpc` (the cluster's wire). The control plane of a job
//! (its JobMaster, and the executor that chooses how it runs) is `eddy-jobmaster`, above
//! this crate: nothing here imports it. The DataStream API (`eddy-api`) sits above both
//! and instantiates the runtime's generic pieces with the user's types.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod channel;
pub mod cluster;
pub mod coordination;
pub mod debloat;
pub mod deployment;
pub mod error;
pub mod graph;
pub mod network;
pub mod observe;
pub mod output;
pub mod task;
pub mod writer;

pub use error::{FailureKind, JobError, TaskError};
pub use observe::CheckpointStats;
pub use output::{Collector, FanOut, Lifecycle, Output, PortOutput, TypedOutput};
