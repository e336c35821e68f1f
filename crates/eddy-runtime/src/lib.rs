//! eddy's runtime: how a job graph runs.
//!
//! - [`graph`]: the job graph as the runtime sees it (types erased behind factories), and
//!   the chaining pass that fuses forward-connected operators of equal parallelism.
//! - [`output`]: the [`Output`] trait every chained operator and every record writer
//!   implements: records flow through a chain as plain function calls.
//! - [`channel`] and [`writer`]: bounded queues of record *batches* between subtasks, and
//!   the writers that partition records into them (forward, rebalance, shuffle, broadcast,
//!   key groups).
//! - [`task`]: one OS thread per subtask running a mailbox loop ([`task::TaskDriver::step`]);
//!   control messages are taken between batches, never inside a user callback.
//! - [`executor`]: the embedded local executor that wires channels, spawns the subtasks
//!   and turns the first failure into a job error naming the operator and subtask.
//!
//! Depends on `eddy-types` and `eddy-state`; the DataStream API (`eddy-api`) sits above and
//! instantiates the runtime's generic pieces with the user's types.

pub mod channel;
pub mod error;
pub mod executor;
pub mod graph;
pub mod output;
pub mod task;
pub mod writer;

pub use error::{FailureKind, JobError, TaskError};
pub use executor::{CheckpointStats, JobResult, LocalExecutor};
pub use output::{Collector, FanOut, Lifecycle, Output, PortOutput, TypedOutput};
