//! JobMaster failover: when the process that runs a job's JobMaster dies (its connection
//! drops, or falls silent for the heartbeat timeout) before the job ended, the job's task
//! executors are stopped and a TaskManager starts the job's binary again as its JobMaster
//! (application mode: every TaskManager runs the job's binary). That JobMaster takes the
//! job back under its id ([`resume`]) and restores the latest checkpoint in the job's
//! directory. A job whose checkpoints lived in its JobMaster's memory cannot be taken over
//! and is lost; one whose JobMaster cannot be started again [`TAKEOVERS_IN_A_ROW_MAX`]
//! times in a row (without getting slots in between) fails.
//!
//! Fencing: each JobMaster admitted gets the job's next *generation*. A JobMaster that lost
//! its JobManager and comes back (high availability) must present the generation it was
//! given, so one that was replaced meanwhile is refused; a JobMaster started by a takeover
//! presents none and is admitted only while that takeover is under way. Each takeover has
//! a number, so that the exit of an earlier one's process cannot pass for this one's.

use super::{ending, store, Job, Shared};
use eddy_rpc::launch::JobMasterTakeover;
use eddy_rpc::messages::TaskManagerMessage;
use eddy_rpc::{Connection, JobId, JobState, TaskManagerId};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// JobMasters started again for a job, none of which got slots, before the job fails.
pub(super) const TAKEOVERS_IN_A_ROW_MAX: u32 = 3;

/// A takeover under way: the TaskManager starting the JobMaster, and the takeover's number.
pub(super) type TakingOver = (TaskManagerId, u32);

/// Why a TaskManager starts a job's JobMaster.
#[derive(Debug, Clone, Copy)]
pub(super) enum Start<'a> {
    /// Its last JobMaster is gone, for this reason.
    JobMasterLost(&'a str),
    /// The job was submitted detached: its JobMaster runs in the cluster from the start.
    Detached,
}

/// Starts the job's JobMaster (again) on a TaskManager, waiting up to the job's slot
/// timeout for one to be there. Only for a job waiting for a JobMaster (`Initializing`):
/// checked here, under the lock.
pub(super) fn start(shared: &Arc<Shared>, job: JobId, why: Start<'_>) {
    let (name, tries) = {
        let mut state = shared.state();
        let Some(j) = state.jobs.get_mut(&job).filter(|j| j.state == JobState::Initializing && j.ended.is_none())
        else {
            return;
        };
        j.takeovers_in_a_row += 1;
        j.taking_over_on = None;
        (j.name.clone(), j.takeovers_in_a_row)
    };
    let reason = match why {
        Start::JobMasterLost(reason) => reason,
        Start::Detached => "submitted detached",
    };
    if tries > TAKEOVERS_IN_A_ROW_MAX {
        let why =
            format!("its JobMaster could not be started {TAKEOVERS_IN_A_ROW_MAX} times in a row; the last: {reason}");
        return ending::end_waiting(shared, job, JobState::Failed, &why);
    }
    match why {
        Start::JobMasterLost(reason) => tracing::warn!(job = %job, name = %name, reason, takeover = tries, "the job's \
            JobMaster is gone; starting it again on a TaskManager"),
        Start::Detached => {
            tracing::info!(job = %job, name = %name, takeover = tries, "starting the JobMaster of a job \
            submitted detached on a TaskManager")
        }
    }
    let shared = shared.clone();
    let _ = std::thread::Builder::new().name("eddy-jm-takeover".into()).spawn(move || {
        if tries > 1 {
            // A JobMaster that just failed to start may still hold what the next needs
            // (its job directory's lock while it exits): one heartbeat timeout apart.
            std::thread::sleep(shared.options.heartbeats.timeout());
        }
        place(&shared, job)
    });
}

