//! The JobMaster: one job's coordination, wherever its subtasks run (Flink's `JobMaster`
//! with its `CheckpointCoordinator` and restart strategy). In application mode it runs in
//! the job's own binary, locally or for a cluster.
//!
//! - this file: the job's life over its attempts (`JobMaster::run`): its checkpoint
//!   storage, what it restores, the restart strategy and what a restart restores;
//! - `coordinator`: one attempt's checkpoint coordinator (triggers, acknowledgements,
//!   declines, timeouts, savepoints, storing and retention, the first failure);
//! - `job_storage`: the job's checkpoint storage, its job directory (locked while the job
//!   runs) and which checkpoint "the latest" is;
//! - `restore`: finding the checkpoint to restore (its files checked), whether it fits
//!   the job, CLAIM mode;
//! - `job_client` and `remote`: on a cluster, the job's link to the JobManager and one
//!   attempt run by task executors;
//! - `takeover`: a JobMaster the cluster started again after its process died;
//! - `autoscaler`: the job's parallelism by load, from its measured busy time;
//! - `status`: what `eddy status` shows of a running job;
//! - [`result`]: what a job reports when it ends.
//!
//! How an attempt's subtasks run (threads here, the simulator, task executors) is behind
//! `AttemptLauncher`: the local thread launch and the simulator are the executor's
//! ([`crate::executor`]), the remote one is here.

pub(crate) mod autoscaler;
pub(crate) mod coordinator;
pub(crate) mod job_client;
pub(crate) mod job_storage;
pub(crate) mod remote;
pub(crate) mod restore;
pub mod result;
mod status;
pub(crate) mod takeover;
#[cfg(test)]
mod tests;

pub use eddy_rpc::{ClusterTarget, SLOT_TIMEOUT_MS_DEFAULT};
pub use eddy_runtime::graph::Autoscaling;
pub use result::{CheckpointStats, JobResult};

use coordinator::discard_checkpoint;
use eddy_checkpoint::restart::RestartBackoff;
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_checkpoint::{CheckpointError, CheckpointId};
use eddy_rpc::JobState;
use eddy_runtime::deployment::restore::{restore_plan, RestorePlan, RestoreSource};
pub(crate) use eddy_runtime::deployment::subtasks::TaskExit;
use eddy_runtime::error::JobError;
use eddy_runtime::graph::{plan_chains, validate, ChainPlan, RestoreMode, StreamGraph};
use eddy_runtime::task::install_panic_capture;
use eddy_types::{Clock, RunSeed};
use job_storage::JobStorage;
use restore::{check_restore, checkpoint_number, claim, load_latest_of};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

/// How one attempt ended.
pub(crate) enum AttemptEnd {
    Finished,
    /// Stopped after a stop-with-savepoint.
    Stopped,
    /// Stopped to go on at another parallelism from a checkpoint taken for it.
    Rescaled(coordinator::Rescaling),
    Failed(JobError),
}

/// Where an attempt starts: the state it restores, the number of its first checkpoint,
/// and the seed it names what it creates by.
pub(crate) struct AttemptStart {
    pub(crate) restore: Option<Arc<RestorePlan>>,
    pub(crate) next_checkpoint_id: u64,
    pub(crate) seed: RunSeed,
    /// The job directory its checkpoints go to (`None`: the JobManager's memory), for task
    /// executors in other processes.
    pub(crate) job_dir: Option<String>,
    /// The rescale it follows, if it does.
    pub(crate) rescaled: Option<coordinator::Rescaling>,
    /// The job's autoscaler, over its attempts.
    pub(crate) autoscaler: Option<Arc<std::sync::Mutex<autoscaler::Autoscaler>>>,
}

/// One attempt, as the JobMaster hands it to a launcher.
pub(crate) struct Attempt<'a> {
    pub(crate) graph: &'a Arc<StreamGraph>,
    pub(crate) plan: &'a Arc<ChainPlan>,
    pub(crate) start: AttemptStart,
    /// The job's checkpoint storage, and the checkpoints it retains over all attempts.
    pub(crate) storage: &'a Arc<dyn CheckpointStorage>,
    pub(crate) retained: &'a RefCell<RetainedCheckpoints>,
    /// Where the job's configured savepoint goes, opened before any task starts.
    pub(crate) savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
}

