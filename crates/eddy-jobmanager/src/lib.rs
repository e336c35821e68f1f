//! The JobManager: `<binary> jobmanager --bind HOST:PORT --secret-file FILE`.
//!
//! It never needs a job's code. It keeps:
//!
//! - the TaskManagers and their slots ([`service`]): registration, heartbeats both ways,
//!   and their loss, at once when a connection drops, else after the heartbeat timeout;
//! - the jobs submitted by their binaries, which coordinate themselves (their JobMasters,
//!   `eddy_jobmaster::jobmaster`): slot requests wait, with a timeout, until the resource
//!   provider can serve them (`service::slots`; the standalone pool of registered
//!   TaskManagers today, which takes slots in the order they joined), and one slot
//!   holds one subtask of every operator (slot sharing); a TaskManager lost is reported to
//!   every job with slots on it, which restarts elsewhere; a job whose JobMaster dies is
//!   taken over by a JobMaster a TaskManager starts again (`service::takeover`);
//! - the CLI's `list`, and its commands to a job (`status`, `savepoint`, `stop`,
//!   `cancel`), relayed to the job and answered back ([`client`] is the CLI's side).
//!
//! Every connection starts with the cluster's secret handshake; a refusal is logged with
//! the peer's address. Depends on `eddy-rpc` only (the wire, ids and service messages).

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod client;
pub mod service;

pub use service::{
    bind_job_manager, run_job_manager, Answer, JobEntry, JobManager, JobManagerHandle, JobManagerOptions,
    JOB_RETENTION_DEFAULT,
};
