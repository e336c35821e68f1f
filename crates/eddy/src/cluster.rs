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
//! Both are explicit in a program: it takes the roles by calling [`serve_role`] first
//! thing in `main` (the `eddy` CLI has them as subcommands), and it submits its job to a
//! cluster by parsing [`SubmitArgs`] (flattened into its own parser, or alone with
//! [`SubmitArgs::from_process_args`]) and applying them to its `Env`
//! ([`SubmitArgs::apply_to`]). Nothing else reads a program's arguments. Every
//! TaskManager must run the same binary as the job it runs: it starts that binary with
//! the job's arguments to rebuild the job's graph.

pub use crate::cluster_error::CliError;
use clap::Parser;
pub use eddy_jobmanager::client::CliClient;
pub use eddy_jobmanager::{run_job_manager, JobManagerOptions};
pub use eddy_jobmaster::jobmaster::SLOT_TIMEOUT_MS_DEFAULT;
pub use eddy_jobmaster::ClusterTarget;
pub use eddy_rpc::messages::{JobCommand, JobSummary};
pub use eddy_rpc::{Heartbeats, JobId, JobState, Secret, Security, TlsConfig, TlsFiles};
pub use eddy_taskmanager::{run_task_manager, TaskManagerOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags a job's binary accepts to submit its job to a cluster and to restore it
/// (Flink's `flink run` flags); flatten them into its own parser, then
/// [`SubmitArgs::apply_to`] its `Env`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SubmitArgs {
    /// Submit the job to this JobManager (HOST:PORT) instead of running it here.
    #[arg(long, conflicts_with = "ha")]
    pub jobmanager: Option<String>,
    /// Submit the job to the cluster whose leading JobManager etcd names
    /// (`etcd://HOST:PORT[,HOST:PORT…][/CLUSTER-ID]`), instead of running it here.
    #[arg(long)]
    pub ha: Option<String>,
    /// The file holding the cluster's shared secret (with --jobmanager or --ha): every
    /// process of the cluster reads the same one.
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// How long the job waits for enough free slots before it fails.
    #[arg(long)]
    pub slot_timeout_ms: Option<u64>,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// Start from this savepoint or retained checkpoint: a `savepoint-N` or `chk-N`
    /// directory, or its `_metadata` file (Flink's `-s`/`--fromSavepoint`).
    #[arg(short = 's', long, value_name = "PATH", conflicts_with = "restore")]
    pub from_savepoint: Option<PathBuf>,
    /// `latest`: resume from the newest checkpoint of this job in its checkpoint
    /// directory, or start fresh (and say so) while there is none, so that one command
    /// line both starts and resumes the job. A directory: resume from the newest
    /// checkpoint in it (a checkpoint directory holding one job's, or one job directory).
    #[arg(long, value_name = "latest|DIR")]
    pub restore: Option<String>,
    /// With -s or --restore: start even when the restored state holds operators this job
    /// no longer has; their state is dropped (Flink's `-n`/`--allowNonRestoredState`).
    #[arg(short = 'n', long)]
    pub allow_non_restored_state: bool,
    /// With -s or --restore: take the restored checkpoint over (Flink's CLAIM restore
    /// mode): later checkpoints reference its files and it is deleted once subsumed.
    /// Default: NO_CLAIM, it is never touched.
    #[arg(long)]
    pub claim: bool,
    /// With --jobmanager or --ha: submit the job, print its id and return; the job runs
    /// on, its JobMaster on a TaskManager (Flink's `-d`/`--detached`).
    #[arg(short = 'd', long)]
    pub detached: bool,
}

// A program whose only flags are these.
#[derive(Debug, Parser)]
#[command(about = "An eddy job: it runs here, or on the cluster that --jobmanager or --ha names")]
struct OnlySubmitArgs {
    #[command(flatten)]
    cluster: SubmitArgs,
}

impl SubmitArgs {
    /// Parses the process's arguments as these flags and nothing else (a program with no
    /// flags of its own, as the examples); a wrong flag ends the process with clap's
    /// message.
    pub fn from_process_args() -> Self {
        OnlySubmitArgs::parse().cluster
    }

    /// The cluster these flags name, if `--jobmanager` is given; task executors run the
    /// program with the same arguments.
    pub fn target(&self) -> Result<Option<ClusterTarget>, CliError> {
        let Some(jobmanager) = jobmanager_of(self.jobmanager.as_ref(), self.ha.as_ref())? else { return Ok(None) };
        let Some(secret_file) = &self.secret_file else {
            return Err(CliError::Usage(
                "--jobmanager (or --ha) needs --secret-file FILE: the cluster refuses jobs without its secret".into(),
            ));
        };
        let mut target = ClusterTarget::new(jobmanager, security(secret_file, &self.tls)?);
        if let Some(timeout_ms) = self.slot_timeout_ms {
            target.slot_timeout_ms = timeout_ms;
        }
        Ok(Some(target))
    }

