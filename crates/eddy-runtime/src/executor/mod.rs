//! The embedded local executor: runs a job graph in this process, one thread per subtask,
//! and plays the JobManager's part for it: the checkpoint coordinator, checkpoint
//! storage, restarts from the latest completed checkpoint, savepoints.
//!
//! It wires one bounded channel per producer and consumer subtask, hands every subtask its
//! receivers and its writers' senders, builds each chain on its own thread (operators
//! never cross threads), and then loops: task reports (acknowledgement handles, finished
//! tasks, declines), task exits, and a tick that triggers checkpoints. Tasks write their
//! own state; the coordinator holds handles. The first failure cancels the attempt; the
//! restart strategy decides whether another attempt follows. Under simulation
//! ([`simulation`]) one thread steps every task and the coordinator instead.
//!
//! - this file: the restart loop ([`LocalExecutor::execute`]) and what a job reports;
//! - [`attempt`]: one attempt, its subtask threads and the coordinator's part for it
//!   (checkpoint triggers, acknowledgements, timeouts, storing and retaining checkpoints,
//!   failures): the JobManager's part, to move into its own process;
//! - [`job_storage`]: the job's checkpoint storage, its job directory (locked while the job
//!   runs) and which checkpoint "the latest" is;
//! - [`restore`]: finding the checkpoint to restore (its files checked) and assigning its
//!   task state handles to the new subtasks, which read their own; CLAIM mode;
//! - [`simulation`]: the deterministic simulator and its seeded faults;
//! - [`wiring`]: the channels between subtasks and the chain each subtask builds.

pub(crate) mod attempt;
mod job_storage;
mod remote;
pub(crate) mod restore;
mod simulation;
pub(crate) mod wiring;

use crate::cluster::job_client::JobClient;
use crate::cluster::ClusterTarget;
use crate::error::JobError;
use crate::graph::{plan_chains, validate, JobConfig, RestoreMode, StreamGraph};
use crate::task::install_panic_capture;
use attempt::{discard_checkpoint, AttemptEnd, AttemptStart};
use eddy_checkpoint::restart::RestartBackoff;
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{CheckpointStorage, MemoryCheckpointStorage};
use eddy_checkpoint::{CheckpointError, CheckpointId};
use eddy_types::{Clock, ManualClock, RunSeed, SystemClock};
use job_storage::JobStorage;
use restore::{check_restore, checkpoint_number, claim, load_latest_of, restore_plan, RestoreSource};
use simulation::Simulator;
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

/// Size and duration of a completed checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStats {
    pub id: CheckpointId,
    /// Full size: every file the checkpoint needs, shared ones included.
    pub bytes: u64,
    /// Bytes written for this checkpoint (less than `bytes` when it is incremental).
    pub incremental_bytes: u64,
    /// The longest synchronous part of an operator (on its task thread, while its input
    /// waits).
    pub sync_ms: u64,
    /// The asynchronous part: writing (and uploading) the state, off the task threads.
    pub async_ms: u64,
    /// From trigger to stored metadata.
    pub duration_ms: u64,
    /// The longest time an operator's task waited for its state backend's snapshots
    /// since the previous checkpoint, outside synchronous parts (RocksDB writes held
    /// while a checkpoint is being made off the task thread).
    pub wait_ms: u64,
    pub location: String,
    /// The task state files written for it, by name (in the metadata when inline).
    pub files: Vec<String>,
}

