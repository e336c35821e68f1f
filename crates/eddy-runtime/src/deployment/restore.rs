//! The task side of a restore: which old task states each new operator instance reads.
//!
//! The JobMaster reads only a checkpoint's metadata and checks its files
//! (in `eddy-jobmaster`), then the handles are assigned to the new subtasks: at
//! the same parallelism each subtask its own; at another, every old subtask's, from which
//! the new subtask keeps its key groups and its share of operator state ([`rescale`]).
//! Each subtask reads its own assignment ([`RestorePlan::operator_state`]); the JobMaster
//! never holds the state.

use crate::graph::StreamGraph;
use eddy_checkpoint::metadata::{CheckpointMetadata, TaskStateEntry};
use eddy_checkpoint::rescale::rescale;
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_checkpoint::{CheckpointId, OperatorSnapshot};
use eddy_types::MaxParallelism;
use std::collections::HashMap;
use std::sync::Arc;

/// A completed checkpoint or savepoint to restore, its files checked.
#[derive(Clone)]
pub struct RestoreSource {
    pub storage: Arc<dyn CheckpointStorage>,
    pub location: String,
    pub metadata: CheckpointMetadata,
    /// The job owns its native files (its own checkpoint, or one it claimed): later
    /// checkpoints may reference them instead of uploading copies.
    pub owned: bool,
}

impl RestoreSource {
    pub fn id(&self) -> CheckpointId {
        self.metadata.checkpoint_id
    }

    /// Uids with state in it, sorted.
    pub fn uids(&self) -> Vec<&str> {
        let mut uids: Vec<&str> =
            self.metadata.tasks.iter().flat_map(|t| &t.operators).map(|o| o.uid.as_str()).collect();
        uids.sort();
        uids.dedup();
        uids
    }
}

/// Which old task states each operator instance of the job reads.
pub struct RestorePlan {
    source: RestoreSource,
    /// (uid, new subtask) → indexes into the metadata's task entries.
    assignments: HashMap<(String, u32), Vec<usize>>,
}

/// Assigns the checkpoint's task state handles to the job's operator instances.
pub fn restore_plan(graph: &StreamGraph, source: &RestoreSource) -> RestorePlan {
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
    pub fn source(&self) -> &RestoreSource {
        &self.source
    }

    /// The checkpoint it restores.
    pub fn id(&self) -> CheckpointId {
        self.source.id()
    }

    /// Task side: reads the state operator `uid` restores as subtask `subtask` of
    /// `parallelism` (`None` when it had none). `cache` keeps the files this subtask read
    /// already: one file holds every operator of an old chain.
    pub fn operator_state(
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
                let mut state = self.source.storage.load_task_state(&self.source.location, entry).map_err(|e| {
                    format!("cannot restore from {}: {e}", self.source.location, e = eddy_types::chain(&e))
                })?;
                if self.source.owned {
                    let natives = state.iter_mut().filter_map(|o| o.keyed.as_mut()).flat_map(|k| &mut k.native);
                    natives.for_each(|n| n.owned = true);
                }
                slot.insert(state);
            }
            old.extend(cache[&index].iter().filter(|o| o.uid == uid).cloned());
        }
        rescale(&old, parallelism, subtask, max_parallelism).map_err(|e| {
            format!("cannot restore operator uid '{uid}' from {}: {e}", self.source.location, e = eddy_types::chain(&e))
        })
    }
}
