//! The one error type of `eddy-runtime`, split by who must act.

/// Why one subtask stopped.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TaskError {
    /// A user function returned an error or panicked; the user must act.
    #[error("operator '{operator}' failed: {message}")]
    Operator { operator: String, message: String },
    /// The job is being cancelled (another subtask failed, or the user cancelled it).
    #[error("cancelled")]
    Cancelled,
    /// A bug in eddy; please report.
    #[error("internal error (please report): {0}")]
    Internal(String),
}

/// Why a job could not be built or did not finish.
///
/// `Debug` prints the message too, so that `fn main() -> Result<(), Box<dyn Error>>`
/// ends a failed job with a readable line instead of a struct dump.
#[derive(Clone, thiserror::Error, PartialEq, Eq)]
pub enum JobError {
    /// The job graph is invalid; the message names the operator and what to change.
    #[error("invalid job '{job}': {message}")]
    InvalidJob { job: String, message: String },
    /// A subtask failed; the job was cancelled. `subtask` is 0-based like every subtask
    /// index; the message counts from 1, as Flink's `(2/4)` does.
    #[error("job '{job}' failed: operator '{operator}' (subtask {}/{parallelism}) failed: {message}", .subtask + 1)]
    TaskFailed { job: String, operator: String, subtask: u32, parallelism: u32, message: String },
    #[error("job '{job}' was cancelled")]
    Cancelled { job: String },
    /// Checkpoints could not be taken, stored or restored.
    #[error("job '{job}': {message}")]
    Checkpoint { job: String, message: String },
    #[error("job '{job}': internal error (please report): {message}")]
    Internal { job: String, message: String },
}

impl std::fmt::Debug for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
