//! The JobMaster's link to the cluster: where a job's binary submits its job
//! ([`ClusterTarget`]), and the [`JobClient`] that holds the connection to the JobManager
//! (slot requests, the CLI's commands, TaskManagers lost, the job's state) and the door its
//! task executors come in by. The JobMaster coordinates the job from here, as Flink's
//! application mode runs `main` and the JobMaster in one place ([`super::remote`]).
//!
//! With high availability (`etcd://…` where the JobManager's address would be) the link
//! follows the leader: the JobManager is found through etcd, and when it is lost the
//! client looks for the new leader for up to [`LEADER_WAIT`] and takes the job back
//! there (`Resume`); the new leader's `Submitted` arrives among the events, so that the
//! attempt running knows its slots are void. Sends made meanwhile wait for it. Without
//! high availability, or when no leader takes the job back in time, the loss arrives as
//! `Refused`.

use crossbeam_channel::{Receiver, Sender};
use eddy_rpc::ha::{is_ha, locate_jobmanager};
use eddy_rpc::messages::JobMasterMessage;
use eddy_rpc::{
    start_heartbeats, AttemptId, ClusterError, ClusterTarget, Connection, Heartbeats, JobId, JobState, PeerRole, Reader,
};
use eddy_runtime::cluster::executor_link::{ExecutorHello, ExecutorMessage};
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a JobMaster that lost its JobManager looks for a new leader to take its job
/// back (high availability): an election takes a lease's time (2 s) and a little more.
pub const LEADER_WAIT: Duration = Duration::from_secs(30);

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
    link: Arc<Link>,
    /// Everything the JobManager says but heartbeats; a new leader's `Submitted` after a
    /// loss (high availability); a loss for good arrives as `Refused`.
    pub events: Receiver<JobMasterMessage>,
    pub executors: Receiver<ExecutorJoin>,
    /// Where task executors reach this process.
    pub address: String,
    /// The job as its lost JobMaster last showed it, for a JobMaster started by a
    /// takeover to carry on.
    pub previous: Option<Box<eddy_rpc::view::JobView>>,
    next_attempt: Arc<AtomicU32>,
    /// The slots the job could hold, as the JobManager last said.
    slots_available: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
}

/// The connection to the JobManager now: none while a new leader is looked for.
struct Link {
    current: Mutex<Option<Connection>>,
    changed: Condvar,
    /// How many times a new leader took the job back.
    leader_changes: AtomicU32,
    /// No JobManager took the job back: nothing more goes out.
    gone: AtomicBool,
}

impl std::fmt::Debug for JobClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobClient(job {} at {})", self.job, self.target.jobmanager)
    }
}

/// The JobManager admitted the job: its connection, reader and answer.
struct Admitted {
    connection: Connection,
    reader: Reader,
    job: JobId,
    first_attempt: u32,
    slots_available: u32,
    /// What it presents to take the job back.
    generation: u32,
    heartbeats: Heartbeats,
    local_ip: IpAddr,
    /// The JobManager's `Submitted`, as it came (without `previous`).
    submitted: JobMasterMessage,
    /// A lost JobMaster's view, to a JobMaster started by a takeover.
    previous: Option<Box<eddy_rpc::view::JobView>>,
}

