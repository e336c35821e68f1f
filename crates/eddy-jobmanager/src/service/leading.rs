//! High availability, the JobManager's side: it serves only once it leads (campaigning
//! through etcd, `eddy_rpc::ha`), takes on the jobs the job store holds when it starts
//! leading (every change of a job a new leader would need is written there as it happens:
//! `super::store`). A job a new
//! leader finds waits for its JobMaster to come back to it (a JobMaster that lost its
//! JobManager looks for the new leader); one whose JobMaster does not come back within
//! the heartbeat timeout is taken over (`super::takeover`).

use super::{ending, takeover, Job, Shared};
use eddy_rpc::ha::{HaServices, JobRecord, Leadership};
use eddy_rpc::{ClusterError, JobState};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// Campaigns until this JobManager, at `address`, leads; then takes on the stored jobs.
/// Losing the leadership later starts the JobManager anew ([`stand_by_again`]): another one
/// leads by then, or will, and this one stands by to lead again.
pub(super) fn lead(shared: &Arc<Shared>, ha: &HaServices, address: &str) -> Result<Leadership, ClusterError> {
    tracing::info!(ha = %ha.url(), address, "campaigning for leadership");
    let leadership = ha.campaign(
        address,
        Box::new(|why| {
            tracing::error!(
                reason = %why,
                "this JobManager lost its leadership; it starts anew and stands by (another one leads, or will)"
            );
            stand_by_again();
        }),
    )?;
    if let Some(url) = shared.rest_url.get() {
        // Before the lease is set: until then the REST API says it stands by. Only a
        // convenience for the standbys' REST clients: leading goes on without it.
        if let Err(e) = ha.publish_rest_url(url, leadership.lease()) {
            tracing::warn!(url, error = %eddy_rpc::chain(&e), "cannot publish this leader's REST address in etcd");
        }
    }
    let _ = shared.lease.set(leadership.lease());
    let records = ha.jobs()?;
    let mut taken_on = Vec::new();
    {
        let mut state = shared.state();
        for record in records {
            state.next_job = state.next_job.max(record.id.0);
            if record.state.is_terminal() {
                continue;
            }
            taken_on.push((record.id, record.name.clone()));
            state.jobs.insert(record.id, job_of(record));
        }
    }
    tracing::info!(address, jobs = taken_on.len(), "this JobManager leads");
    for (job, name) in taken_on {
        tracing::info!(job = %job, name = %name, "job from the job store waits for its JobMaster");
        let shared = shared.clone();
        let grace = shared.options.heartbeats.timeout();
        let _ = std::thread::Builder::new().name("eddy-jm-await".into()).spawn(move || {
            std::thread::sleep(grace);
            let orphaned = shared.state().jobs.get(&job).is_some_and(|j| {
                j.state == JobState::Initializing && j.connection.is_none() && j.taking_over_on.is_none()
            });
            if orphaned {
                let reason =
                    format!("its JobMaster did not come back to the new leader within {} ms", grace.as_millis());
                // Read first: the state's lock must not be held while the job moves on.
                let (readable, detached) =
                    shared.state().jobs.get(&job).map_or((false, false), |j| (j.job_dir.is_some(), j.detached));
                if detached {
                    // Submitted detached, its first JobMaster never started: start it here.
                    takeover::start(&shared, job, takeover::Start::Detached);
                } else if readable {
                    takeover::start(&shared, job, takeover::Start::JobMasterLost(&reason));
                } else {
                    let why = format!("{reason}, and its checkpoints were in its memory");
                    ending::end_waiting(&shared, job, JobState::Lost, &why);
                }
            }
        });
    }
    Ok(leadership)
}

/// Until this JobManager leads, keeps what its REST API answers up to date: where the
/// leader's REST API is, as etcd says, about twice a second (off the REST server's thread,
/// which never waits for etcd).
pub(super) fn watch_while_standing_by(shared: &Arc<Shared>, ha: &HaServices) {
    let (shared, ha) = (shared.clone(), ha.clone());
    let _ = std::thread::Builder::new().name("eddy-jm-standby".into()).spawn(move || {
        while shared.lease.get().is_none() {
            let note = match ha.leader_rest_url() {
                Ok(Some(url)) => {
                    format!("this JobManager stands by (high availability); the leader's REST API is at {url}")
                }
                Ok(None) => "this JobManager stands by (high availability); no leader serves a REST API now (none \
                    leads yet, or the leader has no --rest-bind)"
                    .to_string(),
                Err(e) => format!(
                    "this JobManager stands by (high availability) and cannot ask etcd for the leader: {}",
                    eddy_rpc::chain(&e)
                ),
            };
            *shared.standby_note.lock().unwrap_or_else(|e| e.into_inner()) = Some(note);
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    });
}

/// A stored job, as a new leader takes it on: waiting for its JobMaster.
fn job_of(record: JobRecord) -> Job {
    Job {
        name: record.name,
        connection: None,
        generation: record.generation,
        args: Arc::new(record.args),
        binary: record.binary,
        detached: record.detached,
        job_dir: record.job_dir,
        slot_timeout_ms: record.slot_timeout_ms,
        operator_parallelism: record.operator_parallelism,
        exclusive_resources: record.exclusive_resources,
        next_attempt: record.next_attempt,
        takeovers_in_a_row: 0,
        taking_over_on: None,
        state: JobState::Initializing,
        parallelism: record.parallelism,
        submitted: Instant::now(),
        ended: None,
        allocations: HashMap::new(),
        requested: HashSet::new(),
        view: None,
    }
}

/// Starts this JobManager anew in its own process (the same program, arguments and
/// process id), which campaigns again and stands by while another one leads (Flink's
/// JobManager revokes its leadership and stays a contender). Everything it served as
/// leader goes with the old image: connections close, and TaskManagers and JobMasters find
/// the leader through etcd, as after a leader's death; the job store keeps the jobs. A
/// JobManager that only exited would leave the cluster one short each time etcd paused
/// for longer than a lease, until none was left.
fn stand_by_again() -> ! {
    use std::os::unix::process::CommandExt;
    let failed = match std::env::current_exe() {
        Ok(program) => std::process::Command::new(program).args(std::env::args_os().skip(1)).exec(),
        Err(e) => e,
    };
    tracing::error!(error = %failed, "cannot start this JobManager anew; it stops");
    std::process::exit(1);
}
