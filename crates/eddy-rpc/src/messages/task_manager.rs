//! TaskManager ⇄ JobManager.

use crate::ids::{AttemptId, ExecutorIndex, JobId, TaskManagerId};
use crate::launch::{Deployment, JobMasterTakeover};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum TaskManagerMessage {
    /// "Still here", both ways.
    Heartbeat,
    /// A peer explains why it closes the connection.
    Refused(String),

    // TaskManager → JobManager
    Register {
        slots: u32,
        binary: String,
        pid: u32,
        data_host: String,
        /// Where it serves `/metrics`, if it does.
        metrics_address: Option<String>,
    },
    /// A task executor this TaskManager started for an attempt exited.
    ExecutorExited {
        job: JobId,
        attempt: AttemptId,
        executor: ExecutorIndex,
        status: String,
    },
    /// A JobMaster this TaskManager started again for a job exited.
    JobMasterExited {
        job: JobId,
        /// The takeover it was started for.
        takeover: u32,
        status: String,
    },

    // JobManager → TaskManager
    Registered {
        id: TaskManagerId,
    },
    Deploy(Deployment),
    /// Start the job's JobMaster again: the process that ran it died.
    TakeOverJobMaster(JobMasterTakeover),
    /// Stop the task executor of this attempt, if it still runs.
    CancelExecutor {
        job: JobId,
        attempt: AttemptId,
    },
}
