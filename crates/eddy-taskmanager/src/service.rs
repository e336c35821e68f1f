//! The TaskManager's one loop: register, heartbeats, deployments and cancellations from
//! the JobManager, and one task executor process per deployment.

use eddy_rpc::auth::authenticate_client;
use eddy_rpc::ha::{is_ha, locate_jobmanager};
use eddy_rpc::launch::{
    Credentials, Deployment, JobMasterLaunch, JobMasterTakeover, Launch, JOB_MASTER_ENV, LAUNCH_ENV,
};
use eddy_rpc::messages::TaskManagerMessage;
use eddy_rpc::{
    start_heartbeats, AttemptId, ClusterError, Connection, Heartbeats, JobId, PeerRole, Reader, Security, Stream,
    TaskManagerId,
};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines of a task executor's standard error kept to explain its exit.
const STDERR_LINES_KEPT: usize = 6;

/// How a TaskManager runs.
#[derive(Debug, Clone)]
pub struct TaskManagerOptions {
    pub jobmanager: String,
    pub slots: u32,
    pub security: Security,
    /// The host its task executors listen on for data from other TaskManagers.
    pub host: String,
    pub heartbeats: Heartbeats,
    /// How long it tries to reach its JobManager before it gives up.
    pub register_timeout: Duration,
    /// Where it serves `/metrics`, if it does (told to the JobManager, which lists it).
    pub metrics_address: Option<String>,
}

type Executors = Arc<Mutex<HashMap<(JobId, AttemptId), Arc<Mutex<Child>>>>>;

/// Runs the TaskManager until it is killed, or cannot register (an error). When the
/// JobManager is lost (its process gone, or the network between them cut for longer than
/// the heartbeat timeout), its task executors stop (their slots were given up there) and it
/// registers again, as Flink's TaskManagers do, trying for the register timeout: with the
/// same JobManager, or with high availability (`etcd://…`) with whichever leads by then.
/// So a cluster keeps its capacity across a network partition that heals.
pub fn run_task_manager(options: TaskManagerOptions) -> Result<(), ClusterError> {
    if options.slots == 0 {
        return Err(ClusterError::Config("--slots must be at least 1".into()));
    }
    let mut lost: Option<(String, ClusterError)> = None;
    loop {
        let registered = register_within_timeout(&options);
        let (connection, reader, id, jm) = match (registered, lost.take()) {
            (Ok(registered), _) => registered,
            (Err(e), None) => return Err(e),
            (Err(e), Some((jm, cause))) => {
                return Err(ClusterError::Protocol(format!(
                    "the JobManager at {jm} went away ({cause}); this TaskManager stopped, as it could not \
                     register again: {e}",
                    e = eddy_rpc::chain(&e),
                    cause = eddy_rpc::chain(&cause)
                )))
            }
        };
        let cause = serve_jobmanager(&options, connection, reader, id, &jm)?;
        tracing::warn!(jobmanager = %jm, error = %eddy_rpc::chain(&cause), "lost the JobManager; its task executors stopped; registering \
            again");
        lost = Some((jm, cause));
    }
}

/// What registering gives: the connection, its reader, this TaskManager's id and the
/// JobManager's address.
type Registered = (Connection, Reader, TaskManagerId, String);

