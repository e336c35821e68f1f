//! Restoring, the JobMaster's side: the checkpoint to start from (its files checked, so a
//! damaged checkpoint is skipped before anything starts), whether it fits the job, and
//! taking a checkpoint over in CLAIM mode. Which subtask reads which state files is the
//! task side's ([`eddy_runtime::deployment::restore`]).

use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::{directory_name, CheckpointStorage, OpenStorage};
use eddy_checkpoint::{CheckpointError, SnapshotKind};
use eddy_runtime::deployment::restore::RestoreSource;
use eddy_runtime::error::JobError;
use eddy_runtime::graph::{RestoreFrom, StreamGraph};
use std::path::Path;
use std::sync::Arc;

/// The checkpoint or savepoint in directory `path`, its files checked.
pub(crate) fn open_restore_path(opener: &dyn OpenStorage, path: &Path) -> Result<RestoreSource, CheckpointError> {
    let (storage, location) = opener.open_checkpoint_dir(path)?;
    let metadata = storage.verify(&location)?;
    Ok(RestoreSource { storage, location, metadata, owned: false })
}

/// Whether the checkpoint or savepoint a job is to start from (`RestoreFrom::Path`) is
/// one and fits the job, from its metadata alone: checked before the job is submitted,
/// so that a job that cannot start never enters the cluster's job list.
pub(crate) fn check_before_submit(graph: &StreamGraph) -> Result<(), JobError> {
    let Some(RestoreFrom::Path(path)) = &graph.config.restore else { return Ok(()) };
    let job = &graph.job_name;
    let (storage, location) = graph.services.storage_opener.open_checkpoint_dir(path).map_err(|source| {
        JobError::Checkpoint { job: job.clone(), message: "cannot start".into(), source: Some(source) }
    })?;
    let metadata = storage.metadata(&location).map_err(|source| JobError::Checkpoint {
        job: job.clone(),
        message: "cannot start".into(),
        source: Some(source),
    })?;
    let source = RestoreSource { storage, location, metadata, owned: false };
    check_restore(graph, &source, graph.config.allow_non_restored_state).map_err(|message| JobError::Checkpoint {
        job: job.clone(),
        message,
        source: None,
    })
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
                warnings.push(format!("skipping checkpoint {location}: {e}", e = eddy_types::chain(&e)));
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
            "cannot restore {where_}: it was written with max parallelism {}, the job has {}; max parallelism cannot \
                change",
            source.metadata.max_parallelism,
            graph.max_parallelism.get()
        ));
    }
    for uid in source.uids() {
        if !allow_non_restored && !graph.nodes.iter().any(|n| n.effective_uid() == uid) {
            return Err(format!(
                "cannot restore {where_}: it has state for operator uid '{uid}', which this job does not have; set \
                    allow-non-restored-state to drop it (the flag -n/--allow-non-restored-state, or \
                    Env::set_allow_non_restored_state(true)), or give the operator that had it its uid again"
            ));
        }
    }
    Ok(())
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
            "cannot claim {}: restore mode CLAIM takes over a checkpoint in the job's own checkpoint directory ({}); \
                restore other checkpoints and savepoints in NO_CLAIM mode",
            source.location,
            storage.describe()
        ));
    }
    // The shared files it references are named in its tasks' states: read one task's at
    // a time, for their names only.
    for entry in &source.metadata.tasks {
        let state = source
            .storage
            .load_task_state(&source.location, entry)
            .map_err(|e| format!("cannot claim: {e}", e = eddy_types::chain(&e)))?;
        let natives = state.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
        for file in natives.flat_map(|n| &n.files).filter(|f| f.shared_name.is_some()) {
            retained.reference(id, &file.location, file.bytes, file.crc32);
        }
    }
    retained.add(id);
    source.owned = true;
    Ok(())
}
