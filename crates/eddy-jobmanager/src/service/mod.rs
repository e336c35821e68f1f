//! The JobManager's state and one thread per connection; `takeover`: a job whose
//! JobMaster died is taken over by a JobMaster started again on a TaskManager;
//! `leading`: with high availability, leading the cluster and keeping the job store.

mod leading;
mod takeover;

use eddy_rpc::launch::Deployment;
use eddy_rpc::messages::{CliMessage, JobCommand, JobMasterMessage, JobSummary, TaskManagerMessage};
use eddy_rpc::slots::ExecutorSlots;
use eddy_rpc::view::{ClusterOverview, JobView, TaskManagerView};
use eddy_rpc::{
    AttemptId, ClusterError, Connection, ExecutorIndex, Heartbeats, JobId, JobState, PeerRole, Reader, Security,
    TaskManagerId,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How a JobManager runs.
#[derive(Debug, Clone)]
pub struct JobManagerOptions {
    pub bind: String,
    pub security: Security,
    pub heartbeats: Heartbeats,
    /// High availability: lead through etcd, and keep the jobs there.
    pub ha: Option<eddy_rpc::ha::HaServices>,
}

struct TaskManager {
    connection: Connection,
    slots: u32,
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

/// What receives the answer to a command asked through [`JobManagerHandle::command`].
pub type Answer = Box<dyn FnOnce(Result<String, String>) + Send>;

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

impl State {
    fn used(&self, task_manager: TaskManagerId) -> u32 {
        self.jobs
            .values()
            .flat_map(|j| j.allocations.values())
            .flatten()
            .filter(|(tm, _)| *tm == task_manager)
            .fold(0u32, |used, (_, n)| used.saturating_add(*n))
    }

    fn free(&self, task_manager: TaskManagerId) -> u32 {
        self.task_managers.get(&task_manager).map_or(0, |tm| tm.slots.saturating_sub(self.used(task_manager)))
    }

    fn free_total(&self) -> u32 {
        self.task_managers.keys().fold(0u32, |total, &id| total.saturating_add(self.free(id)))
    }

    /// The slots job `job` could hold: the free ones and its own.
    fn available_to(&self, job: JobId) -> u32 {
        let own = self
            .jobs
            .get(&job)
            .map_or(0, |j| j.allocations.values().flatten().fold(0u32, |total, (_, n)| total.saturating_add(*n)));
        self.free_total().saturating_add(own)
    }

    fn slots_total(&self) -> u32 {
        self.task_managers.values().fold(0u32, |total, tm| total.saturating_add(tm.slots))
    }
}

struct Shared {
    state: Mutex<State>,
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
}

/// A JobManager listening, not serving yet: [`JobManager::handle`] reads and commands
/// it (the REST API), [`JobManager::run`] serves until the process ends.
pub struct JobManager {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Binds the JobManager's address; an error if it cannot listen.
pub fn bind_job_manager(options: JobManagerOptions) -> Result<JobManager, ClusterError> {
    options.heartbeats.validate()?;
    let listener = TcpListener::bind(&options.bind)
        .map_err(|e| ClusterError::io(&options.bind, "listening (is the address free and local?)", e))?;
    let address = listener.local_addr().map_err(|e| ClusterError::io(&options.bind, "listening", e))?;
    tracing::info!(address = %address, "JobManager listening");
    // The address, for a script or a test that bound port 0.
    println!("jobmanager listening on {address}");
    let shared = Arc::new(Shared {
        state: Mutex::default(),
        store_writes: Mutex::new(()),
        slots_changed: Condvar::new(),
        options,
    });
    Ok(JobManager { listener, shared })
}

/// Runs the JobManager until the process ends; an error only if it cannot listen.
pub fn run_job_manager(options: JobManagerOptions) -> Result<(), ClusterError> {
    bind_job_manager(options)?.run()
}

impl JobManager {
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
                Some(leading::lead(&shared, ha, &address.to_string())?)
            }
            None => None,
        };
        let heartbeats = shared.clone();
        std::thread::Builder::new()
            .name("eddy-heartbeats".into())
            .spawn(move || send_heartbeats(&heartbeats))
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}")))?;
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
    /// Every job, oldest first.
    pub fn jobs(&self) -> Vec<JobEntry> {
        let state = self.shared.state();
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
        let state = self.shared.state();
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
            tracing::warn!(peer = %connection.peer(), role = ?other, "this role does not talk to the JobManager; closed");
            // Its own message kind is unknown here; the log and the closed connection say it.
        }
    }
}

