//! Where a job's binary submits its job.

use crate::heartbeat::Heartbeats;
use crate::security::Security;

/// Where a job's binary submits its job: the JobManager, the cluster's credentials, and
/// the arguments every TaskManager runs the binary with to rebuild the job's graph
/// (application mode). Built by the program itself (`eddy::cluster::SubmitArgs` parses
/// the usual flags): nothing reads the process's arguments behind its back, but for
/// [`ClusterTarget::new`], which hands them on whole, as they are, to task executors.
#[derive(Debug, Clone)]
pub struct ClusterTarget {
    /// `HOST:PORT` of the JobManager.
    pub jobmanager: String,
    pub security: Security,
    /// The arguments the binary was started with, which every TaskManager runs it with.
    pub args: Vec<String>,
    /// How long the job waits for enough slots before it fails.
    pub slot_timeout_ms: u64,
    pub heartbeats: Heartbeats,
    /// Submit and return (`--detached`): the job's JobMaster runs on a TaskManager, as
    /// after a failover, and the submitting process ends once the job is running.
    pub detached: bool,
}

/// How long a job waits for slots by default (Flink's `slot.request.timeout` is 5 min;
/// a job on a small cluster usually learns sooner that nobody will come).
pub const SLOT_TIMEOUT_MS_DEFAULT: u64 = 60_000;

impl ClusterTarget {
    /// The JobManager at `jobmanager`, with `security`; the task executors run this
    /// process's own arguments.
    pub fn new(jobmanager: impl Into<String>, security: Security) -> Self {
        Self {
            jobmanager: jobmanager.into(),
            security,
            args: std::env::args().skip(1).collect(),
            slot_timeout_ms: SLOT_TIMEOUT_MS_DEFAULT,
            heartbeats: Heartbeats::default(),
            detached: false,
        }
    }
}
