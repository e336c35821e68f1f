//! How a job ends that no JobMaster runs any more, and what those who wait for its
//! answers hear.

use super::store::persist;
use super::{Shared, Waiter};
use eddy_rpc::{JobId, JobState};
use std::time::Instant;

/// A job waiting for a JobMaster ends as `state` (failed, lost) for `why`: nothing can
/// run it any more. Only if it still waits (checked under the lock).
pub(super) fn end_waiting(shared: &Shared, job: JobId, state: JobState, why: &str) {
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
    persist(shared, job);
}

/// Whoever waits for the job's answer to a command hears `why` there is none.
pub(super) fn answer_waiting(shared: &Shared, job: JobId, why: &str) {
    let waiting: Vec<Waiter> = {
        let mut state = shared.state();
        let requests: Vec<u64> = state.waiting.iter().filter(|(_, (_, j))| *j == job).map(|(r, _)| *r).collect();
        requests.into_iter().filter_map(|r| state.waiting.remove(&r).map(|(w, _)| w)).collect()
    };
    for waiter in waiting {
        waiter.answer(Err(why.to_string()));
    }
}