fn serve_task_manager(shared: &Arc<Shared>, connection: Connection, mut reader: Reader) {
    let (slots, binary, pid, host, metrics_address) = match reader.receive() {
        Ok(TaskManagerMessage::Register { slots, binary, pid, data_host, metrics_address }) => {
            (slots, binary, pid, data_host, metrics_address)
        }
        other => {
            tracing::warn!(peer = %connection.peer(), first = ?other.map(|m| format!("{m:?}")), "a TaskManager that did not register; closed");
            return;
        }
    };
    let id = {
        let mut state = shared.state();
        state.next_task_manager += 1;
        let id = TaskManagerId(state.next_task_manager);
        let registered_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let tm = TaskManager { connection: connection.clone(), slots, host, pid, registered_ms, metrics_address };
        state.task_managers.insert(id, tm);
        id
    };
    if connection.send(&TaskManagerMessage::Registered { id }).is_err() {
        return lose_task_manager(shared, id, "it went away while registering");
    }
    tracing::info!(task_manager = %id, slots, peer = %connection.peer(), pid, binary = %binary, "TaskManager joined");
    shared.slots_changed.notify_all();
    tell_slots_available(shared);
    let reason = loop {
        match reader.receive() {
            Ok(TaskManagerMessage::Heartbeat) => {}
            Ok(TaskManagerMessage::ExecutorExited { job, attempt, executor, status }) => {
                let client = shared
                    .state()
                    .jobs
                    .get(&job)
                    .filter(|j| j.allocations.contains_key(&attempt))
                    .and_then(|j| j.connection.clone());
                if let Some(client) = client {
                    let _ = client.send(&JobMasterMessage::ExecutorFailed { attempt, executor, status });
                }
            }
            Ok(TaskManagerMessage::JobMasterExited { job, takeover, status }) => {
                takeover::job_master_exited(shared, job, (id, takeover), &status)
            }
            Ok(other) => {
                tracing::warn!(task_manager = %id, message = ?other, "unexpected message from a TaskManager; ignored")
            }
            Err(e) => break e.to_string(),
        }
    };
    lose_task_manager(shared, id, &reason);
}

/// A TaskManager left: its slots go, every job with slots there hears of it, and a
/// JobMaster it was starting again is started elsewhere.
fn lose_task_manager(shared: &Arc<Shared>, id: TaskManagerId, reason: &str) {
    let clients: Vec<Connection> = {
        let mut state = shared.state();
        if state.task_managers.remove(&id).is_none() {
            return;
        }
        let starting: Vec<(JobId, takeover::TakingOver)> = state
            .jobs
            .iter()
            .filter_map(|(job, j)| j.taking_over_on.filter(|(tm, _)| *tm == id).map(|t| (*job, t)))
            .collect();
        drop(state);
        for (job, taking_over) in starting {
            let why = format!("its TaskManager {id} was lost: {reason}");
            takeover::job_master_exited(shared, job, taking_over, &why);
        }
        let mut state = shared.state();
        let mut clients = Vec::new();
        for job in state.jobs.values_mut() {
            let mut affected = false;
            for allocation in job.allocations.values_mut() {
                let before = allocation.len();
                allocation.retain(|(tm, _)| *tm != id);
                affected |= allocation.len() != before;
            }
            if affected {
                clients.extend(job.connection.clone());
            }
        }
        clients
    };
    tracing::warn!(task_manager = %id, reason, "TaskManager lost");
    for client in clients {
        let _ = client.send(&JobMasterMessage::TaskManagerLost { task_manager: id, reason: reason.to_string() });
    }
    shared.slots_changed.notify_all();
    tell_slots_available(shared);
}

/// Tells every running job how many slots it could hold now (reactive mode takes them).
fn tell_slots_available(shared: &Shared) {
    let told: Vec<(Connection, u32)> = {
        let state = shared.state();
        let running = state.jobs.iter().filter(|(_, j)| j.ended.is_none());
        running.filter_map(|(id, j)| Some((j.connection.clone()?, state.available_to(*id)))).collect()
    };
    for (connection, slots) in told {
        let _ = connection.send(&JobMasterMessage::SlotsAvailable { slots });
    }
}

