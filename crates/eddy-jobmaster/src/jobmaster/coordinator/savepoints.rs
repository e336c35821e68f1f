//! Savepoints: by the job's configuration (`--savepoint-dir`, stop-with-savepoint) or
//! asked for by the CLI or a REST API, written where the request says, announced to task executors
//! before the trigger, and answered when they complete.

use super::AttemptCoordinator;
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_checkpoint::{CheckpointId, SnapshotKind};
use eddy_rpc::messages::JobCommand;
use eddy_runtime::error::JobError;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A savepoint to take: where it goes, whether the job stops after it, and the CLI
/// request waiting for it.
pub(crate) struct SavepointOrder {
    pub(super) storage: Arc<dyn CheckpointStorage>,
    pub(super) dir: String,
    pub(super) stop: bool,
    pub(super) request: Option<u64>,
}

/// Tells every task executor where a savepoint goes.
pub(crate) type AnnounceSavepoint<'a> = Box<dyn Fn(CheckpointId, &str) + 'a>;

/// What an attempt's coordinator tells beyond its tasks' mailboxes: on a cluster, the
/// task executors and the JobManager; locally, the job's REST API.
/// What a command got: its answer, or a line of progress with the answer to follow.
pub(crate) enum CommandOutcome {
    Answer(Result<String, String>),
    Pending(String),
}

pub(crate) struct RemoteHooks<'a> {
    /// Savepoint `id` goes to directory `dir`: told to every task executor before the
    /// savepoint is triggered.
    pub(crate) announce_savepoint: AnnounceSavepoint<'a>,
    /// The answer to a CLI request.
    pub(crate) reply: Box<dyn Fn(u64, Result<String, String>) + 'a>,
    /// The slots the job could hold on the cluster now (a rescale cannot ask for more).
    pub(crate) slots_available: Box<dyn Fn() -> u32 + 'a>,
    /// The job's view, about once a second, for the JobManager to serve.
    pub(crate) publish_view: Box<dyn Fn(eddy_rpc::view::JobView) + 'a>,
}

impl AttemptCoordinator<'_> {
    /// A savepoint into `dir` now, asked for by the CLI (request `request`); the job
    /// stops after it if `stop`. The answer comes through the reply hook when it completed
    /// or failed.
    pub(crate) fn savepoint_now(&mut self, dir: &str, stop: bool, request: u64) -> Result<String, String> {
        if self.savepoint_pending.is_some() {
            return Err("a savepoint is being taken already; try again when it completed".into());
        }
        if self.rescale.is_some() || self.rescaling.is_some() {
            return Err("the job is being rescaled; try again when it runs at its new parallelism".into());
        }
        if self.cancel.load(Ordering::SeqCst) || self.stopping || self.failure.is_some() {
            return Err("the job is stopping or restarting; try again".into());
        }
        if self.coordinator.all_finished() {
            return Err("every task finished its input: the job is ending, no savepoint can be taken".into());
        }
        let storage = self
            .graph
            .services
            .storage_opener
            .open(dir)
            .map_err(|e| format!("cannot open the savepoint directory: {e}", e = eddy_types::chain(&e)))?;
        self.savepoint_order = Some(SavepointOrder { storage, dir: dir.to_string(), stop, request: Some(request) });
        let now = self.now_ms();
        self.trigger(SnapshotKind::Savepoint, now);
        let id = self.savepoint_pending.as_ref().map_or(0, |(id, _)| id.0);
        Ok(format!("savepoint {id} triggered{}", if stop { "; the job stops once it completed" } else { "" }))
    }

    /// A user's command (from the CLI through the JobManager, or from a REST API):
    /// answered now, or, for a savepoint, with a progress line now and the answer
    /// through the reply hook once it completed.
    pub(crate) fn command(
        &mut self,
        request: u64,
        command: JobCommand,
        status: &dyn Fn(&Self) -> String,
    ) -> CommandOutcome {
        let stop = matches!(command, JobCommand::Stop { .. });
        match command {
            JobCommand::Cancel => {
                tracing::info!(job = %self.graph.job_name, "cancel requested");
                // A cancel wins over a rescale under way: the attempt ends cancelled.
                if self.rescaling.take().is_some() {
                    self.stopping = false;
                }
                // The user's word ends the attempt cancelled even when a task failed
                // just before: the restart that failure asked for is not wanted now.
                self.cancelled_by_user = true;
                self.failure = None;
                self.fail(JobError::Cancelled { job: self.graph.job_name.clone() });
                CommandOutcome::Answer(Ok("cancelling".to_string()))
            }
            JobCommand::Status => CommandOutcome::Answer(Ok(status(self))),
            JobCommand::Savepoint { dir } | JobCommand::Stop { savepoint_dir: dir } => {
                match self.savepoint_now(&dir, stop, request) {
                    Ok(progress) => CommandOutcome::Pending(progress),
                    Err(why) => CommandOutcome::Answer(Err(why)),
                }
            }
            JobCommand::Rescale { parallelism } => match self.rescale_now(parallelism, Some(request)) {
                Ok(progress) => CommandOutcome::Pending(progress),
                Err(why) => CommandOutcome::Answer(Err(why)),
            },
        }
    }

    /// Where savepoint `id` is written.
    pub(super) fn savepoint_storage_of(&self, id: CheckpointId) -> Option<Arc<dyn CheckpointStorage>> {
        match &self.savepoint_pending {
            Some((pending, order)) if *pending == id => Some(order.storage.clone()),
            _ => self.savepoint_storage.clone(),
        }
    }
}