/// Deploys an attempt's subtasks and coordinates them with an [`coordinator::AttemptCoordinator`]
/// until every one exited: on threads of this process, under the simulator, or on task
/// executors of a cluster.
pub(crate) trait AttemptLauncher {
    /// Runs `attempt` until it finished, stopped or failed.
    fn launch(&self, attempt: Attempt<'_>, result: &mut JobResult) -> AttemptEnd;

    /// The clock the JobMaster reads and waits on (restart delays).
    fn clock(&self) -> Arc<dyn Clock>;

    /// The checkpoint storage as this launcher's attempts see it (the simulator's has
    /// faults).
    fn checkpoint_storage(&self, storage: Arc<dyn CheckpointStorage>) -> Arc<dyn CheckpointStorage> {
        storage
    }

    /// The job's checkpoint storage is open: its job directory (`None`: in the JobMaster's
    /// memory). A cluster's JobManager keeps it, to take the job over from there.
    fn storage_opened(&self, _job_dir: Option<&str>) {}

    /// The job ended as `state`, before its checkpoints are deleted (a cluster's
    /// JobManager hears it then).
    fn job_ended(&self, _state: JobState) {}

    /// The parallelism the next attempt takes in reactive mode (every slot the job could
    /// hold, up to its max parallelism); `None`: as the graph says.
    fn reactive_parallelism(&self, _graph: &StreamGraph) -> Option<u32> {
        None
    }

    /// Whether the job keeps a trace of what happened ([`JobResult::trace`]).
    fn traced(&self) -> bool {
        false
    }
}

/// One job's JobMaster, its attempts run by `launcher`.
pub(crate) struct JobMaster<'a> {
    pub(crate) launcher: &'a dyn AttemptLauncher,
}