    /// Applies the restore flags to `env`, and submits its jobs to the cluster these flags
    /// name, if any. In a task executor (a TaskManager started this program for a
    /// cluster job) it submits nothing: the TaskManager gave it the cluster's
    /// credentials, and the secret file named here need not exist on its machine.
    pub fn apply_to(&self, env: &crate::Env) -> Result<(), CliError> {
        // A JobMaster started again after a failover restores what the job started from
        // when the job has no checkpoint of its own yet: the restore flags apply there too.
        let target = if is_task_executor() { None } else { self.target()? };
        if self.detached && target.is_none() && !is_task_executor() {
            return Err(CliError::Usage(
                "--detached needs --jobmanager or --ha: a local job runs in this process and ends with it".into(),
            ));
        }
        if self.detached && !is_task_executor() {
            // The detached job's JobMaster runs in a TaskManager's directory.
            let restore = self.restore.iter().filter(|r| *r != "latest").map(PathBuf::from);
            let relative = self.from_savepoint.iter().cloned().chain(restore).find(|p| p.is_relative());
            if let Some(path) = relative {
                return Err(CliError::Usage(format!(
                    "--detached with the relative path {}: the job's JobMaster runs on a TaskManager, in its \
                     directory; give an absolute path",
                    path.display()
                )));
            }
        }
        let restoring = self.from_savepoint.is_some() || self.restore.is_some();
        if (self.allow_non_restored_state || self.claim) && !restoring {
            let flag = if self.claim { "--claim" } else { "--allow-non-restored-state" };
            return Err(CliError::Usage(format!("{flag} goes with -s/--from-savepoint PATH or --restore")));
        }
        if let Some(path) = &self.from_savepoint {
            env.restore_from(path);
        }
        match self.restore.as_deref().map(std::path::Path::new) {
            None => {}
            Some(latest) if latest == std::path::Path::new("latest") => {
                env.restore_latest();
            }
            // A directory without `_metadata` is one to restore the newest checkpoint of (a
            // checkpoint directory, or a job directory); anything else restores as -s does
            // (a checkpoint or savepoint, its `_metadata`, or a path that does not exist,
            // which the restore names with what is nearby).
            Some(dir) if dir.is_dir() && !dir.join("_metadata").is_file() => {
                env.restore_latest_from(dir);
            }
            Some(path) => {
                env.restore_from(path);
            }
        }
        if self.allow_non_restored_state {
            env.set_allow_non_restored_state(true);
        }
        if self.claim {
            env.set_restore_mode(crate::RestoreMode::Claim);
        }
        if let Some(mut target) = target {
            target.detached = self.detached;
            env.set_cluster(target);
        }
        Ok(())
    }
}

/// Whether a TaskManager started this process: a task executor, to run subtasks of a
/// cluster job (whose `execute` then returns with
/// [`JobResult::task_executor`](crate::JobResult::task_executor) set), or the job's
/// JobMaster started again after the process that ran it died (it takes the cluster and
/// the job from its TaskManager, not from its flags).
pub fn is_task_executor() -> bool {
    eddy_rpc::launch::launched()
}

/// Where a process finds the JobManager: `--jobmanager HOST:PORT`, or `--ha URL` (the
/// leader etcd names, checked here), as the cluster crates take it.
fn jobmanager_of(jobmanager: Option<&String>, ha: Option<&String>) -> Result<Option<String>, CliError> {
    match (jobmanager, ha) {
        (_, Some(url)) => {
            eddy_rpc::ha::HaServices::parse(url).map_err(CliError::cluster(format!("--ha {url}")))?;
            Ok(Some(url.clone()))
        }
        (Some(address), None) if eddy_rpc::ha::is_ha(address) => {
            Err(CliError::Usage(format!("--jobmanager {address}: a high-availability address goes with --ha")))
        }
        (Some(address), None) => {
            let host_port =
                address.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !host_port {
                return Err(CliError::Usage(format!(
                    "--jobmanager {address}: give the JobManager's HOST:PORT, as its `jobmanager --bind` (by default \
                     127.0.0.1:6123) or its `jobmanager listening on` line says"
                )));
            }
            Ok(Some(address.clone()))
        }
        (None, None) => Ok(None),
    }
}

