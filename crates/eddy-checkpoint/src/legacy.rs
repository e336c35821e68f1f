//! Task state written in format 1, before snapshots recorded each state's declared type:
//! the same fields without the types, read as unknown (a restore then checks nothing),
//! so that checkpoints and savepoints of an earlier eddy still restore.

use crate::error::CheckpointError;
use crate::snapshot::OperatorSnapshot;
use eddy_state::keyed::{KeyedStateEntries, NativeSnapshot};
use eddy_state::operator::{BroadcastSnapshot, ListDistribution, ListSnapshot};
use eddy_state::{KeyedStateSnapshot, OperatorStateSnapshot};
use eddy_types::KeyGroupRange;
use serde::{Deserialize, Serialize};

/// [`OperatorSnapshot`] as format 1 wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OperatorSnapshotV1 {
    pub(crate) uid: String,
    pub(crate) name: String,
    pub(crate) subtask: u32,
    pub(crate) parallelism: u32,
    pub(crate) keyed: Option<KeyedStateSnapshotV1>,
    pub(crate) operator: OperatorStateSnapshotV1,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyedStateSnapshotV1 {
    pub(crate) key_group_range: Option<KeyGroupRange>,
    pub(crate) states: Vec<KeyedStateEntries>,
    pub(crate) native: Vec<NativeSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OperatorStateSnapshotV1 {
    pub(crate) lists: Vec<ListSnapshotV1>,
    pub(crate) broadcasts: Vec<BroadcastSnapshotV1>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListSnapshotV1 {
    pub(crate) name: String,
    pub(crate) distribution: ListDistribution,
    pub(crate) elements: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BroadcastSnapshotV1 {
    pub(crate) name: String,
    pub(crate) entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl From<OperatorSnapshotV1> for OperatorSnapshot {
    fn from(old: OperatorSnapshotV1) -> Self {
        let keyed = old.keyed.map(|k| KeyedStateSnapshot {
            key_group_range: k.key_group_range,
            states: k.states,
            native: k.native,
            ..KeyedStateSnapshot::default()
        });
        let lists = old.operator.lists.into_iter().map(|l| ListSnapshot {
            name: l.name,
            distribution: l.distribution,
            element_type: String::new(),
            elements: l.elements,
        });
        let broadcasts = old.operator.broadcasts.into_iter().map(|b| BroadcastSnapshot {
            name: b.name,
            entry_type: String::new(),
            entries: b.entries,
        });
        OperatorSnapshot {
            uid: old.uid,
            name: old.name,
            subtask: old.subtask,
            parallelism: old.parallelism,
            keyed,
            operator: OperatorStateSnapshot { lists: lists.collect(), broadcasts: broadcasts.collect() },
            ..OperatorSnapshot::default()
        }
    }
}

/// One task's state in format 1, `path` naming it in errors.
pub(crate) fn decode_task_state_v1(path: &str, payload: &[u8]) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
    let old: Vec<OperatorSnapshotV1> = crate::metadata::decode(path, payload)?;
    Ok(old.into_iter().map(OperatorSnapshot::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{decode_task_state, encode, frame, unframe_versioned};
    use eddy_state::{ListStateDescriptor, OperatorStateStore};

    #[test]
    fn task_state_of_format_1_reads_with_its_types_unknown_and_restores() {
        let offsets: Vec<Vec<u8>> = [7u64, 9].iter().map(|v| postcard::to_allocvec(v).unwrap()).collect();
        let old = vec![OperatorSnapshotV1 {
            uid: "source".into(),
            name: "source".into(),
            subtask: 1,
            parallelism: 2,
            keyed: Some(KeyedStateSnapshotV1 {
                key_group_range: Some(KeyGroupRange::new(0, 63)),
                states: vec![KeyedStateEntries { name: "count".into(), ttl: false, key_groups: vec![(3, vec![1, 2])] }],
                native: Vec::new(),
            }),
            operator: OperatorStateSnapshotV1 {
                lists: vec![ListSnapshotV1 {
                    name: "offsets".into(),
                    distribution: ListDistribution::EvenSplit,
                    elements: offsets,
                }],
                broadcasts: vec![BroadcastSnapshotV1 { name: "rules".into(), entries: vec![(vec![1], vec![2])] }],
            },
        }];
        let mut framed = frame(&encode(&old).unwrap());
        framed[8..12].copy_from_slice(&1u32.to_le_bytes());
        let (version, payload) = unframe_versioned("old.state", &framed).unwrap();
        assert_eq!(version, 1);
        let read = decode_task_state("old.state", version, payload).unwrap();
        assert_eq!(read.len(), 1);
        let snapshot = &read[0];
        assert_eq!((snapshot.uid.as_str(), snapshot.subtask, snapshot.parallelism), ("source", 1, 2));
        let keyed = snapshot.keyed.as_ref().unwrap();
        assert_eq!(keyed.states, old[0].keyed.as_ref().unwrap().states);
        assert!(keyed.state_types.is_empty(), "types unknown");
        assert_eq!(snapshot.operator.lists[0].element_type, "");
        assert_eq!(snapshot.operator.broadcasts[0].entries, vec![(vec![1], vec![2])]);
        // Read as format 2 instead, the same bytes are refused, not misread.
        assert!(decode_task_state("old.state", 2, payload).is_err());
        // An unknown type checks nothing: the list restores as declared.
        let mut store = OperatorStateStore::restored_from(snapshot.operator.clone());
        assert_eq!(store.list_state(&ListStateDescriptor::<u64>::new("offsets")).unwrap().get(), vec![7, 9]);
    }
}
