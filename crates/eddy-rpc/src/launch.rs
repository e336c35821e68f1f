//! How a TaskManager starts a task executor: the job's own binary, run with the job's
//! arguments and [`LAUNCH_ENV`] set, reading its [`Launch`] from standard input.

use crate::frame::write_value;
use crate::ids::{AttemptId, ExecutorIndex, JobId, TaskManagerId};
use crate::tls::TlsFiles;
use serde::{Deserialize, Serialize};

/// Set in a task executor's environment by the TaskManager that starts it.
pub const LAUNCH_ENV: &str = "EDDY_TASK_EXECUTOR";

/// What a TaskManager starts: a task executor, the job's binary run with the job's
/// arguments, which rebuilds the graph and reports to the JobMaster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deployment {
    pub job: JobId,
    pub job_name: String,
    pub attempt: AttemptId,
    pub executor: ExecutorIndex,
    pub args: Vec<String>,
    /// Where the job's JobMaster waits for its task executors.
    pub job_master: String,
}

/// What a TaskManager writes to a task executor's standard input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    pub deployment: Deployment,
    pub task_manager: TaskManagerId,
    /// The host its data listener binds (the TaskManager's).
    pub data_host: String,
    pub secret: Vec<u8>,
    /// TLS on: the cluster's certificate files.
    pub tls: Option<TlsFiles>,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
}

impl Launch {
    pub fn write(&self, to: &mut impl std::io::Write) -> std::io::Result<()> {
        write_value(to, self)
    }
}

/// Whether this process is a task executor (its TaskManager set [`LAUNCH_ENV`]).
pub fn launched() -> bool {
    std::env::var_os(LAUNCH_ENV).is_some()
}