/// TLS for every connection of the cluster: all its processes take the same flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// The cluster's certificate (PEM); with --tls-key, turns TLS on.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The CA that signed the certificate (PEM); default: the certificate itself.
    #[arg(long, requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
}

/// The secret in `secret_file` and the TLS configuration of `tls`.
pub fn security(secret_file: &std::path::Path, tls: &TlsArgs) -> Result<Security, CliError> {
    let secret = Secret::from_file(secret_file).map_err(CliError::cluster("the cluster's secret"))?;
    let tls = match (&tls.tls_cert, &tls.tls_key) {
        (Some(cert), Some(key)) => Some(
            TlsConfig::from_files(TlsFiles { cert: cert.clone(), key: key.clone(), ca: tls.tls_ca.clone() })
                .map_err(CliError::cluster("TLS"))?,
        ),
        _ => None,
    };
    Ok(Security { secret, tls })
}

/// `jobmanager`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct JobManagerArgs {
    /// Where TaskManagers, jobs and the CLI reach it.
    #[arg(long, default_value = "127.0.0.1:6123")]
    pub bind: String,
    /// The file holding the cluster's shared secret: every process of the cluster reads
    /// the same one (any bytes; e.g. `head -c 32 /dev/urandom | base64 > secret`).
    #[arg(long)]
    pub secret_file: PathBuf,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub heartbeats: HeartbeatArgs,
    /// Serve the REST API, the dashboard and `/metrics` here (`HOST:PORT`; port 0: any
    /// free one). Every request needs the cluster's secret as a bearer token; TLS when
    /// the cluster has TLS.
    #[arg(long)]
    pub rest_bind: Option<String>,
    /// High availability: campaign for leadership through etcd
    /// (`etcd://HOST:PORT[,HOST:PORT…][/CLUSTER-ID]`), serve only while leading, and keep
    /// the jobs there for the next leader. Run two or more JobManagers with it.
    #[arg(long)]
    pub ha: Option<String>,
    /// How long an ended job stays in the job list, the REST API and `/metrics` (Flink's
    /// `jobstore.expiration-time`).
    #[arg(long, default_value_t = eddy_jobmanager::JOB_RETENTION_DEFAULT.as_millis() as u64)]
    pub job_retention_ms: u64,
}

/// `taskmanager`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TaskManagerArgs {
    /// The JobManager to register with (HOST:PORT).
    #[arg(long, required_unless_present = "ha", conflicts_with = "ha")]
    pub jobmanager: Option<String>,
    /// Register with the leading JobManager that etcd names (`etcd://HOST:PORT…`), and
    /// with the next leader when it goes.
    #[arg(long)]
    pub ha: Option<String>,
    /// Slots it offers: one slot holds one subtask of every operator of a job.
    #[arg(long, default_value_t = 1)]
    pub slots: u32,
    /// The file holding the cluster's shared secret, the same as the JobManager's.
    #[arg(long)]
    pub secret_file: PathBuf,
    /// The address other TaskManagers reach its subtasks at.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// How long it tries to reach the JobManager before it gives up: when it starts, and
    /// again after it lost the JobManager (Flink's `taskmanager.registration.timeout`).
    #[arg(long, default_value_t = 300_000)]
    pub register_timeout_ms: u64,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub heartbeats: HeartbeatArgs,
    /// Serve `/metrics` here (`HOST:PORT`; port 0: any free one), behind the cluster's
    /// secret as a bearer token.
    #[arg(long)]
    pub rest_bind: Option<String>,
}

/// Heartbeats (both ways) and how long a silent peer stays a member.
#[derive(Debug, Clone, clap::Args)]
pub struct HeartbeatArgs {
    /// How often it says it is alive (Flink's `heartbeat.interval`).
    #[arg(long, default_value_t = Heartbeats::default().interval_ms)]
    pub heartbeat_interval_ms: u64,
    /// How long a peer may stay silent before it counts as lost (Flink's
    /// `heartbeat.timeout`).
    #[arg(long, default_value_t = Heartbeats::default().timeout_ms)]
    pub heartbeat_timeout_ms: u64,
}

impl HeartbeatArgs {
    fn heartbeats(&self) -> Result<Heartbeats, CliError> {
        let heartbeats = Heartbeats { interval_ms: self.heartbeat_interval_ms, timeout_ms: self.heartbeat_timeout_ms };
        heartbeats.validate().map_err(CliError::cluster("heartbeats"))?;
        Ok(heartbeats)
    }
}