fn serve_job(shared: &Arc<Shared>, connection: Connection, mut reader: Reader) {
    let first = reader.receive();
    let admitted = match first {
        Ok(JobMasterMessage::Submit { name, parallelism, args, exclusive_resources }) => {
            submit(shared, &connection, name, parallelism, args, exclusive_resources)
        }
        Ok(JobMasterMessage::Resume { job, name, parallelism, generation }) => {
            takeover::resume(shared, &connection, (job, &name, parallelism), generation)
        }
        other => {
            tracing::warn!(peer = %connection.peer(), first = ?other.map(|m| format!("{m:?}")), "a JobMaster that did not submit; closed");
            return;
        }
    };
    let (job, generation, first_attempt) = match admitted {
        Ok(admitted) => admitted,
        Err(why) => {
            tracing::warn!(peer = %connection.peer(), reason = %why, "a JobMaster refused");
            let _ = connection.send(&JobMasterMessage::Refused(why));
            return;
        }
    };
    let heartbeats = shared.options.heartbeats;
    // The job's connection is set here, and `Submitted` sent, under one lock: whatever
    // else goes to the job (slots available, commands) is sent after it, as its
    // JobMaster's admission expects (a TaskManager registering in between sent it
    // `SlotsAvailable` first, once in 220 stress runs).
    let sent = {
        let mut state = shared.state();
        let slots_available = state.available_to(job);
        match state.jobs.get_mut(&job) {
            Some(j) if j.generation == generation && j.ended.is_none() => {
                j.connection = Some(connection.clone());
                connection.send(&JobMasterMessage::Submitted {
                    job,
                    first_attempt,
                    slots_available,
                    generation,
                    heartbeat_interval_ms: heartbeats.interval_ms,
                    heartbeat_timeout_ms: heartbeats.timeout_ms,
                })
            }
            _ => return,
        }
    };
    if sent.is_err() {
        return end_job(shared, job, generation, "its JobMaster went away");
    }
    let Some((name, args)) = shared.state().jobs.get(&job).map(|j| (j.name.clone(), j.args.clone())) else { return };
    let reason = loop {
        match reader.receive() {
            Ok(JobMasterMessage::Heartbeat) => {}
            Ok(JobMasterMessage::RequestSlots { attempt, slots, timeout_ms, job_master, operator_parallelism }) => {
                let again = shared.state().jobs.get_mut(&job).is_some_and(|j| !j.requested.insert(attempt));
                if again {
                    tracing::debug!(job = %job, attempt = %attempt, "slots asked for again; answered once");
                    continue;
                }
                if let Some(j) = shared.state().jobs.get_mut(&job) {
                    j.state = JobState::Deploying;
                    j.next_attempt = j.next_attempt.max(attempt.0.saturating_add(1));
                    j.slot_timeout_ms = timeout_ms;
                    j.parallelism = slots;
                    j.operator_parallelism = operator_parallelism.clone();
                }
                leading::persist(shared, job);
                let request = SlotRequest {
                    job,
                    generation,
                    name: name.clone(),
                    attempt,
                    slots,
                    timeout_ms,
                    job_master,
                    args: args.clone(),
                    operator_parallelism,
                };
                let (shared, client) = (shared.clone(), connection.clone());
                let _ = std::thread::Builder::new()
                    .name("eddy-slot-request".into())
                    .spawn(move || allocate(&shared, request, &client));
            }
            Ok(JobMasterMessage::ReleaseSlots { attempt }) => release(shared, job, attempt),
            Ok(JobMasterMessage::State(state)) => {
                if let Some(j) = shared.state().jobs.get_mut(&job) {
                    j.state = state;
                }
                if state.is_terminal() {
                    leading::persist(shared, job);
                }
            }
            Ok(JobMasterMessage::CommandReply { request, reply }) => {
                // Only this job's: a reply meant for another leader's request number
                // (sent again after a leader change) answers nobody here.
                let waiting = {
                    let mut state = shared.state();
                    let ours = state.waiting.get(&request).is_some_and(|(_, j)| *j == job);
                    if ours {
                        state.waiting.remove(&request)
                    } else {
                        None
                    }
                };
                if let Some((waiter, _)) = waiting {
                    waiter.answer(reply);
                }
            }
            Ok(JobMasterMessage::CommandProgress { request, text }) => {
                let cli = match shared.state().waiting.get(&request) {
                    Some((Waiter::Cli(cli), _)) => Some(cli.clone()),
                    _ => None,
                };
                if let Some(cli) = cli {
                    let _ = cli.send(&CliMessage::CommandProgress { text });
                }
            }
            Ok(JobMasterMessage::JobDirectory(dir)) => {
                tracing::info!(job = %job, job_dir = %dir, "the job's checkpoints go to its job directory");
                if let Some(j) = shared.state().jobs.get_mut(&job) {
                    j.job_dir = Some(dir);
                }
                leading::persist(shared, job);
            }
            Ok(JobMasterMessage::View(view)) => {
                if let Some(j) = shared.state().jobs.get_mut(&job) {
                    j.view = Some(view);
                }
            }
            Ok(other) => tracing::warn!(job = %job, message = ?other, "unexpected message from a job; ignored"),
            Err(e) => break e.to_string(),
        }
    };
    end_job(shared, job, generation, &reason);
}

