//! This process's subtasks of an attempt: one function builds them from their wiring, for
//! the local executor, the simulator and a task executor alike, and one starts each on a
//! thread of its own.

use super::restore::RestorePlan;
use super::wiring::{run_task, TaskContext, TaskSetup};
use crate::error::TaskError;
use crate::graph::{ChainPlan, StreamGraph};
use crate::task::{AsyncWork, AsyncWorkers, MailboxSender, TaskCheckpointing, TaskCounters, TaskReport};
use crossbeam_channel::Sender;
use eddy_checkpoint::storage::{CheckpointStorage, SavepointTargets, TaskStateWriter};
use eddy_checkpoint::CheckpointError;
use eddy_types::{Clock, NodeId, RunSeed};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a subtask thread hands back: its task index (the JobMaster's numbering) and how
/// it ended.
pub type TaskExit = (usize, Result<(), TaskError>);

/// A subtask about to start: what it is wired to, and what it gets from the attempt.
pub type PendingTask = (TaskSetup, TaskContext);

/// What every subtask of this process gets from the attempt.
pub struct SubtaskEnv {
    /// Where checkpoints go.
    pub storage: Arc<dyn CheckpointStorage>,
    /// Where the job's configured savepoint goes, if it has one.
    pub savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
    /// Where savepoints asked for while the job runs go, by id.
    pub savepoint_targets: SavepointTargets,
    pub clock: Arc<dyn Clock>,
    pub cancel: Arc<AtomicBool>,
    pub reports: Sender<TaskReport>,
    /// Where the asynchronous part of snapshots runs.
    pub work: Arc<dyn AsyncWork>,
    pub restore: Option<Arc<RestorePlan>>,
    pub seed: RunSeed,
    /// Under simulation, the clock state time-to-live reads.
    pub ttl_clock: Option<Arc<dyn Clock>>,
}

/// This process's subtasks, built and not started yet.
pub struct Subtasks {
    pub pending: Vec<PendingTask>,
    /// Per subtask, in the same order: its task index, its mailbox and its counters.
    pub mailboxes: Vec<(usize, MailboxSender)>,
    pub counters: Vec<(usize, Arc<TaskCounters>)>,
}

/// Builds the subtasks of `setups` (this process's, from the wiring), each numbered by
/// `task_index` as the JobMaster numbers the attempt's tasks ([`ChainPlan::tasks`]).
pub fn prepare_subtasks(
    graph: &StreamGraph,
    plan: &ChainPlan,
    setups: Vec<(TaskSetup, MailboxSender)>,
    env: &SubtaskEnv,
    task_index: &dyn Fn(NodeId, u32) -> usize,
) -> Subtasks {
    let mut subtasks = Subtasks { pending: Vec::new(), mailboxes: Vec::new(), counters: Vec::new() };
    for (setup, mailbox) in setups {
        let index = task_index(setup.head, setup.subtask);
        let writer = TaskStateWriter::new(
            env.storage.clone(),
            env.savepoint_storage.clone(),
            env.clock.clone(),
            plan.chain_name(graph, setup.head),
            setup.subtask,
            &graph.node(setup.head).effective_uid(),
        )
        .with_savepoint_targets(env.savepoint_targets.clone());
        let counters = Arc::<TaskCounters>::default();
        let context = TaskContext {
            counters: counters.clone(),
            cancel: env.cancel.clone(),
            clock: env.clock.clone(),
            checkpointing: TaskCheckpointing {
                task: index,
                reports: env.reports.clone(),
                writer: Arc::new(writer),
                work: env.work.clone(),
            },
            restore: env.restore.clone(),
            seed: env.seed,
            ttl_clock: env.ttl_clock.clone(),
        };
        subtasks.mailboxes.push((index, mailbox));
        subtasks.counters.push((index, counters));
        subtasks.pending.push((setup, context));
    }
    subtasks
}

/// A subtask as Flink names it in logs and thread names: `chain (2/4)`.
pub fn subtask_name(graph: &StreamGraph, plan: &ChainPlan, head: NodeId, subtask: u32) -> String {
    format!("{} ({}/{})", plan.chain_name(graph, head), subtask + 1, graph.node(head).parallelism)
}

/// Starts each pending subtask on a thread of its own; each sends its exit on `done`.
/// A thread that cannot start ends the start: the ones already running are returned with
/// the error, so that the caller cancels and waits for them.
pub fn start_subtask_threads(
    graph: &Arc<StreamGraph>,
    plan: &Arc<ChainPlan>,
    pending: Vec<PendingTask>,
    done: &Sender<TaskExit>,
) -> (Vec<JoinHandle<()>>, Result<(), String>) {
    let mut handles = Vec::new();
    for (setup, context) in pending {
        let name = subtask_name(graph, plan, setup.head, setup.subtask);
        let index = context.checkpointing.task;
        let (graph, plan, done) = (graph.clone(), plan.clone(), done.clone());
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let outcome = run_task(&graph, &plan, setup, context);
            let _ = done.send((index, outcome));
        });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(e) => return (handles, Err(format!("cannot start a subtask thread: {e}", e = eddy_types::chain(&e)))),
        }
    }
    (handles, Ok(()))
}

/// The threads that write the asynchronous part of snapshots for `subtasks` subtasks of
/// this process: two per subtask at most, and no more than the machine has cores.
pub fn start_snapshot_workers(subtasks: usize) -> std::io::Result<AsyncWorkers> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    AsyncWorkers::start(cores.min(subtasks.max(1) * 2))
}

/// The checkpoint storage a process's subtasks write to: the job directory its JobMaster
/// chose, else the JobManager's memory (the state travels in acknowledgements).
pub fn open_task_storage(
    graph: &StreamGraph,
    job_dir: Option<&str>,
) -> Result<Arc<dyn CheckpointStorage>, CheckpointError> {
    Ok(match job_dir {
        None => graph.config.memory_storage(),
        Some(dir) => graph.services.storage_opener.open(dir)?,
    })
}
