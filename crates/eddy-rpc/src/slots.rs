//! Slots given to an attempt, and which task executor runs each subtask: the one reading
//! of an allocation that the JobManager, the JobMaster and every task executor share.

use crate::ids::{ExecutorIndex, TaskManagerId};
use serde::{Deserialize, Serialize};

/// Slots of one TaskManager given to an attempt: its task executor holds slots
/// `first_slot..first_slot + slots` (slot i runs subtask i of every operator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorSlots {
    pub task_manager: TaskManagerId,
    pub first_slot: u32,
    pub slots: u32,
}

/// Which executor of an allocation runs each subtask index `0..parallelism`. The
/// allocation arrives over the network: it must give the executors contiguous slots from
/// 0 that cover `parallelism`, else it is refused.
pub fn slot_owners(executors: &[ExecutorSlots], parallelism: u32) -> Result<Vec<ExecutorIndex>, String> {
    let mut owners = Vec::new();
    let mut next_slot = 0u64;
    for (index, executor) in executors.iter().enumerate() {
        if u64::from(executor.first_slot) != next_slot || executor.slots == 0 {
            return Err(format!(
                "an allocation whose executor {index} holds slots from {} ({} slots) where slot {next_slot} was due",
                executor.first_slot, executor.slots
            ));
        }
        next_slot += u64::from(executor.slots);
        let missing = (parallelism as usize).saturating_sub(owners.len());
        let index = ExecutorIndex(u32::try_from(index).map_err(|_| "an allocation of too many executors".to_string())?);
        owners.extend(std::iter::repeat_n(index, (executor.slots as usize).min(missing)));
    }
    if owners.len() < parallelism as usize {
        return Err(format!("an allocation of {} slots for parallelism {parallelism}", owners.len()));
    }
    Ok(owners)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(ranges: &[(u32, u32)]) -> Vec<ExecutorSlots> {
        ranges
            .iter()
            .map(|&(first_slot, slots)| ExecutorSlots { task_manager: TaskManagerId(0), first_slot, slots })
            .collect()
    }

    fn indexes(of: &[u32]) -> Vec<ExecutorIndex> {
        of.iter().map(|&i| ExecutorIndex(i)).collect()
    }

    #[test]
    fn an_allocation_names_each_subtasks_executor_and_refuses_gaps_and_shortfalls() {
        assert_eq!(slot_owners(&slots(&[(0, 2), (2, 1)]), 3).unwrap(), indexes(&[0, 0, 1]));
        assert_eq!(slot_owners(&slots(&[(0, 3), (3, 1)]), 2).unwrap(), indexes(&[0, 0]), "more slots than needed");
        assert!(slot_owners(&slots(&[(0, 2), (3, 1)]), 3).is_err(), "a gap");
        assert!(slot_owners(&slots(&[(0, 2)]), 3).is_err(), "too few");
        assert!(slot_owners(&[], 1).is_err(), "none");
        assert!(slot_owners(&slots(&[(0, 0), (0, 2)]), 2).is_err(), "an executor of no slots");
    }
}