/// A new job: its entry, under the next id; refused if a job not ended yet holds one of
/// its exclusive resources.
fn submit(
    shared: &Shared,
    connection: &Connection,
    name: String,
    parallelism: u32,
    args: Vec<String>,
    exclusive_resources: Vec<String>,
) -> Result<(JobId, u32, u32), String> {
    let mut state = shared.state();
    // A job that reported its end holds nothing any more, also before its JobMaster's
    // connection closes (a restore from its savepoint follows at once).
    let holding = state.jobs.iter().filter(|(_, j)| j.ended.is_none() && !j.state.is_terminal());
    for (id, other) in holding {
        if let Some(resource) = exclusive_resources.iter().find(|r| other.exclusive_resources.contains(r)) {
            return Err(format!(
                "job '{name}' needs {resource}, which job {id} ('{}', {}) holds: two writers would fence each \
                 other. Stop or cancel job {id} and wait until it has ended, or give this job's sink another one",
                other.name, other.state
            ));
        }
    }
    state.next_job += 1;
    let id = JobId(state.next_job);
    let entry = Job {
        name: name.clone(),
        // Set once it is told it is admitted (`serve_job`).
        connection: None,
        generation: 0,
        args: Arc::new(args),
        job_dir: None,
        slot_timeout_ms: eddy_rpc::SLOT_TIMEOUT_MS_DEFAULT,
        operator_parallelism: Vec::new(),
        exclusive_resources,
        next_attempt: 0,
        takeovers_in_a_row: 0,
        taking_over_on: None,
        state: JobState::Created,
        parallelism,
        submitted: Instant::now(),
        ended: None,
        allocations: HashMap::new(),
        requested: HashSet::new(),
        view: None,
    };
    state.jobs.insert(id, entry);
    drop(state);
    tracing::info!(job = %id, name = %name, parallelism, peer = %connection.peer(), "job submitted");
    leading::persist(shared, id);
    Ok((id, 0, 0))
}

/// A job's request for the slots of one attempt.
struct SlotRequest {
    job: JobId,
    /// The JobMaster that asked: its successor's requests are its own.
    generation: u32,
    name: String,
    attempt: AttemptId,
    slots: u32,
    timeout_ms: u64,
    job_master: String,
    args: Arc<Vec<String>>,
    operator_parallelism: Vec<u32>,
}

