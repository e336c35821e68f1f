//! Job-level settings that travel with the graph (checkpoints, where they go, how the job
//! restarts, what it restores from, autoscaling), and the services a job is handed.

use eddy_checkpoint::restart::RestartStrategy;
use eddy_checkpoint::storage::{DirectoryOpener, OpenStorage};
use eddy_checkpoint::CheckpointConfig;
use eddy_state::{HeapStateBackend, KeyedBackendFactory};
use std::path::PathBuf;
use std::sync::Arc;

/// Where completed checkpoints go.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum StorageChoice {
    /// The JobManager's memory, capped per task (lost with the process).
    #[default]
    Memory,
    /// A directory (filesystem checkpoint storage).
    Directory(PathBuf),
}

/// What a job starts from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RestoreFrom {
    /// A checkpoint or savepoint directory.
    Path(PathBuf),
    /// The newest complete checkpoint in a checkpoint directory.
    LatestIn(PathBuf),
    /// The newest complete checkpoint of this job in its own checkpoint directory, or
    /// nothing (a fresh start, logged) while it has none yet: one command line that both
    /// starts a job and resumes it (`--restore latest`).
    LatestOrFresh,
}

/// Who owns the files of the checkpoint a job is restored from (Flink's restore modes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RestoreMode {
    /// The job never deletes them, and its first checkpoints upload their own copies of
    /// whatever they need (Flink's default).
    #[default]
    NoClaim,
    /// The job takes the checkpoint over as if it had written it: later checkpoints
    /// reference its files, and it is deleted once subsumed. It must be a checkpoint in
    /// the job's own checkpoint directory.
    Claim,
}

/// A savepoint taken while the job runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SavepointRequest {
    pub dir: PathBuf,
    /// Job time after which it is triggered.
    pub after_ms: u64,
    /// Stop the job once the savepoint completed (Flink's stop-with-savepoint).
    pub stop: bool,
}

/// Run the job under deterministic simulation: one thread, a seeded scheduler, a
/// simulated clock, and seeded faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Simulation {
    /// Decides the schedule, the faults, and the run's seed for ids and file names.
    pub seed: u64,
    /// How many faults to inject over the run.
    pub faults: u32,
}

/// How a cluster job's parallelism is chosen (Flink's `scheduler-mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SchedulerMode {
    /// The parallelism the program sets; `eddy rescale` changes it.
    #[default]
    Default,
    /// Every slot of the cluster, up to the max parallelism (Flink's reactive mode): the
    /// job grows when a TaskManager joins and shrinks when one leaves. Its operators that
    /// follow the job's default parallelism take the slots' count.
    Reactive,
}

/// Everything about running a job that is not its operators, as plain settings (they
/// serialize, and a JobMaster and a task executor read the same). What runs the job hands
/// it its live parts apart, as [`JobServices`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobConfig {
    pub checkpoint: CheckpointConfig,
    pub storage: StorageChoice,
    /// `None`: Flink's default (exponential delay with checkpointing on, else no restart).
    pub restart: Option<RestartStrategy>,
    pub restore: Option<RestoreFrom>,
    pub restore_mode: RestoreMode,
    /// Start even if the restored state has operators this job does not have.
    pub allow_non_restored_state: bool,
    pub savepoint: Option<SavepointRequest>,
    /// The seed the run derives its ids and file names from; `None`: drawn when the job
    /// starts (and logged).
    pub seed: Option<u64>,
    /// `Some`: run under deterministic simulation (heap backend only).
    pub simulation: Option<Simulation>,
    /// How often partial batches and network buffers are sent while input keeps coming
    /// (Flink's `execution.buffer-timeout`); 0: after every record.
    pub buffer_timeout_ms: u64,
    /// `Some`: buffer debloating (Flink's `taskmanager.network.memory.buffer-debloat`):
    /// batches shrink so that each queue drains within the target time.
    pub buffer_debloat: Option<crate::debloat::BufferDebloat>,
    pub scheduler_mode: SchedulerMode,
    /// `Some`: the parallelism follows the load, within bounds.
    pub autoscaling: Option<Autoscaling>,
}

