//! The task view of checkpoint storage: a subtask writes its own part of a checkpoint,
//! off its task thread (Flink's `AsyncCheckpointRunnable`), and acknowledges with a
//! [`TaskAcknowledgement`] handle. The coordinator never sees state bytes (except inline
//! handles of the JobManager memory storage, which are the state by design).
//!
//! Incremental snapshots reference the shared files of this subtask's last completed
//! checkpoint instead of uploading them again (Flink's RocksDB `uploadedSstFiles`): the
//! coordinator holds that checkpoint, so its files exist; it checks every such reference
//! when the acknowledgement arrives.

use super::native::{upload_native_files, KnownFiles};
use super::{directory_name, file_safe, CheckpointStorage};
use crate::acknowledgement::TaskAcknowledgement;
use crate::error::CheckpointError;
use crate::metadata::{encode_task_state, OperatorEntry, TaskStateEntry};
use crate::snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_types::Clock;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Known {
    /// The shared files of this subtask's last completed checkpoint.
    confirmed: KnownFiles,
    /// The shared files of checkpoints written but not completed yet.
    pending: BTreeMap<u64, KnownFiles>,
}

/// Where each savepoint of an attempt goes, as the coordinator decides while the job
/// runs (a savepoint the CLI asks for names its directory then): one registry per process,
/// shared by its task writers. The coordinator registers a savepoint's storage before it
/// triggers the savepoint; a writer in another process, which hears of it by message,
/// waits briefly for it.
#[derive(Clone, Default)]
pub struct SavepointTargets(Arc<(Mutex<TargetsById>, Condvar)>);

type TargetsById = HashMap<u64, Arc<dyn CheckpointStorage>>;

/// How long a writer waits for a savepoint's storage to be registered.
const SAVEPOINT_TARGET_WAIT: Duration = Duration::from_secs(10);
/// The same, when the job has a savepoint directory of its own to fall back to.
const LATE_TARGET_WAIT: Duration = Duration::from_secs(2);

impl SavepointTargets {
    /// Savepoint `id` goes to `storage`.
    pub fn set(&self, id: CheckpointId, storage: Arc<dyn CheckpointStorage>) {
        let (targets, registered) = &*self.0;
        let mut targets = targets.lock().unwrap_or_else(|p| p.into_inner());
        // Only the newest few matter: one savepoint runs at a time.
        targets.retain(|old, _| *old + 16 > id.0);
        targets.insert(id.0, storage);
        registered.notify_all();
    }