/// Where the CLI finds the cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct CliArgs {
    /// The JobManager's HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:6123")]
    pub jobmanager: String,
    /// The leading JobManager that etcd names (`etcd://HOST:PORT…`), instead of
    /// --jobmanager.
    #[arg(long)]
    pub ha: Option<String>,
    /// The file holding the cluster's shared secret, the same as the JobManager's.
    #[arg(long)]
    pub secret_file: PathBuf,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// Job control against a running cluster (`list`, `status`, `savepoint`, `stop`,
/// `cancel`). A job is named by its id (from `list`) or by its name.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum JobControl {
    /// Lists the jobs: id, name, state, parallelism and uptime.
    List {
        #[command(flatten)]
        cluster: CliArgs,
    },
    /// Shows a running job's subtasks and checkpoints.
    Status {
        job: String,
        #[command(flatten)]
        cluster: CliArgs,
    },
    /// Takes a savepoint of a running job into DIR; prints `savepoint=<path>`.
    Savepoint {
        job: String,
        dir: PathBuf,
        #[command(flatten)]
        cluster: CliArgs,
    },
    /// Takes a savepoint of a running job into DIR, then ends the job; prints
    /// `savepoint=<path>`. Resume with the job's binary and `--restore <path>`, at any
    /// parallelism.
    Stop {
        job: String,
        #[arg(long)]
        savepoint: PathBuf,
        #[command(flatten)]
        cluster: CliArgs,
    },
    /// Cancels a running job.
    Cancel {
        job: String,
        #[command(flatten)]
        cluster: CliArgs,
    },
    /// Takes a running job to another parallelism (its operators that follow the job's
    /// default parallelism), from a checkpoint taken for it: one short pause, no savepoint
    /// round trip (Flink's adaptive scheduler).
    Rescale {
        job: String,
        #[arg(long)]
        parallelism: u32,
        #[command(flatten)]
        cluster: CliArgs,
    },
}

/// Runs a job-control command; what it prints on success, or why it failed.
pub fn job_control(command: JobControl) -> Result<String, CliError> {
    let connect = |cluster: &CliArgs| -> Result<CliClient, CliError> {
        let security = security(&cluster.secret_file, &cluster.tls)?;
        let jobmanager = jobmanager_of(Some(&cluster.jobmanager), cluster.ha.as_ref())?.unwrap_or_default();
        CliClient::connect(&jobmanager, &security).map_err(CliError::cluster("cannot reach the JobManager"))
    };
    let (job, cluster, command) = match command {
        JobControl::List { cluster } => {
            use eddy_types::text::{duration, table, Align};
            let jobs = connect(&cluster)?.list().map_err(CliError::cluster("cannot list the jobs"))?;
            let rows: Vec<Vec<String>> = jobs
                .iter()
                .map(|job| {
                    let state = job.state.to_string();
                    vec![
                        job.id.to_string(),
                        job.name.clone(),
                        state,
                        job.parallelism.to_string(),
                        duration(job.uptime_ms),
                    ]
                })
                .collect();
            let align = [Align::Right, Align::Left, Align::Left, Align::Right, Align::Right];
            return Ok(table(&["ID", "NAME", "STATE", "PARALLELISM", "UPTIME"], &align, &rows));
        }
        JobControl::Status { job, cluster } => (job, cluster, JobCommand::Status),
        JobControl::Savepoint { job, dir, cluster } => (job, cluster, JobCommand::Savepoint { dir: absolute(&dir)? }),
        JobControl::Stop { job, savepoint, cluster } => {
            (job, cluster, JobCommand::Stop { savepoint_dir: absolute(&savepoint)? })
        }
        JobControl::Cancel { job, cluster } => (job, cluster, JobCommand::Cancel),
        JobControl::Rescale { job, parallelism, cluster } => (job, cluster, JobCommand::Rescale { parallelism }),
    };
    let long = matches!(command, JobCommand::Savepoint { .. } | JobCommand::Stop { .. } | JobCommand::Rescale { .. });
    let bar = Progress::start(long, &format!("asking job {job}"));
    let answer = connect(&cluster)?.command(&job, command, &mut |line: &str| bar.say(line));
    bar.finish();
    answer.map_err(CliError::cluster(format!("cannot ask job {job}")))?.map_err(CliError::Refused)
}

