//! Running eddy as a cluster: the roles every eddy binary can take (application mode),
//! and the CLI's job control.
//!
//! ```text
//! <binary> jobmanager  --bind 127.0.0.1:6123 --secret-file SECRET
//! <binary> taskmanager --jobmanager 127.0.0.1:6123 --slots 2 --secret-file SECRET
//! <binary> <its own arguments> --jobmanager 127.0.0.1:6123 --secret-file SECRET   (submits its job)
//! eddy list|status|savepoint|stop|cancel --jobmanager 127.0.0.1:6123 --secret-file SECRET
//! ```
//!
//! A binary takes the roles by calling [`serve_role`] first thing in `main`; the `eddy`
//! CLI has them as subcommands. Every TaskManager must run the same binary as the job it
//! runs: it starts that binary with the job's arguments to rebuild the job's graph.

use clap::Parser;
pub use eddy_jobmanager::client::CliClient;
pub use eddy_jobmanager::{run_job_manager, JobManagerOptions};
pub use eddy_runtime::cluster::messages::{JobCommand, JobSummary};
pub use eddy_runtime::cluster::taskmanager::{run_task_manager, TaskManagerOptions};
pub use eddy_runtime::cluster::{ClusterTarget, Heartbeats, Secret};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags a job's binary accepts to submit its job to a cluster; flatten them into
/// its own parser. [`Env::execute`](crate::Env::execute) reads them from the process's
/// arguments itself.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SubmitArgs {
    /// Submit the job to this JobManager instead of running it here.
    #[arg(long)]
    pub jobmanager: Option<String>,
    /// The cluster's secret (with --jobmanager).
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// How long the job waits for enough free slots before it fails.
    #[arg(long)]
    pub slot_timeout_ms: Option<u64>,
}

/// `jobmanager`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct JobManagerArgs {
    /// Where TaskManagers, jobs and the CLI reach it.
    #[arg(long, default_value = "127.0.0.1:6123")]
    pub bind: String,
    /// The cluster's shared secret: every process must hold the same.
    #[arg(long)]
    pub secret_file: PathBuf,
    #[command(flatten)]
    pub heartbeats: HeartbeatArgs,
}

/// `taskmanager`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TaskManagerArgs {
    /// The JobManager to register with.
    #[arg(long)]
    pub jobmanager: String,
    /// Slots it offers: one slot holds one subtask of every operator of a job.
    #[arg(long, default_value_t = 1)]
    pub slots: u32,
    #[arg(long)]
    pub secret_file: PathBuf,
    /// The address other TaskManagers reach its subtasks at.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[command(flatten)]
    pub heartbeats: HeartbeatArgs,
}

/// Heartbeats (both ways) and how long a silent peer stays a member.
#[derive(Debug, Clone, clap::Args)]
pub struct HeartbeatArgs {
    #[arg(long, default_value_t = Heartbeats::default().interval_ms)]
    pub heartbeat_interval_ms: u64,
    #[arg(long, default_value_t = Heartbeats::default().timeout_ms)]
    pub heartbeat_timeout_ms: u64,
}

impl HeartbeatArgs {
    fn heartbeats(&self) -> Result<Heartbeats, String> {
        let heartbeats = Heartbeats { interval_ms: self.heartbeat_interval_ms, timeout_ms: self.heartbeat_timeout_ms };
        heartbeats.validate().map_err(|e| e.to_string())?;
        Ok(heartbeats)
    }
}

#[derive(Debug, Parser)]
#[command(about = "eddy cluster role")]
enum Role {
    /// Runs the JobManager.
    Jobmanager(JobManagerArgs),
    /// Runs a TaskManager.
    Taskmanager(TaskManagerArgs),
}

/// If this process was started as `<binary> jobmanager …` or `<binary> taskmanager …`,
/// runs that role and exits the process; otherwise returns at once. Call it first thing in
/// `main`, before the program parses its own arguments.
pub fn serve_role() {
    let args: Vec<String> = std::env::args().collect();
    if !matches!(args.get(1).map(String::as_str), Some("jobmanager" | "taskmanager")) {
        return;
    }
    let role = Role::parse_from(&args);
    crate::log_to_stderr();
    let code = match role {
        Role::Jobmanager(args) => report(run_jobmanager(&args)),
        Role::Taskmanager(args) => report(run_taskmanager(&args)),
    };
    std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 });
}

fn report(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("eddy: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the JobManager until the process is stopped.
pub fn run_jobmanager(args: &JobManagerArgs) -> Result<(), String> {
    let secret = Secret::from_file(&args.secret_file).map_err(|e| e.to_string())?;
    let options = JobManagerOptions { bind: args.bind.clone(), secret, heartbeats: args.heartbeats.heartbeats()? };
    run_job_manager(options).map_err(|e| format!("jobmanager: {e}"))
}

/// Runs a TaskManager until its JobManager goes away (an error) or it is stopped.
pub fn run_taskmanager(args: &TaskManagerArgs) -> Result<(), String> {
    let secret = Secret::from_file(&args.secret_file).map_err(|e| e.to_string())?;
    let options = TaskManagerOptions {
        jobmanager: args.jobmanager.clone(),
        slots: args.slots,
        secret,
        host: args.host.clone(),
        heartbeats: args.heartbeats.heartbeats()?,
    };
    run_task_manager(options).map_err(|e| format!("taskmanager: {e}"))
}