impl JobMaster<'_> {
    /// Runs the job to completion (all sources exhausted), restarting from the latest
    /// completed checkpoint on failures as the restart strategy allows.
    pub(crate) fn run(&self, graph: StreamGraph) -> Result<JobResult, JobError> {
        let clock = self.launcher.clock();
        let job = graph.job_name.clone();
        let fail = |message: String| JobError::Checkpoint { job: job.clone(), message, source: None };
        let failed_by = |context: &str, source: CheckpointError| JobError::Checkpoint {
            job: job.clone(),
            message: context.to_string(),
            source: Some(source),
        };
        validate(&graph)?;
        install_panic_capture();
        let config = graph.config.clone();
        let autoscaler =
            config.autoscaling.map(|settings| Arc::new(std::sync::Mutex::new(autoscaler::Autoscaler::new(settings))));
        let mut warnings = Vec::new();
        let simulated_seed = config.simulation.map(|s| RunSeed(s.seed));
        let job_storage =
            JobStorage::open(&config, graph.services.storage_opener.as_ref(), &job, simulated_seed, &mut warnings)
                .map_err(|e| failed_by("cannot start", e))?;
        let storage = self.launcher.checkpoint_storage(job_storage.storage.clone());
        self.launcher.storage_opened(job_storage.job_dir.as_deref());
        let mut result = JobResult { warnings, ..JobResult::new(job.clone()) };
        // What the job started from: a restart with no checkpoint of its own since goes
        // back to it (never to a newer checkpoint another job left in the directory).
        let initial = job_storage.restore.clone();
        let mut restore = job_storage.restore.clone();
        if let Some(checkpoint) = &restore {
            check_restore(&graph, checkpoint, config.allow_non_restored_state).map_err(fail)?;
        }
        let plan = plan_chains(&graph);
        // The checkpoints this run writes and keeps, over all attempts; the one it started
        // from is not among them and is never deleted (Flink's NO_CLAIM restore mode).
        let retained = RefCell::new(RetainedCheckpoints::new(config.checkpoint.retained));
        if let (Some(checkpoint), RestoreMode::Claim) = (restore.as_mut(), config.restore_mode) {
            claim(checkpoint, storage.as_ref(), &mut retained.borrow_mut()).map_err(&fail)?;
        }
        let seed = config.simulation.map(|s| s.seed).or(config.seed).map_or_else(RunSeed::draw, RunSeed);
        tracing::info!(
            job = %job,
            seed = %seed.hex(),
            subtasks = plan.heads.iter().map(|head| graph.node(*head).parallelism).sum::<u32>(),
            storage = %storage.describe(),
            checkpoint_dir = job_storage.job_dir.as_deref().unwrap_or("JobManager memory"),
            restore_from = restore.as_ref().map_or("nothing", |c| c.location.as_str()),
            restore_of_job = restore.as_ref().map_or("", |c| c.metadata.job_name.as_str()),
            "job starting"
        );
        graph.services.board.start_job(&graph, &plan, storage.describe());
        let board = graph.services.board.clone();
        let mut graph = Arc::new(graph);
        let mut plan = Arc::new(plan);
        let mut rescaled = None;
        let mut backoff = RestartBackoff::new(config.restart_strategy());
        let started_ms = clock.now_ms();
        let elapsed_ms = || clock.now_ms().saturating_sub(started_ms);
        loop {
            if let Some(target) = self.launcher.reactive_parallelism(&graph) {
                // Reactive mode: the attempt takes the slots there are now.
                match graph.rescaled(target) {
                    Ok(next) if next.operator_parallelism() != graph.operator_parallelism() => {
                        tracing::info!(job = %job, from = graph.slots_needed(), to = target, "reactive mode: the \
                            attempt takes the slots available");
                        (graph, plan) = planned(next, &storage);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(job = %job, to = target, error = %e, "reactive mode cannot take the slots \
                            available")
                    }
                }
            }
            let restored = restore.as_ref().map(|source| Arc::new(restore_plan(&graph, source)));
            // Numbers continue after the restored checkpoint and after every checkpoint already
            // in the storage (another run's too), so no directory is ever written twice.
            // A listing that fails stops the job: guessing could reuse an id and overwrite a
            // checkpoint.
            let stored = storage
                .completed()
                .map_err(|e| failed_by("cannot list the checkpoints already stored, to number new ones", e))?;
            let newest_stored = stored.iter().filter_map(|l| checkpoint_number(l)).max();
            let restored_id = restored.as_ref().map(|plan| plan.id().0);
            let next_id = newest_stored.max(restored_id).unwrap_or(0).checked_add(1).ok_or_else(|| {
                fail("the stored checkpoints are numbered up to the largest number there is; no next one".into())
            })?;
            // Every attempt names what it creates anew (its backends' instances), from the
            // restart count and its first checkpoint number: a later run into the same
            // directory starts after every stored number, so even with the same seed its
            // names differ from an earlier run's.
            let mut part = u64::from(result.restarts).to_le_bytes().to_vec();
            part.extend_from_slice(&next_id.to_le_bytes());
            let attempt_seed = seed.derive(&part);
            let start = AttemptStart {
                restore: restored,
                next_checkpoint_id: next_id,
                seed: attempt_seed,
                job_dir: job_storage.job_dir.clone(),
                rescaled: rescaled.take(),
                autoscaler: autoscaler.clone(),
            };
            let end = self.attempt(&graph, &plan, start, (&storage, &retained), &mut result);
            result.duration = Duration::from_millis(elapsed_ms());
            match end {
                AttemptEnd::Rescaled(rescaling) => {
                    // Checked when it was asked for; the same graph gives the same answer.
                    let next = graph.rescaled(rescaling.to)?;
                    (graph, plan) = planned(next, &storage);
                    restore = self
                        .restore_after_failure(initial.as_ref(), &storage, &retained, &mut result.warnings)
                        .map_err(|e| failed_by("cannot read the checkpoint to rescale from", e))?;
                    tracing::info!(
                        job = %job,
                        from = rescaling.from,
                        to = rescaling.to,
                        restore_from = restore.as_ref().map_or("nothing", |c| c.location.as_str()),
                        "rescaling: starting the next attempt at the new parallelism"
                    );
                    rescaled = Some(rescaling);
                }
                AttemptEnd::Finished | AttemptEnd::Stopped => {
                    result.stopped = matches!(end, AttemptEnd::Stopped);
                    // Said before its checkpoints go: a JobMaster dying from here on must
                    // not be taken over (it would find no checkpoint and start again).
                    self.launcher.job_ended(if result.stopped { JobState::Stopped } else { JobState::Finished });
                    if config.savepoint.is_some() && result.savepoint.is_none() {
                        result
                            .warnings
                            .push("the job finished before its savepoint was due; no savepoint was taken".into());
                    }
                    if !config.checkpoint.retain_on_cancel {
                        let mut retained = retained.borrow_mut();
                        for id in retained.ids() {
                            discard_checkpoint(storage.as_ref(), &mut retained, id);
                        }
                    }
                    job_storage.finish();
                    board.ended(if result.stopped { JobState::Stopped } else { JobState::Finished });
                    tracing::info!(
                        job = %job,
                        duration_ms = result.duration.as_millis() as u64,
                        checkpoints = result.checkpoints_completed,
                        restarts = result.restarts,
                        "job {}",
                        if matches!(end, AttemptEnd::Stopped) { "stopped with a savepoint" } else { "finished" }
                    );
                    return Ok(result);
                }
                AttemptEnd::Failed(mut error) => loop {
                    // A failure that the restart strategy allows is followed by its delay
                    // and a restore; a restore that cannot read its state counts as
                    // another failure.
                    let delay_ms = if error.is_restartable() { backoff.on_failure(elapsed_ms()) } else { None };
                    let Some(delay_ms) = delay_ms else {
                        tracing::error!(job = %job, error = %eddy_types::chain(&error), "job failed");
                        if matches!(error, JobError::Cancelled { .. }) {
                            board.ended(JobState::Canceled);
                        } else {
                            board.attempt_failed(eddy_types::chain(&error), false);
                        }
                        return Err(error);
                    };
                    result.restarts = backoff.restarts();
                    board.attempt_failed(eddy_types::chain(&error), true);
                    clock.sleep_ms(delay_ms);
                    match self.restore_after_failure(initial.as_ref(), &storage, &retained, &mut result.warnings) {
                        Ok(from) => {
                            restore = from;
                            let from =
                                restore.as_ref().map_or_else(|| "the beginning".to_string(), |c| c.location.clone());
                            tracing::warn!(
                                job = %job,
                                restart = result.restarts,
                                delay_ms,
                                cause = %eddy_types::chain(&error),
                                from = %from,
                                "restarting"
                            );
                            if self.launcher.traced() {
                                result.trace.push(format!(
                                    "restart {} from {}",
                                    result.restarts,
                                    trace_location(&from)
                                ));
                            }
                            result.warnings.push(format!(
                                "restart {} after: {error}; restoring from {from}",
                                result.restarts,
                                error = eddy_types::chain(&error)
                            ));
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(job = %job, error = %eddy_types::chain(&e), "cannot read the state to restart from; trying \
                                again under the restart strategy");
                            if self.launcher.traced() {
                                result.trace.push(format!("restore failed after restart {}", result.restarts));
                            }
                            error = JobError::CheckpointFailover {
                                job: job.clone(),
                                message: "cannot restore after a failure".into(),
                                source: Some(e),
                            };
                        }
                    }
                },
            }
        }
    }

    /// One attempt: the job's savepoint directory opened (tasks write savepoints
    /// themselves), then the launcher's.
    fn attempt(
        &self,
        graph: &Arc<StreamGraph>,
        plan: &Arc<ChainPlan>,
        start: AttemptStart,
        (storage, retained): (&Arc<dyn CheckpointStorage>, &RefCell<RetainedCheckpoints>),
        result: &mut JobResult,
    ) -> AttemptEnd {
        let config = &graph.config;
        let savepoint_storage = match &config.savepoint {
            None => None,
            Some(request) => match graph.services.storage_opener.open(&request.dir.to_string_lossy()) {
                Ok(storage) => Some(storage),
                Err(e) => {
                    let job = graph.job_name.clone();
                    let message = "cannot open the savepoint directory".to_string();
                    return AttemptEnd::Failed(JobError::Checkpoint { job, message, source: Some(e) });
                }
            },
        };
        let attempt = Attempt { graph, plan, start, storage, retained, savepoint_storage };
        self.launcher.launch(attempt, result)
    }

    /// What a restart restores: the newest checkpoint this run completed, else what the
    /// run started from, else nothing.
    fn restore_after_failure(
        &self,
        initial: Option<&RestoreSource>,
        storage: &Arc<dyn CheckpointStorage>,
        retained: &RefCell<RetainedCheckpoints>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<RestoreSource>, CheckpointError> {
        // The newest checkpoint this run owns: never another run's, even a newer one in the
        // same directory.
        let own = |location: &str| checkpoint_number(location).is_some_and(|n| retained.borrow().owns(CheckpointId(n)));
        if let Some(mut source) = load_latest_of(storage, warnings, &own)? {
            // The job's own checkpoint: its next checkpoints may reference the files instead
            // of uploading them again.
            source.owned = true;
            return Ok(Some(source));
        }
        // Nothing completed since: start again from what the job started from, its files
        // checked again.
        match initial {
            Some(source) => {
                let metadata = source.storage.verify(&source.location)?;
                Ok(Some(RestoreSource { metadata, ..source.clone() }))
            }
            None => Ok(None),
        }
    }
}

/// The job at another parallelism, planned, and shown so on its board.
fn planned(graph: StreamGraph, storage: &Arc<dyn CheckpointStorage>) -> (Arc<StreamGraph>, Arc<ChainPlan>) {
    let plan = Arc::new(plan_chains(&graph));
    graph.services.board.replan_job(&graph, &plan, storage.describe());
    (Arc::new(graph), plan)
}

/// A checkpoint's location in a trace: its directory name, not where the storage is.
pub(crate) fn trace_location(location: &str) -> &str {
    location.rsplit('/').next().unwrap_or(location)
}
