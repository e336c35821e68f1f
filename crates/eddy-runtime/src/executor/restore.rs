//! Restoring: the checkpoint to start from, whether it fits the job, which subtask
//! restores what (at another parallelism: redistributed by key groups and operator-state
//! kind), and taking a checkpoint over in CLAIM mode.

use crate::graph::StreamGraph;
use eddy_checkpoint::rescale::rescale;
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{directory_name, CheckpointStorage, CompletedCheckpoint};
use eddy_checkpoint::{CheckpointError, OperatorSnapshot, SnapshotKind};
use std::collections::HashMap;

/// The newest completed checkpoint that loads; corrupt ones are skipped with a warning.
pub(super) fn load_latest(
    storage: &dyn CheckpointStorage,
    warnings: &mut Vec<String>,
) -> Result<Option<CompletedCheckpoint>, CheckpointError> {
    load_latest_of(storage, warnings, &|_| true)
}

/// [`load_latest`] among the checkpoints whose location `accept` accepts. Only a damaged
/// checkpoint is skipped: when the storage fails to answer, falling back to an older
/// checkpoint would replay what two-phase-commit sinks already committed, so the error
/// stops the search.
pub(super) fn load_latest_of(
    storage: &dyn CheckpointStorage,
    warnings: &mut Vec<String>,
    accept: &dyn Fn(&str) -> bool,
) -> Result<Option<CompletedCheckpoint>, CheckpointError> {
    let mut first_error = None;
    for location in storage.completed()?.into_iter().filter(|l| accept(l)) {
        match storage.load(&location) {
            Ok(checkpoint) => return Ok(Some(checkpoint)),
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
/// operator (unless allowed), same parallelism per operator.
pub(super) fn check_restore(
    graph: &StreamGraph,
    checkpoint: &CompletedCheckpoint,
    allow_non_restored: bool,
) -> Result<(), String> {
    let where_ = &checkpoint.location;
    if checkpoint.metadata.max_parallelism != graph.max_parallelism.get() {
        return Err(format!(
            "cannot restore {where_}: it was written with max parallelism {}, the job has {}; max parallelism cannot change",
            checkpoint.metadata.max_parallelism,
            graph.max_parallelism.get()
        ));
    }
    for uid in checkpoint.uids() {
        match graph.nodes.iter().find(|n| n.effective_uid() == uid) {
            None if allow_non_restored => {}
            None => {
                return Err(format!(
                    "cannot restore {where_}: it has state for operator uid '{uid}', which this job does not have; set allow-non-restored-state to drop it"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The state every operator instance of the job restores: taken as it is at the same
/// parallelism, redistributed by key groups and operator-state kind at another.
pub(super) type RestorePlan = HashMap<(String, u32), OperatorSnapshot>;

pub(super) fn restore_plan(graph: &StreamGraph, checkpoint: &CompletedCheckpoint) -> Result<RestorePlan, String> {
    let mut plan = HashMap::new();
    for node in &graph.nodes {
        let uid = node.effective_uid();
        let old: Vec<OperatorSnapshot> = checkpoint.operators.iter().filter(|o| o.uid == uid).cloned().collect();
        for subtask in 0..node.parallelism {
            let state = rescale(&old, node.parallelism, subtask, graph.max_parallelism)
                .map_err(|e| format!("cannot restore operator '{}' from {}: {e}", node.name, checkpoint.location))?;
            if let Some(state) = state {
                plan.insert((uid.clone(), subtask), state);
            }
        }
    }
    Ok(plan)
}

/// The number of a completed checkpoint from its location (`…/chk-7`, `memory:7`).
pub(super) fn checkpoint_number(location: &str) -> Option<u64> {
    location.rsplit(['-', ':']).next()?.parse().ok()
}

/// Takes over a restored checkpoint (CLAIM mode): it becomes one of the job's retained
/// checkpoints, its shared files referenced, and its files usable by later checkpoints.
pub(super) fn claim(
    checkpoint: &mut CompletedCheckpoint,
    storage: &dyn CheckpointStorage,
    retained: &mut RetainedCheckpoints,
) -> Result<(), String> {
    let id = checkpoint.metadata.checkpoint_id;
    let own = format!("{}/{}", storage.describe(), directory_name(id, SnapshotKind::Checkpoint));
    let canonical = |path: &str| std::path::Path::new(path).canonicalize().ok();
    let same_place = own == checkpoint.location
        || matches!((canonical(&own), canonical(&checkpoint.location)), (Some(a), Some(b)) if a == b);
    if checkpoint.metadata.kind != SnapshotKind::Checkpoint || !same_place {
        return Err(format!(
            "cannot claim {}: restore mode CLAIM takes over a checkpoint in the job's own checkpoint directory ({}); restore other checkpoints and savepoints in NO_CLAIM mode",
            checkpoint.location,
            storage.describe()
        ));
    }
    let natives = checkpoint.operators.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
    for file in natives.flat_map(|n| &n.files).filter(|f| f.shared_name.is_some()) {
        retained.reference(id, &file.location, file.bytes, file.crc32);
    }
    retained.add(id);
    mark_native_owned(checkpoint);
    Ok(())
}

/// Lets the restored backends reference the checkpoint's native files in later
/// checkpoints (the job owns them).
pub(super) fn mark_native_owned(checkpoint: &mut CompletedCheckpoint) {
    let keyed = checkpoint.operators.iter_mut().filter_map(|o| o.keyed.as_mut());
    keyed.flat_map(|k| &mut k.native).for_each(|n| n.owned = true);
}
