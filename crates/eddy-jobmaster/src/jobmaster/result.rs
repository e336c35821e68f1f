//! What a job reports when it ends: its checkpoints, restarts, savepoint, warnings and
//! counters.

pub use eddy_runtime::observe::CheckpointStats;
use std::time::Duration;

/// What a finished job reports.
#[derive(Debug, Clone)]
pub struct JobResult {
    pub job_name: String,
    /// From the first subtask's start to the last subtask's end, over all attempts.
    pub duration: Duration,
    pub checkpoints_completed: u64,
    /// The last periodic checkpoint (the final one of a finished job if there was none).
    pub last_checkpoint: Option<CheckpointStats>,
    /// Every completed periodic checkpoint, oldest first (Flink's checkpoint history);
    /// the final checkpoint of a finished job is not one.
    pub checkpoint_history: Vec<CheckpointStats>,
    pub restarts: u32,
    /// Where the savepoint of a stop-with-savepoint went.
    pub savepoint: Option<String>,
    /// The job ended by a stop-with-savepoint (not by the end of its input).
    pub stopped: bool,
    /// Things that went wrong without failing the job (a corrupt checkpoint skipped…).
    pub warnings: Vec<String>,
    /// Under simulation, what happened, in order, without machine paths: checkpoints
    /// triggered, completed (with their files) and aborted, faults, failures and restarts.
    /// The same for the same seed; `eddy-bench` prints its hash as `trace=`. Empty
    /// otherwise: a job that runs for months would grow it without end.
    pub trace: Vec<String>,
    /// The jobs' counters by name (Flink's accumulators), summed over every subtask of
    /// the attempt that finished the job.
    pub accumulators: std::collections::BTreeMap<String, u64>,
    /// This process ran as one of a cluster job's task executors
    /// ([`crate::executor::ExecutionMode::TaskExecutor`]): its subtasks of an attempt
    /// ended, and nothing else here is the job's; the job's result is its JobMaster's.
    pub task_executor: bool,
    /// Submitted detached (`--detached`): the job runs on in the cluster under this id,
    /// its JobMaster on a TaskManager; nothing else here is the job's.
    pub detached: Option<eddy_rpc::JobId>,
}

impl JobResult {
    /// A job's result before anything happened.
    pub(crate) fn new(job_name: String) -> Self {
        JobResult {
            job_name,
            duration: Duration::ZERO,
            checkpoints_completed: 0,
            last_checkpoint: None,
            checkpoint_history: Vec::new(),
            restarts: 0,
            savepoint: None,
            stopped: false,
            warnings: Vec::new(),
            trace: Vec::new(),
            accumulators: Default::default(),
            task_executor: false,
            detached: None,
        }
    }

    /// Whether the job's outcome is not this process's to report: it ran as a task
    /// executor, or submitted the job detached.
    pub fn elsewhere(&self) -> bool {
        self.task_executor || self.detached.is_some()
    }

    /// What a task executor's `execute` returns once its subtasks ended.
    pub(crate) fn of_task_executor(job_name: String) -> Self {
        JobResult { task_executor: true, ..JobResult::new(job_name) }
    }
}
