//! eddy's JobMaster: the control plane of one job, above the data plane of `eddy-runtime`.
//!
//! - [`jobmaster`]: the job's life over its attempts (restart strategy, checkpoint storage
//!   and retention, restores), each attempt's checkpoint coordinator and savepoints,
//!   rescales and the autoscaler, and on a cluster its link to the JobManager, its remote
//!   attempts and the takeover by a JobMaster started again;
//! - [`executor`]: the one place that chooses how a job runs ([`ExecutionMode`]: locally,
//!   simulated, as a task executor, or on a cluster), the local thread launch, and the
//!   deterministic simulator's driver of the job's subtasks.
//!
//! Depends on `eddy-runtime` (tasks, channels, the deployment of an attempt's subtasks,
//! the task executor), `eddy-checkpoint` (formats, storage, the coordinator's decisions)
//! and `eddy-rpc` (the cluster's wire); the DataStream API (`eddy-api`) runs its graphs
//! here. Nothing in the data plane imports this crate: a job's settings
//! ([`eddy_runtime::graph::JobConfig`]) and the services it is handed
//! ([`eddy_runtime::graph::JobServices`]) are the runtime's.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod executor;
pub mod jobmaster;

pub use executor::{ExecutionMode, LocalExecutor};
pub use jobmaster::{ClusterTarget, JobResult};
