//! The JobManager: its state (TaskManagers, jobs, who waits for which answer), shared by
//! one thread per connection, each serving one concern:
//!
//! - `task_managers`: TaskManagers registering, and lost;
//! - `jobs`: JobMasters, the jobs they run, their requests for slots and their end;
//! - `cli`: the command line's (and the REST API's) commands, relayed to jobs;
//! - `slots`: slot accounting, and where slots come from (a `ResourceProvider`, the
//!   standalone pool of registered TaskManagers today);
//! - `takeover`: a job whose JobMaster died is taken over by a JobMaster started again on a
//!   TaskManager;
//! - `ending`: how a job ends that no JobMaster runs any more;
//! - `leading`: with high availability, leading the cluster; `store`: keeping the job store.

mod cli;
mod ending;
mod jobs;
mod leading;
mod slots;
mod store;
mod takeover;
mod task_managers;

use cli::{relay, serve_cli};
use jobs::serve_job;
use slots::{ResourceProvider, StandalonePool};
use task_managers::serve_task_manager;

use eddy_rpc::messages::{CliMessage, JobCommand, JobMasterMessage, JobSummary, TaskManagerMessage};
use eddy_rpc::view::{ClusterOverview, JobView, TaskManagerView};
use eddy_rpc::{AttemptId, ClusterError, Connection, Heartbeats, JobId, JobState, PeerRole, Security, TaskManagerId};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// How a JobManager runs.
#[derive(Debug, Clone)]
pub struct JobManagerOptions {
    pub bind: String,
    pub security: Security,
    pub heartbeats: Heartbeats,
    /// High availability: lead through etcd, and keep the jobs there.
    pub ha: Option<eddy_rpc::ha::HaServices>,
    /// How long an ended job stays in the job list, the REST API and `/metrics` (Flink's
    /// `jobstore.expiration-time`, 1 hour by default): a long-lived cluster's series do
    /// not grow with every job it ever ran.
    pub job_retention: std::time::Duration,
}

/// Flink's `jobstore.expiration-time`.
pub const JOB_RETENTION_DEFAULT: std::time::Duration = std::time::Duration::from_secs(3600);

struct TaskManager {
    connection: Connection,
    slots: u32,
    /// Its binary's path, and the name jobs are matched by.
    binary: (String, String),
    host: String,
    pid: u32,
    registered_ms: u64,
    metrics_address: Option<String>,
}

/// One attempt's slots: (TaskManager, slots there).
type Allocation = Vec<(TaskManagerId, u32)>;

struct Job {
    name: String,
    /// Its JobMaster's connection, once told it is admitted (the last one's while another
    /// starts; none for a job a new leader found in the job store, until its JobMaster
    /// comes back).
    connection: Option<Connection>,
    /// Counts the job's JobMasters: a connection that ends speaks for the job only if it
    /// is still the current JobMaster's.
    generation: u32,
    /// The arguments its binary was submitted with (task executors and a JobMaster
    /// taken over run them).
    args: Arc<Vec<String>>,
    /// Its binary's name ([`eddy_rpc::launch::binary_name`]): only TaskManagers of that
    /// binary run it. Empty when unknown (a job store written before it was kept).
    binary: String,
    /// Submitted detached, its first JobMaster not started yet (then a TaskManager starts
    /// it; a new leader too).
    detached: bool,
    /// Where its checkpoints go, once its JobMaster said (`None`: in its memory, which a
    /// takeover cannot read).
    job_dir: Option<String>,
    /// What its JobMaster last asked slots with.
    slot_timeout_ms: u64,
    /// Each operator's parallelism in its last attempt (empty: as the program sets it).
    operator_parallelism: Vec<u32>,
    /// What it holds alone while it runs (a Kafka sink's transactional ids).
    exclusive_resources: Vec<String>,
    /// The number after its attempts so far.
    next_attempt: u32,
    /// JobMasters started again since one last got slots.
    takeovers_in_a_row: u32,
    /// The takeover starting its JobMaster again, while it does.
    taking_over_on: Option<takeover::TakingOver>,
    state: JobState,
    parallelism: u32,
    submitted: Instant,
    ended: Option<Instant>,
    allocations: HashMap<AttemptId, Allocation>,
    /// The attempts whose slots were asked for here: a request sent again (its JobMaster
    /// could not know whether this leader heard it) is answered once.
    requested: HashSet<AttemptId>,
    /// What its JobMaster last showed of it.
    view: Option<Box<JobView>>,
}

/// Who waits for a job's answer to a command.
enum Waiter {
    /// The CLI, on its connection (progress lines too).
    Cli(Connection),
    /// A REST request, with what to do with the answer.
    Callback(Answer),
}

pub use eddy_rpc::messages::Answer;

impl Waiter {
    fn answer(self, reply: Result<String, String>) {
        match self {
            Waiter::Cli(cli) => {
                let _ = cli.send(&CliMessage::CommandReply { reply });
            }
            Waiter::Callback(answer) => answer(reply),
        }
    }
}

