//! Restoring an operator at another parallelism: Flink's rescaling by key groups.
//!
//! Keyed state moves by key-group ranges: new subtask i takes, from every old subtask
//! whose range overlaps its own, the key groups of its range. Operator state is
//! redistributed as its kind says (even-split, union, broadcast; see
//! `eddy_state::operator::redistribute`). Max parallelism never changes, so key groups
//! mean the same before and after.

use crate::snapshot::OperatorSnapshot;
use eddy_state::keyed::KeyedStateSnapshot;
use eddy_state::operator::redistribute;
use eddy_state::StateError;
use eddy_types::{key_group_range_for_subtask, MaxParallelism};

/// The state subtask `subtask` of `parallelism` restores, from the snapshots of every old
/// subtask of one operator. `None` when the operator has no state.
pub fn rescale(
    old: &[OperatorSnapshot],
    parallelism: u32,
    subtask: u32,
    max_parallelism: MaxParallelism,
) -> Result<Option<OperatorSnapshot>, StateError> {
    let Some(first) = old.first() else { return Ok(None) };
    let mut old: Vec<&OperatorSnapshot> = old.iter().collect();
    old.sort_by_key(|o| o.subtask);
    if first.parallelism == parallelism {
        return Ok(old.into_iter().find(|o| o.subtask == subtask).cloned());
    }
    let range = key_group_range_for_subtask(max_parallelism, parallelism, subtask);
    let keyed = if old.iter().any(|o| o.keyed.is_some()) {
        let mut keyed = KeyedStateSnapshot { key_group_range: Some(range), ..KeyedStateSnapshot::default() };
        for snapshot in old.iter().filter_map(|o| o.keyed.as_ref()) {
            keyed.add_state_types(&snapshot.state_types);
            for state in &snapshot.states {
                keyed.add_key_groups(state, range);
            }
            // Native files are read by the backend, which skips key groups outside its
            // range: hand over every snapshot that overlaps it.
            let overlapping = snapshot.native.iter().filter(|n| !n.key_group_range.intersection(&range).is_empty());
            keyed.native.extend(overlapping.cloned());
        }
        Some(keyed)
    } else {
        None
    };
    let operator_states: Vec<_> = old.iter().map(|o| o.operator.clone()).collect();
    let operator = redistribute(&operator_states, parallelism as usize)?.swap_remove(subtask as usize);
    Ok(Some(OperatorSnapshot {
        uid: first.uid.clone(),
        name: first.name.clone(),
        subtask,
        parallelism,
        keyed,
        operator,
        sync_micros: 0,
        wait_micros: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_state::keyed::KeyedStateEntries;
    use eddy_types::KeyGroup;

    /// Old subtask i of p holds key groups of its range, each with its own number as data.
    fn old_snapshots(p: u32, max: MaxParallelism) -> Vec<OperatorSnapshot> {
        (0..p)
            .map(|i| {
                let range = key_group_range_for_subtask(max, p, i);
                let key_groups = range.iter().map(|kg| (kg.0, vec![kg.0 as u8])).collect();
                OperatorSnapshot {
                    uid: "op".into(),
                    name: "op".into(),
                    subtask: i,
                    parallelism: p,
                    keyed: Some(KeyedStateSnapshot {
                        key_group_range: Some(range),
                        states: vec![KeyedStateEntries { name: "s".into(), ttl: false, key_groups }],
                        ..KeyedStateSnapshot::default()
                    }),
                    operator: Default::default(),
                    sync_micros: 0,
                    wait_micros: 0,
                }
            })
            .collect()
    }

    #[test]
    fn every_key_group_lands_in_exactly_one_new_subtask() {
        let max = MaxParallelism::new(16).unwrap();
        for p in 1..=5 {
            let old = old_snapshots(p, max);
            for q in 1..=5 {
                let mut seen = Vec::new();
                for j in 0..q {
                    let new = rescale(&old, q, j, max).unwrap().unwrap();
                    let range = key_group_range_for_subtask(max, q, j);
                    for (kg, data) in &new.keyed.unwrap().states[0].key_groups {
                        assert!(range.contains(KeyGroup(*kg)), "p={p} q={q} j={j} kg={kg}");
                        assert_eq!(data, &vec![*kg as u8]);
                        seen.push(*kg);
                    }
                }
                seen.sort_unstable();
                assert_eq!(seen, (0..16).collect::<Vec<_>>(), "p={p} q={q}");
            }
        }
    }
}
