//! Every control message between the cluster's processes, in one enum: each side handles
//! the messages of its role and calls anything else a protocol error.
//!
//! - TaskManager ⇄ JobManager: registration, deployments, executor exits, heartbeats.
//! - Job client ⇄ JobManager: submission, slot requests, commands relayed from the CLI,
//!   TaskManagers lost, the job's end.
//! - CLI ⇄ JobManager: listing jobs, commands and their replies.
//! - Task executor ⇄ the job's JobMaster (in the job client): hello with the graph's
//!   fingerprint, the start of an attempt, control messages to subtasks, reports and
//!   exits from them.

use crate::error::TaskError;
use crate::task::{Control, TaskReport};
use eddy_checkpoint::metadata::CheckpointMetadata;
use serde::{Deserialize, Serialize};

/// A job, as numbered by its JobManager.
pub type JobId = u64;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Message {
    /// "Still here", both ways on every long-lived connection.
    Heartbeat,
    /// A peer explains why it closes the connection.
    Refused(String),

    // TaskManager → JobManager
    RegisterTaskManager {
        slots: u32,
        binary: String,
        pid: u32,
        data_host: String,
    },
    /// A task executor this TaskManager started for an attempt exited.
    ExecutorExited {
        job: JobId,
        attempt: u32,
        executor: u32,
        status: String,
    },
    // JobManager → TaskManager
    TaskManagerRegistered {
        id: u32,
    },
    Deploy(Deployment),
    /// Stop the task executor of this attempt, if it still runs.
    CancelExecutor {
        job: JobId,
        attempt: u32,
    },

    // Job client → JobManager
    SubmitJob {
        name: String,
        parallelism: u32,
        args: Vec<String>,
    },
    /// Slots for an attempt; the executors the job's JobMaster at `job_master` will hear
    /// from. Waits up to `timeout_ms` for enough slots.
    RequestSlots {
        attempt: u32,
        slots: u32,
        timeout_ms: u64,
        job_master: String,
    },
    /// The attempt ended: its task executors go, its slots are free.
    ReleaseSlots {
        attempt: u32,
    },
    /// What `list` shows of the job.
    JobState {
        state: String,
    },
    /// A command relayed from the CLI is answered.
    CommandReply {
        request: u64,
        reply: Result<String, String>,
    },
    /// A line of progress for a command still running.
    CommandProgress {
        request: u64,
        text: String,
    },
    // JobManager → job client
    /// With the cluster's heartbeat settings, which the job's connections follow.
    JobSubmitted {
        job: JobId,
        heartbeat_interval_ms: u64,
        heartbeat_timeout_ms: u64,
    },
    SlotsAllocated {
        attempt: u32,
        executors: Vec<ExecutorSlots>,
    },
    SlotsUnavailable {
        attempt: u32,
        message: String,
    },
    TaskManagerLost {
        task_manager: u32,
        reason: String,
    },
    /// A task executor exited before its attempt ended (it could not build the job…).
    ExecutorFailed {
        attempt: u32,
        executor: u32,
        status: String,
    },

    // CLI → JobManager
    ListJobs,
    JobCommand {
        job: String,
        command: JobCommand,
    },
    // JobManager → CLI
    Jobs(Vec<JobSummary>),
    // JobManager → job client (relayed), and the answer back to the CLI
    Command {
        request: u64,
        command: JobCommand,
    },

    // Task executor ⇄ JobMaster
    ExecutorHello(ExecutorHello),
    StartTasks(Box<StartTasks>),
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
    Report(TaskReport),
    TaskExited {
        task: u32,
        outcome: Result<(), TaskError>,
    },
    /// Per task: records in and out, time backpressured (status).
    TaskMetrics(Vec<TaskMetrics>),

    // Task executor → task executor, first on a data connection
    DataHello {
        attempt: u32,
        executor: u32,
    },
}

/// What the CLI asks of a running job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum JobCommand {
    Status,
    Savepoint { dir: String },
    Stop { savepoint_dir: String },
    Cancel,
}

/// A line of `list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobSummary {
    pub id: JobId,
    pub name: String,
    pub state: String,
    pub parallelism: u32,
    pub uptime_ms: u64,
}

/// Slots of one TaskManager given to an attempt: its task executor holds slots
/// `first_slot..first_slot + slots` (slot i runs subtask i of every operator).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutorSlots {
    pub task_manager: u32,
    pub first_slot: u32,
    pub slots: u32,
}

/// Which executor of an allocation runs each subtask index `0..parallelism`, the one
/// reading of an allocation that the JobMaster and every task executor share. The
/// allocation arrives over the network: it must give the executors contiguous slots from
/// 0 that cover `parallelism`, else it is refused.
pub fn slot_owners(executors: &[ExecutorSlots], parallelism: u32) -> Result<Vec<usize>, String> {
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
        owners.extend(std::iter::repeat_n(index, (executor.slots as usize).min(missing)));
    }
    if owners.len() < parallelism as usize {
        return Err(format!("an allocation of {} slots for parallelism {parallelism}", owners.len()));
    }
    Ok(owners)
}

/// What a TaskManager starts: a task executor, the job's binary run with the job's
/// arguments, which rebuilds the graph and reports to the JobMaster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deployment {
    pub job: JobId,
    pub job_name: String,
    pub attempt: u32,
    pub executor: u32,
    pub args: Vec<String>,
    pub job_master: String,
}

/// A task executor's first words to its JobMaster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutorHello {
    pub attempt: u32,
    pub executor: u32,
    pub task_manager: u32,
    /// The graph it built, one line per operator ([`super::fingerprint`]).
    pub graph: Vec<String>,
    /// Where its data listener waits for producers.
    pub data_address: String,
    pub binary: String,
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

/// What `status` shows per subtask.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TaskMetrics {
    pub task: u32,
    pub records_in: u64,
    pub records_out: u64,
    pub backpressured_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(ranges: &[(u32, u32)]) -> Vec<ExecutorSlots> {
        ranges.iter().map(|&(first_slot, slots)| ExecutorSlots { task_manager: 0, first_slot, slots }).collect()
    }

    #[test]
    fn an_allocation_names_each_subtasks_executor_and_refuses_gaps_and_shortfalls() {
        assert_eq!(slot_owners(&slots(&[(0, 2), (2, 1)]), 3).unwrap(), vec![0, 0, 1]);
        assert_eq!(slot_owners(&slots(&[(0, 3), (3, 1)]), 2).unwrap(), vec![0, 0], "more slots than needed");
        assert!(slot_owners(&slots(&[(0, 2), (3, 1)]), 3).is_err(), "a gap");
        assert!(slot_owners(&slots(&[(0, 2)]), 3).is_err(), "too few");
        assert!(slot_owners(&[], 1).is_err(), "none");
        assert!(slot_owners(&slots(&[(0, 0), (0, 2)]), 2).is_err(), "an executor of no slots");
    }
}