impl Default for JobConfig {
    fn default() -> Self {
        Self {
            checkpoint: CheckpointConfig::default(),
            storage: StorageChoice::default(),
            restart: None,
            restore_mode: RestoreMode::NoClaim,
            scheduler_mode: SchedulerMode::Default,
            autoscaling: None,
            restore: None,
            allow_non_restored_state: false,
            savepoint: None,
            seed: None,
            simulation: None,
            buffer_timeout_ms: crate::channel::DEFAULT_BUFFER_TIMEOUT_MS,
            buffer_debloat: None,
        }
    }
}

/// What whoever runs a job hands it besides its settings: live objects the job uses and
/// shows itself through (the API builds them from the program's choices and features).
#[derive(Debug, Clone)]
pub struct JobServices {
    /// Where keyed state lives while the job runs (heap by default).
    pub state_backend: Arc<dyn KeyedBackendFactory>,
    /// Opens checkpoint storage (checkpoint directories, savepoints, restores): local
    /// directories by default; with the facade's `object-store` feature the API sets one
    /// that opens `s3://` locations too.
    pub storage_opener: Arc<dyn OpenStorage>,
    /// `Some`: submit the job to this cluster's JobManager instead of running it here.
    pub cluster: Option<eddy_rpc::ClusterTarget>,
    /// What the job shows of itself while it runs (REST, `/metrics`); the API keeps a
    /// clone to serve it.
    pub board: crate::observe::JobBoard,
    /// How a task executor of this job serves its subtasks' `/metrics`; `None`: it does
    /// not.
    pub metrics_server: Option<Arc<dyn crate::observe::ServeMetrics>>,
}

impl Default for JobServices {
    fn default() -> Self {
        Self {
            state_backend: Arc::new(HeapStateBackend::new()),
            storage_opener: Arc::new(DirectoryOpener),
            cluster: None,
            board: crate::observe::JobBoard::default(),
            metrics_server: None,
        }
    }
}

impl JobConfig {
    pub fn checkpointing_enabled(&self) -> bool {
        self.checkpoint.interval_ms > 0
    }

    /// The JobManager-memory checkpoint storage (Flink's `JobManagerCheckpointStorage`)
    /// with this job's cap per task: the JobMaster's, and a task executor's.
    pub fn memory_storage(&self) -> Arc<dyn eddy_checkpoint::storage::CheckpointStorage> {
        Arc::new(eddy_checkpoint::storage::MemoryCheckpointStorage::new(self.checkpoint.memory_state_bytes_max))
    }

    /// The restart strategy in force.
    pub fn restart_strategy(&self) -> RestartStrategy {
        match &self.restart {
            Some(strategy) => strategy.clone(),
            None if self.checkpointing_enabled() => RestartStrategy::default(),
            None => RestartStrategy::None,
        }
    }
}

/// How the autoscaler decides (`Env::set_autoscaling`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Autoscaling {
    pub min_parallelism: u32,
    pub max_parallelism: u32,
    /// The busy fraction each subtask should run at (Flink's
    /// `job.autoscaler.target.utilization`, 0.7).
    pub target_utilization: f64,
    /// A vertex busy within this of the target needs no change (Flink's
    /// `job.autoscaler.target.utilization.boundary`): without it the job would flap
    /// between two parallelisms that both sit near the target.
    pub utilization_boundary: f64,
    /// How long every sample must agree before a rescale (Flink's stabilization interval).
    pub window_ms: u64,
    /// After a rescale, how long no decision is taken (the new attempt's figures settle).
    pub cooldown_ms: u64,
}

impl Autoscaling {
    /// Between `min` and `max`, at Flink's target utilization, deciding over 10 s with
    /// 30 s of cool-down.
    pub fn new(min_parallelism: u32, max_parallelism: u32) -> Self {
        Self {
            min_parallelism,
            max_parallelism,
            target_utilization: 0.7,
            utilization_boundary: 0.2,
            window_ms: 10_000,
            cooldown_ms: 30_000,
        }
    }

    /// What is wrong with these settings, if anything (the job's validation asks).
    pub(super) fn check(&self) -> Result<(), String> {
        if self.min_parallelism == 0 || self.min_parallelism > self.max_parallelism {
            return Err(format!(
                "autoscaling between {} and {}: the minimum must be at least 1 and at most the maximum",
                self.min_parallelism, self.max_parallelism
            ));
        }
        if !(self.target_utilization > 0.0 && self.target_utilization <= 1.0) {
            return Err(format!("autoscaling target utilization {} is not in (0, 1]", self.target_utilization));
        }
        Ok(())
    }
}
