//! With high availability, the job store: every change of a job that a new leader would
//! need (its job directory, its attempt numbers, its end) is written as it happens, and
//! only while this JobManager's lease holds the leader key (an etcd transaction), so that
//! a leader paused past its lease cannot overwrite its successor's records.

use super::Shared;
use eddy_rpc::ha::JobRecord;
use eddy_rpc::JobId;

/// Writes the job as it is now to the store (or removes it once it ended); without high
/// availability, nothing. A failed write is logged: the job goes on, and a new leader
/// would see it as it was at the last write.
pub(super) fn persist(shared: &Shared, job: JobId) {
    let Some(ha) = &shared.options.ha else { return };
    let Some(&lease) = shared.lease.get() else {
        tracing::warn!(job = %job, "not leading: the job is not written to the job store");
        return;
    };
    // One write at a time, each of the state as it is when it starts: the last write is
    // of the newest state.
    let _writing = shared.store_writes.lock().unwrap_or_else(|e| e.into_inner());
    let record =
        shared.state().jobs.get(&job).filter(|j| j.ended.is_none() && !j.state.is_terminal()).map(|j| JobRecord {
            id: job,
            name: j.name.clone(),
            args: j.args.to_vec(),
            parallelism: j.parallelism,
            job_dir: j.job_dir.clone(),
            slot_timeout_ms: j.slot_timeout_ms,
            operator_parallelism: j.operator_parallelism.clone(),
            exclusive_resources: j.exclusive_resources.clone(),
            binary: j.binary.clone(),
            detached: j.detached,
            generation: j.generation,
            next_attempt: j.next_attempt,
            state: j.state,
        });
    let written = match &record {
        Some(record) => ha.put_job(record, lease),
        None => ha.remove_job(job, lease),
    };
    if let Err(e) = written {
        tracing::warn!(job = %job, error = %eddy_rpc::chain(&e), "cannot write the job to the job store");
    }
}
