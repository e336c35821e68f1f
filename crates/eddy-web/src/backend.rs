//! What a server shows and does: a [`Backend`] per kind of process.

use eddy_rpc::messages::JobCommand;
use eddy_rpc::view::{ClusterOverview, JobView, TaskManagerView};
use eddy_rpc::JobState;

/// What kind of process serves, for `/metrics` and the dashboard's title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessRole {
    JobManager,
    TaskManager,
    TaskExecutor,
    /// A job running on its own (the embedded default), its JobMaster in this process.
    LocalJob,
}

impl ProcessRole {
    pub fn name(self) -> &'static str {
        match self {
            ProcessRole::JobManager => "jobmanager",
            ProcessRole::TaskManager => "taskmanager",
            ProcessRole::TaskExecutor => "task_executor",
            ProcessRole::LocalJob => "local",
        }
    }
}

/// A job as a server lists it.
#[derive(Debug, Clone)]
pub struct JobEntry {
    /// Its id in the REST paths (the JobManager's number; `local` for a local job).
    pub id: String,
    pub name: String,
    pub state: JobState,
    pub parallelism: u32,
    pub uptime_ms: u64,
    /// What its JobMaster last showed of it; `None` before its first view.
    pub view: Option<JobView>,
}

/// Everything a server reads, at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub role: ProcessRole,
    /// On the JobManager: the cluster.
    pub cluster: Option<ClusterOverview>,
    pub task_managers: Vec<TaskManagerView>,
    pub jobs: Vec<JobEntry>,
    /// On a TaskManager: its id if known, and its slots.
    pub slots: Option<u32>,
}

pub use eddy_rpc::messages::Answer;

/// A server's source of truth.
pub trait Backend: Send + Sync + 'static {
    fn snapshot(&self) -> Snapshot;

    /// Asks the job `job` (as [`JobEntry::id`] names it) for `command`; `answer` gets the
    /// job's answer later. An error if the job cannot be asked.
    fn command(&self, job: &str, command: JobCommand, answer: Answer) -> Result<(), String>;

    /// `Some(why)` while this process does not answer for the cluster: a JobManager
    /// standing by under high availability, naming the leader's REST API when known. The
    /// REST API then answers 503 with it (Flink's standby answers 503 too), not an empty
    /// cluster; `/metrics` still shows the process.
    fn standing_by(&self) -> Option<String> {
        None
    }
}