/// Finds the JobManager (the leader, with high availability), connects, and has it admit
/// the job with `hello` (`Submit` or `Resume`).
fn admit(target: &ClusterTarget, hello: &JobMasterMessage, wait: Duration) -> Result<Admitted, ClusterError> {
    let jm = locate_jobmanager(&target.jobmanager, wait)?;
    let stream = target.security.connect(&jm, PeerRole::JobMaster, "connecting to the JobManager")?;
    let local_ip = stream.local_ip().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
    let (connection, mut reader) = Connection::new(stream, Some(target.heartbeats.timeout()))?;
    connection.send(hello)?;
    loop {
        match reader.receive()? {
            mut submitted @ JobMasterMessage::Submitted { .. } => {
                let JobMasterMessage::Submitted {
                    job,
                    first_attempt,
                    slots_available,
                    generation,
                    heartbeat_interval_ms,
                    heartbeat_timeout_ms,
                    ref mut previous,
                } = submitted
                else {
                    unreachable!("matched as Submitted")
                };
                // The lost JobMaster's view goes to the board; the message stays as it came.
                let previous = previous.take();
                let heartbeats = Heartbeats { interval_ms: heartbeat_interval_ms, timeout_ms: heartbeat_timeout_ms };
                heartbeats.validate()?;
                reader.set_read_timeout(Some(heartbeats.timeout()))?;
                return Ok(Admitted {
                    connection,
                    reader,
                    job,
                    first_attempt,
                    slots_available,
                    generation,
                    heartbeats,
                    local_ip,
                    submitted,
                    previous,
                });
            }
            JobMasterMessage::Heartbeat => {}
            JobMasterMessage::Refused(why) => return Err(ClusterError::Refused(why)),
            other => {
                return Err(ClusterError::Protocol(format!("the JobManager answered a submission with {other:?}")))
            }
        }
    }
}

impl JobClient {
    /// Submits job `name` detached: the JobManager admits it, then has a TaskManager start
    /// its JobMaster (`--detached`); this process holds nothing of it afterwards. Returns
    /// the job's id.
    pub fn submit_detached(
        target: &ClusterTarget,
        name: &str,
        parallelism: u32,
        exclusive_resources: Vec<String>,
    ) -> Result<JobId, ClusterError> {
        let hello = JobMasterMessage::Submit {
            name: name.to_string(),
            parallelism,
            args: target.args.clone(),
            exclusive_resources,
            binary: eddy_rpc::launch::this_binary_name(),
        };
        let Admitted { connection, mut reader, job, .. } = admit(target, &hello, target.heartbeats.timeout())?;
        connection.send(&JobMasterMessage::Detach)?;
        // Its answer, before this process says the job is submitted.
        let answer = loop {
            match reader.receive()? {
                JobMasterMessage::Detached => break Ok(job),
                JobMasterMessage::Refused(why) => break Err(ClusterError::Refused(why)),
                _ => {}
            }
        };
        connection.close();
        answer
    }

