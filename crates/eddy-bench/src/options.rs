//! The checkpoint, recovery and output flags every workload shares.

use eddy::checkpoint::restart::RestartStrategy;
use eddy::checkpoint::{CheckpointConfig, CheckpointingMode};
use eddy::prelude::*;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    ExactlyOnce,
    AtLeastOnce,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckpointArgs {
    /// Checkpoint interval in ms (0 = no checkpoints).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_ms: u64,
    #[arg(long, value_enum, default_value_t = Mode::ExactlyOnce)]
    pub mode: Mode,
    /// Unaligned checkpoints: barriers overtake queued records, which the checkpoint
    /// stores (Flink's `execution.checkpointing.unaligned.enabled`).
    #[arg(long)]
    pub unaligned: bool,
    /// With --unaligned: a checkpoint turns unaligned at a task only once its alignment
    /// took this long (Flink's `aligned-checkpoint-timeout`); 0: from the first barrier.
    #[arg(long, default_value_t = 0, requires = "unaligned")]
    pub aligned_timeout_ms: u64,
    /// Filesystem checkpoint storage; checkpoints are kept when the job ends or dies.
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Write the output through the exactly-once file sink into this directory.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Where --stop-with-savepoint-after-ms puts its savepoint.
    #[arg(long, requires = "stop_with_savepoint_after_ms")]
    pub savepoint_dir: Option<PathBuf>,
    /// Stop with a savepoint after this long and print `savepoint=<path>`.
    #[arg(long, requires = "savepoint_dir")]
    pub stop_with_savepoint_after_ms: Option<u64>,
    /// Run under deterministic simulation with this seed: every task on one thread in a
    /// seeded order, on a simulated clock (heap backend). Prints `trace=<hash>`.
    #[arg(long)]
    pub simulate: Option<u64>,
    /// Seeded faults to inject under --simulate: task failures, storage write and read
    /// errors, files cut short.
    #[arg(long, default_value_t = 0, requires = "simulate")]
    pub faults: u32,
    /// Restart after a failure this long after it, up to --restart-attempts times
    /// (Flink's fixed-delay strategy). Default: Flink's exponential delay from 1 s.
    #[arg(long)]
    pub restart_delay_ms: Option<u64>,
    #[arg(long, default_value_t = 100, requires = "restart_delay_ms")]
    pub restart_attempts: u32,
}

impl CheckpointArgs {
    /// Applies the flags to a job's environment.
    pub fn apply(&self, env: &Env) -> anyhow::Result<()> {
        env.set_checkpoint_config(CheckpointConfig {
            interval_ms: self.checkpoint_ms,
            mode: match self.mode {
                Mode::ExactlyOnce => CheckpointingMode::ExactlyOnce,
                Mode::AtLeastOnce => CheckpointingMode::AtLeastOnce,
            },
            retain_on_cancel: true,
            unaligned: self.unaligned,
            aligned_checkpoint_timeout_ms: self.aligned_timeout_ms,
            ..CheckpointConfig::default()
        });
        if let Some(dir) = &self.checkpoint_dir {
            env.set_checkpoint_dir(dir);
        }
        if let (Some(dir), Some(after_ms)) = (&self.savepoint_dir, self.stop_with_savepoint_after_ms) {
            env.stop_with_savepoint_after(dir, after_ms);
        }
        if let Some(seed) = self.simulate {
            env.simulate(seed, self.faults);
        }
        if let Some(delay_ms) = self.restart_delay_ms {
            env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: self.restart_attempts, delay_ms });
        }
        Ok(())
    }

    /// `name=value` lines about checkpoints and savepoints for the report.
    pub fn report(&self, result: &JobResult) -> Vec<(String, String)> {
        let mut lines = Vec::new();
        if let Some(savepoint) = &result.savepoint {
            lines.push(("savepoint".into(), savepoint.clone()));
        }
        if self.checkpoint_ms > 0 {
            lines.push(("checkpoints".into(), result.checkpoints_completed.to_string()));
            if let Some(last) = &result.last_checkpoint {
                lines.push(("last_checkpoint_bytes".into(), last.bytes.to_string()));
                lines.push(("last_checkpoint_incremental_bytes".into(), last.incremental_bytes.to_string()));
                lines.push(("last_checkpoint_ms".into(), last.duration_ms.to_string()));
                lines.push(("last_checkpoint_sync_ms".into(), last.sync_ms.to_string()));
                lines.push(("last_checkpoint_async_ms".into(), last.async_ms.to_string()));
                lines.push(("last_checkpoint_wait_ms".into(), last.wait_ms.to_string()));
            }
            // Over every completed checkpoint: one after a RocksDB compaction uploads much
            // more than the others, so the last one alone says little.
            let history = &result.checkpoint_history;
            if !history.is_empty() {
                let n = history.len() as u64;
                let uploaded: u64 = history.iter().map(|c| c.incremental_bytes).sum();
                let millis: u64 = history.iter().map(|c| c.duration_ms).sum();
                let sync: u64 = history.iter().map(|c| c.sync_ms).sum();
                let wait: u64 = history.iter().map(|c| c.wait_ms).sum();
                lines.push(("avg_checkpoint_incremental_bytes".into(), (uploaded / n).to_string()));
                lines.push(("avg_checkpoint_ms".into(), (millis / n).to_string()));
                lines.push(("avg_checkpoint_sync_ms".into(), (sync / n).to_string()));
                lines.push(("avg_checkpoint_wait_ms".into(), (wait / n).to_string()));
                // Unaligned checkpoints: the records their barriers overtook, per checkpoint.
                if let Some(bytes) = result.accumulators.get(eddy::IN_FLIGHT_BYTES) {
                    lines.push(("avg_checkpoint_in_flight_bytes".into(), (bytes / n).to_string()));
                }
            }
        }
        if result.restarts > 0 {
            lines.push(("restarts".into(), result.restarts.to_string()));
        }
        if self.simulate.is_some() {
            lines.push(("trace".into(), format!("{:016x}", trace_hash(&result.trace))));
        }
        lines
    }
}

/// FNV-1a over the trace's events, each ended by a newline: stable across runs, builds
/// and machines.
pub fn trace_hash(trace: &[String]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for byte in trace.iter().flat_map(|event| event.bytes().chain(std::iter::once(b'\n'))) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
