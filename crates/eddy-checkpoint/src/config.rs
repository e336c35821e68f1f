//! Checkpoint settings, with Flink's meanings and defaults.

/// Flink's `CheckpointingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum CheckpointingMode {
    /// Tasks with several inputs align barriers: no record counts twice after recovery.
    #[default]
    ExactlyOnce,
    /// No alignment: lower latency, records after a barrier may be replayed on recovery.
    AtLeastOnce,
}

/// How checkpoints are taken and kept.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointConfig {
    /// 0 = periodic checkpoints off.
    pub interval_ms: u64,
    pub mode: CheckpointingMode,
    /// The least time between the end of one checkpoint and the start of the next.
    pub min_pause_ms: u64,
    /// A checkpoint not complete after this long is aborted.
    pub timeout_ms: u64,
    pub max_concurrent: usize,
    /// Failed checkpoints tolerated in a row before the job fails.
    pub tolerable_failures: u32,
    /// Completed checkpoints kept (Flink's `state.checkpoints.num-retained`, default 1).
    pub retained: usize,
    /// Keep the retained checkpoints when the job is cancelled or ends.
    pub retain_on_cancel: bool,
    /// Cap per task of the JobManager memory storage: 64 MiB by default. Flink's 5 MiB
    /// comes from its RPC frame size; eddy's acknowledgements travel in frames of up to
    /// 256 MiB, and 5 MiB is outgrown within seconds by a windowed job (W3 at parallelism
    /// 2 holds about 9 MB per task). A checkpoint above the cap fails the job at once.
    pub memory_state_bytes_max: usize,
    /// Flink's `execution.checkpointing.unaligned.enabled`: a checkpoint's barrier
    /// overtakes the records queued before it, which are written into the checkpoint
    /// instead, so that backpressure does not hold checkpoints back. Exactly-once
    /// checkpoints only; savepoints stay aligned.
    pub unaligned: bool,
    /// Flink's `execution.checkpointing.aligned-checkpoint-timeout`, with `unaligned`: a
    /// checkpoint starts aligned at each task and turns unaligned there when its alignment
    /// has taken this long. 0: unaligned from the first barrier.
    pub aligned_checkpoint_timeout_ms: u64,
}

/// The default cap per task of the JobManager memory storage.
pub const MEMORY_STATE_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            interval_ms: 0,
            mode: CheckpointingMode::ExactlyOnce,
            min_pause_ms: 0,
            timeout_ms: 10 * 60 * 1000,
            max_concurrent: 1,
            tolerable_failures: 0,
            retained: 1,
            retain_on_cancel: false,
            memory_state_bytes_max: MEMORY_STATE_BYTES_MAX_DEFAULT,
            unaligned: false,
            aligned_checkpoint_timeout_ms: 0,
        }
    }
}

impl CheckpointConfig {
    /// Periodic checkpoints every `interval_ms`, other settings default.
    pub fn every(interval_ms: u64) -> Self {
        Self { interval_ms, ..Self::default() }
    }
}