#[derive(Default)]
struct State {
    task_managers: BTreeMap<TaskManagerId, TaskManager>,
    jobs: BTreeMap<JobId, Job>,
    next_task_manager: u32,
    next_job: u64,
    next_request: u64,
    /// The number of the last takeover started.
    next_takeover: u32,
    /// Who waits for a job's answer, by request, with the job.
    waiting: HashMap<u64, (Waiter, JobId)>,
}

struct Shared {
    state: Mutex<State>,
    /// With high availability, the lease this JobManager leads under, once it leads: the
    /// job store takes its writes only while that lease holds the leader key.
    lease: std::sync::OnceLock<eddy_rpc::ha::LeaseId>,
    /// Where this JobManager's REST API is served, if it serves one: published in etcd
    /// once it leads, for the JobManagers standing by to name.
    rest_url: std::sync::OnceLock<String>,
    /// While it stands by, what its REST API answers (where the leader's is), refreshed
    /// from etcd about twice a second by a thread of its own: a REST request never waits
    /// for etcd.
    standby_note: Mutex<Option<String>>,
    /// Where slots come from.
    resources: Box<dyn ResourceProvider>,
    /// Held while a job is written to the job store (high availability).
    store_writes: Mutex<()>,
    /// Signalled when slots free up or TaskManagers register.
    slots_changed: Condvar,
    options: JobManagerOptions,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, the jobs that ended longer than the retention ago gone from it (looked
    /// at whenever the jobs are listed, shown or scraped).
    fn state_without_expired(&self) -> MutexGuard<'_, State> {
        let mut state = self.state();
        let retention = self.options.job_retention;
        state.jobs.retain(|id, job| {
            let expired = job.ended.is_some_and(|ended| ended.elapsed() > retention);
            if expired {
                tracing::info!(job = %id, name = %job.name, state = %job.state, "ended job expired from the job list");
            }
            !expired
        });
        state
    }
}

/// A JobManager listening, not serving yet: [`JobManager::handle`] reads and commands
/// it (the REST API), [`JobManager::run`] serves until the process ends.
pub struct JobManager {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Binds the JobManager's address; an error if it cannot listen. Nothing is said before
/// [`JobManager::run`].
pub fn bind_job_manager(options: JobManagerOptions) -> Result<JobManager, ClusterError> {
    options.heartbeats.validate()?;
    let listener = TcpListener::bind(&options.bind)
        .map_err(|e| ClusterError::io(&options.bind, "listening (is the address free and local?)", e))?;
    let shared = Arc::new(Shared {
        state: Mutex::default(),
        lease: std::sync::OnceLock::new(),
        rest_url: std::sync::OnceLock::new(),
        standby_note: Mutex::new(None),
        resources: Box::new(StandalonePool),
        store_writes: Mutex::new(()),
        slots_changed: Condvar::new(),
        options,
    });
    Ok(JobManager { listener, shared })
}

/// Runs the JobManager until the process ends; an error only if it cannot listen.
pub fn run_job_manager(options: JobManagerOptions) -> Result<(), ClusterError> {
    let job_manager = bind_job_manager(options)?;
    job_manager.announce()?;
    job_manager.run()
}

impl JobManager {
    /// Says where it listens (the log, and a line on standard output for a script or a
    /// test that bound port 0). Said once everything the process serves is bound (its
    /// REST API too): a process that said it does not then exit for an address taken.
    pub fn announce(&self) -> Result<std::net::SocketAddr, ClusterError> {
        let address =
            self.listener.local_addr().map_err(|e| ClusterError::io(&self.shared.options.bind, "listening", e))?;
        tracing::info!(address = %address, "JobManager listening");
        println!("jobmanager listening on {address}");
        Ok(address)
    }

    /// What the REST API reads and commands.
    pub fn handle(&self) -> JobManagerHandle {
        JobManagerHandle { shared: self.shared.clone() }
    }

    /// Serves TaskManagers, jobs and the CLI until the process ends.
    pub fn run(self) -> Result<(), ClusterError> {
        let JobManager { listener, shared } = self;
        // With high availability, nothing is served before this JobManager leads (clients
        // connect to the leader's address only; those here early wait in the backlog).
        let _leadership = match &shared.options.ha {
            Some(ha) => {
                let address =
                    listener.local_addr().map_err(|e| ClusterError::io(&shared.options.bind, "listening", e))?;
                leading::watch_while_standing_by(&shared, ha);
                Some(leading::lead(&shared, ha, &address.to_string())?)
            }
            None => None,
        };
        let heartbeats = shared.clone();
        std::thread::Builder::new()
            .name("eddy-heartbeats".into())
            .spawn(move || send_heartbeats(&heartbeats))
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}", e = eddy_rpc::chain(&e))))?;
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let shared = shared.clone();
            let _ = std::thread::Builder::new().name("eddy-jm-connection".into()).spawn(move || serve(&shared, stream));
        }
        Ok(())
    }
}