/// What a finished job reports.
#[derive(Debug, Clone)]
pub struct JobResult {
    pub job_name: String,
    /// From the first subtask's start to the last subtask's end, over all attempts.
    pub duration: Duration,
    pub checkpoints_completed: u64,
    /// The last periodic checkpoint (the final one of a finished job if there was none).
    pub last_checkpoint: Option<CheckpointStats>,
    /// Every completed periodic checkpoint, oldest first (Flink's checkpoint history);
    /// the final checkpoint of a finished job is not one.
    pub checkpoint_history: Vec<CheckpointStats>,
    pub restarts: u32,
    /// Where the savepoint of a stop-with-savepoint went.
    pub savepoint: Option<String>,
    /// The job ended by a stop-with-savepoint (not by the end of its input).
    pub stopped: bool,
    /// Things that went wrong without failing the job (a corrupt checkpoint skipped…).
    pub warnings: Vec<String>,
    /// Under simulation, what happened, in order, without machine paths: checkpoints
    /// triggered, completed (with their files) and aborted, faults, failures and restarts.
    /// The same for the same seed; `eddy-bench` prints its hash as `trace=`. Empty
    /// otherwise: a job that runs for months would grow it without end.
    pub trace: Vec<String>,
    /// The jobs' counters by name (Flink's accumulators), summed over every subtask of
    /// the attempt that finished the job.
    pub accumulators: std::collections::BTreeMap<String, u64>,
}

/// Runs jobs in this process.
pub struct LocalExecutor {
    clock: Arc<dyn Clock>,
    /// Set when the job runs under deterministic simulation: one thread steps every task.
    simulator: Option<Simulator>,
    /// Set when the job runs on a cluster: its link to the JobManager.
    cluster: Option<Arc<JobClient>>,
}

