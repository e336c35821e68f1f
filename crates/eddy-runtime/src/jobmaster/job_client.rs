//! The JobMaster's link to the cluster: where a job's binary submits its job
//! ([`ClusterTarget`]), and the [`JobClient`] that holds the connection to the JobManager
//! (slot requests, the CLI's commands, TaskManagers lost, the job's state) and the door its
//! task executors come in by. The JobMaster coordinates the job from here, as Flink's
//! application mode runs `main` and the JobMaster in one place ([`super::remote`]).

use crate::cluster::executor_link::{ExecutorHello, ExecutorMessage};
use crossbeam_channel::{Receiver, Sender};
use eddy_rpc::messages::JobMasterMessage;
use eddy_rpc::{
    start_heartbeats, AttemptId, ClusterError, ClusterTarget, Connection, Heartbeats, JobId, JobState, PeerRole, Reader,
};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// A task executor that connected and said hello.
pub struct ExecutorJoin {
    pub connection: Connection,
    pub reader: Reader,
    pub hello: ExecutorHello,
}

/// A submitted job's link to its JobManager, and the door its task executors come in by.
pub struct JobClient {
    pub job: JobId,
    pub target: ClusterTarget,
    jobmanager: Connection,
    /// Everything the JobManager says but heartbeats; its loss arrives as `Refused`.
    pub events: Receiver<JobMasterMessage>,
    pub executors: Receiver<ExecutorJoin>,
    /// Where task executors reach this process.
    pub address: String,
    next_attempt: AtomicU32,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for JobClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobClient(job {} at {})", self.job, self.target.jobmanager)
    }
}

impl JobClient {
    /// Submits job `name` needing `parallelism` slots to the JobManager `target` names;
    /// or, for a JobMaster started again (`resume`), takes the job back under its id.
    pub fn submit(
        target: &ClusterTarget,
        name: &str,
        parallelism: u32,
        resume: Option<JobId>,
    ) -> Result<Self, ClusterError> {
        let jm = &target.jobmanager;
        let stream = target.security.connect(jm, PeerRole::JobMaster, "connecting to the JobManager")?;
        let local_ip = stream.local_ip().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
        let (connection, mut reader) = Connection::new(stream, Some(target.heartbeats.timeout()))?;
        let name = name.to_string();
        connection.send(&match resume {
            None => JobMasterMessage::Submit { name: name.clone(), parallelism, args: target.args.clone() },
            Some(job) => JobMasterMessage::Resume { job, name: name.clone(), parallelism },
        })?;
        let (job, first_attempt, heartbeats) = loop {
            match reader.receive()? {
                JobMasterMessage::Submitted { job, first_attempt, heartbeat_interval_ms, heartbeat_timeout_ms } => {
                    let heartbeats =
                        Heartbeats { interval_ms: heartbeat_interval_ms, timeout_ms: heartbeat_timeout_ms };
                    break (job, first_attempt, heartbeats);
                }
                JobMasterMessage::Heartbeat => {}
                JobMasterMessage::Refused(why) => return Err(ClusterError::Refused(why)),
                other => {
                    return Err(ClusterError::Protocol(format!("the JobManager answered a submission with {other:?}")))
                }
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        heartbeats.validate()?;
        reader.set_read_timeout(Some(heartbeats.timeout()))?;
        start_heartbeats(connection.clone(), heartbeats, stop.clone(), JobMasterMessage::Heartbeat);
        let (events_tx, events) = crossbeam_channel::unbounded();
        let jm_name = jm.clone();
        std::thread::Builder::new()
            .name("eddy-jobmanager-reader".into())
            .spawn(move || read_jobmanager(reader, events_tx, jm_name))
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}")))?;
        let listener = TcpListener::bind((local_ip, 0))
            .map_err(|e| ClusterError::io(&local_ip.to_string(), "listening for task executors", e))?;
        let address = listener.local_addr().map_err(|e| ClusterError::io(jm, "listening", e))?.to_string();
        let (executors_tx, executors) = crossbeam_channel::unbounded();
        let security = target.security.clone();
        std::thread::Builder::new()
            .name("eddy-executor-accept".into())
            .spawn(move || loop {
                let Ok((socket, _)) = listener.accept() else { continue };
                let stream = match security.accept(socket) {
                    Ok((stream, PeerRole::TaskExecutor)) => stream,
                    Ok((stream, role)) => {
                        tracing::warn!(peer = %stream.peer(), role = ?role, "not a task executor; closed");
                        continue;
                    }
                    Err(_) => continue,
                };
                let Ok((connection, mut reader)) = Connection::new(stream, Some(heartbeats.timeout())) else { continue };
                // Heartbeats from here on, until the connection closes with its attempt.
                start_heartbeats(connection.clone(), heartbeats, Arc::new(AtomicBool::new(false)), ExecutorMessage::Heartbeat);
                match reader.receive() {
                    Ok(ExecutorMessage::Hello(hello)) => {
                        if executors_tx.send(ExecutorJoin { connection, reader, hello }).is_err() {
                            return;
                        }
                    }
                    other => tracing::warn!(peer = %connection.peer(), first = ?other.map(|m| format!("{m:?}")), "a task executor that did not say hello; closed"),
                }
            })
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}")))?;
        if resume.is_some() {
            tracing::info!(job = %job, name, jobmanager = %jm, job_master = %address, first_attempt, "JobMaster took the job back");
        } else {
            tracing::info!(job = %job, name, jobmanager = %jm, job_master = %address, "job submitted to the cluster");
        }
        Ok(Self {
            job,
            target: target.clone(),
            jobmanager: connection,
            events,
            executors,
            address,
            next_attempt: AtomicU32::new(first_attempt),
            stop,
        })
    }

    /// A fresh number for the next attempt.
    pub fn next_attempt(&self) -> AttemptId {
        AttemptId(self.next_attempt.fetch_add(1, Ordering::Relaxed))
    }

    /// Tells the JobManager something (slot requests, releases, state, command replies).
    pub fn send(&self, message: &JobMasterMessage) -> Result<(), ClusterError> {
        self.jobmanager.send(message)
    }

    /// The job is over: its state for `list`, and goodbye.
    pub fn finish(&self, state: JobState) {
        let _ = self.send(&JobMasterMessage::State(state));
        self.stop.store(true, Ordering::Relaxed);
        self.jobmanager.close();
    }
}

fn read_jobmanager(mut reader: Reader, events: Sender<JobMasterMessage>, jm: String) {
    loop {
        match reader.receive() {
            Ok(JobMasterMessage::Heartbeat) => {}
            Ok(message) => {
                if events.send(message).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = events.send(JobMasterMessage::Refused(format!("lost the JobManager at {jm}: {e}")));
                return;
            }
        }
    }
}
