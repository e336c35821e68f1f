//! The task executor ⇄ JobMaster connection: its one message enum. It carries runtime
//! types (control messages to subtasks, their reports and exits, checkpoint metadata to
//! restore), so it lives here rather than in `eddy-rpc` with the services' messages; it
//! travels in the same frames over the same authenticated streams.

use crate::error::TaskError;
use crate::task::{Control, TaskReport};
use eddy_checkpoint::metadata::CheckpointMetadata;
use eddy_rpc::slots::ExecutorSlots;
use eddy_rpc::{AttemptId, ExecutorIndex, TaskManagerId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ExecutorMessage {
    /// "Still here", both ways.
    Heartbeat,
    /// A peer explains why it closes the connection (the JobMaster refusing a task
    /// executor whose binary builds another graph).
    Refused(String),

    // Task executor → JobMaster
    Hello(ExecutorHello),
    Report(TaskReport),
    TaskExited {
        task: u32,
        outcome: Result<(), TaskError>,
    },
    /// Per task: what it counted (status, REST, `/metrics`).
    TaskMetrics(Vec<TaskMetrics>),

    // JobMaster → task executor
    Start(Box<StartTasks>),
    /// To subtask `task` (the attempt's task index), in order.
    Control {
        task: u32,
        control: Control,
    },
    /// The whole attempt stops now (Flink's cancel), beyond what mailboxes say.
    CancelAttempt,
    /// Savepoint `id` is written into directory `dir` (sent before it is triggered).
    SavepointTarget {
        id: u64,
        dir: String,
    },
}

/// A task executor's first words to its JobMaster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutorHello {
    pub attempt: AttemptId,
    pub executor: ExecutorIndex,
    pub task_manager: TaskManagerId,
    /// The graph it built, one line per operator ([`super::fingerprint`]).
    pub graph: Vec<String>,
    /// Where its data listener waits for producers.
    pub data_address: String,
    pub binary: String,
    /// Where it serves `/metrics` of its subtasks, if it does.
    pub metrics_address: Option<String>,
}

/// The start of an attempt, once every task executor said hello.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartTasks {
    /// Per executor: its slots and data address.
    pub executors: Vec<(ExecutorSlots, String)>,
    pub seed: u64,
    pub restore: Option<RestoreTicket>,
    /// The job directory checkpoints go to; `None`: the JobManager's memory.
    pub job_dir: Option<String>,
}

/// The checkpoint an attempt restores: its metadata, read and checked by the JobMaster,
/// and where its files are, so that each subtask reads its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreTicket {
    pub location: String,
    pub metadata: CheckpointMetadata,
    pub owned: bool,
    /// In the job's own checkpoint storage (else in the storage at `storage_root`).
    pub in_job_storage: bool,
    /// The root of the storage it is in, to open it.
    pub storage_root: String,
}

/// What a subtask counted, for `status`, the REST API and `/metrics`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TaskMetrics {
    pub task: u32,
    pub counters: eddy_rpc::view::SubtaskCounters,
}
