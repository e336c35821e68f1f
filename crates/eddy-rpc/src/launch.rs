//! How a TaskManager starts a process from a job's own binary, run with the job's
//! arguments and an environment variable that says what it is, reading what it needs
//! from standard input:
//!
//! - a *task executor* ([`LAUNCH_ENV`], a [`Launch`]): runs its slots' subtasks of one
//!   attempt for the job's JobMaster;
//! - a *JobMaster taken over* ([`JOB_MASTER_ENV`], a [`JobMasterLaunch`]): the job's
//!   JobMaster started again by the cluster after the process that ran it died, which
//!   resumes the job under its id from its latest completed checkpoint.

use crate::auth::Secret;
use crate::error::ClusterError;
use crate::frame::write_value;
use crate::heartbeat::Heartbeats;
use crate::ids::{AttemptId, ExecutorIndex, JobId, TaskManagerId};
use crate::security::Security;
use crate::tls::{TlsConfig, TlsFiles};
use serde::{Deserialize, Serialize};

/// Set in a task executor's environment by the TaskManager that starts it.
pub const LAUNCH_ENV: &str = "EDDY_TASK_EXECUTOR";
/// Set in the environment of a JobMaster that a TaskManager starts again for a job.
pub const JOB_MASTER_ENV: &str = "EDDY_JOB_MASTER";

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
    /// Each operator's parallelism in this attempt (node order; the job may have been
    /// rescaled since the program set it).
    pub operator_parallelism: Vec<u32>,
}

/// The cluster's credentials and heartbeats, as a TaskManager hands them to a process it
/// starts (whose machine need not hold the secret file).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Credentials {
    pub secret: Vec<u8>,
    /// TLS on: the cluster's certificate files.
    pub tls: Option<TlsFiles>,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
}

impl Credentials {
    pub fn new(security: &Security, heartbeats: Heartbeats) -> Self {
        Self {
            secret: security.secret.bytes().to_vec(),
            tls: security.tls.as_ref().map(|tls| tls.files.clone()),
            heartbeat_interval_ms: heartbeats.interval_ms,
            heartbeat_timeout_ms: heartbeats.timeout_ms,
        }
    }

    /// The security and heartbeats they carry, or what is wrong with them.
    pub fn open(&self) -> Result<(Security, Heartbeats), ClusterError> {
        let secret = Secret::from_bytes(&self.secret)?;
        let tls = match &self.tls {
            None => None,
            Some(files) => Some(TlsConfig::from_files(files.clone())?),
        };
        let heartbeats = Heartbeats { interval_ms: self.heartbeat_interval_ms, timeout_ms: self.heartbeat_timeout_ms };
        heartbeats.validate()?;
        Ok((Security { secret, tls }, heartbeats))
    }
}

/// What a TaskManager writes to a task executor's standard input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    pub deployment: Deployment,
    pub task_manager: TaskManagerId,
    /// The host its data listener binds (the TaskManager's).
    pub data_host: String,
    pub credentials: Credentials,
}

impl Launch {
    pub fn write(&self, to: &mut impl std::io::Write) -> std::io::Result<()> {
        write_value(to, self)
    }
}

/// A job whose JobMaster is to be started again, as the JobManager asks a TaskManager.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMasterTakeover {
    pub job: JobId,
    /// The takeover's number (the TaskManager names it when the process exits).
    pub takeover: u32,
    pub job_name: String,
    /// The arguments the job's binary was submitted with.
    pub args: Vec<String>,
    /// The job directory its checkpoints are in (it restores the latest one there);
    /// `None` for a job submitted detached, whose JobMaster starts here for the first time.
    pub job_dir: Option<String>,
    /// How long its attempts wait for slots (what the job last asked with).
    pub slot_timeout_ms: u64,
    /// Each operator's parallelism when its last JobMaster ran it (empty: as the program
    /// sets it).
    pub operator_parallelism: Vec<u32>,
}

/// What a TaskManager writes to the standard input of a JobMaster it starts again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMasterLaunch {
    pub takeover: JobMasterTakeover,
    /// Where the JobManager is (as the TaskManager reaches it).
    pub jobmanager: String,
    pub credentials: Credentials,
}

impl JobMasterLaunch {
    pub fn write(&self, to: &mut impl std::io::Write) -> std::io::Result<()> {
        write_value(to, self)
    }
}

/// A binary as the cluster compares binaries: its file name, without a Windows `.exe`. A
/// TaskManager runs the jobs of its own binary (it starts it with the job's arguments),
/// and the JobManager gives a job the slots of TaskManagers whose binary has the job's
/// name; the graph's fingerprint then catches a binary of the same name that builds
/// another job.
pub fn binary_name(path: &str) -> String {
    // Linux names an executable replaced on disk (rebuilt) `… (deleted)`.
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let name = std::path::Path::new(path).file_name().map_or(path.into(), |n| n.to_string_lossy().into_owned());
    name.strip_suffix(".exe").map_or(name.clone(), str::to_string)
}

/// This process's binary's [`binary_name`] (empty if the system cannot tell).
pub fn this_binary_name() -> String {
    std::env::current_exe().map_or(String::new(), |path| binary_name(&path.to_string_lossy()))
}

/// Whether a TaskManager started this process (a task executor, or a JobMaster taken
/// over): the program's own cluster flags do not apply to it.
pub fn launched() -> bool {
    std::env::var_os(LAUNCH_ENV).is_some() || job_master_launched()
}

/// Whether a TaskManager started this process as a job's JobMaster taken over.
pub fn job_master_launched() -> bool {
    std::env::var_os(JOB_MASTER_ENV).is_some()
}
