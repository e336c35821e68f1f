//! A job's JobMaster (in the job's binary) ⇄ JobManager.

use super::cli::JobCommand;
use crate::ids::{AttemptId, ExecutorIndex, JobId, TaskManagerId};
use crate::job_state::JobState;
use crate::slots::ExecutorSlots;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum JobMasterMessage {
    /// "Still here", both ways.
    Heartbeat,
    /// A peer explains why it closes the connection.
    Refused(String),

    // JobMaster → JobManager
    Submit {
        name: String,
        parallelism: u32,
        args: Vec<String>,
        /// What its operators must hold alone (a Kafka sink's transactional ids): refused
        /// while a running job holds one of them. (Added in protocol version 3: postcard
        /// cannot leave a field out, so a default would not help older peers.)
        exclusive_resources: Vec<String>,
        /// The file name of the job's binary: its task executors run on TaskManagers of
        /// the same binary only (application mode), see [`crate::launch::binary_name`].
        binary: String,
    },
    /// A JobMaster started again for a job whose JobMaster died takes it back under its id.
    Resume {
        job: JobId,
        name: String,
        parallelism: u32,
        /// The generation the JobManager gave this JobMaster when it last admitted it;
        /// `None` for a JobMaster started by a takeover.
        generation: Option<u32>,
    },
    /// Where the job's checkpoints go: the job directory a JobMaster started again restores
    /// the latest checkpoint from. Not sent for checkpoints in the JobMaster's memory.
    JobDirectory(String),
    /// Slots for an attempt; the executors the JobMaster at `job_master` will hear from.
    /// Waits up to `timeout_ms` for enough slots.
    RequestSlots {
        attempt: AttemptId,
        slots: u32,
        timeout_ms: u64,
        job_master: String,
        /// Each operator's parallelism in this attempt (node order), for the task
        /// executors, which build the graph at the parallelism the program sets.
        operator_parallelism: Vec<u32>,
    },
    /// The attempt ended: its task executors go, its slots are free.
    ReleaseSlots {
        attempt: AttemptId,
    },
    /// What `list` shows of the job.
    State(JobState),
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
    /// What the job looks like now (about once a second), for the REST API and
    /// `/metrics`.
    View(Box<crate::view::JobView>),
    /// Submitted with `--detached`: the JobManager has a TaskManager start the job's
    /// JobMaster (as a takeover does), and the submitting process goes.
    Detach,

    // JobManager → JobMaster
    /// With the cluster's heartbeat settings, which the job's connections follow.
    Submitted {
        job: JobId,
        /// The number of its next attempt (attempts of an earlier JobMaster of the job
        /// came before).
        first_attempt: u32,
        /// The slots it could hold now (free ones and its own), for reactive mode.
        slots_available: u32,
        /// This JobMaster's generation: it presents it to take the job back after losing
        /// its JobManager (a JobMaster replaced meanwhile has an older one).
        generation: u32,
        heartbeat_interval_ms: u64,
        heartbeat_timeout_ms: u64,
        /// To a JobMaster started by a takeover: the job as its lost JobMaster last showed
        /// it (its start time, restarts, exceptions with the loss among them, checkpoint
        /// history), which the new one carries on; `None` otherwise.
        previous: Option<Box<crate::view::JobView>>,
    },
    /// The slots the job could hold changed (a TaskManager joined or left): free ones and
    /// its own. A job in reactive mode takes them.
    SlotsAvailable {
        slots: u32,
    },
    SlotsAllocated {
        attempt: AttemptId,
        executors: Vec<ExecutorSlots>,
    },
    SlotsUnavailable {
        attempt: AttemptId,
        message: String,
    },
    TaskManagerLost {
        task_manager: TaskManagerId,
        reason: String,
    },
    /// A task executor exited before its attempt ended (it could not build the job…).
    ExecutorFailed {
        attempt: AttemptId,
        executor: ExecutorIndex,
        status: String,
    },
    /// The answer to `Detach`: a TaskManager starts the job's JobMaster (or `Refused`).
    Detached,
    /// A command relayed from the CLI, to answer with `CommandReply`.
    Command {
        request: u64,
        command: JobCommand,
    },
}
