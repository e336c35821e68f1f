//! Restoring: the checkpoint to start from, whether it fits the job, which subtask reads
//! which state files, and taking a checkpoint over in CLAIM mode.
//!
//! The coordinator reads only a checkpoint's metadata and checks its files one at a time
//! (so a damaged checkpoint is skipped before anything starts), then assigns task state
//! handles to the new subtasks: at the same parallelism each subtask its own; at another,
//! every old subtask's, from which the new subtask keeps its key groups and its share of
//! operator state ([`rescale`]). Each subtask reads its own assignment
//! ([`RestorePlan::operator_state`]); the coordinator never holds the state.

use crate::graph::StreamGraph;
use eddy_checkpoint::metadata::{CheckpointMetadata, TaskStateEntry};
use eddy_checkpoint::rescale::rescale;
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{directory_name, CheckpointStorage, OpenStorage};
use eddy_checkpoint::{CheckpointError, CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_types::MaxParallelism;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A completed checkpoint or savepoint to restore, its files checked.
#[derive(Clone)]
pub(crate) struct RestoreSource {
    pub(crate) storage: Arc<dyn CheckpointStorage>,
    pub(crate) location: String,
    pub(crate) metadata: CheckpointMetadata,
    /// The job owns its native files (its own checkpoint, or one it claimed): later
    /// checkpoints may reference them instead of uploading copies.
    pub(crate) owned: bool,
}

impl RestoreSource {
    pub(crate) fn id(&self) -> CheckpointId {
        self.metadata.checkpoint_id
    }

    /// Uids with state in it, sorted.
    fn uids(&self) -> Vec<&str> {
        let mut uids: Vec<&str> =
            self.metadata.tasks.iter().flat_map(|t| &t.operators).map(|o| o.uid.as_str()).collect();
        uids.sort();
        uids.dedup();
        uids
    }
}

/// The checkpoint or savepoint in directory `path`, its files checked.
pub(crate) fn open_restore_path(opener: &dyn OpenStorage, path: &Path) -> Result<RestoreSource, CheckpointError> {
    let (storage, location) = opener.open_checkpoint_dir(path)?;
    let metadata = storage.verify(&location)?;
    Ok(RestoreSource { storage, location, metadata, owned: false })
}

/// The newest completed checkpoint whose files check out; damaged ones are skipped with
/// a warning.
pub(crate) fn load_latest(
    storage: &Arc<dyn CheckpointStorage>,
    warnings: &mut Vec<String>,
) -> Result<Option<RestoreSource>, CheckpointError> {
    load_latest_of(storage, warnings, &|_| true)
}

/// [`load_latest`] among the checkpoints whose location `accept` accepts. Only a damaged
/// checkpoint is skipped: when the storage fails to answer, falling back to an older
/// checkpoint would replay what two-phase-commit sinks already committed, so the error
/// stops the search.
pub(crate) fn load_latest_of(
    storage: &Arc<dyn CheckpointStorage>,
    warnings: &mut Vec<String>,
    accept: &dyn Fn(&str) -> bool,
) -> Result<Option<RestoreSource>, CheckpointError> {
    let mut first_error = None;
    for location in storage.completed()?.into_iter().filter(|l| accept(l)) {
        match storage.verify(&location) {
            Ok(metadata) => {
                return Ok(Some(RestoreSource { storage: storage.clone(), location, metadata, owned: false }))
            }
            Err(e) if !e.is_damaged_checkpoint() => return Err(e),
            Err(e) => {
                warnings.push(format!("skipping checkpoint {location}: {e}"));
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// Checks that a checkpoint fits the job: same max parallelism, every state has an
/// operator (unless allowed).
pub(crate) fn check_restore(
    graph: &StreamGraph,
    source: &RestoreSource,
    allow_non_restored: bool,
) -> Result<(), String> {
    let where_ = &source.location;
    if source.metadata.max_parallelism != graph.max_parallelism.get() {
        return Err(format!(
            "cannot restore {where_}: it was written with max parallelism {}, the job has {}; max parallelism cannot change",
            source.metadata.max_parallelism,
            graph.max_parallelism.get()
        ));
    }
    for uid in source.uids() {
        if !allow_non_restored && !graph.nodes.iter().any(|n| n.effective_uid() == uid) {
            return Err(format!(
                "cannot restore {where_}: it has state for operator uid '{uid}', which this job does not have; set allow-non-restored-state to drop it"
            ));
        }
    }
    Ok(())
}

/// Which old task states each operator instance of the job reads.
pub(crate) struct RestorePlan {
    source: RestoreSource,
    /// (uid, new subtask) → indexes into the metadata's task entries.
    assignments: HashMap<(String, u32), Vec<usize>>,
}

/// Assigns the checkpoint's task state handles to the job's operator instances.
pub(crate) fn restore_plan(graph: &StreamGraph, source: &RestoreSource) -> RestorePlan {
    let mut assignments = HashMap::new();
    for node in &graph.nodes {
        let uid = node.effective_uid();
        let holding: Vec<(usize, &TaskStateEntry, u32)> = source
            .metadata
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.operators.iter().find(|o| o.uid == uid).map(|o| (i, t, o.parallelism)))
            .collect();
        let Some(&(_, _, old_parallelism)) = holding.first() else { continue };
        for subtask in 0..node.parallelism {
            let entries: Vec<usize> = if old_parallelism == node.parallelism {
                holding.iter().filter(|(_, t, _)| t.subtask == subtask).map(|(i, _, _)| *i).collect()
            } else {
                // Key groups move by range, and operator state may be redistributed from
                // every old subtask: each new one reads them all and keeps its part.
                holding.iter().map(|(i, _, _)| *i).collect()
            };
            assignments.insert((uid.clone(), subtask), entries);
        }
    }
    RestorePlan { source: source.clone(), assignments }
}

impl RestorePlan {
    /// Where it restores from.
    pub(crate) fn source(&self) -> &RestoreSource {
        &self.source
    }

    /// The checkpoint it restores.
    pub(crate) fn id(&self) -> CheckpointId {
        self.source.id()
    }

    /// Task side: reads the state operator `uid` restores as subtask `subtask` of
    /// `parallelism` (`None` when it had none). `cache` keeps the files this subtask read
    /// already: one file holds every operator of an old chain.
    pub(crate) fn operator_state(
        &self,
        uid: &str,
        subtask: u32,
        parallelism: u32,
        max_parallelism: MaxParallelism,
        cache: &mut HashMap<usize, Vec<OperatorSnapshot>>,
    ) -> Result<Option<OperatorSnapshot>, String> {
        let Some(entries) = self.assignments.get(&(uid.to_string(), subtask)) else { return Ok(None) };
        let mut old = Vec::new();
        for &index in entries {
            if let std::collections::hash_map::Entry::Vacant(slot) = cache.entry(index) {
                let entry = &self.source.metadata.tasks[index];
                let mut state = self
                    .source
                    .storage
                    .load_task_state(&self.source.location, entry)
                    .map_err(|e| format!("cannot restore from {}: {e}", self.source.location))?;
                if self.source.owned {
                    let natives = state.iter_mut().filter_map(|o| o.keyed.as_mut()).flat_map(|k| &mut k.native);
                    natives.for_each(|n| n.owned = true);
                }
                slot.insert(state);
            }
            old.extend(cache[&index].iter().filter(|o| o.uid == uid).cloned());
        }
        rescale(&old, parallelism, subtask, max_parallelism)
            .map_err(|e| format!("cannot restore operator uid '{uid}' from {}: {e}", self.source.location))
    }
}

/// The number of a completed checkpoint from its location (`…/chk-7`, `memory:7`).
pub(crate) fn checkpoint_number(location: &str) -> Option<u64> {
    location.rsplit(['-', ':']).next()?.parse().ok()
}

/// Takes over a restored checkpoint (CLAIM mode): it becomes one of the job's retained
/// checkpoints, its shared files referenced, and its files usable by later checkpoints.
pub(crate) fn claim(
    source: &mut RestoreSource,
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
) -> Result<(), String> {
    let id = source.id();
    let own = format!("{}/{}", storage.describe(), directory_name(id, SnapshotKind::Checkpoint));
    let canonical = |path: &str| std::path::Path::new(path).canonicalize().ok();
    let same_place = own == source.location
        || matches!((canonical(&own), canonical(&source.location)), (Some(a), Some(b)) if a == b);
    if source.metadata.kind != SnapshotKind::Checkpoint || !same_place {
        return Err(format!(
            "cannot claim {}: restore mode CLAIM takes over a checkpoint in the job's own checkpoint directory ({}); restore other checkpoints and savepoints in NO_CLAIM mode",
            source.location,
            storage.describe()
        ));
    }
    // The shared files it references are named in its tasks' states: read one task's at
    // a time, for their names only.
    for entry in &source.metadata.tasks {
        let state =
            source.storage.load_task_state(&source.location, entry).map_err(|e| format!("cannot claim: {e}"))?;
        let natives = state.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
        for file in natives.flat_map(|n| &n.files).filter(|f| f.shared_name.is_some()) {
            retained.reference(id, &file.location, file.bytes, file.crc32);
        }
    }
    retained.add(id);
    source.owned = true;
    Ok(())
}
