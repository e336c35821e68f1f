//! What `eddy status` shows of a running job: per subtask, where it runs, its records and
//! backpressure; what the operators' coordinators show (a Kafka source's consumer lag per
//! partition); then the last checkpoints.

use super::coordinator::AttemptCoordinator;
use super::JobResult;
use eddy_rpc::{AttemptId, TaskManagerId};
use eddy_runtime::cluster::executor_link::TaskMetrics;
use std::collections::HashMap;

impl AttemptCoordinator<'_> {
    /// What `status` prints: per subtask, where it runs, its records and backpressure;
    /// then the last checkpoints.
    pub(crate) fn status_text(
        &self,
        attempt: AttemptId,
        task_managers: &[TaskManagerId],
        metrics: &HashMap<u32, TaskMetrics>,
        result: &JobResult,
    ) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        let _ = writeln!(
            text,
            "job '{}': attempt {attempt}, {} restarts, {} checkpoints completed",
            self.graph.job_name, result.restarts, result.checkpoints_completed
        );
        if let Some(autoscaler) = &self.autoscaler {
            let autoscaler = autoscaler.lock().unwrap_or_else(|e| e.into_inner());
            let decision = autoscaler.last_decision.as_deref().unwrap_or("no rescale decided yet");
            let _ = writeln!(text, "autoscaler: {decision}");
        }
        let _ = writeln!(
            text,
            "{:<40} {:>4} {:>14} {:>14} {:>14}",
            "SUBTASK", "TM", "RECORDS IN", "RECORDS OUT", "BACKPRESSURED"
        );
        for index in 0..self.task_count() {
            let counted = metrics.get(&(index as u32)).cloned().unwrap_or_default();
            let _ = writeln!(
                text,
                "{:<40} {:>4} {:>14} {:>14} {:>13.1}s",
                self.subtask_name(index),
                task_managers.get(index).copied().unwrap_or_default(),
                counted.counters.records_in,
                counted.counters.records_out,
                counted.counters.backpressured_ms as f64 / 1000.0
            );
        }
        for line in self.coordinator_status() {
            let _ = writeln!(text, "{line}");
        }
        let recent = result.checkpoint_history.iter().rev().take(5).collect::<Vec<_>>();
        if recent.is_empty() {
            let _ = writeln!(text, "no checkpoint completed yet");
        }
        for checkpoint in recent {
            let _ = writeln!(
                text,
                "checkpoint {}: {} ms, {} bytes ({} written), {}",
                checkpoint.id,
                checkpoint.duration_ms,
                checkpoint.bytes,
                checkpoint.incremental_bytes,
                checkpoint.location
            );
        }
        text
    }
}
