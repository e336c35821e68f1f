//! Job-level settings that travel with the graph: checkpoints, where they go, how the job
//! restarts, and what it restores from.

use eddy_checkpoint::restart::RestartStrategy;
use eddy_checkpoint::storage::{DirectoryOpener, OpenStorage};
use eddy_checkpoint::CheckpointConfig;
use eddy_state::{HeapStateBackend, KeyedBackendFactory};
use std::path::PathBuf;
use std::sync::Arc;

/// Where completed checkpoints go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StorageChoice {
    /// The JobManager's memory, capped per task (lost with the process).
    #[default]
    Memory,
    /// A directory (filesystem checkpoint storage).
    Directory(PathBuf),
}

/// What a job starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreFrom {
    /// A checkpoint or savepoint directory.
    Path(PathBuf),
    /// The newest complete checkpoint in a checkpoint directory.
    LatestIn(PathBuf),
}

/// Who owns the files of the checkpoint a job is restored from (Flink's restore modes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavepointRequest {
    pub dir: PathBuf,
    /// Job time after which it is triggered.
    pub after_ms: u64,
    /// Stop the job once the savepoint completed (Flink's stop-with-savepoint).
    pub stop: bool,
}

/// Run the job under deterministic simulation: one thread, a seeded scheduler, a
/// simulated clock, and seeded faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Simulation {
    /// Decides the schedule, the faults, and the run's seed for ids and file names.
    pub seed: u64,
    /// How many faults to inject over the run.
    pub faults: u32,
}

/// How a cluster job's parallelism is chosen (Flink's `scheduler-mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SchedulerMode {
    /// The parallelism the program sets; `eddy rescale` changes it.
    #[default]
    Default,
    /// Every slot of the cluster, up to the max parallelism (Flink's reactive mode): the
    /// job grows when a TaskManager joins and shrinks when one leaves. Its operators that
    /// follow the job's default parallelism take the slots' count.
    Reactive,
}

/// Everything about running a job that is not its operators.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Where keyed state lives while the job runs (heap by default).
    pub state_backend: Arc<dyn KeyedBackendFactory>,
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
    /// Opens checkpoint storage (checkpoint directories, savepoints, restores): local
    /// directories by default; with the facade's `object-store` feature the API sets one
    /// that opens `s3://` locations too.
    pub storage_opener: Arc<dyn OpenStorage>,
    /// How often partial batches and network buffers are sent while input keeps coming
    /// (Flink's `execution.buffer-timeout`); 0: after every record.
    pub buffer_timeout_ms: u64,
    /// `Some`: buffer debloating (Flink's `taskmanager.network.memory.buffer-debloat`):
    /// batches shrink so that each queue drains within the target time.
    pub buffer_debloat: Option<crate::debloat::BufferDebloat>,
    /// `Some`: submit the job to this cluster's JobManager instead of running it here.
    pub cluster: Option<eddy_rpc::ClusterTarget>,
    /// What the job shows of itself while it runs (REST, `/metrics`); the API keeps a
    /// clone to serve it.
    pub board: crate::observe::JobBoard,
    /// How a task executor of this job serves its subtasks' `/metrics`; `None`: it does
    /// not.
    pub metrics_server: Option<Arc<dyn crate::observe::ServeMetrics>>,
    pub scheduler_mode: SchedulerMode,
    /// `Some`: the parallelism follows the load, within bounds.
    pub autoscaling: Option<crate::jobmaster::Autoscaling>,
}

impl Default for JobConfig {
    fn default() -> Self {
        Self {
            state_backend: Arc::new(HeapStateBackend::new()),
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
            storage_opener: Arc::new(DirectoryOpener),
            cluster: None,
            buffer_timeout_ms: crate::channel::DEFAULT_BUFFER_TIMEOUT_MS,
            buffer_debloat: None,
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