    /// Submits job `name` needing `parallelism` slots and holding `exclusive_resources`
    /// alone to the JobManager `target` names; or, for a JobMaster started again
    /// (`resume`), takes the job back under its id (the JobManager knows the rest).
    pub fn submit(
        target: &ClusterTarget,
        name: &str,
        parallelism: u32,
        exclusive_resources: Vec<String>,
        resume: Option<JobId>,
    ) -> Result<Self, ClusterError> {
        let name = name.to_string();
        let hello = match resume {
            None => JobMasterMessage::Submit {
                name: name.clone(),
                parallelism,
                args: target.args.clone(),
                exclusive_resources,
                binary: eddy_rpc::launch::this_binary_name(),
            },
            Some(job) => JobMasterMessage::Resume { job, name: name.clone(), parallelism, generation: None },
        };
        let admitted = admit(target, &hello, target.heartbeats.timeout())?;
        let (job, first_attempt, heartbeats, local_ip) =
            (admitted.job, admitted.first_attempt, admitted.heartbeats, admitted.local_ip);
        let previous = admitted.previous;
        let stop = Arc::new(AtomicBool::new(false));
        start_heartbeats(admitted.connection.clone(), heartbeats, stop.clone(), JobMasterMessage::Heartbeat);
        let link = Arc::new(Link {
            current: Mutex::new(Some(admitted.connection)),
            changed: Condvar::new(),
            leader_changes: AtomicU32::new(0),
            gone: AtomicBool::new(false),
        });
        let next_attempt = Arc::new(AtomicU32::new(first_attempt));
        let slots_available = Arc::new(AtomicU32::new(admitted.slots_available));
        let (events_tx, events) = crossbeam_channel::unbounded();
        let follower = Follower {
            target: target.clone(),
            job: (job, name.clone(), parallelism),
            generation: AtomicU32::new(admitted.generation),
            link: link.clone(),
            events: events_tx,
            next_attempt: next_attempt.clone(),
            slots_available: slots_available.clone(),
            stop: stop.clone(),
        };
        let reader = admitted.reader;
        std::thread::Builder::new()
            .name("eddy-jobmanager-reader".into())
            .spawn(move || follower.read(reader))
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}", e = eddy_types::chain(&e))))?;
        let jm = &target.jobmanager;
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
                let Ok((connection, mut reader)) = Connection::new(stream, Some(heartbeats.timeout())) else {
                    continue;
                };
                // Heartbeats from here on, until the connection closes with its attempt.
                let never_stopped = Arc::new(AtomicBool::new(false));
                start_heartbeats(connection.clone(), heartbeats, never_stopped, ExecutorMessage::Heartbeat);
                match reader.receive() {
                    Ok(ExecutorMessage::Hello(hello)) => {
                        if executors_tx.send(ExecutorJoin { connection, reader, hello }).is_err() {
                            return;
                        }
                    }
                    other => tracing::warn!(peer = %connection.peer(), first = ?other.map(|m| format!("{m:?}")), "a \
                        task executor that did not say hello; closed"),
                }
            })
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}", e = eddy_types::chain(&e))))?;
        if resume.is_some() {
            tracing::info!(job = %job, name, jobmanager = %jm, job_master = %address, first_attempt, "JobMaster took \
                the job back");
        } else {
            tracing::info!(job = %job, name, jobmanager = %jm, job_master = %address, "job submitted to the cluster");
        }
        Ok(Self {
            job,
            target: target.clone(),
            link,
            events,
            executors,
            address,
            previous,
            next_attempt,
            slots_available,
            stop,
        })
    }

    /// How many times a new leader took the job back so far: an attempt (or a slot
    /// request) that began before the last change was the old leader's, and a `Submitted`
    /// event older than it is no news to it.
    pub fn leader_changes(&self) -> u32 {
        self.link.leader_changes.load(Ordering::SeqCst)
    }

    /// The slots the job could hold, as the JobManager last said (free ones and its own).
    pub fn slots_available(&self) -> u32 {
        self.slots_available.load(Ordering::SeqCst)
    }

    /// A fresh number for the next attempt.
    pub fn next_attempt(&self) -> AttemptId {
        AttemptId(self.next_attempt.fetch_add(1, Ordering::Relaxed))
    }

    /// Tells the JobManager something (slot requests, releases, state, command replies).
    /// With high availability, a send while the JobManager is lost waits for the new
    /// leader (up to [`LEADER_WAIT`]) and goes there.
    pub fn send(&self, message: &JobMasterMessage) -> Result<(), ClusterError> {
        let deadline = Instant::now() + LEADER_WAIT;
        loop {
            // Cloned out: no lock is held while the socket is written to.
            let current = self.link.current.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(connection) = current {
                match connection.send(message) {
                    Ok(()) => return Ok(()),
                    Err(e) if !is_ha(&self.target.jobmanager) => return Err(e),
                    // The reader sees the loss too, and looks for the leader.
                    Err(_) => {}
                }
            }
            if self.link.gone.load(Ordering::SeqCst) || Instant::now() >= deadline {
                return Err(ClusterError::Refused("lost the JobManager, and no leader took the job back".into()));
            }
            let current = self.link.current.lock().unwrap_or_else(|e| e.into_inner());
            let _ = self.link.changed.wait_timeout(current, eddy_rpc::ha::POLL_INTERVAL);
        }
    }

    /// The job is over: its state for `list`, and goodbye.
    pub fn finish(&self, state: JobState) {
        let _ = self.send(&JobMasterMessage::State(state));
        self.stop.store(true, Ordering::Relaxed);
        self.link.gone.store(true, Ordering::SeqCst);
        if let Some(connection) = self.link.current.lock().unwrap_or_else(|e| e.into_inner()).take() {
            connection.close();
        }
    }
}

