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
//! - [`task`]: a subtask's input gates, barrier alignment, watermark valve and mailbox
//!   loop; a step never waits for input ([`task::TaskDriver::step`]; it waits only for room
//!   in a full output queue, backpressure), so a subtask runs on its own
//!   thread or, simulated, beside every other on one. Control messages are taken between
//!   batches, never inside a user callback; snapshots are written off the task thread.
//! - [`executor`]: the embedded local executor that wires channels, runs the subtasks and
//!   the checkpoint coordinator, restarts, the job's checkpoint storage and job directory,
//!   restores, and the deterministic simulator.
//! - [`cluster`]: the cluster's processes but the JobManager: the secret handshake and TLS,
//!   control messages and their framing, the data plane with credits, the TaskManager,
//!   task executors and the job's link to its JobManager.
//! - [`error`]: the crate's errors, by who must act, and which failures a restart mends.
//!
//! Depends on `eddy-types`, `eddy-state` and `eddy-checkpoint` (formats, storage interface,
//! coordinator decisions); the DataStream API (`eddy-api`) sits above and instantiates the
//! runtime's generic pieces with the user's types.

pub mod channel;
pub mod cluster;
pub mod error;
pub mod executor;
pub mod graph;
pub mod output;
pub mod task;
pub mod writer;

pub use error::{FailureKind, JobError, TaskError};
pub use executor::{CheckpointStats, JobResult, LocalExecutor};
pub use output::{Collector, FanOut, Lifecycle, Output, PortOutput, TypedOutput};