/// Picks the TaskManager of the job's binary with the most free slots (the first to join
/// among equals), or waits for one, and has it start the JobMaster.
fn place(shared: &Shared, job: JobId) {
    let mut state = shared.state();
    let Some(timeout_ms) = state.jobs.get(&job).map(|j| j.slot_timeout_ms) else { return };
    let deadline = Instant::now() + Duration::from_millis(timeout_ms.min(24 * 3600 * 1000));
    loop {
        if state.jobs.get(&job).is_none_or(|j| j.state != JobState::Initializing || j.ended.is_some()) {
            return;
        }
        let binary = state.jobs.get(&job).map(|j| j.binary.clone()).unwrap_or_default();
        let chosen = state
            .task_managers
            .keys()
            .copied()
            .filter(|id| state.runs(*id, &binary))
            .max_by_key(|id| (state.free(*id), std::cmp::Reverse(*id)));
        if let Some(task_manager) = chosen {
            let connection = state.task_managers[&task_manager].connection.clone();
            state.next_takeover += 1;
            let number = state.next_takeover;
            let Some(j) = state.jobs.get_mut(&job) else { return };
            let job_dir = j.job_dir.clone();
            j.taking_over_on = Some((task_manager, number));
            let takeover = JobMasterTakeover {
                job,
                takeover: number,
                job_name: j.name.clone(),
                args: j.args.to_vec(),
                job_dir,
                slot_timeout_ms: j.slot_timeout_ms,
                operator_parallelism: j.operator_parallelism.clone(),
            };
            drop(state);
            tracing::info!(job = %job, task_manager = %task_manager, takeover = number, "asking a TaskManager to start \
                the job's JobMaster again");
            // A TaskManager that cannot be told is lost: its loss starts the JobMaster elsewhere.
            let _ = connection.send(&TaskManagerMessage::TakeOverJobMaster(takeover));
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            let mut why = format!("no TaskManager came within {timeout_ms} ms to start its JobMaster");
            if let Some(others) = state.jobs.get(&job).and_then(|j| state.other_binaries(&j.name, &j.binary)) {
                why.push_str(&format!("; {others}"));
            }
            drop(state);
            return ending::end_waiting(shared, job, JobState::Failed, &why);
        }
        state = shared.slots_changed.wait_timeout(state, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// The JobMaster that takeover `number` had TaskManager `task_manager` start for `job`
/// exited (or its TaskManager was lost) before it took the job back: another try, if
/// the job has tries left. An earlier takeover's exit changes nothing.
pub(super) fn job_master_exited(shared: &Arc<Shared>, job: JobId, taking_over: TakingOver, status: &str) {
    let current = shared.state().jobs.get(&job).is_some_and(|j| {
        j.state == JobState::Initializing && j.ended.is_none() && j.taking_over_on == Some(taking_over)
    });
    if current {
        // `start` checks again under its lock: a JobMaster taking the job back meanwhile wins.
        start(shared, job, Start::JobMasterLost(&format!("the JobMaster started on a TaskManager exited: {status}")));
    }
}

/// A JobMaster takes its job back: one started by a takeover under way (`generation`
/// `None`), or one that lost its JobManager and presents the generation it was given. It
/// becomes the job's JobMaster, with the next generation. Returns the job, that
/// generation and the number of its first attempt, or why not.
pub(super) fn resume(
    shared: &Shared,
    connection: &Connection,
    (job, name, parallelism): (JobId, &str, u32),
    presented: Option<u32>,
) -> Result<(JobId, u32, u32), String> {
    let mut state = shared.state();
    let Some(j) = state.jobs.get_mut(&job) else {
        return Err(format!("no job {job} is known here, so none can be taken back"));
    };
    if j.state != JobState::Initializing || j.ended.is_some() || j.name != name {
        return Err(format!("job {job} ('{}', {}) awaits no JobMaster for '{name}'", j.name, j.state));
    }
    let admitted = match presented {
        None => j.taking_over_on.is_some(),
        Some(generation) => generation == j.generation && j.taking_over_on.is_none(),
    };
    if !admitted {
        return Err(format!("job {job} has another JobMaster by now (or one is being started for it); this one stops"));
    }
    let Job { generation, connection: current, state: job_state, taking_over_on, parallelism: p, detached, .. } = j;
    *detached = false;
    *generation += 1;
    // Set once it is told it is admitted (`serve_job`).
    *current = None;
    *job_state = JobState::Created;
    *taking_over_on = None;
    *p = parallelism;
    tracing::info!(job = %job, name, peer = %connection.peer(), first_attempt = j.next_attempt, "job taken back by its \
        JobMaster");
    let admitted = (job, j.generation, j.next_attempt);
    drop(state);
    store::persist(shared, job);
    Ok(admitted)
}
