//! A JobMaster started again: the process that ran a cluster job's JobMaster died, and the
//! JobManager had a TaskManager start the job's binary again, with the job's arguments
//! and `eddy_rpc::launch::JOB_MASTER_ENV` set (Flink's JobMaster failover, in
//! application mode). It reads the takeover from standard input, takes the job back under
//! its id, and runs it from the latest checkpoint completed in the job's directory (in
//! CLAIM mode: the checkpoint is the job's own), or, if none completed yet, from what the
//! job started from. Checkpoint numbers go on after every stored one; attempt numbers
//! after the dead JobMaster's, and its task executors were stopped before this one asked
//! for slots.

use super::remote::RemoteLauncher;
use super::JobResult;
use eddy_rpc::frame::read_value;
use eddy_rpc::launch::JobMasterLaunch;
use eddy_rpc::ClusterTarget;
use eddy_runtime::error::JobError;
use eddy_runtime::graph::{RestoreFrom, RestoreMode, StreamGraph};
use eddy_types::Clock;
use std::sync::Arc;

/// Runs `graph` as the job's JobMaster taken over, until the job ends.
pub(crate) fn run(clock: Arc<dyn Clock>, mut graph: StreamGraph) -> Result<JobResult, JobError> {
    let job = graph.job_name.clone();
    let cluster = |message: String, source| JobError::Cluster { job: job.clone(), message, source };
    let launch: JobMasterLaunch = read_value(&mut std::io::stdin().lock())
        .map_err(|e| {
            cluster(format!("cannot read the takeover from the TaskManager: {e}", e = eddy_types::chain(&e)), None)
        })?
        .ok_or_else(|| cluster("the TaskManager closed the pipe before the takeover".into(), None))?;
    let (security, heartbeats) = launch
        .credentials
        .open()
        .map_err(|e| cluster("the cluster's credentials from the TaskManager".into(), Some(e)))?;
    let takeover = launch.takeover;
    let target = ClusterTarget {
        jobmanager: launch.jobmanager,
        security,
        args: takeover.args.clone(),
        slot_timeout_ms: takeover.slot_timeout_ms,
        heartbeats,
        detached: false,
    };
    let Some(job_dir) = takeover.job_dir.clone() else {
        // Submitted detached: this is the job's first JobMaster, and the program's flags
        // say what it starts from.
        tracing::info!(job = %takeover.job, name = %job, "JobMaster of a job submitted detached starting");
        return RemoteLauncher::execute(target, clock, graph, Some(takeover.job));
    };
    if ended(&job_dir) {
        // Its JobMaster died as the job ended, after deleting its checkpoints: running it
        // again would write its output twice. It takes the job back only to say so.
        tracing::warn!(job = %takeover.job, job_dir = %job_dir, "the job's directory says it ended; it is not \
            run again");
        let client = take_job_back(&target, &job, graph.slots_needed(), takeover.job)?;
        client.finish(eddy_rpc::JobState::Finished);
        return Ok(JobResult::new(job));
    }
    if !takeover.operator_parallelism.is_empty() {
        // As its last JobMaster ran it (a rescale may have changed the program's).
        graph.apply_operator_parallelism(&takeover.operator_parallelism).map_err(|message| JobError::InvalidJob {
            job: job.clone(),
            message: format!("cannot take the job over: {message}"),
        })?;
    }
    let storage = graph.services.storage_opener.open(&job_dir).map_err(|source| JobError::Checkpoint {
        job: job.clone(),
        message: format!("cannot open the job directory {job_dir} to take the job over"),
        source: Some(source),
    })?;
    let completed = storage.completed().map_err(|source| JobError::Checkpoint {
        job: job.clone(),
        message: format!("cannot list the checkpoints in {job_dir} to take the job over"),
        source: Some(source),
    })?;
    if !completed.is_empty() {
        let config = &mut graph.config;
        config.restore = Some(RestoreFrom::LatestIn(job_dir.clone().into()));
        config.restore_mode = RestoreMode::Claim;
    }
    tracing::info!(
        job = %takeover.job,
        name = %job,
        job_dir = %job_dir,
        checkpoints = completed.len(),
        "JobMaster started again to take the job over"
    );
    RemoteLauncher::execute(target, clock, graph, Some(takeover.job))
}

/// Whether a job directory says its job ended: gone (a job that ran to its end deletes
/// its checkpoints and then its directory, which existed from its start), or marked
/// finished (its checkpoints retained). Only a local directory can say; an object
/// store's prefix has no such marks.
fn ended(job_dir: &str) -> bool {
    if job_dir.contains("://") && !job_dir.starts_with("file://") {
        return false;
    }
    let dir = std::path::Path::new(job_dir.strip_prefix("file://").unwrap_or(job_dir));
    !dir.exists() || dir.join(eddy_checkpoint::storage::JOB_FINISHED_FILE).exists()
}

/// The job taken back under its id, to tell the JobManager how it ended.
fn take_job_back(
    target: &ClusterTarget,
    name: &str,
    parallelism: u32,
    job: eddy_rpc::JobId,
) -> Result<super::job_client::JobClient, JobError> {
    super::job_client::JobClient::submit(target, name, parallelism, Vec::new(), Some(job)).map_err(|source| {
        JobError::Cluster {
            job: name.to_string(),
            message: "cannot take the job back from the JobManager".into(),
            source: Some(source),
        }
    })
}
