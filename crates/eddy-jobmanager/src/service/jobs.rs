//! Jobs: one thread per JobMaster's connection (a job submitted, or a JobMaster come back
//! to a new leader), its requests for slots, the commands it answers, and its end.

use super::slots::{allocate, SlotRequest};
use super::{ending, store, takeover, Job, Shared, Waiter};
use eddy_rpc::messages::{CliMessage, JobMasterMessage, TaskManagerMessage};
use eddy_rpc::{AttemptId, Connection, JobId, JobState, Reader};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

pub(super) fn serve_job(shared: &Arc<Shared>, connection: Connection, mut reader: Reader) {
    let first = reader.receive();
    // A JobMaster started by a takeover carries on the lost one's view.
    let by_takeover = matches!(first, Ok(JobMasterMessage::Resume { generation: None, .. }));
    let admitted = match first {
        Ok(JobMasterMessage::Submit { name, parallelism, args, exclusive_resources, binary }) => {
            submit(shared, &connection, Submission { name, parallelism, args, exclusive_resources, binary })
        }
        Ok(JobMasterMessage::Resume { job, name, parallelism, generation }) => {
            takeover::resume(shared, &connection, (job, &name, parallelism), generation)
        }
        other => {
            tracing::warn!(peer = %connection.peer(), first = ?other.map(|m| format!("{m:?}")), "a JobMaster that did \
                not submit; closed");
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
                    previous: if by_takeover { j.view.clone() } else { None },
                })
            }
            _ => return,
        }
    };
    if sent.is_err() {
        return end_job(shared, job, generation, "its JobMaster went away");
    }
    let Some((name, args, binary)) =
        shared.state().jobs.get(&job).map(|j| (j.name.clone(), j.args.clone(), j.binary.clone()))
    else {
        return;
    };
    let reason = loop {
        match reader.receive() {
            Ok(JobMasterMessage::Heartbeat) => {}
            Ok(JobMasterMessage::RequestSlots { attempt, slots, timeout_ms, job_master, operator_parallelism }) => {
                let again = shared.state().jobs.get_mut(&job).is_some_and(|j| !j.requested.insert(attempt));
                // Its first request: a job never deployed is refused at once when no
                // TaskManager runs its binary (later ones wait for their TaskManagers).
                let first = shared.state().jobs.get(&job).is_some_and(|j| j.requested.len() == 1);
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
                store::persist(shared, job);
                let request = SlotRequest {
                    job,
                    generation,
                    name: name.clone(),
                    attempt,
                    slots,
                    timeout_ms,
                    job_master,
                    args: args.clone(),
                    binary: binary.clone(),
                    first,
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
                    store::persist(shared, job);
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
                store::persist(shared, job);
            }
            Ok(JobMasterMessage::Detach) => detach(shared, &connection, job, generation),
            Ok(JobMasterMessage::View(view)) => {
                if let Some(j) = shared.state().jobs.get_mut(&job) {
                    j.view = Some(view);
                }
            }
            Ok(other) => tracing::warn!(job = %job, message = ?other, "unexpected message from a job; ignored"),
            Err(e) => break eddy_rpc::chain(&e),
        }
    };
    end_job(shared, job, generation, &reason);
}

/// A job submitted detached: its submitting process goes, and a TaskManager starts the
/// job's JobMaster, as a takeover does (Flink's detached mode runs the JobMaster in the
/// cluster too). Only a job just submitted, not yet running anything.
fn detach(shared: &Arc<Shared>, connection: &Connection, job: JobId, generation: u32) {
    let detached = {
        let mut state = shared.state();
        match state.jobs.get_mut(&job) {
            Some(j) if j.generation == generation && j.ended.is_none() && j.state == JobState::Created => {
                j.state = JobState::Initializing;
                j.detached = true;
                // Its submitter closes the connection: that is no JobMaster lost.
                j.connection = None;
                tracing::info!(job = %job, name = %j.name, "job submitted detached: a TaskManager starts its JobMaster");
                Ok(())
            }
            Some(j) => Err(format!("job {job} cannot be detached now: it is {}", j.state)),
            None => Err(format!("no job {job} to detach")),
        }
    };
    match detached {
        Ok(()) => {
            // A command a CLI asked of the submitter meanwhile gets no answer from it.
            ending::answer_waiting(shared, job, "the job was submitted detached: ask again once its JobMaster runs");
            let _ = connection.send(&JobMasterMessage::Detached);
            store::persist(shared, job);
            takeover::start(shared, job, takeover::Start::Detached);
        }
        Err(why) => {
            let _ = connection.send(&JobMasterMessage::Refused(why));
        }
    }
}

/// A job as its JobMaster submits it.
pub(super) struct Submission {
    name: String,
    parallelism: u32,
    args: Vec<String>,
    exclusive_resources: Vec<String>,
    binary: String,
}

/// A new job: its entry, under the next id; refused if a job not ended yet holds one of
/// its exclusive resources.
pub(super) fn submit(
    shared: &Shared,
    connection: &Connection,
    submission: Submission,
) -> Result<(JobId, u32, u32), String> {
    let Submission { name, parallelism, args, exclusive_resources, binary } = submission;
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
        binary,
        detached: false,
        job_dir: None,
        slot_timeout_ms: eddy_rpc::SLOT_TIMEOUT_MS_DEFAULT,
        operator_parallelism: Vec::new(),
        exclusive_resources,
        next_attempt: 1,
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
    store::persist(shared, id);
    // Attempts count from 1, as every screen shows them.
    Ok((id, 0, 1))
}

/// An attempt ended: its task executors go, its slots are free again.
pub(super) fn release(shared: &Shared, job: JobId, attempt: AttemptId) {
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
pub(super) fn end_job(shared: &Arc<Shared>, job: JobId, generation: u32, reason: &str) {
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
            if let Some(view) = j.view.as_mut() {
                view.job_master_lost(&format!(
                    "the job's JobMaster was lost ({reason}); a TaskManager starts it again, and the job resumes from \
                     its latest checkpoint"
                ));
            }
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
                    "the job's JobMaster died and its checkpoints were in its memory (no checkpoint directory): no \
                        JobMaster can take it over; the job is lost"
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
    ending::answer_waiting(shared, job, &format!("the job's JobMaster went away before it answered ({reason})"));
    store::persist(shared, job);
    if taken_over {
        takeover::start(shared, job, takeover::Start::JobMasterLost(reason));
    }
}
