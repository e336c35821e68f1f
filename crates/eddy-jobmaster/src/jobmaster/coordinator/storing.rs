//! Completing checkpoints and savepoints (their `_metadata`, from the tasks' handles),
//! retention, shared files' references, and deleting what an incomplete or late
//! checkpoint left behind.

use super::{Acknowledged, AttemptCoordinator};
use crate::jobmaster::{trace_location, CheckpointStats, JobResult};
use crossbeam_channel::Receiver;
use eddy_checkpoint::acknowledgement::TaskAcknowledgement;
use eddy_checkpoint::coordinator::Completed;
use eddy_checkpoint::metadata::{CheckpointMetadata, StateHandle};
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_checkpoint::{CheckpointError, CheckpointId, SnapshotKind};
use eddy_runtime::channel::CheckpointEvent;
use eddy_runtime::error::JobError;
use eddy_runtime::task::{Control, TaskReport};
use std::sync::atomic::Ordering;

/// Room left in a restore's start message for everything but the restored state.
const RESTORE_MESSAGE_HEADROOM_BYTES: usize = 1 << 20;

impl AttemptCoordinator<'_> {
    /// The final checkpoint completed: store it, then let sinks commit their end-of-input
    /// transactions (only once the checkpoint that holds them is stored).
    pub(super) fn finish_job(&mut self, checkpoint: Completed<Acknowledged>, result: &mut JobResult) {
        let id = checkpoint.id;
        if !self.store(checkpoint, result, false) {
            return self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!("the final checkpoint {id} could not be stored; nothing of it was committed"),
                source: None,
            });
        }
        self.operators.completed(id);
        if !self.cancel.load(Ordering::SeqCst) {
            self.job_finished_sent = true;
            self.broadcast(Control::JobFinished);
        }
    }

    /// Counts the shared files a task's state references under checkpoint `id`. One it
    /// took from an earlier checkpoint must still be held: the earlier one may have been
    /// dropped after the task wrote (it had not heard yet).
    pub(super) fn register_shared(&mut self, id: CheckpointId, ack: &TaskAcknowledgement) -> Result<(), String> {
        let mut retained = self.retained.borrow_mut();
        if let Some(gone) =
            ack.shared_files.iter().find(|f| !f.uploaded_now && retained.shared_file(&f.location).is_none())
        {
            return Err(format!(
                "{} references the shared file {}, which no retained checkpoint holds any more",
                ack.entry.task, gone.location
            ));
        }
        for file in &ack.shared_files {
            retained.reference(id, &file.location, file.bytes, file.crc32);
        }
        Ok(())
    }

    /// A pending checkpoint that cannot complete: abort it, delete what was written for
    /// it, tell the tasks.
    pub(super) fn abort_checkpoint(
        &mut self,
        id: CheckpointId,
        kind: SnapshotKind,
        reason: &str,
        result: &mut JobResult,
    ) {
        tracing::warn!(checkpoint = %id, kind = ?kind, reason, "checkpoint aborted");
        self.note(|| format!("{kind:?} {id} aborted"));
        result.warnings.push(format!("checkpoint {id} aborted: {reason}"));
        self.board_checkpoint_failed(id, reason);
        let counted = self.coordinator.abort(id);
        self.discard_pending(id, kind);
        self.broadcast(Control::Checkpoint(CheckpointEvent::Aborted(id)));
        if let Err(too_many) = counted {
            self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!(
                    "checkpoint {id} aborted: {reason}; {} failures in a row (tolerable: {})",
                    too_many.consecutive, too_many.tolerable
                ),
                source: None,
            });
        }
    }

    /// Deletes what tasks wrote for a checkpoint that will never complete. Without the
    /// final checkpoint the job cannot finish: that fails it over.
    pub(super) fn discard_pending(&mut self, id: CheckpointId, kind: SnapshotKind) {
        self.operators.discard(id);
        if Some(id) == self.final_checkpoint {
            self.fail(JobError::CheckpointFailover {
                job: self.graph.job_name.clone(),
                message: format!("the final checkpoint {id} failed; nothing of it was committed"),
                source: None,
            });
        }
        match kind {
            SnapshotKind::Checkpoint => {
                discard_incomplete_checkpoint(self.storage.as_ref(), &mut self.retained.borrow_mut(), id)
            }
            SnapshotKind::Savepoint => {
                if let Some(savepoints) = self.savepoint_storage_of(id) {
                    if let Err(e) = savepoints.discard(id, kind) {
                        tracing::warn!(savepoint = %id, error = %eddy_types::chain(&e), "cannot delete an incomplete savepoint; its files \
                            stay");
                    }
                }
                if matches!(&self.savepoint_pending, Some((pending, _)) if *pending == id) {
                    let (_, order) = self.savepoint_pending.take().expect("pending");
                    if let Some(request) = order.request {
                        let why = format!(
                            "savepoint {id} did not complete (aborted, expired, declined by a task not \
                            ready, or the job failed; the job's log says which)"
                        );
                        self.reply(request, Err(why));
                    }
                }
            }
        }
    }

    /// An acknowledgement for a checkpoint no longer pending: its files go (what it
    /// uploaded has names of its own; what it took from earlier checkpoints stays).
    pub(super) fn discard_late(&mut self, id: CheckpointId, ack: &TaskAcknowledgement) {
        self.discard_written(id, ack.kind);
        if ack.kind == SnapshotKind::Checkpoint {
            let retained = self.retained.borrow();
            let unused =
                ack.shared_files.iter().filter(|f| f.uploaded_now && retained.reference_count(&f.location) == 0);
            delete_unreferenced(self.storage.as_ref(), unused.map(|f| f.location.clone()).collect());
        }
    }

    /// Deletes the directory of a checkpoint or savepoint that will never complete (what
    /// tasks wrote into it), in the storage its kind goes to.
    pub(super) fn discard_written(&self, id: CheckpointId, kind: SnapshotKind) {
        let storage = match kind {
            SnapshotKind::Checkpoint => Some(self.storage.clone()),
            SnapshotKind::Savepoint => self.savepoint_storage_of(id),
        };
        if let Some(Err(e)) = storage.map(|s| s.discard(id, kind)) {
            tracing::warn!(checkpoint = %id, kind = ?kind, error = %eddy_types::chain(&e), "cannot delete what was written for an \
                incomplete checkpoint");
        }
    }

    /// The attempt is over: acknowledgements that came too late, and checkpoints still
    /// pending, leave nothing behind (files, references).
    pub(super) fn clean_up(&mut self, reports: &Receiver<TaskReport>) {
        while let Ok(report) = reports.try_recv() {
            match report {
                TaskReport::Acknowledge { checkpoint, ack, .. } => self.discard_late(checkpoint, &ack),
                TaskReport::Declined { checkpoint, kind, .. } => self.discard_written(checkpoint, kind),
                TaskReport::Finished { .. } | TaskReport::OperatorEvent { .. } | TaskReport::Running { .. } => {}
                TaskReport::Accumulators { values } => self.accumulate(values),
            }
        }
        for (id, kind) in self.coordinator.pending() {
            self.discard_pending(id, kind);
        }
    }

    /// A checkpoint every task acknowledged: store it, tell the tasks, drop old ones.
    pub(super) fn complete(&mut self, checkpoint: Completed<Acknowledged>, result: &mut JobResult) {
        if checkpoint.kind == SnapshotKind::Savepoint {
            let order = match self.savepoint_pending.take() {
                Some((id, order)) if id == checkpoint.id => order,
                other => {
                    self.savepoint_pending = other;
                    return;
                }
            };
            let reply = |run: &Self, answer: Result<String, String>| {
                if let Some(request) = order.request {
                    run.reply(request, answer);
                }
            };
            match self.commit(&checkpoint, order.storage.as_ref()) {
                Ok(stats) => {
                    tracing::info!(savepoint = %stats.id, bytes = stats.bytes, location = %stats.location, "savepoint \
                        completed");
                    self.note(|| format!("savepoint {} completed", stats.id));
                    self.graph.services.board.checkpoint_completed(&stats, &task_bytes(&checkpoint));
                    // A stop whose savepoint completed after a task failed does not stop:
                    // the attempt fails over to the latest checkpoint, as in Flink.
                    let stops = order.stop && self.failure.is_none();
                    match (&self.failure, order.stop) {
                        (Some(failure), true) => {
                            let answer = failed_stop(stats.id, &stats.location, failure);
                            tracing::warn!(job = %self.graph.job_name, "{answer}");
                            // The CLI's stop hears it; a configured one's result says it.
                            if order.request.is_none() {
                                result.warnings.push(answer.clone());
                            }
                            reply(self, Err(answer));
                        }
                        _ => reply(self, Ok(format!("savepoint={}", stats.location))),
                    }
                    // The job's own savepoints (its configuration's, or the one it stops
                    // with) are its result's; one the CLI took went to the CLI. A stop that
                    // did not happen is not (the next attempt takes its own).
                    if stops || (order.request.is_none() && !order.stop) {
                        result.savepoint = Some(stats.location);
                    }
                    if stops {
                        // Every task hears of the savepoint before it stops (its sinks
                        // commit): the stop goes through the mailboxes behind that news,
                        // and the cancel flag follows once everything is delivered.
                        self.operators.completed(checkpoint.id);
                        self.broadcast(Control::Checkpoint(CheckpointEvent::Completed(checkpoint.id)));
                        self.stopping = true;
                        self.broadcast(Control::Cancel);
                    } else {
                        // Any other savepoint commits nothing (Flink's FLIP-193): a failover
                        // restores the latest checkpoint, never a savepoint, and what sinks
                        // committed after that checkpoint would be written again. What they
                        // pre-committed for the savepoint commits with the next checkpoint,
                        // or when a job restored from the savepoint starts.
                        self.operators.discard(checkpoint.id);
                    }
                }
                Err(e) if order.request.is_some() => {
                    self.operators.discard(checkpoint.id);
                    // Asked for by the CLI: the job goes on without it.
                    tracing::warn!(savepoint = %checkpoint.id, error = %eddy_types::chain(&e), "savepoint failed");
                    self.board_checkpoint_failed(checkpoint.id, &eddy_types::chain(&e));
                    reply(self, Err(format!("savepoint {} failed: {e}", checkpoint.id, e = eddy_types::chain(&e))));
                }
                Err(e) => self.fail(JobError::Checkpoint {
                    job: self.graph.job_name.clone(),
                    message: format!("savepoint {} failed", checkpoint.id),
                    source: Some(e),
                }),
            }
            return;
        }
        if !self.graph.config.checkpointing_enabled() {
            return;
        }
        let id = checkpoint.id;
        if self.store(checkpoint, result, true) {
            self.operators.completed(id);
            self.broadcast(Control::Checkpoint(CheckpointEvent::Completed(id)));
            self.rescale_if_due(id);
        }
    }

    /// Writes a checkpoint's metadata and applies retention. `periodic`: not the final
    /// checkpoint of a finished job (whose stats say little).
    pub(super) fn store(
        &mut self,
        checkpoint: Completed<Acknowledged>,
        result: &mut JobResult,
        periodic: bool,
    ) -> bool {
        let storage = self.storage.clone();
        if let Some(message) = self.too_large_to_restore_remotely(&checkpoint) {
            // Every later checkpoint would be as large, and a restart could not restore it:
            // the job fails now, saying so, rather than at its first restart.
            discard_incomplete_checkpoint(storage.as_ref(), &mut self.retained.borrow_mut(), checkpoint.id);
            tracing::error!(checkpoint = %checkpoint.id, %message, "checkpoint cannot be restored on this cluster");
            self.fail(JobError::Checkpoint { job: self.graph.job_name.clone(), message, source: None });
            return false;
        }
        // Counted at acknowledgement already; counted again (no effect) to check them all.
        let registered = checkpoint.task_states.iter().try_for_each(|ack| self.register_shared(checkpoint.id, ack));
        let written = match registered {
            Ok(()) => self.commit(&checkpoint, storage.as_ref()),
            Err(reason) => Err(CheckpointError::InvalidLocation {
                location: format!("checkpoint {}", checkpoint.id),
                message: reason,
            }),
        };
        match written {
            Ok(stats) => {
                tracing::info!(
                    checkpoint = %stats.id,
                    bytes = stats.bytes,
                    incremental_bytes = stats.incremental_bytes,
                    duration_ms = stats.duration_ms,
                    sync_ms = stats.sync_ms,
                    async_ms = stats.async_ms,
                    location = %stats.location,
                    "checkpoint completed"
                );
                self.note(|| {
                    format!(
                        "checkpoint {} completed at {} with {}",
                        stats.id,
                        trace_location(&stats.location),
                        stats.files.join(" ")
                    )
                });
                result.checkpoints_completed += 1;
                if periodic {
                    self.graph.services.board.checkpoint_completed(&stats, &task_bytes(&checkpoint));
                }
                if periodic || result.last_checkpoint.is_none() {
                    result.last_checkpoint = Some(stats.clone());
                }
                // The final checkpoint of a finished job is written the moment it is
                // triggered: its duration says nothing, so it stays out of the averages.
                if periodic {
                    result.checkpoint_history.push(stats);
                }
                let beyond = self.retained.borrow_mut().add(checkpoint.id);
                for old in beyond {
                    discard_checkpoint(storage.as_ref(), &mut self.retained.borrow_mut(), old);
                }
                true
            }
            Err(e) => {
                // Its metadata may have been written before the failure: treated as complete.
                discard_checkpoint(storage.as_ref(), &mut self.retained.borrow_mut(), checkpoint.id);
                self.operators.discard(checkpoint.id);
                tracing::warn!(checkpoint = %checkpoint.id, error = %eddy_types::chain(&e), "checkpoint could not be stored");
                self.board_checkpoint_failed(
                    checkpoint.id,
                    &format!("could not be stored: {e}", e = eddy_types::chain(&e)),
                );
                self.note(|| format!("checkpoint {} could not be stored", checkpoint.id));
                result.warnings.push(format!("checkpoint {} failed: {e}", checkpoint.id, e = eddy_types::chain(&e)));
                if let Err(too_many) = self.coordinator.record_failure() {
                    self.fail(JobError::CheckpointFailover {
                        job: self.graph.job_name.clone(),
                        message: format!(
                            "checkpoint {} could not be stored; {} failures in a row (tolerable: {})",
                            checkpoint.id, too_many.consecutive, too_many.tolerable
                        ),
                        source: Some(e),
                    });
                }
                false
            }
        }
    }

    /// On a cluster, a restore hands the checkpoint's metadata to every task executor in
    /// one control message: state kept in it (the JobManager's memory) must fit one.
    fn too_large_to_restore_remotely(&self, checkpoint: &Completed<Acknowledged>) -> Option<String> {
        self.hooks.as_ref()?;
        let inline: usize = checkpoint
            .task_states
            .iter()
            .map(|ack| match &ack.entry.handle {
                StateHandle::Inline { payload } => payload.len(),
                StateHandle::File { .. } => 0,
            })
            .sum::<usize>()
            + self.operators.state_bytes(checkpoint.id);
        let limit = eddy_rpc::frame::MESSAGE_BYTES_MAX - RESTORE_MESSAGE_HEADROOM_BYTES;
        (inline > limit).then(|| {
            format!(
                "checkpoint {} holds {inline} bytes of state in the JobManager's memory; a restore on a cluster \
                 carries it to the task executors in one control message of at most {limit} bytes; use a \
                 checkpoint directory",
                checkpoint.id
            )
        })
    }

    /// Completes a checkpoint or savepoint: its `_metadata`, from the tasks' handles.
    pub(super) fn commit(
        &self,
        checkpoint: &Completed<Acknowledged>,
        storage: &dyn CheckpointStorage,
    ) -> Result<CheckpointStats, CheckpointError> {
        let (triggered, timestamp_ms) =
            self.triggered_at.get(&checkpoint.id.0).copied().unwrap_or((self.clock.now_ms(), 0));
        let acks = &checkpoint.task_states;
        let metadata = CheckpointMetadata {
            checkpoint_id: checkpoint.id,
            kind: checkpoint.kind,
            job_name: self.graph.job_name.clone(),
            max_parallelism: self.graph.max_parallelism.get(),
            timestamp_ms,
            tasks: acks.iter().map(|a| a.entry.clone()).collect(),
            coordinators: Some(self.operators.states(checkpoint.id)),
        };
        let location = storage.commit(&metadata)?;
        let max = |f: fn(&TaskAcknowledgement) -> u64| acks.iter().map(f).max().unwrap_or(0);
        Ok(CheckpointStats {
            id: checkpoint.id,
            bytes: acks.iter().map(|a| a.bytes).sum(),
            incremental_bytes: acks.iter().map(|a| a.written_bytes).sum(),
            sync_ms: max(|a| a.sync_micros) / 1000,
            wait_ms: max(|a| a.wait_micros) / 1000,
            async_ms: max(|a| a.async_micros) / 1000,
            duration_ms: self.clock.now_ms().saturating_sub(triggered),
            location,
            files: acks
                .iter()
                .map(|a| match &a.entry.handle {
                    StateHandle::Inline { .. } => format!("{}/{} (inline)", a.entry.task, a.entry.subtask),
                    handle => handle.describe(),
                })
                .collect(),
        })
    }
}

