//! Rescaling a running job (Flink's adaptive scheduler, `PUT
//! /jobs/:id/resource-requirements`; `eddy rescale JOB --parallelism N`): the smallest
//! snapshot that serves, a checkpoint (incremental on RocksDB when the job's checkpoints
//! are), is triggered at once; when it (or any later one) completed and every task heard
//! so (their sinks committed), the attempt stops and the JobMaster starts the next one at
//! the new parallelism from that checkpoint: each new subtask restores its key groups and
//! operator state, and the sources resume from their checkpointed positions.

use super::AttemptCoordinator;
use eddy_checkpoint::{CheckpointId, SnapshotKind};
use eddy_runtime::error::JobError;
use eddy_runtime::task::Control;
use eddy_types::{Clock, WallClock};
use std::sync::atomic::Ordering;

/// A rescale asked for: to what, by whom, after which checkpoint.
pub(crate) struct RescaleOrder {
    pub(super) parallelism: u32,
    /// Who asked (`None`: reactive mode or the autoscaler).
    pub(super) request: Option<u64>,
    /// The checkpoint triggered for it: it, or any later one, serves.
    pub(super) after: CheckpointId,
}

/// A rescale under way: the attempt stopped for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rescaling {
    pub(crate) from: u32,
    pub(crate) to: u32,
    /// The checkpoint the next attempt restores.
    pub(crate) checkpoint: CheckpointId,
    /// When the tasks were told to stop (the coordinator's clock, ms): records stop here.
    pub(crate) stopped_at_ms: u64,
}

impl AttemptCoordinator<'_> {
    /// Asked to take the job to `parallelism` (request `request`): a checkpoint for it is
    /// triggered; the answer comes when the attempt stops for the rescale.
    pub(crate) fn rescale_now(&mut self, parallelism: u32, request: Option<u64>) -> Result<String, String> {
        if self.cancel.load(Ordering::SeqCst) || self.stopping || self.failure.is_some() {
            return Err("the job is stopping or restarting; try again".into());
        }
        if self.rescale.is_some() {
            return Err("a rescale is under way already; try again when it is done".into());
        }
        if self.savepoint_pending.is_some() || self.savepoint_order.is_some() {
            return Err("a savepoint is being taken; try again when it completed".into());
        }
        if !self.graph.config.checkpointing_enabled() {
            return Err("rescaling restores a checkpoint, and this job takes none (set a checkpoint interval)".into());
        }
        if self.coordinator.all_finished() || !self.sources_running() {
            return Err("the job's sources finished: it is ending, and a rescale would not serve".into());
        }
        let rescaled = self.graph.rescaled(parallelism).map_err(|e| match e {
            JobError::InvalidJob { message, .. } => message,
            other => eddy_types::chain(&other),
        })?;
        if rescaled.operator_parallelism() == self.graph.operator_parallelism() {
            return Err(format!("the job runs at parallelism {parallelism} already"));
        }
        if let Some(hooks) = &self.hooks {
            let (needed, available) = (rescaled.slots_needed(), (hooks.slots_available)());
            if needed > available {
                return Err(format!(
                    "parallelism {parallelism} needs {needed} slots; the cluster has {available} for this job"
                ));
            }
        }
        let now = self.now_ms();
        let after = self.trigger(SnapshotKind::Checkpoint, now);
        tracing::info!(
            job = %self.graph.job_name,
            from = self.graph.slots_needed(),
            to = parallelism,
            checkpoint = %after,
            "rescale asked for; checkpoint triggered for it"
        );
        self.rescale = Some(RescaleOrder { parallelism, request, after });
        Ok(format!("checkpoint {after} triggered; the job rescales to parallelism {parallelism} once it completed"))
    }

    /// The autoscaler's sample of the view just refreshed, and the rescale it decides.
    pub(super) fn autoscale(&mut self) {
        let Some(autoscaler) = self.autoscaler.clone() else { return };
        if self.cancel.load(Ordering::SeqCst) || self.stopping || self.failure.is_some() || self.rescale.is_some() {
            return;
        }
        // Not before every task runs: a restoring attempt's figures say nothing yet.
        if self.tasks_running < self.tasks.len() {
            return;
        }
        let mut autoscaler = autoscaler.lock().unwrap_or_else(|e| e.into_inner());
        let view = self.graph.services.board.view();
        let now = WallClock.now_ms();
        let Some((target, decision)) = autoscaler.observe(self.graph, &view, now) else { return };
        // Decided: whether it happens or not, the next decision waits for the cool-down.
        autoscaler.rescaled(now);
        drop(autoscaler);
        match self.rescale_now(target, None) {
            Ok(_) => tracing::info!(job = %self.graph.job_name, %decision, "autoscaler: rescaling"),
            Err(why) => {
                tracing::info!(job = %self.graph.job_name, %decision, reason = %why, "autoscaler: no rescale now")
            }
        }
    }

    /// The attempt ends with a rescale still waiting for its checkpoint: whoever asked
    /// hears that it did not happen.
    pub(super) fn abandon_rescale(&mut self) {
        if let Some(RescaleOrder { request: Some(request), .. }) = self.rescale.take() {
            self.reply(request, Err("the attempt ended before the rescale's checkpoint completed; ask again".into()));
        }
    }

    /// Every task of the attempt runs (its state restored): after a rescale, records flow
    /// again, and the pause since they stopped is known.
    pub(super) fn all_running(&mut self) {
        if let Some(rescaling) = self.after_rescale.take() {
            let pause_ms = self.clock.now_ms().saturating_sub(rescaling.stopped_at_ms);
            tracing::info!(
                job = %self.graph.job_name,
                from = rescaling.from,
                to = rescaling.to,
                checkpoint = %rescaling.checkpoint,
                pause_ms,
                "rescaled: every subtask runs at the new parallelism"
            );
            self.note(|| format!("rescaled from {} to {}", rescaling.from, rescaling.to));
        }
    }

    /// Checkpoint `id` completed and every task heard so: if a rescale waits for it (or
    /// for an earlier one), the attempt stops now, behind that news in every mailbox.
    pub(super) fn rescale_if_due(&mut self, id: CheckpointId) {
        let Some(order) = self.rescale.as_ref().filter(|order| id >= order.after) else { return };
        let (to, request) = (order.parallelism, order.request);
        self.rescale = None;
        if self.stopping || self.failure.is_some() {
            // Stopped or failing meanwhile: that goes first.
            if let Some(request) = request {
                self.reply(request, Err("the job stopped or failed before it could rescale".into()));
            }
            return;
        }
        let rescaling =
            Rescaling { from: self.graph.slots_needed(), to, checkpoint: id, stopped_at_ms: self.clock.now_ms() };
        tracing::info!(job = %self.graph.job_name, from = rescaling.from, to, checkpoint = %id, "rescaling: the \
            attempt stops, to restart at the new parallelism from this checkpoint");
        self.rescaling = Some(rescaling);
        self.stopping = true;
        self.broadcast(Control::Cancel);
        if let Some(request) = request {
            let answer = format!("rescaling from parallelism {} to {to} from checkpoint {id}", rescaling.from);
            self.reply(request, Ok(answer));
        }
    }
}
