//! No panic from any byte of a checkpoint on disk: a checkpoint whose `_metadata` or state
//! files are mutated, cut short or replaced by random bytes is read through every path a
//! restore and `eddy checkpoint inspect` take, and each gives a result or an error that
//! names the file, never a panic.

use eddy_checkpoint::metadata::{encode_task_state, CheckpointMetadata, OperatorEntry, TaskStateEntry};
use eddy_checkpoint::storage::{inspect_checkpoint_dir, load_checkpoint_dir, CheckpointStorage, DirectoryStorage};
use eddy_checkpoint::{CheckpointId, OperatorSnapshot, SnapshotKind};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn fresh_checkpoint(dir: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    let storage = DirectoryStorage::local(dir).unwrap();
    let id = CheckpointId(1);
    let mut snapshot =
        OperatorSnapshot { uid: "source".into(), name: "source".into(), parallelism: 1, ..Default::default() };
    snapshot.operator.lists.push(eddy_state::operator::ListSnapshot {
        name: "offsets".into(),
        distribution: eddy_state::operator::ListDistribution::EvenSplit,
        element_type: "u8".into(),
        elements: vec![vec![1, 2, 3], vec![4]],
    });
    let handle = storage
        .write_task_state(id, SnapshotKind::Checkpoint, "source-0", encode_task_state(&[snapshot]).unwrap())
        .unwrap();
    let metadata = CheckpointMetadata {
        checkpoint_id: id,
        kind: SnapshotKind::Checkpoint,
        job_name: "mutations".into(),
        max_parallelism: 128,
        timestamp_ms: 1,
        tasks: vec![TaskStateEntry {
            task: "source".into(),
            subtask: 0,
            operators: vec![OperatorEntry { uid: "source".into(), name: "source".into(), parallelism: 1 }],
            handle,
            finished: false,
        }],
        coordinators: Some(Vec::new()),
    };
    storage.commit(&metadata).unwrap();
    dir.join("chk-1")
}

/// A mutation of a file's bytes: flip bytes, cut it, grow it, or replace it.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(Vec<(usize, u8)>),
    Truncate(usize),
    Append(Vec<u8>),
    Replace(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        proptest::collection::vec((any::<usize>(), 1..=255u8), 1..4).prop_map(Mutation::Flip),
        any::<usize>().prop_map(Mutation::Truncate),
        proptest::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Append),
        proptest::collection::vec(any::<u8>(), 0..256).prop_map(Mutation::Replace),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    match mutation {
        Mutation::Flip(flips) if !bytes.is_empty() => {
            for (at, xor) in flips {
                let at = at % bytes.len();
                bytes[at] ^= xor;
            }
        }
        Mutation::Flip(_) => {}
        Mutation::Truncate(at) => bytes.truncate(at % (bytes.len() + 1)),
        Mutation::Append(more) => bytes.extend_from_slice(more),
        Mutation::Replace(new) => *bytes = new.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_checkpoint_reads_back_or_fails_naming_its_file(target in 0..2usize, change in mutation()) {
        let dir = std::env::temp_dir().join(format!("eddy-mutated-{}", std::process::id()));
        let checkpoint = fresh_checkpoint(&dir);
        let file = checkpoint.join(["_metadata", "source-0.state"][target]);
        let mut bytes = std::fs::read(&file).unwrap();
        let original = bytes.clone();
        apply(&mut bytes, &change);
        std::fs::write(&file, &bytes).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();

        let loaded = load_checkpoint_dir(&checkpoint);
        let storage = DirectoryStorage::local(&dir).unwrap();
        let location = storage.completed().unwrap().into_iter().next();
        let verified = location.as_ref().map(|l| storage.verify(l));
        let inspected = inspect_checkpoint_dir(&checkpoint);
        if bytes == original {
            prop_assert!(loaded.is_ok());
        } else {
            // A changed file is never taken for the intact checkpoint: framing and
            // checksums catch every change.
            let error = loaded.unwrap_err().to_string();
            prop_assert!(error.contains(&name), "the error names {}: {}", name, error);
            if let Some(verified) = verified {
                prop_assert!(verified.is_err());
            }
            if let Ok((_, tasks)) = inspected {
                prop_assert!(tasks.iter().all(|t| t.state.is_err()));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