/// What a long command shows while it runs: on a terminal a line that updates (the last
/// word from the job, and the time so far), else plain lines as they come.
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn start(long: bool, first: &str) -> Self {
        use std::io::IsTerminal;
        if !long || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(first.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Progress(Some(bar))
    }

    fn say(&self, line: &str) {
        match &self.0 {
            Some(bar) => bar.set_message(line.to_string()),
            None => eprintln!("{line}"),
        }
    }

    fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

/// A directory as the job's processes see it: absolute (they may run elsewhere).
fn absolute(dir: &std::path::Path) -> Result<String, CliError> {
    let dir = std::path::absolute(dir).map_err(|source| CliError::Io { what: dir.display().to_string(), source })?;
    Ok(dir.display().to_string())
}

#[derive(Debug, Parser)]
#[command(about = "eddy cluster role or job control")]
enum Role {
    /// Runs the JobManager.
    Jobmanager(JobManagerArgs),
    /// Runs a TaskManager.
    Taskmanager(TaskManagerArgs),
    #[command(flatten)]
    Control(JobControl),
}

/// The words [`serve_role`] takes as a program's first argument.
pub const ROLE_WORDS: [&str; 8] =
    ["jobmanager", "taskmanager", "list", "status", "savepoint", "stop", "cancel", "rescale"];

/// If this process was started as `<binary> jobmanager …` or `<binary> taskmanager …`
/// (or with a job-control command: `list`, `status`, `savepoint`, `stop`, `cancel`), runs
/// it and exits the process; otherwise returns at once. Call it first thing in `main`,
/// before the program parses its own arguments: then every binary of a job can run the
/// whole cluster and operate it.
pub fn serve_role() {
    let args: Vec<String> = std::env::args().collect();
    if !args.get(1).is_some_and(|word| ROLE_WORDS.contains(&word.as_str())) {
        return;
    }
    let role = Role::parse_from(&args);
    crate::log_to_stderr();
    let code = match role {
        Role::Jobmanager(args) => report(run_jobmanager(&args).map(|()| String::new())),
        Role::Taskmanager(args) => report(run_taskmanager(&args).map(|()| String::new())),
        Role::Control(command) => report(job_control(command)),
    };
    std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 });
}

/// Prints what a command says, or its error with its causes; the exit code says which.
pub fn report(result: Result<String, CliError>) -> ExitCode {
    match result {
        Ok(output) => {
            print!("{output}");
            if !output.is_empty() && !output.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("eddy: {}", eddy_types::chain(&error));
            ExitCode::FAILURE
        }
    }
}

/// Runs the JobManager until the process is stopped.
pub fn run_jobmanager(args: &JobManagerArgs) -> Result<(), CliError> {
    let security = security(&args.secret_file, &args.tls)?;
    let options = JobManagerOptions {
        bind: args.bind.clone(),
        security: security.clone(),
        heartbeats: args.heartbeats.heartbeats()?,
        ha: args.ha.as_deref().map(eddy_rpc::ha::HaServices::parse).transpose().map_err(CliError::cluster("--ha"))?,
        job_retention: std::time::Duration::from_millis(args.job_retention_ms),
    };
    let job_manager = eddy_jobmanager::bind_job_manager(options).map_err(CliError::cluster("jobmanager"))?;
    let server = match &args.rest_bind {
        Some(bind) => Some(crate::cluster_web::serve_job_manager(bind, job_manager.handle(), &security)?),
        None => None,
    };
    job_manager.announce().map_err(CliError::cluster("jobmanager"))?;
    if let Some(server) = &server {
        job_manager.handle().set_rest_url(&server.url());
        // The address, for a script or a test that bound port 0.
        println!("rest listening on {}", server.url());
    }
    job_manager.run().map_err(CliError::cluster("jobmanager"))
}

/// Runs a TaskManager until its JobManager goes away (an error) or it is stopped.
pub fn run_taskmanager(args: &TaskManagerArgs) -> Result<(), CliError> {
    let security = security(&args.secret_file, &args.tls)?;
    let metrics_address = match &args.rest_bind {
        None => None,
        Some(bind) => {
            let (server, address) = crate::cluster_web::serve_task_manager(bind, args.slots, &security)?;
            println!("metrics listening on {}", server.url());
            Some(address)
        }
    };
    let options = TaskManagerOptions {
        jobmanager: jobmanager_of(args.jobmanager.as_ref(), args.ha.as_ref())?.unwrap_or_default(),
        slots: args.slots,
        metrics_address,
        security,
        host: args.host.clone(),
        heartbeats: args.heartbeats.heartbeats()?,
        register_timeout: std::time::Duration::from_millis(args.register_timeout_ms),
    };
    run_task_manager(options).map_err(CliError::cluster("taskmanager"))
}
