//! The TaskManager: `<binary> taskmanager --jobmanager HOST:PORT --slots N --secret-file FILE`.
//!
//! It never needs a job's code, as the JobManager does not. It registers its slots with
//! the JobManager, sends heartbeats, and for each attempt of a job deployed to it starts a
//! task executor: the job's binary (this same one: application mode), run with the job's
//! arguments and `eddy_rpc::launch::LAUNCH_ENV` set, which rebuilds the job's graph, runs
//! its slots' subtasks and reports to the job's JobMaster (`eddy_runtime::cluster::task_executor`).
//! The executor's standard input stays a pipe from here, so that it dies with its
//! TaskManager. A lost JobManager ends the TaskManager (and its executors) with an error
//! that says so.
//!
//! - [`service`]: registration and the loop over the JobManager's messages, starting and
//!   stopping task executors.
//!
//! Depends on `eddy-rpc` only.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod service;

pub use service::{run_task_manager, TaskManagerOptions};