/// Reads what the JobManager says, and follows the leader when it is lost.
struct Follower {
    target: ClusterTarget,
    /// The job's id, name and parallelism, to take it back by.
    job: (JobId, String, u32),
    /// The generation the JobManager last gave this JobMaster.
    generation: AtomicU32,
    link: Arc<Link>,
    events: Sender<JobMasterMessage>,
    next_attempt: Arc<AtomicU32>,
    slots_available: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
}

impl Follower {
    fn read(self, mut reader: Reader) {
        let jm = self.target.jobmanager.clone();
        loop {
            match reader.receive() {
                Ok(JobMasterMessage::Heartbeat) => {}
                Ok(message) => {
                    // Known at once, whatever the JobMaster is busy with: a restart reads it.
                    if let JobMasterMessage::SlotsAvailable { slots } = &message {
                        self.slots_available.store(*slots, Ordering::SeqCst);
                    }
                    if self.events.send(message).is_err() {
                        return;
                    }
                }
                Err(_) if self.link.gone.load(Ordering::SeqCst) => return,
                Err(e) if !is_ha(&jm) => {
                    return self.lost(format!("lost the JobManager at {jm}: {e}", e = eddy_types::chain(&e)))
                }
                Err(e) => {
                    *self.link.current.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    tracing::warn!(error = %eddy_types::chain(&e), "lost the JobManager; looking for the leader to take the job back");
                    match self.take_back() {
                        Ok(admitted) => {
                            let at = admitted.connection.peer().to_string();
                            tracing::info!(jobmanager = %at, "the job is back with the leading JobManager");
                            self.next_attempt.fetch_max(admitted.first_attempt, Ordering::Relaxed);
                            self.slots_available.store(admitted.slots_available, Ordering::SeqCst);
                            self.generation.store(admitted.generation, Ordering::SeqCst);
                            let heartbeats = admitted.heartbeats;
                            start_heartbeats(
                                admitted.connection.clone(),
                                heartbeats,
                                self.stop.clone(),
                                JobMasterMessage::Heartbeat,
                            );
                            *self.link.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(admitted.connection);
                            self.link.leader_changes.fetch_add(1, Ordering::SeqCst);
                            self.link.changed.notify_all();
                            reader = admitted.reader;
                            if self.events.send(admitted.submitted).is_err() {
                                return;
                            }
                        }
                        Err(why) => {
                            return self.lost(format!(
                                "lost the JobManager ({e}), and no leader took the job back within {} s: {why}",
                                LEADER_WAIT.as_secs(),
                                e = eddy_types::chain(&e),
                                why = eddy_types::chain(&why)
                            ))
                        }
                    }
                }
            }
        }
    }

    /// Takes the job back to the leader, trying until [`LEADER_WAIT`] passed: the leader
    /// key names the dead leader until its lease expires. A refusal (another JobMaster
    /// took the job over meanwhile) ends the tries.
    fn take_back(&self) -> Result<Admitted, ClusterError> {
        let deadline = Instant::now() + LEADER_WAIT;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let (job, name, parallelism) = self.job.clone();
            let generation = Some(self.generation.load(Ordering::SeqCst));
            let resume = JobMasterMessage::Resume { job, name, parallelism, generation };
            match admit(&self.target, &resume, wait) {
                Ok(admitted) => return Ok(admitted),
                Err(refused @ ClusterError::Refused(_)) => return Err(refused),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(eddy_rpc::ha::POLL_INTERVAL),
            }
        }
    }

    fn lost(&self, why: String) {
        self.link.gone.store(true, Ordering::SeqCst);
        self.link.changed.notify_all();
        let _ = self.events.send(JobMasterMessage::Refused(why));
    }
}
