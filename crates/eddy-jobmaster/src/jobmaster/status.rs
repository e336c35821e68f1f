//! What `eddy status` shows of a running job: per subtask, where it runs, its records and
//! backpressure; what the operators' coordinators show (a Kafka source's consumer lag per
//! partition); then the last checkpoints.

use super::coordinator::AttemptCoordinator;
use eddy_rpc::view::CheckpointStatus;
use eddy_rpc::TaskManagerId;
use eddy_runtime::cluster::executor_link::TaskMetrics;
use eddy_types::text::{duration, table, utc_time, Align};
use std::collections::HashMap;

impl AttemptCoordinator<'_> {
    /// What `status` prints: the job's attempt, restarts and checkpoints as its board
    /// shows them (the dashboard and REST tell the same); per subtask, where it runs,
    /// its records and backpressure; then the last checkpoints.
    pub(crate) fn status_text(&self, task_managers: &[TaskManagerId], metrics: &HashMap<u32, TaskMetrics>) -> String {
        use std::fmt::Write;
        let view = self.graph.services.board.view();
        let mut text = String::new();
        let _ = writeln!(
            text,
            "job '{}': attempt {}, {} restarts, {} checkpoints completed, running since {} ({})",
            self.graph.job_name,
            view.attempt,
            view.restarts,
            view.checkpoints.completed,
            utc_time(view.start_time_ms),
            duration(view.duration_ms)
        );
        if let Some(autoscaler) = &self.autoscaler {
            let autoscaler = autoscaler.lock().unwrap_or_else(|e| e.into_inner());
            let decision = autoscaler.last_decision.as_deref().unwrap_or("no rescale decided yet");
            let _ = writeln!(text, "autoscaler: {decision}");
        }
        let rows: Vec<Vec<String>> = (0..self.task_count())
            .map(|index| {
                let counted = metrics.get(&(index as u32)).cloned().unwrap_or_default();
                vec![
                    self.subtask_name(index),
                    task_managers.get(index).copied().unwrap_or_default().to_string(),
                    counted.counters.records_in.to_string(),
                    counted.counters.records_out.to_string(),
                    format!("{:.1}s", counted.counters.backpressured_ms as f64 / 1000.0),
                ]
            })
            .collect();
        let right = [Align::Left, Align::Right, Align::Right, Align::Right, Align::Right];
        text.push_str(&table(&["SUBTASK", "TM", "RECORDS IN", "RECORDS OUT", "BACKPRESSURED"], &right, &rows));
        for line in self.coordinator_status() {
            let _ = writeln!(text, "{line}");
        }
        let recent: Vec<Vec<String>> = view
            .checkpoints
            .history
            .iter()
            .rev()
            .filter(|c| c.status == CheckpointStatus::Completed)
            .take(5)
            .map(|c| {
                vec![
                    c.id.to_string(),
                    utc_time(c.trigger_time_ms),
                    duration(c.duration_ms),
                    c.bytes.to_string(),
                    c.incremental_bytes.to_string(),
                    c.location.clone(),
                ]
            })
            .collect();
        if recent.is_empty() {
            let _ = writeln!(text, "no checkpoint completed yet");
        } else {
            let align = [Align::Right, Align::Left, Align::Right, Align::Right, Align::Right, Align::Left];
            text.push_str(&table(
                &["CHECKPOINT", "TRIGGERED", "TOOK", "BYTES", "WRITTEN", "LOCATION"],
                &align,
                &recent,
            ));
        }
        text
    }
}
