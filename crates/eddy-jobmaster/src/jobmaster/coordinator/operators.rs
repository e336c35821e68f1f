//! The operator coordinators of one attempt ([`eddy_runtime::coordination`]): made from the graph
//! when the attempt starts, restored from the checkpoint it restores, fed their subtasks'
//! events, polled every tick, and snapshotted when a checkpoint is triggered, before the
//! trigger goes out. Their events to subtasks go through the subtasks' mailboxes, so in
//! order with the triggers.

use eddy_checkpoint::metadata::{CheckpointMetadata, CoordinatorStateEntry};
use eddy_checkpoint::CheckpointId;
use eddy_runtime::coordination::{CoordinatorContext, CoordinatorError, CoordinatorRestore, OperatorCoordinator};
use eddy_runtime::graph::StreamGraph;
use eddy_runtime::task::{Control, Mailboxes};
use eddy_types::{NodeId, SubtaskIndex};
use std::collections::BTreeMap;

/// A coordinator that failed: its operator's name and why.
pub(crate) struct CoordinatorFailure {
    pub(crate) operator: String,
    pub(crate) error: CoordinatorError,
}

/// One operator's coordinator in this attempt.
struct Running {
    uid: String,
    name: String,
    parallelism: u32,
    coordinator: Box<dyn OperatorCoordinator>,
    /// Per subtask of the operator: its task index in the attempt.
    tasks: Vec<usize>,
}

/// Every operator coordinator of an attempt, and their states per pending checkpoint.
#[derive(Default)]
pub(crate) struct OperatorCoordinators {
    running: Vec<Running>,
    /// Task index → (position in `running`, subtask).
    by_task: BTreeMap<usize, (usize, u32)>,
    /// Per checkpoint triggered and not yet completed or dropped: every coordinator's state.
    states: BTreeMap<CheckpointId, Vec<CoordinatorStateEntry>>,
    outbox: Vec<(u32, Vec<u8>)>,
}