/// A job as the JobManager lists it, with what its JobMaster last showed of it.
#[derive(Debug, Clone)]
pub struct JobEntry {
    pub summary: JobSummary,
    pub view: Option<JobView>,
}

/// Reads the JobManager's state and relays commands to jobs, for the REST API.
#[derive(Clone)]
pub struct JobManagerHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for JobManagerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobManagerHandle").finish_non_exhaustive()
    }
}

impl JobManagerHandle {
    /// Where this JobManager's REST API is served (`http(s)://HOST:PORT`): with high
    /// availability, published once it leads, so that the JobManagers standing by can
    /// name it to their REST clients.
    pub fn set_rest_url(&self, url: &str) {
        let _ = self.shared.rest_url.set(url.to_string());
    }

    /// `Some(why)` while this JobManager stands by (high availability, another one leads
    /// or none yet): its REST API then answers with this instead of an empty cluster,
    /// naming the leader's REST API when the leader published one.
    pub fn standing_by(&self) -> Option<String> {
        self.shared.options.ha.as_ref()?;
        if self.shared.lease.get().is_some() {
            return None;
        }
        let note = self.shared.standby_note.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Some(note.unwrap_or_else(|| "this JobManager stands by (high availability)".to_string()))
    }

    /// Every job, oldest first.
    pub fn jobs(&self) -> Vec<JobEntry> {
        let state = self.shared.state_without_expired();
        state
            .jobs
            .iter()
            .map(|(id, job)| JobEntry { summary: summary(*id, job), view: job.view.as_deref().cloned() })
            .collect()
    }

    pub fn task_managers(&self) -> Vec<TaskManagerView> {
        let state = self.shared.state();
        state
            .task_managers
            .iter()
            .map(|(id, tm)| TaskManagerView {
                id: id.0,
                host: tm.host.clone(),
                pid: tm.pid,
                slots_total: tm.slots,
                slots_free: state.free(*id),
                registered_ms: tm.registered_ms,
                metrics_address: tm.metrics_address.clone(),
            })
            .collect()
    }

    pub fn overview(&self) -> ClusterOverview {
        let state = self.shared.state_without_expired();
        let count = |f: &dyn Fn(JobState) -> bool| state.jobs.values().filter(|j| f(j.state)).count() as u32;
        ClusterOverview {
            taskmanagers: state.task_managers.len() as u32,
            slots_total: state.slots_total(),
            slots_available: state.free_total(),
            jobs_running: count(&|s| !s.is_terminal()),
            jobs_finished: count(&|s| matches!(s, JobState::Finished | JobState::Stopped)),
            jobs_cancelled: count(&|s| s == JobState::Canceled),
            jobs_failed: count(&|s| matches!(s, JobState::Failed | JobState::Lost)),
        }
    }

    /// Relays `command` to the job named `job` (its id, or the name of one running job);
    /// `answer` receives the job's answer. An error if no running job has that name.
    pub fn command(&self, job: &str, command: JobCommand, answer: Answer) -> Result<(), String> {
        relay(&self.shared, Waiter::Callback(answer), job, command)
    }
}

fn summary(id: JobId, job: &Job) -> JobSummary {
    JobSummary {
        id,
        name: job.name.clone(),
        state: job.state,
        parallelism: job.parallelism,
        uptime_ms: job.ended.unwrap_or_else(Instant::now).duration_since(job.submitted).as_millis() as u64,
    }
}

fn send_heartbeats(shared: &Shared) {
    loop {
        std::thread::sleep(shared.options.heartbeats.interval());
        let (task_managers, jobs): (Vec<Connection>, Vec<Connection>) = {
            let state = shared.state();
            let tms = state.task_managers.values().map(|tm| tm.connection.clone());
            let jobs = state.jobs.values().filter(|j| j.ended.is_none()).filter_map(|j| j.connection.clone());
            (tms.collect(), jobs.collect())
        };
        // A failed send shows up in the connection's reader too.
        for connection in task_managers {
            let _ = connection.send(&TaskManagerMessage::Heartbeat);
        }
        for connection in jobs {
            let _ = connection.send(&JobMasterMessage::Heartbeat);
        }
    }
}

fn serve(shared: &Arc<Shared>, socket: TcpStream) {
    let (stream, role) = match shared.options.security.accept(socket) {
        Ok(accepted) => accepted,
        Err(_) => return, // logged with the peer's address
    };
    // The CLI waits for long commands (a savepoint) and sends no heartbeats.
    let timeout = match role {
        PeerRole::Cli => None,
        _ => Some(shared.options.heartbeats.timeout()),
    };
    let Ok((connection, reader)) = Connection::new(stream, timeout) else { return };
    match role {
        PeerRole::TaskManager => serve_task_manager(shared, connection, reader),
        PeerRole::JobMaster => serve_job(shared, connection, reader),
        PeerRole::Cli => serve_cli(shared, connection, reader),
        other => {
            tracing::warn!(peer = %connection.peer(), role = ?other, "this role does not talk to the JobManager; \
                closed");
            // Its own message kind is unknown here; the log and the closed connection say it.
        }
    }
}
