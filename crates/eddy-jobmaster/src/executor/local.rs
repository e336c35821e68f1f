//! The local thread launch: an attempt's subtasks wired with in-process channels and run
//! on threads of this process (or, simulated, stepped on one), coordinated by the
//! JobMaster's [`AttemptCoordinator`].

use super::simulation::Simulator;
use crate::jobmaster::coordinator::AttemptCoordinator;
use crate::jobmaster::{Attempt, AttemptEnd, AttemptLauncher, JobResult};
use eddy_checkpoint::storage::{CheckpointStorage, SavepointTargets};
use eddy_runtime::channel::{ChannelCapacity, CHANNEL_BATCHES_MAX};
use eddy_runtime::deployment::subtasks::{
    prepare_subtasks, start_snapshot_workers, start_subtask_threads, SubtaskEnv, Subtasks, TaskExit,
};
use eddy_runtime::deployment::wiring::wire;
use eddy_runtime::error::JobError;
use eddy_runtime::task::{AsyncWork, Mailboxes, QueuedWork, TaskReport};
use eddy_types::{Clock, NodeId};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs attempts in this process: one thread per subtask, or every subtask stepped by
/// the simulator on this thread.
pub(crate) struct LocalLauncher {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) simulator: Option<Simulator>,
}

impl AttemptLauncher for LocalLauncher {
    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn checkpoint_storage(&self, storage: Arc<dyn CheckpointStorage>) -> Arc<dyn CheckpointStorage> {
        match &self.simulator {
            Some(simulator) => simulator.storage(storage),
            None => storage,
        }
    }

    fn traced(&self) -> bool {
        self.simulator.is_some()
    }

    fn launch(&self, attempt: Attempt<'_>, result: &mut JobResult) -> AttemptEnd {
        let Attempt { graph, plan, start, storage, retained, savepoint_storage } = attempt;
        let capacity = match self.simulator {
            Some(_) => ChannelCapacity::Unbounded,
            None => ChannelCapacity::Bounded(CHANNEL_BATCHES_MAX),
        };
        let setups = wire(graph, plan, capacity);
        // Where the asynchronous part of snapshots runs: worker threads, or the
        // simulator's turns.
        let queued = Arc::new(QueuedWork::default());
        let workers = match &self.simulator {
            Some(_) => None,
            None => match start_snapshot_workers(setups.len()) {
                Ok(workers) => Some(workers),
                Err(e) => {
                    let message =
                        format!("cannot start the threads that write snapshots: {e}", e = eddy_types::chain(&e));
                    return AttemptEnd::Failed(JobError::Internal { job: graph.job_name.clone(), message });
                }
            },
        };
        let work: Arc<dyn AsyncWork> = match &workers {
            Some(workers) => workers.queue(),
            None => queued.clone(),
        };
        // Tasks are numbered as everywhere else (`ChainPlan::tasks`, as a cluster's task
        // executors number them).
        let tasks: Vec<(NodeId, u32)> = plan.tasks(graph);
        let numbering: HashMap<(NodeId, u32), usize> = tasks.iter().enumerate().map(|(i, t)| (*t, i)).collect();
        let cancel = Arc::new(AtomicBool::new(false));
        let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
        let targets = SavepointTargets::default();
        let env = SubtaskEnv {
            storage: storage.clone(),
            savepoint_storage: savepoint_storage.clone(),
            savepoint_targets: targets.clone(),
            clock: self.clock.clone(),
            cancel: cancel.clone(),
            reports: reports_tx,
            work,
            restore: start.restore.clone(),
            seed: start.seed,
            ttl_clock: self.simulator.as_ref().map(|_| self.clock.clone()),
        };
        let Subtasks { mut pending, mut mailboxes, counters, .. } =
            prepare_subtasks(graph, plan, setups, &env, &|head, subtask| numbering[&(head, subtask)]);
        drop(env);
        // In task order: the coordinator and the simulator address tasks by position.
        pending.sort_by_key(|(_, context)| context.checkpointing.task);
        mailboxes.sort_by_key(|(index, _)| *index);

        let mailboxes = Mailboxes::new(mailboxes.into_iter().map(|(_, mailbox)| mailbox).collect());
        let mut coordinator = AttemptCoordinator::new(
            (graph, plan),
            (storage, retained, savepoint_storage),
            (mailboxes, tasks, cancel),
            self.clock.clone(),
            start.next_checkpoint_id,
            self.simulator.is_some(),
        );
        coordinator.savepoint_targets = targets;
        coordinator.after_rescale = start.rescaled;
        coordinator.autoscaler = start.autoscaler.clone();
        coordinator.observe_attempt(None, &|_| 0, start.restore.as_deref());
        if self.simulator.is_none() {
            coordinator.sampler =
                Some(Box::new(move || counters.iter().map(|(task, counted)| (*task, counted.snapshot())).collect()));
        }
        coordinator.start_operator_coordinators(start.restore.as_deref());
        match &self.simulator {
            Some(simulator) => simulator.run_attempt(&mut coordinator, pending, &queued, &reports_rx, result),
            None => {
                let (done_tx, done_rx) = crossbeam_channel::unbounded::<TaskExit>();
                let (handles, started) = start_subtask_threads(graph, plan, pending, &done_tx);
                drop(done_tx);
                if let Err(message) = started {
                    coordinator.fail(JobError::Internal { job: graph.job_name.clone(), message });
                }
                let never = crossbeam_channel::never();
                coordinator.coordinate(&done_rx, &reports_rx, handles.len(), result, (&never, &mut |_, _: (), _| {}));
                // Reports that raced with the exits (a last acknowledgement) change nothing now.
                for handle in handles {
                    let _ = handle.join();
                }
            }
        }
        // Snapshots still being written belong to checkpoints this attempt will never
        // complete: they finish (or are dropped, simulated), and what they and the
        // checkpoints still pending wrote goes.
        queued.clear();
        if let Some(workers) = workers {
            workers.stop();
        }
        coordinator.end(&reports_rx, result)
    }
}