impl Default for LocalExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalExecutor {
    /// An executor whose subtasks read the machine's clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock::new()))
    }

    /// An executor whose subtasks read time from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self { clock, simulator: None, cluster: None }
    }

    /// Runs the job to completion (all sources exhausted), restarting from the latest
    /// completed checkpoint on failures as the restart strategy allows.
    pub fn execute(&self, graph: StreamGraph) -> Result<JobResult, JobError> {
        if let (Some(simulation), None) = (graph.config.simulation, &self.simulator) {
            let clock = ManualClock::new(0);
            let simulator = Simulator::new(RunSeed(simulation.seed), simulation.faults, clock.clone());
            return LocalExecutor { clock: Arc::new(clock), simulator: Some(simulator), cluster: None }.execute(graph);
        }
        if crate::cluster::task_executor::launched() {
            crate::cluster::task_executor::run(graph);
        }
        if let (Some(target), None) = (&graph.config.cluster, &self.cluster) {
            return self.execute_on_cluster(target.clone(), graph);
        }
        let job = graph.job_name.clone();
        let fail = |message: String| JobError::Checkpoint { job: job.clone(), message };
        validate(&graph).map_err(|message| JobError::InvalidJob { job: job.clone(), message })?;
        install_panic_capture();
        let config = graph.config.clone();
        let mut warnings = Vec::new();
        let simulated_seed = config.simulation.map(|s| RunSeed(s.seed));
        let job_storage = JobStorage::open(&config, &job, simulated_seed, &mut warnings)
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        let storage = match &self.simulator {
            Some(simulator) => simulator.storage(job_storage.storage.clone()),
            None => job_storage.storage.clone(),
        };
        let mut result = JobResult {
            job_name: job.clone(),
            duration: Duration::ZERO,
            checkpoints_completed: 0,
            last_checkpoint: None,
            checkpoint_history: Vec::new(),
            restarts: 0,
            savepoint: None,
            stopped: false,
            warnings,
            trace: Vec::new(),
            accumulators: Default::default(),
        };
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
        let graph = Arc::new(graph);
        let plan = Arc::new(plan);
        let mut backoff = RestartBackoff::new(config.restart_strategy());
        let started_ms = self.clock.now_ms();
        let elapsed_ms = || self.clock.now_ms().saturating_sub(started_ms);
        loop {
            let restored = restore.as_ref().map(|source| Arc::new(restore_plan(&graph, source)));
            // Numbers continue after the restored checkpoint and after every checkpoint already
            // in the storage (another run's too), so no directory is ever written twice.
            // A listing that fails stops the job: guessing could reuse an id and overwrite a
            // checkpoint.
            let stored = storage
                .completed()
                .map_err(|e| fail(format!("cannot list the checkpoints already stored, to number new ones: {e}")))?;
            let newest_stored = stored.iter().filter_map(|l| checkpoint_number(l)).max();
            let restored_id = restored.as_ref().map(|plan| plan.id().0);
            let next_id = newest_stored.max(restored_id).unwrap_or(0).checked_add(1).ok_or_else(|| {
                fail("the stored checkpoints are numbered up to the largest number there is; no next one".into())
            })?;
            let checkpoints = (&storage, &retained);
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
            };
            let end = self.attempt(&graph, &plan, start, checkpoints, &mut result);
            result.duration = Duration::from_millis(elapsed_ms());
            match end {
                AttemptEnd::Finished | AttemptEnd::Stopped => {
                    result.stopped = matches!(end, AttemptEnd::Stopped);
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
                        tracing::error!(job = %job, error = %error, "job failed");
                        return Err(error);
                    };
                    result.restarts = backoff.restarts();
                    self.clock.sleep_ms(delay_ms);
                    match self.restore_after_failure(initial.as_ref(), &storage, &retained, &mut result.warnings) {
                        Ok(from) => {
                            restore = from;
                            let from =
                                restore.as_ref().map_or_else(|| "the beginning".to_string(), |c| c.location.clone());
                            tracing::warn!(job = %job, restart = result.restarts, delay_ms, cause = %error, from = %from, "restarting");
                            if self.simulator.is_some() {
                                result.trace.push(format!(
                                    "restart {} from {}",
                                    result.restarts,
                                    trace_location(&from)
                                ));
                            }
                            result
                                .warnings
                                .push(format!("restart {} after: {error}; restoring from {from}", result.restarts));
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(job = %job, error = %e, "cannot read the state to restart from; trying again under the restart strategy");
                            if self.simulator.is_some() {
                                result.trace.push(format!("restore failed after restart {}", result.restarts));
                            }
                            error = JobError::CheckpointFailover {
                                job: job.clone(),
                                message: format!("cannot restore after a failure: {e}"),
                            };
                        }
                    }
                },
            }
        }
    }

    /// Submits the job to the cluster's JobManager and coordinates it from here.
    fn execute_on_cluster(&self, target: ClusterTarget, graph: StreamGraph) -> Result<JobResult, JobError> {
        let job = graph.job_name.clone();
        validate(&graph).map_err(|message| JobError::InvalidJob { job: job.clone(), message })?;
        let parallelism = graph.nodes.iter().map(|n| n.parallelism).max().unwrap_or(1);
        let client = JobClient::submit(&target, &job, parallelism).map_err(|e| JobError::Cluster {
            job: job.clone(),
            message: format!("cannot submit the job to the JobManager at {}: {e}", target.jobmanager),
        })?;
        let client = Arc::new(client);
        let executor = LocalExecutor { clock: self.clock.clone(), simulator: None, cluster: Some(client.clone()) };
        let outcome = executor.execute(graph);
        client.finish(match &outcome {
            Ok(result) if result.stopped => "STOPPED",
            Ok(_) => "FINISHED",
            Err(JobError::Cancelled { .. }) => "CANCELED",
            Err(_) => "FAILED",
        });
        outcome
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

/// The checkpoint storage a task executor's subtasks write to: the job directory its
/// JobMaster chose, else the JobManager's memory (the state travels in acknowledgements).
pub(crate) fn open_task_storage(
    config: &JobConfig,
    job_dir: Option<&str>,
) -> Result<Arc<dyn CheckpointStorage>, CheckpointError> {
    Ok(match job_dir {
        None => Arc::new(MemoryCheckpointStorage::new(config.checkpoint.memory_state_bytes_max)),
        Some(dir) => config.storage_opener.open(dir)?,
    })
}

/// A checkpoint's location in a trace: its directory name, not where the storage is.
pub(super) fn trace_location(location: &str) -> &str {
    location.rsplit('/').next().unwrap_or(location)
}
