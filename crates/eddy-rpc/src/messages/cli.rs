//! The CLI ⇄ JobManager.

use crate::ids::JobId;
use crate::job_state::JobState;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum CliMessage {
    // CLI → JobManager
    ListJobs,
    /// `command` for the job named `job` (its id or its name).
    JobCommand {
        job: String,
        command: JobCommand,
    },

    // JobManager → CLI
    Jobs(Vec<JobSummary>),
    /// A line of progress from the job.
    CommandProgress {
        text: String,
    },
    /// The job's (or the JobManager's) answer.
    CommandReply {
        reply: Result<String, String>,
    },
}

/// What receives the answer to a [`JobCommand`] (what to print, or why it failed), on
/// whichever thread answers it: the JobManager's, a job's board, a REST handler.
pub type Answer = Box<dyn FnOnce(Result<String, String>) + Send>;

/// What the CLI asks of a running job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum JobCommand {
    Status,
    Savepoint {
        dir: String,
    },
    Stop {
        savepoint_dir: String,
    },
    Cancel,
    /// Takes the running job to `parallelism` (its operators that follow the job's
    /// default parallelism), from a checkpoint taken for it.
    Rescale {
        parallelism: u32,
    },
}

/// A line of `list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSummary {
    pub id: JobId,
    pub name: String,
    pub state: JobState,
    pub parallelism: u32,
    pub uptime_ms: u64,
}
