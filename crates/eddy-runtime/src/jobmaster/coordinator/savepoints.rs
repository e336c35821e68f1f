//! Savepoints: by the job's configuration (`--savepoint-dir`, stop-with-savepoint) or
//! asked for by the CLI, written where the request says, announced to task executors
//! before the trigger, and answered when they complete.

use super::AttemptCoordinator;
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_checkpoint::{CheckpointId, SnapshotKind};
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

/// What a cluster attempt's coordinator tells beyond its tasks' mailboxes.
pub(crate) struct RemoteHooks<'a> {
    /// Savepoint `id` goes to directory `dir`: told to every task executor before the
    /// savepoint is triggered.
    pub(crate) announce_savepoint: AnnounceSavepoint<'a>,
    /// The answer to a CLI request.
    pub(crate) reply: Box<dyn Fn(u64, Result<String, String>) + 'a>,
}

impl AttemptCoordinator<'_> {
    /// A savepoint into `dir` now, asked for by the CLI (request `request`); the job
    /// stops after it if `stop`. The answer comes through the reply hook when it completed
    /// or failed.
    pub(crate) fn savepoint_now(&mut self, dir: &str, stop: bool, request: u64) -> Result<String, String> {
        if self.savepoint_pending.is_some() {
            return Err("a savepoint is being taken already; try again when it completed".into());
        }
        if self.cancel.load(Ordering::SeqCst) || self.stopping || self.failure.is_some() {
            return Err("the job is stopping or restarting; try again".into());
        }
        if self.coordinator.all_finished() {
            return Err("every task finished its input: the job is ending, no savepoint can be taken".into());
        }
        let storage = self
            .graph
            .config
            .storage_opener
            .open(dir)
            .map_err(|e| format!("cannot open the savepoint directory: {e}"))?;
        self.savepoint_order = Some(SavepointOrder { storage, dir: dir.to_string(), stop, request: Some(request) });
        let now = self.now_ms();
        self.trigger(SnapshotKind::Savepoint, now);
        let id = self.savepoint_pending.as_ref().map_or(0, |(id, _)| id.0);
        Ok(format!("savepoint {id} triggered{}", if stop { "; the job stops once it completed" } else { "" }))
    }

    /// Where savepoint `id` is written.
    pub(super) fn savepoint_storage_of(&self, id: CheckpointId) -> Option<Arc<dyn CheckpointStorage>> {
        match &self.savepoint_pending {
            Some((pending, order)) if *pending == id => Some(order.storage.clone()),
            _ => self.savepoint_storage.clone(),
        }
    }
}