    /// Where savepoint `id` goes, waiting up to `wait` for it to be registered.
    pub fn get(&self, id: CheckpointId, wait: Duration) -> Option<Arc<dyn CheckpointStorage>> {
        let (targets, registered) = &*self.0;
        let deadline = std::time::Instant::now() + wait;
        let mut guard = targets.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(storage) = guard.get(&id.0) {
                return Some(storage.clone());
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            guard = registered.wait_timeout(guard, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// Writes one subtask's state for checkpoints and savepoints.
pub struct TaskStateWriter {
    storage: Arc<dyn CheckpointStorage>,
    /// Where savepoints go, when the job was started with a savepoint directory.
    savepoints: Option<Arc<dyn CheckpointStorage>>,
    /// Where savepoints decided while the job runs go.
    targets: SavepointTargets,
    clock: Arc<dyn Clock>,
    /// The chain, for `_metadata`.
    task: String,
    subtask: u32,
    /// The name of its state files in a checkpoint's directory.
    stem: String,
    known: Mutex<Known>,
}

impl TaskStateWriter {
    /// The writer of subtask `subtask` of the chain `task` whose head has uid `head_uid`.
    pub fn new(
        storage: Arc<dyn CheckpointStorage>,
        savepoints: Option<Arc<dyn CheckpointStorage>>,
        clock: Arc<dyn Clock>,
        task: String,
        subtask: u32,
        head_uid: &str,
    ) -> Self {
        let stem = format!("{}-{subtask}", file_safe(head_uid));
        let targets = SavepointTargets::default();
        Self { storage, savepoints, targets, clock, task, subtask, stem, known: Mutex::new(Known::default()) }
    }

    /// Savepoints decided while the job runs go where `targets` says.
    pub fn with_savepoint_targets(mut self, targets: SavepointTargets) -> Self {
        self.targets = targets;
        self
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The subtask restored `snapshot`: the shared files of native snapshots the job owns
    /// may be referenced by its next checkpoints.
    pub fn restored(&self, snapshot: &OperatorSnapshot) {
        let natives = snapshot.keyed.iter().flat_map(|k| &k.native).filter(|n| n.owned);
        let mut known = self.known();
        for file in natives.flat_map(|n| &n.files) {
            if let Some(name) = &file.shared_name {
                known.confirmed.insert(name.clone(), (file.location.clone(), file.bytes, file.crc32));
            }
        }
    }

    /// Checkpoint `id` completed: its shared files become the ones to reference.
    pub fn completed(&self, id: CheckpointId) {
        let mut known = self.known();
        if let Some(files) = known.pending.remove(&id.0) {
            known.confirmed = files;
        }
        known.pending.retain(|pending, _| *pending > id.0);
    }

    /// Checkpoint `id` will never complete.
    pub fn aborted(&self, id: CheckpointId) {
        self.known().pending.remove(&id.0);
    }

    /// The asynchronous part of checkpoint `id`: finishes what the backends deferred,
    /// uploads native files, serializes and writes the state.
    pub fn write(
        &self,
        id: CheckpointId,
        kind: SnapshotKind,
        mut snapshots: Vec<OperatorSnapshot>,
    ) -> Result<TaskAcknowledgement, CheckpointError> {
        let started_ms = self.clock.now_ms();
        let savepoint_storage;
        let storage = match kind {
            SnapshotKind::Savepoint => {
                // A target announced a little late still wins over the job's configured
                // directory: a savepoint the CLI asked for goes where it said.
                let announced = self.targets.get(id, Duration::ZERO).or_else(|| {
                    let wait = if self.savepoints.is_some() { LATE_TARGET_WAIT } else { SAVEPOINT_TARGET_WAIT };
                    self.targets.get(id, wait)
                });
                savepoint_storage =
                    announced.or_else(|| self.savepoints.clone()).ok_or_else(|| CheckpointError::InvalidLocation {
                        location: format!("savepoint {id}"),
                        message: "the job has no savepoint directory".into(),
                    })?;
                &savepoint_storage
            }
            SnapshotKind::Checkpoint => &self.storage,
        };
        for keyed in snapshots.iter_mut().filter_map(|s| s.keyed.as_mut()) {
            keyed.complete_deferred().map_err(|e| CheckpointError::Encode(eddy_types::Cause::new(e)))?;
        }
        // A savepoint is self-contained: it references nothing of the checkpoints.
        let known = match kind {
            SnapshotKind::Checkpoint => self.known().confirmed.clone(),
            SnapshotKind::Savepoint => KnownFiles::new(),
        };
        let dir = directory_name(id, kind);
        let (uploaded, shared_files) = upload_native_files(storage.as_ref(), &known, &dir, &dir, &mut snapshots)?;
        let written =
            encode_task_state(&snapshots).and_then(|framed| storage.write_task_state(id, kind, &self.stem, framed));
        let handle = match written {
            Ok(handle) => handle,
            Err(e) => {
                // Nobody will reference what this write uploaded: it goes now.
                for file in shared_files.iter().filter(|f| f.uploaded_now) {
                    let _ = storage.delete_file(&file.location);
                }
                return Err(e);
            }
        };
        if kind == SnapshotKind::Checkpoint {
            let files = shared_files.iter().map(|f| (f.name.clone(), (f.location.clone(), f.bytes, f.crc32))).collect();
            self.known().pending.insert(id.0, files);
        }
        let native_bytes: u64 =
            snapshots.iter().filter_map(|s| s.keyed.as_ref()).flat_map(|k| &k.native).map(|n| n.total_bytes()).sum();
        let sync_micros = snapshots.iter().map(|s| s.sync_micros).max().unwrap_or(0);
        let wait_micros = snapshots.iter().map(|s| s.wait_micros).max().unwrap_or(0);
        Ok(TaskAcknowledgement {
            kind,
            entry: TaskStateEntry {
                task: self.task.clone(),
                subtask: self.subtask,
                operators: snapshots
                    .iter()
                    .map(|s| OperatorEntry { uid: s.uid.clone(), name: s.name.clone(), parallelism: s.parallelism })
                    .collect(),
                handle: handle.clone(),
                // The task says so, if it had finished ([`TaskStateEntry::finished`]).
                finished: false,
            },
            shared_files,
            bytes: native_bytes + handle.bytes(),
            written_bytes: uploaded + handle.bytes(),
            sync_micros,
            wait_micros,
            async_micros: self.clock.now_ms().saturating_sub(started_ms) * 1000,
        })
    }
}
