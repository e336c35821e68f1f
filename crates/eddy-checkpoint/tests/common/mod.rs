//! What the storage tests share (here and in `eddy-checkpoint-object`'s): a temporary
//! directory, an operator's snapshot, and a two-subtask checkpoint written into a storage.
#![allow(dead_code)]

use eddy_checkpoint::metadata::{encode_task_state, CheckpointMetadata, OperatorEntry, TaskStateEntry};
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_checkpoint::{CheckpointId, OperatorSnapshot, SnapshotKind};

pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-storage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub fn snapshot(uid: &str, subtask: u32, marker: u8) -> OperatorSnapshot {
    let mut s = OperatorSnapshot { uid: uid.into(), name: uid.into(), subtask, parallelism: 2, ..Default::default() };
    s.operator.lists.push(eddy_state::operator::ListSnapshot {
        name: "offsets".into(),
        distribution: eddy_state::operator::ListDistribution::EvenSplit,
        element_type: "u8".into(),
        elements: vec![vec![marker]],
    });
    s
}

pub fn write_checkpoint(storage: &dyn CheckpointStorage, id: u64, marker: u8) -> String {
    let id = CheckpointId(id);
    let mut tasks = Vec::new();
    for subtask in 0..2 {
        let state = vec![snapshot("source", subtask, marker)];
        let handle = storage
            .write_task_state(
                id,
                SnapshotKind::Checkpoint,
                &format!("source-{subtask}"),
                encode_task_state(&state).unwrap(),
            )
            .unwrap();
        tasks.push(TaskStateEntry {
            task: "source".into(),
            subtask,
            operators: vec![OperatorEntry { uid: "source".into(), name: "source".into(), parallelism: 2 }],
            handle,
            finished: false,
        });
    }
    let metadata = CheckpointMetadata {
        checkpoint_id: id,
        kind: SnapshotKind::Checkpoint,
        job_name: "job".into(),
        max_parallelism: 128,
        timestamp_ms: 1,
        tasks,
        coordinators: Some(Vec::new()),
    };
    storage.commit(&metadata).unwrap()
}
