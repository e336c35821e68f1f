//! The TaskManager's one loop: register, heartbeats, deployments and cancellations from
//! the JobManager, and one task executor process per deployment.

use eddy_rpc::auth::authenticate_client;
use eddy_rpc::launch::{Deployment, Launch, LAUNCH_ENV};
use eddy_rpc::messages::TaskManagerMessage;
use eddy_rpc::{
    start_heartbeats, AttemptId, ClusterError, Connection, Heartbeats, JobId, PeerRole, Security, Stream, TaskManagerId,
};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
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

/// Runs the TaskManager until its JobManager goes away (an error) or it is killed.
pub fn run_task_manager(options: TaskManagerOptions) -> Result<(), ClusterError> {
    if options.slots == 0 {
        return Err(ClusterError::Config("--slots must be at least 1".into()));
    }
    let jm = options.jobmanager.clone();
    let started = Instant::now();
    let stream = loop {
        match TcpStream::connect(&jm) {
            Ok(stream) => break stream,
            Err(e) if started.elapsed() < options.register_timeout => {
                tracing::debug!(jobmanager = %jm, error = %e, "JobManager not reachable yet; trying again");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => {
                return Err(ClusterError::io(
                    &jm,
                    &format!("reaching the JobManager (tried for {} ms)", options.register_timeout.as_millis()),
                    e,
                ))
            }
        }
    };
    let stream = Stream::client(stream, &jm, options.security.tls.as_ref())?;
    authenticate_client(&stream, &options.security.secret, PeerRole::TaskManager)?;
    let (connection, mut reader) = Connection::new(stream, Some(options.heartbeats.timeout()))?;
    let binary =
        std::env::current_exe().map_err(|e| ClusterError::Config(format!("cannot find this program's path: {e}")))?;
    connection.send(&TaskManagerMessage::Register {
        slots: options.slots,
        binary: binary.display().to_string(),
        pid: std::process::id(),
        data_host: options.host.clone(),
        metrics_address: options.metrics_address.clone(),
    })?;
    let id = loop {
        match reader.receive()? {
            TaskManagerMessage::Registered { id } => break id,
            TaskManagerMessage::Heartbeat => {}
            TaskManagerMessage::Refused(why) => return Err(ClusterError::Refused(why)),
            other => {
                return Err(ClusterError::Protocol(format!("the JobManager answered the registration with {other:?}")))
            }
        }
    };
    tracing::info!(task_manager = %id, slots = options.slots, jobmanager = %jm, "TaskManager registered");
    let stop = Arc::new(AtomicBool::new(false));
    start_heartbeats(connection.clone(), options.heartbeats, stop.clone(), TaskManagerMessage::Heartbeat);
    let executors: Executors = Arc::default();
    let error: ClusterError = loop {
        match reader.receive() {
            Ok(TaskManagerMessage::Heartbeat) => {}
            Ok(TaskManagerMessage::Deploy(deployment)) => {
                if let Err(e) = start_executor(&options, id, &binary, deployment.clone(), &connection, &executors) {
                    tracing::error!(job = %deployment.job, error = %e, "cannot start a task executor");
                    let _ = connection.send(&TaskManagerMessage::ExecutorExited {
                        job: deployment.job,
                        attempt: deployment.attempt,
                        executor: deployment.executor,
                        status: e,
                    });
                }
            }
            Ok(TaskManagerMessage::CancelExecutor { job, attempt }) => {
                let child = executors.lock().unwrap_or_else(|e| e.into_inner()).remove(&(job, attempt));
                if let Some(child) = child {
                    let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
                }
            }
            Ok(TaskManagerMessage::Refused(why)) => break ClusterError::Refused(why),
            Ok(other) => tracing::warn!(message = ?other, "unexpected message from the JobManager; ignored"),
            Err(e) => break e,
        }
    };
    stop.store(true, Ordering::Relaxed);
    for (_, child) in executors.lock().unwrap_or_else(|e| e.into_inner()).drain() {
        let _ = child.lock().unwrap_or_else(|e| e.into_inner()).kill();
    }
    tracing::error!(jobmanager = %jm, error = %error, "the JobManager went away; this TaskManager stops with its task executors");
    Err(ClusterError::Protocol(format!("the JobManager at {jm} went away ({error}); this TaskManager stopped")))
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
    tracing::info!(job = %deployment.job, name = %deployment.job_name, attempt = %deployment.attempt, executor = %deployment.executor, "starting a task executor");
    let mut child = Command::new(binary)
        .args(&deployment.args)
        .env(LAUNCH_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let launch = Launch {
        deployment: deployment.clone(),
        task_manager,
        data_host: options.host.clone(),
        secret: options.security.secret.bytes().to_vec(),
        tls: options.security.tls.as_ref().map(|tls| tls.files.clone()),
        heartbeat_interval_ms: options.heartbeats.interval_ms,
        heartbeat_timeout_ms: options.heartbeats.timeout_ms,
    };
    let Some(mut stdin) = child.stdin.take() else { return Err("the task executor has no standard input".into()) };
    launch.write(&mut stdin).map_err(|e| format!("cannot hand the deployment to the task executor: {e}"))?;
    // Its last lines of standard error explain an early exit; every line goes on to
    // this process's.
    let Some(stderr) = child.stderr.take() else { return Err("the task executor has no standard error".into()) };
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let tail_writer = tail.clone();
    let stderr_thread = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let mut tail = tail_writer.lock().unwrap_or_else(|e| e.into_inner());
            if tail.len() == STDERR_LINES_KEPT {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    });
    let child = Arc::new(Mutex::new(child));
    let key = (deployment.job, deployment.attempt);
    executors.lock().unwrap_or_else(|e| e.into_inner()).insert(key, child.clone());
    let (connection, executors) = (connection.clone(), executors.clone());
    std::thread::spawn(move || {
        // The pipe stays open while the executor lives: its end tells the executor
        // that this TaskManager is gone.
        let _stdin = stdin;
        let status = loop {
            if let Ok(Some(status)) = child.lock().unwrap_or_else(|e| e.into_inner()).try_wait() {
                break status;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = stderr_thread.join();
        let cancelled = executors.lock().unwrap_or_else(|e| e.into_inner()).remove(&key).is_none();
        let lines: Vec<String> = tail.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
        tracing::info!(job = %key.0, attempt = %key.1, %status, "task executor exited");
        if !cancelled && !status.success() {
            let status = format!("{status}; its last words: {}", lines.join(" | "));
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
