//! A job's state as the JobManager shows it (Flink's `JobStatus`, the states eddy has).

use serde::{Deserialize, Serialize};

/// Where a job is in its life, as `list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Its JobMaster is being started again, after the process that ran it died.
    Initializing,
    /// Submitted; its JobMaster has not asked for slots yet.
    Created,
    /// Its JobMaster asked for slots and waits for them.
    Deploying,
    /// Slots given: its task executors run.
    Running,
    /// Every source ended and the last checkpoint completed.
    Finished,
    /// Ended by a stop-with-savepoint.
    Stopped,
    /// Cancelled by a user.
    Canceled,
    /// Failed beyond what its restart strategy allows.
    Failed,
    /// Its JobMaster went away without saying how the job ended.
    Lost,
}

impl JobState {
    /// Whether the job has ended (its slots are free, nothing more happens to it).
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobState::Initializing | JobState::Created | JobState::Deploying | JobState::Running)
    }

    /// The name Flink shows (`RUNNING`, `FINISHED`…).
    pub fn name(self) -> &'static str {
        match self {
            JobState::Initializing => "INITIALIZING",
            JobState::Created => "CREATED",
            JobState::Deploying => "DEPLOYING",
            JobState::Running => "RUNNING",
            JobState::Finished => "FINISHED",
            JobState::Stopped => "STOPPED",
            JobState::Canceled => "CANCELED",
            JobState::Failed => "FAILED",
            JobState::Lost => "LOST",
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that `list` can align it with `{:<10}`.
        f.pad(self.name())
    }
}