/// Deletes one of the job's completed checkpoints and the shared files only it referenced.
pub(crate) fn discard_checkpoint(
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
    id: CheckpointId,
) {
    // The checkpoint (its metadata first) before its shared files: a crash in between
    // leaves unreferenced files, never a complete-looking checkpoint missing some.
    if let Err(e) = storage.discard(id, SnapshotKind::Checkpoint) {
        tracing::warn!(checkpoint = %id, error = %eddy_types::chain(&e), "cannot discard a checkpoint that is no longer retained; its \
            files stay");
        return;
    }
    delete_unreferenced(storage, retained.release(id));
}

/// Deletes what was written for a checkpoint that never completed (pending when it was
/// aborted, subsumed or the attempt ended, or not stored), and the shared files only it
/// referenced.
fn discard_incomplete_checkpoint(
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
    id: CheckpointId,
) {
    // Without metadata nothing of it can look complete, so its shared files go even when
    // its directory could not: a task still writing its part (its snapshot of a later
    // checkpoint was written first) can add a file while the directory is removed. That
    // task's acknowledgement comes late and removes the rest (`discard_late`), also when
    // it is drained as the attempt ends (`clean_up`); one that never arrives (its process
    // died) leaves the directory behind, without metadata: never taken for a checkpoint.
    if let Err(e) = storage.discard(id, SnapshotKind::Checkpoint) {
        tracing::info!(checkpoint = %id, error = %eddy_types::chain(&e), "cannot delete all of an incomplete checkpoint yet (a \
            task may still be writing its part); the rest goes with that task's late acknowledgement");
    }
    delete_unreferenced(storage, retained.release(id));
}

/// Deletes shared files that no checkpoint references any more.
fn delete_unreferenced(storage: &dyn CheckpointStorage, unused: Vec<String>) {
    for unused in unused {
        if let Err(e) = storage.delete_file(&unused) {
            tracing::warn!(file = %unused, error = %eddy_types::chain(&e), "cannot delete a shared file no checkpoint references");
        }
    }
}

/// Each task's state in a completed checkpoint, in task order.
fn task_bytes(checkpoint: &Completed<Acknowledged>) -> Vec<u64> {
    checkpoint.task_states.iter().map(|ack| ack.bytes).collect()
}

/// The answer to a stop whose savepoint completed after the attempt had failed (or was
/// cancelled): the savepoint exists, but nothing of it is committed and the job does not
/// stop (as Flink's `StopWithSavepointStoppingException`).
pub(crate) fn failed_stop(id: CheckpointId, location: &str, failure: &JobError) -> String {
    format!(
        "savepoint {id} was written to {location}, but the job did not stop with it: {failure}. Nothing of the \
         savepoint is committed, and the job goes on as that failure decides (a restart from its latest \
         checkpoint, or its end). The savepoint is consistent: a job started from it commits it",
        failure = eddy_types::chain(failure)
    )
}