impl OperatorCoordinators {
    /// The coordinators of `graph`'s operators that have one; `tasks` numbers the attempt's
    /// tasks by (chain head, subtask). Only a chain's head may have one (a source is one).
    pub(crate) fn new(graph: &StreamGraph, tasks: &[(NodeId, u32)]) -> Self {
        let mut coordinators = Self::default();
        for node in &graph.nodes {
            let Some(provider) = &node.coordinator else { continue };
            let mut subtasks: Vec<(u32, usize)> =
                tasks.iter().enumerate().filter(|(_, (head, _))| *head == node.id).map(|(i, (_, s))| (*s, i)).collect();
            subtasks.sort();
            let position = coordinators.running.len();
            for (subtask, task) in &subtasks {
                coordinators.by_task.insert(*task, (position, *subtask));
            }
            coordinators.running.push(Running {
                uid: node.effective_uid(),
                name: node.name.clone(),
                parallelism: node.parallelism,
                coordinator: provider(),
                tasks: subtasks.into_iter().map(|(_, task)| task).collect(),
            });
        }
        coordinators
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Starts every coordinator, from its state in `restored` when the checkpoint has one.
    pub(crate) fn start(
        &mut self,
        restored: Option<&CheckpointMetadata>,
        mailboxes: &mut Mailboxes,
    ) -> Result<(), CoordinatorFailure> {
        for position in 0..self.running.len() {
            let uid = &self.running[position].uid;
            let state = match restored {
                None => CoordinatorRestore::Fresh,
                // A checkpoint of format 3 has every coordinator's state: an operator
                // without one there is new to it.
                Some(metadata) if metadata.coordinators.is_some() => {
                    metadata.coordinator_state(uid).map_or(CoordinatorRestore::Fresh, CoordinatorRestore::State)
                }
                // An earlier format had none: the operator's subtasks hold what it had.
                Some(metadata) if metadata.tasks.iter().any(|t| t.operators.iter().any(|o| &o.uid == uid)) => {
                    CoordinatorRestore::WithoutState
                }
                Some(_) => CoordinatorRestore::Fresh,
            };
            tracing::info!(operator = %self.running[position].name, restore = %state.describe(), "operator coordinator \
                starting");
            self.call(position, mailboxes, |coordinator, ctx| coordinator.start(state, ctx))?;
        }
        Ok(())
    }

    /// Task `task` sent `event` to its head operator's coordinator.
    pub(crate) fn event(
        &mut self,
        task: usize,
        event: &[u8],
        mailboxes: &mut Mailboxes,
    ) -> Result<(), CoordinatorFailure> {
        let Some(&(position, subtask)) = self.by_task.get(&task) else {
            tracing::warn!(task, "an operator event from a task whose operator has no coordinator; dropped");
            return Ok(());
        };
        self.call(position, mailboxes, |coordinator, ctx| coordinator.handle_event(SubtaskIndex(subtask), event, ctx))
    }

    /// Lets every coordinator take what finished elsewhere.
    pub(crate) fn poll(&mut self, mailboxes: &mut Mailboxes) -> Result<(), CoordinatorFailure> {
        for position in 0..self.running.len() {
            self.call(position, mailboxes, |coordinator, ctx| coordinator.poll(ctx))?;
        }
        Ok(())
    }

    /// Takes every coordinator's state for checkpoint `id`, before its trigger goes out.
    pub(crate) fn checkpoint(&mut self, id: CheckpointId) -> Result<(), CoordinatorFailure> {
        let mut states = Vec::with_capacity(self.running.len());
        for running in &mut self.running {
            let state = running
                .coordinator
                .checkpoint(id)
                .map_err(|error| CoordinatorFailure { operator: running.name.clone(), error })?;
            states.push(CoordinatorStateEntry { uid: running.uid.clone(), state });
        }
        self.states.insert(id, states);
        Ok(())
    }

    /// The states taken for checkpoint `id`, for its `_metadata`.
    pub(crate) fn states(&self, id: CheckpointId) -> Vec<CoordinatorStateEntry> {
        self.states.get(&id).cloned().unwrap_or_default()
    }

    /// Checkpoint `id` will never complete.
    pub(crate) fn discard(&mut self, id: CheckpointId) {
        self.states.remove(&id);
    }

    /// The bytes of the states taken for checkpoint `id` (they travel in a restore's start).
    pub(crate) fn state_bytes(&self, id: CheckpointId) -> usize {
        self.states.get(&id).map_or(0, |states| states.iter().map(|s| s.state.len()).sum())
    }

    /// Checkpoint `id` completed: the coordinators hear it. (Checkpoints it subsumed were
    /// discarded one by one; an older savepoint still pending keeps its states.)
    pub(crate) fn completed(&mut self, id: CheckpointId) {
        self.states.remove(&id);
        for running in &mut self.running {
            running.coordinator.notify_checkpoint_complete(id);
        }
    }

    /// What `eddy status` shows of them: each line named by its operator.
    pub(crate) fn status_lines(&self) -> Vec<String> {
        let lines = self.running.iter().flat_map(|r| r.coordinator.status().into_iter().map(|l| (r.name.clone(), l)));
        lines.map(|(operator, line)| format!("{operator}: {line}")).collect()
    }

    /// Their gauges, each labelled with its operator.
    pub(crate) fn gauges(&self) -> Vec<eddy_runtime::coordination::GaugeView> {
        let mut gauges = Vec::new();
        for running in &self.running {
            for mut gauge in running.coordinator.gauges() {
                gauge.labels.insert(0, ("operator".to_string(), running.name.clone()));
                gauges.push(gauge);
            }
        }
        gauges
    }

    /// The attempt ended.
    pub(crate) fn close(&mut self) {
        for running in &mut self.running {
            running.coordinator.close();
        }
    }

    /// Calls coordinator `position`, then posts what it sent to its subtasks' mailboxes.
    fn call(
        &mut self,
        position: usize,
        mailboxes: &mut Mailboxes,
        f: impl FnOnce(&mut dyn OperatorCoordinator, &mut CoordinatorContext<'_>) -> Result<(), CoordinatorError>,
    ) -> Result<(), CoordinatorFailure> {
        let running = &mut self.running[position];
        let mut ctx = CoordinatorContext::new(running.parallelism, &mut self.outbox);
        let result = f(running.coordinator.as_mut(), &mut ctx);
        for (subtask, event) in self.outbox.drain(..) {
            // The context lets only `0..parallelism` through: every such subtask has a task.
            if let Some(&task) = running.tasks.get(subtask as usize) {
                mailboxes.post(task, Control::OperatorEvent(event));
            }
        }
        result.map_err(|error| CoordinatorFailure { operator: running.name.clone(), error })
    }
}