/// Waits (up to the request's timeout) for enough free slots, takes them from the
/// TaskManagers in the order they joined, deploys a task executor to each, and tells the
/// job where its subtasks run.
fn allocate(shared: &Shared, request: SlotRequest, client: &Connection) {
    let SlotRequest { job, attempt, slots, .. } = request;
    // A timeout beyond any deadline a clock can hold waits "for ever" (a year).
    let deadline = Instant::now()
        .checked_add(Duration::from_millis(request.timeout_ms))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
    let mut state = shared.state();
    let mut told_waiting = false;
    loop {
        match state.jobs.get(&job) {
            Some(j) if j.ended.is_none() && j.generation == request.generation && j.state != JobState::Initializing => {
            }
            _ => return,
        }
        if state.free_total() >= slots {
            let mut allocation: Allocation = Vec::new();
            let mut remaining = slots;
            let ids: Vec<TaskManagerId> = state.task_managers.keys().copied().collect();
            for id in ids {
                let take = state.free(id).min(remaining);
                if take > 0 {
                    allocation.push((id, take));
                    remaining -= take;
                }
                if remaining == 0 {
                    break;
                }
            }
            let mut executors = Vec::new();
            let mut deployments = Vec::new();
            let mut first_slot = 0;
            for (executor, &(task_manager, n)) in allocation.iter().enumerate() {
                executors.push(ExecutorSlots { task_manager, first_slot, slots: n });
                first_slot += n;
                let deployment = Deployment {
                    job,
                    job_name: request.name.clone(),
                    attempt,
                    executor: ExecutorIndex(executor as u32),
                    args: request.args.to_vec(),
                    job_master: request.job_master.clone(),
                    operator_parallelism: request.operator_parallelism.clone(),
                };
                deployments.push((state.task_managers[&task_manager].connection.clone(), deployment));
            }
            if let Some(j) = state.jobs.get_mut(&job) {
                j.allocations.insert(attempt, allocation.clone());
                j.state = JobState::Running;
                j.takeovers_in_a_row = 0;
            }
            drop(state);
            tracing::info!(job = %job, attempt = %attempt, slots, task_managers = %describe(&allocation), "slots allocated; deploying");
            for (connection, deployment) in deployments {
                // A TaskManager that cannot be told is lost: its reader says so, and the
                // job hears it.
                let _ = connection.send(&TaskManagerMessage::Deploy(deployment));
            }
            let _ = client.send(&JobMasterMessage::SlotsAllocated { attempt, executors });
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            let message = format!(
                "the job needs {slots} slots (its highest parallelism); the cluster has {} free of {} on {} TaskManager(s), and no more came within {} ms (--slot-timeout-ms)",
                state.free_total(),
                state.slots_total(),
                state.task_managers.len(),
                request.timeout_ms
            );
            tracing::warn!(job = %job, attempt = %attempt, %message, "slot request timed out");
            drop(state);
            let _ = client.send(&JobMasterMessage::SlotsUnavailable { attempt, message });
            return;
        }
        if !told_waiting {
            told_waiting = true;
            tracing::info!(job = %job, attempt = %attempt, needed = slots, free = state.free_total(), "waiting for slots");
        }
        state = shared.slots_changed.wait_timeout(state, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// An allocation as the log shows it: `[(TaskManager, slots there), …]`.
fn describe(allocation: &Allocation) -> String {
    let pairs: Vec<String> = allocation.iter().map(|(tm, slots)| format!("({tm}, {slots})")).collect();
    format!("[{}]", pairs.join(", "))
}

/// An attempt ended: its task executors go, its slots are free again.
fn release(shared: &Shared, job: JobId, attempt: AttemptId) {
    let targets: Vec<Connection> = {
        let mut state = shared.state();
        let allocation = state.jobs.get_mut(&job).and_then(|j| j.allocations.remove(&attempt)).unwrap_or_default();
        allocation.iter().filter_map(|(tm, _)| state.task_managers.get(tm).map(|t| t.connection.clone())).collect()
    };
    for connection in targets {
        let _ = connection.send(&TaskManagerMessage::CancelExecutor { job, attempt });
    }
    shared.slots_changed.notify_all();
}

/// A job's JobMaster went away: every attempt's slots go (its task executors are
/// stopped), and waiting CLIs hear why. A job that had not ended is taken over by a
/// JobMaster started again, if its checkpoints are where one can read them.
fn end_job(shared: &Arc<Shared>, job: JobId, generation: u32, reason: &str) {
    // Decided and marked in one step with the attempts collected: a slot request still
    // waiting sees the job ended (or its JobMaster replaced) and allocates nothing more.
    let (taken_over, attempts) = {
        let mut state = shared.state();
        let Some(j) = state.jobs.get_mut(&job) else { return };
        if j.generation != generation || j.ended.is_some() || j.state == JobState::Initializing {
            // A JobMaster replaced already, or a job over.
            return;
        }
        let taken_over = !j.state.is_terminal() && j.job_dir.is_some();
        if taken_over {
            j.state = JobState::Initializing;
            // Nothing more goes to the JobMaster that is gone (if it lives on somewhere,
            // unheard, its closed connection tells it that it was replaced).
            if let Some(old) = j.connection.take() {
                old.close();
            }
        } else {
            if !j.state.is_terminal() {
                tracing::error!(
                    job = %job,
                    reason,
                    "the job's JobMaster died and its checkpoints were in its memory (no checkpoint directory): no JobMaster can take it over; the job is lost"
                );
                j.state = JobState::Lost;
            }
            j.ended = Some(Instant::now());
            tracing::info!(job = %job, name = %j.name, state = %j.state, reason, "job left the cluster");
        }
        (taken_over, j.allocations.keys().copied().collect::<Vec<AttemptId>>())
    };
    for attempt in attempts {
        release(shared, job, attempt);
    }
    answer_waiting(shared, job, &format!("the job's JobMaster went away before it answered ({reason})"));
    leading::persist(shared, job);
    if taken_over {
        takeover::start(shared, job, reason);
    }
}

/// A job waiting for a JobMaster ends as `state` (failed, lost) for `why`: nothing can
/// run it any more. Only if it still waits (checked under the lock).
fn end_waiting(shared: &Shared, job: JobId, state: JobState, why: &str) {
    {
        let mut jobs = shared.state();
        let Some(j) = jobs.jobs.get_mut(&job).filter(|j| j.state == JobState::Initializing && j.ended.is_none()) else {
            return;
        };
        j.state = state;
        j.ended = Some(Instant::now());
        j.taking_over_on = None;
        tracing::error!(job = %job, name = %j.name, reason = why, "job {}: no JobMaster can run it", state);
        tracing::info!(job = %job, name = %j.name, state = %j.state, "job left the cluster");
    }
    leading::persist(shared, job);
}

/// Whoever waits for the job's answer to a command hears `why` there is none.
fn answer_waiting(shared: &Shared, job: JobId, why: &str) {
    let waiting: Vec<Waiter> = {
        let mut state = shared.state();
        let requests: Vec<u64> = state.waiting.iter().filter(|(_, (_, j))| *j == job).map(|(r, _)| *r).collect();
        requests.into_iter().filter_map(|r| state.waiting.remove(&r).map(|(w, _)| w)).collect()
    };
    for waiter in waiting {
        waiter.answer(Err(why.to_string()));
    }
}

fn serve_cli(shared: &Shared, connection: Connection, mut reader: Reader) {
    loop {
        match reader.receive() {
            Ok(CliMessage::ListJobs) => {
                let jobs = shared.state().jobs.iter().map(|(id, j)| summary(*id, j)).collect();
                let _ = connection.send(&CliMessage::Jobs(jobs));
            }
            Ok(CliMessage::JobCommand { job, command }) => {
                if let Err(message) = relay(shared, Waiter::Cli(connection.clone()), &job, command) {
                    let _ = connection.send(&CliMessage::CommandReply { reply: Err(message) });
                }
            }
            Ok(other) => {
                tracing::warn!(peer = %connection.peer(), message = ?other, "unexpected message from the CLI; ignored")
            }
            Err(_) => return,
        }
    }
}

/// Hands a CLI's command to the job it names (by id, or by name if one running job has
/// it); the job's answer goes back to the CLI.
fn relay(shared: &Shared, waiter: Waiter, job: &str, command: JobCommand) -> Result<(), String> {
    let mut state = shared.state();
    let id = match job.parse::<u64>().map(JobId) {
        Ok(id) if state.jobs.contains_key(&id) => id,
        _ => {
            let running: Vec<JobId> =
                state.jobs.iter().filter(|(_, j)| j.name == job && j.ended.is_none()).map(|(id, _)| *id).collect();
            match running.as_slice() {
                [id] => *id,
                [] => return Err(format!("no running job '{job}' (`list` shows the jobs, by id and name)")),
                _ => return Err(format!("{} running jobs are named '{job}': name one by its id", running.len())),
            }
        }
    };
    let entry = &state.jobs[&id];
    if entry.ended.is_some() {
        return Err(format!("job {id} ('{}') already ended: {}", entry.name, entry.state));
    }
    if entry.state == JobState::Initializing {
        return Err(format!(
            "job {id} ('{}') is being taken over by a JobMaster started again; try again in a moment",
            entry.name
        ));
    }
    let Some(client) = entry.connection.clone() else {
        return Err(format!("job {id} ('{}') waits for its JobMaster to come back; try again in a moment", entry.name));
    };
    state.next_request += 1;
    let request = state.next_request;
    let from = if matches!(waiter, Waiter::Cli(_)) { "the CLI" } else { "the REST API" };
    state.waiting.insert(request, (waiter, id));
    drop(state);
    tracing::info!(job = %id, command = ?command, from, "relaying a command");
    client.send(&JobMasterMessage::Command { request, command }).map_err(|e| {
        // Answered here, not again when the job goes.
        shared.state().waiting.remove(&request);
        format!("cannot reach job {id}: {e}")
    })
}