/// Registers with the JobManager (the leader), trying again for the register timeout
/// while it cannot be reached.
fn register_within_timeout(options: &TaskManagerOptions) -> Result<Registered, ClusterError> {
    let binary = this_binary()?;
    let started = Instant::now();
    loop {
        match register(options, &binary) {
            Ok(registered) => return Ok(registered),
            Err((e, again)) if again && started.elapsed() < options.register_timeout => {
                tracing::debug!(jobmanager = %options.jobmanager, error = %eddy_rpc::chain(&e), "JobManager not reachable yet; trying \
                    again");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err((e, true)) => {
                return Err(ClusterError::Config(format!(
                    "{e} (tried for {} ms, --register-timeout-ms)",
                    options.register_timeout.as_millis(),
                    e = eddy_rpc::chain(&e)
                )))
            }
            Err((e, false)) => return Err(e),
        }
    }
}

fn this_binary() -> Result<std::path::PathBuf, ClusterError> {
    std::env::current_exe()
        .map_err(|e| ClusterError::Config(format!("cannot find this program's path: {e}", e = eddy_rpc::chain(&e))))
}

/// Serves the JobManager this TaskManager registered with until it is lost: the loss (its
/// task executors stopped), or an error that registering again cannot mend.
fn serve_jobmanager(
    options: &TaskManagerOptions,
    connection: Connection,
    mut reader: Reader,
    id: TaskManagerId,
    jm: &str,
) -> Result<ClusterError, ClusterError> {
    tracing::info!(task_manager = %id, slots = options.slots, jobmanager = %jm, "TaskManager registered");
    let binary = &this_binary()?;
    let stop = Arc::new(AtomicBool::new(false));
    start_heartbeats(connection.clone(), options.heartbeats, stop.clone(), TaskManagerMessage::Heartbeat);
    let executors: Executors = Arc::default();
    let error: ClusterError = loop {
        match reader.receive() {
            Ok(TaskManagerMessage::Heartbeat) => {}
            Ok(TaskManagerMessage::Deploy(deployment)) => {
                if let Err(e) = start_executor(options, id, binary, deployment.clone(), &connection, &executors) {
                    tracing::error!(job = %deployment.job, error = %e, "cannot start a task executor");
                    let _ = connection.send(&TaskManagerMessage::ExecutorExited {
                        job: deployment.job,
                        attempt: deployment.attempt,
                        executor: deployment.executor,
                        status: e,
                    });
                }
            }
            Ok(TaskManagerMessage::TakeOverJobMaster(takeover)) => {
                let (job, number) = (takeover.job, takeover.takeover);
                if let Err(status) = take_over_job_master(options, binary, takeover, &connection) {
                    tracing::error!(job = %job, error = %status, "cannot start the job's JobMaster again");
                    let _ = connection.send(&TaskManagerMessage::JobMasterExited { job, takeover: number, status });
                }
            }
            Ok(TaskManagerMessage::CancelExecutor { job, attempt }) => {
                let child = executors.lock().unwrap_or_else(|e| e.into_inner()).remove(&(job, attempt));
                if let Some(child) = child {
                    let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
                }
            }
            Ok(TaskManagerMessage::Refused(why)) => {
                stop_executors(&stop, &executors);
                return Err(ClusterError::Refused(why));
            }
            Ok(other) => tracing::warn!(message = ?other, "unexpected message from the JobManager; ignored"),
            Err(e) => break e,
        }
    };
    stop_executors(&stop, &executors);
    Ok(error)
}

/// Stops the heartbeats and every task executor: their slots are not this TaskManager's
/// any more.
fn stop_executors(stop: &AtomicBool, executors: &Executors) {
    stop.store(true, Ordering::Relaxed);
    for (_, child) in executors.lock().unwrap_or_else(|e| e.into_inner()).drain() {
        let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
    }
}

/// One try to register with the JobManager (the leader): the connection, its reader, this
/// TaskManager's id and the JobManager's address; or the error, and whether to try
/// again. A JobManager not reachable is tried again; with high availability so is one
/// that fails in the handshake (a leader dying while its successor is not known yet may
/// still take a connection); a refusal never is.
#[allow(clippy::type_complexity)]
fn register(
    options: &TaskManagerOptions,
    binary: &std::path::Path,
) -> Result<(Connection, Reader, TaskManagerId, String), (ClusterError, bool)> {
    let jm = locate_jobmanager(&options.jobmanager, Duration::ZERO).map_err(|e| (e, true))?;
    let stream = TcpStream::connect(&jm).map_err(|e| (ClusterError::io(&jm, "reaching the JobManager", e), true))?;
    // A standby that does not lead yet (high availability) answers nothing; a connection
    // that broke or went unanswered (a network cut) may work the next time; a refusal or a
    // wrong answer will not.
    let again = |e: &ClusterError| is_ha(&options.jobmanager) || matches!(e, ClusterError::Io { .. });
    let handshake = || -> Result<(Connection, Reader, TaskManagerId), ClusterError> {
        let stream = Stream::client(stream, &jm, options.security.tls.as_ref())?;
        authenticate_client(&stream, &options.security.secret, PeerRole::TaskManager)?;
        let (connection, mut reader) = Connection::new(stream, Some(options.heartbeats.timeout()))?;
        connection.send(&TaskManagerMessage::Register {
            slots: options.slots,
            binary: binary.display().to_string(),
            pid: std::process::id(),
            data_host: options.host.clone(),
            metrics_address: options.metrics_address.clone(),
        })?;
        loop {
            match reader.receive()? {
                TaskManagerMessage::Registered { id } => return Ok((connection, reader, id)),
                TaskManagerMessage::Heartbeat => {}
                TaskManagerMessage::Refused(why) => return Err(ClusterError::Refused(why)),
                other => {
                    return Err(ClusterError::Protocol(format!(
                        "the JobManager answered the registration with {other:?}"
                    )))
                }
            }
        }
    };
    match handshake() {
        Ok((connection, reader, id)) => Ok((connection, reader, id, jm)),
        Err(refused @ ClusterError::Refused(_)) => Err((refused, false)),
        Err(e) => {
            let again = again(&e);
            Err((e, again))
        }
    }
}

/// Starts the task executor of one deployment, and a thread that reports its exit.
fn start_executor(
    options: &TaskManagerOptions,
    task_manager: TaskManagerId,
    binary: &std::path::Path,
    deployment: Deployment,
    connection: &Connection,
    executors: &Executors,
) -> Result<(), String> {
    tracing::info!(
        job = %deployment.job,
        name = %deployment.job_name,
        attempt = %deployment.attempt,
        executor = %deployment.executor,
        "starting a task executor"
    );
    let launch = Launch {
        deployment: deployment.clone(),
        task_manager,
        data_host: options.host.clone(),
        credentials: Credentials::new(&options.security, options.heartbeats),
    };
    let started = start_process(binary, &deployment.args, LAUNCH_ENV, &|stdin| launch.write(stdin))
        .map_err(|e| format!("{e} (a task executor)"))?;
    let Started { child, stdin, tail, stderr } = started;
    let child = Arc::new(Mutex::new(child));
    let key = (deployment.job, deployment.attempt);
    executors.lock().unwrap_or_else(|e| e.into_inner()).insert(key, child.clone());
    let (connection, executors) = (connection.clone(), executors.clone());
    std::thread::spawn(move || {
        // The pipe stays open while the executor lives: its end tells the executor
        // that this TaskManager is gone.
        let _stdin = stdin;
        let status = wait_for_exit(&child, stderr);
        let cancelled = executors.lock().unwrap_or_else(|e| e.into_inner()).remove(&key).is_none();
        tracing::info!(job = %key.0, attempt = %key.1, %status, "task executor exited");
        if !cancelled && !status.success() {
            let status = format!("{status}; its last words: {}", last_words(&tail));
            let _ = connection.send(&TaskManagerMessage::ExecutorExited {
                job: key.0,
                attempt: key.1,
                executor: deployment.executor,
                status,
            });
        }
    });
    Ok(())
}

/// Starts a job's JobMaster again from the job's binary, for the JobManager: the process
/// that ran it died. It lives on its own (this TaskManager's end does not end it); its
/// exit with an error is reported, so that the JobManager can try elsewhere.
fn take_over_job_master(
    options: &TaskManagerOptions,
    binary: &std::path::Path,
    takeover: JobMasterTakeover,
    connection: &Connection,
) -> Result<(), String> {
    let (job, number) = (takeover.job, takeover.takeover);
    tracing::info!(job = %job, name = %takeover.job_name, job_dir = takeover.job_dir.as_deref().unwrap_or("none yet"), "starting the job's JobMaster \
        again");
    let args = takeover.args.clone();
    let launch = JobMasterLaunch {
        takeover,
        jobmanager: options.jobmanager.clone(),
        credentials: Credentials::new(&options.security, options.heartbeats),
    };
    let Started { child, stdin, tail, stderr } =
        start_process(binary, &args, JOB_MASTER_ENV, &|stdin| launch.write(stdin))
            .map_err(|e| format!("{e} (the job's JobMaster)"))?;
    drop(stdin);
    let child = Mutex::new(child);
    let connection = connection.clone();
    std::thread::spawn(move || {
        let status = wait_for_exit(&child, stderr);
        tracing::info!(job = %job, %status, "JobMaster exited");
        if !status.success() {
            let status = format!("{status}; its last words: {}", last_words(&tail));
            let _ = connection.send(&TaskManagerMessage::JobMasterExited { job, takeover: number, status });
        }
    });
    Ok(())
}

/// A process started from this TaskManager's binary, its input written.
struct Started {
    child: Child,
    stdin: ChildStdin,
    /// The last lines of its standard error, which explain an early exit.
    tail: Arc<Mutex<VecDeque<String>>>,
    /// Copies its standard error to this process's, line by line.
    stderr: std::thread::JoinHandle<()>,
}

/// Starts `binary` with `args` and `env` set, writes its input with `input`, and copies
/// its standard error to this process's, keeping the last lines.
fn start_process(
    binary: &std::path::Path,
    args: &[String],
    env: &str,
    input: &dyn Fn(&mut ChildStdin) -> std::io::Result<()>,
) -> Result<Started, String> {
    let mut child = Command::new(binary)
        .args(args)
        .env(env, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display(), e = eddy_rpc::chain(&e)))?;
    let (Some(mut stdin), Some(stderr)) = (child.stdin.take(), child.stderr.take()) else {
        let _ = child.kill();
        return Err("a process started without its pipes".into());
    };
    if let Err(e) = input(&mut stdin) {
        let _ = child.kill();
        return Err(format!("cannot hand the process what it runs: {e}", e = eddy_rpc::chain(&e)));
    }
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let tail_writer = tail.clone();
    let stderr = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let mut tail = tail_writer.lock().unwrap_or_else(|e| e.into_inner());
            if tail.len() == STDERR_LINES_KEPT {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    });
    Ok(Started { child, stdin, tail, stderr })
}

/// Waits until the process exits and its standard error is copied.
fn wait_for_exit(child: &Mutex<Child>, stderr: std::thread::JoinHandle<()>) -> std::process::ExitStatus {
    // Polled, not `wait`ed: a cancel kills the child through the same lock meanwhile.
    let status = loop {
        match child.lock().unwrap_or_else(|e| e.into_inner()).try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            // Not a child of ours any more: nothing to wait for.
            Err(_) => break std::os::unix::process::ExitStatusExt::from_raw(0),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = stderr.join();
    status
}

fn last_words(tail: &Mutex<VecDeque<String>>) -> String {
    let lines: Vec<String> = tail.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
    lines.join(" | ")
}
