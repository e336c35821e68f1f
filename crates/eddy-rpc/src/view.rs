//! What an operator sees of a job while it runs (Flink's `ExecutionGraph` as its REST API
//! and dashboard show it): its vertices and their subtasks with their counters, rates and
//! watermarks, its checkpoints, its exceptions, and the gauges its operators' coordinators
//! publish (a Kafka source's consumer lag).
//!
//! A job's JobMaster builds one about once a second. On a cluster it travels to the
//! JobManager ([`crate::messages::JobMasterMessage::View`]), which serves it; a local job
//! serves its own. Plain data: the same structs are postcard on the wire and JSON in the
//! REST API.

use crate::job_state::JobState;
use serde::{Deserialize, Serialize};

/// One job, as its JobMaster last saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub name: String,
    pub state: Option<JobState>,
    /// Wall-clock ms when the job started, and how long it has run.
    pub start_time_ms: u64,
    pub duration_ms: u64,
    /// The attempt running now (from 1), and the restarts before it.
    pub attempt: u32,
    pub restarts: u32,
    pub max_parallelism: u32,
    /// Tasks (chains of operators), in the order data flows.
    pub vertices: Vec<VertexView>,
    /// Which vertex feeds which, and how (`FORWARD`, `HASH`, `REBALANCE`, `BROADCAST`…).
    pub edges: Vec<EdgeView>,
    pub checkpoints: CheckpointsView,
    /// The failures that restarted or ended the job, oldest first (the last 50).
    pub exceptions: Vec<ExceptionView>,
    /// What the operators' coordinators publish, as gauges.
    pub gauges: Vec<GaugeView>,
    /// What the operators' coordinators show as text (`eddy status`).
    pub coordinator_status: Vec<String>,
    /// Where the attempt's task executors serve `/metrics` (on a cluster).
    pub task_executors: Vec<TaskExecutorView>,
}

impl JobView {
    /// Its JobMaster was lost and is being started again (a failover): a restart, with the
    /// loss as its exception, nothing running, checkpoints in progress failed.
    pub fn job_master_lost(&mut self, message: &str) {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        self.restarts += 1;
        self.push_exception(now, message.to_string(), true);
        self.state = Some(JobState::Initializing);
        self.fail_pending("its JobMaster was lost");
        for vertex in &mut self.vertices {
            vertex.subtasks.clear();
        }
        self.task_executors.clear();
    }

    /// A failure of the running attempt at `time_ms`, and whether the job restarted; the
    /// last [`EXCEPTIONS_MAX`] are kept.
    pub fn push_exception(&mut self, time_ms: u64, message: String, restarted: bool) {
        self.exceptions.push(ExceptionView { time_ms, attempt: self.attempt, message, restarted });
        let excess = self.exceptions.len().saturating_sub(EXCEPTIONS_MAX);
        self.exceptions.drain(..excess);
    }

    /// Checkpoints still in progress failed, for `reason`.
    pub fn fail_pending(&mut self, reason: &str) {
        for checkpoint in &mut self.checkpoints.history {
            if checkpoint.status == CheckpointStatus::InProgress {
                checkpoint.status = CheckpointStatus::Failed;
                checkpoint.failure = Some(reason.to_string());
                self.checkpoints.failed += 1;
            }
        }
        self.checkpoints.in_progress = 0;
    }
}

/// The exceptions a view keeps, newest last.
pub const EXCEPTIONS_MAX: usize = 50;

/// A task executor of a job's attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskExecutorView {
    pub task_manager: u32,
    pub metrics_address: Option<String>,
}

/// A TaskManager, as the JobManager knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskManagerView {
    pub id: u32,
    /// Where other TaskManagers reach its subtasks, and its process id there.
    pub host: String,
    pub pid: u32,
    pub slots_total: u32,
    pub slots_free: u32,
    /// Wall-clock ms when it registered.
    pub registered_ms: u64,
    /// Where it serves `/metrics`, if it does.
    pub metrics_address: Option<String>,
}

/// The cluster at a glance (Flink's `/overview`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterOverview {
    pub taskmanagers: u32,
    pub slots_total: u32,
    pub slots_available: u32,
    pub jobs_running: u32,
    pub jobs_finished: u32,
    pub jobs_cancelled: u32,
    pub jobs_failed: u32,
}

/// A task: a chain of operators, and its subtasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VertexView {
    /// The vertex's id in the job (its head operator's node id).
    pub id: u32,
    pub name: String,
    /// Its head operator's uid as the program set it (`.uid(…)`), else `node-<id>`: stable
    /// across runs of the same program, for metrics' labels.
    pub uid: String,
    pub parallelism: u32,
    /// The operators chained in it, in order.
    pub operators: Vec<String>,
    pub subtasks: Vec<SubtaskView>,
    /// Its state in the last completed checkpoint, over its subtasks (bytes).
    pub state_bytes: u64,
}

/// One subtask of a vertex.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubtaskView {
    /// From 0.
    pub index: u32,
    /// The TaskManager it runs on (0: this process, a local job).
    pub task_manager: u32,
    pub counters: SubtaskCounters,
    /// Per second, over the last sampling interval.
    pub records_in_per_second: f64,
    pub records_out_per_second: f64,
    pub bytes_in_per_second: f64,
    pub bytes_out_per_second: f64,
    /// Of every second: processing, waiting for room downstream, waiting for input
    /// (Flink's `busyTimeMsPerSecond`, `backPressuredTimeMsPerSecond`,
    /// `idleTimeMsPerSecond`).
    pub busy_ms_per_second: f64,
    pub backpressured_ms_per_second: f64,
    pub idle_ms_per_second: f64,
}

impl SubtaskView {
    /// Flink's back-pressure level of a subtask from its backpressured share of time:
    /// `ok` up to 10 %, `low` up to 50 %, `high` above.
    pub fn backpressure_level(&self) -> &'static str {
        backpressure_level(self.backpressured_ms_per_second / 1000.0)
    }
}

/// Flink's thresholds for a backpressured ratio (0..=1).
pub fn backpressure_level(ratio: f64) -> &'static str {
    if ratio <= 0.10 {
        "ok"
    } else if ratio <= 0.5 {
        "low"
    } else {
        "high"
    }
}

/// What a subtask counted since it started (this attempt).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskCounters {
    pub records_in: u64,
    pub records_out: u64,
    /// Bytes read and written on network channels (records between processes); records
    /// handed over inside a process are never serialized, and count no bytes.
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub busy_ms: u64,
    pub backpressured_ms: u64,
    pub idle_ms: u64,
    /// How long its last barrier alignment took, from the first barrier of a checkpoint to
    /// the last (Flink's `checkpointAlignmentTime`), in microseconds.
    pub alignment_us: u64,
    /// Records its window operators dropped as late (Flink's `numLateRecordsDropped`).
    pub late_records_dropped: u64,
    /// The watermark of its input (the minimum over its channels) and the last one it
    /// sent on; `None` before the first.
    pub input_watermark: Option<i64>,
    pub output_watermark: Option<i64>,
}

/// An edge of the job graph.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeView {
    pub source: u32,
    pub target: u32,
    pub ship_strategy: String,
}

/// A job's checkpoints: counts, the recent ones, the latest of each kind, the settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointsView {
    pub triggered: u64,
    pub in_progress: u64,
    pub completed: u64,
    pub failed: u64,
    /// Where the job's current attempt restored from, if anywhere.
    pub restored_from: Option<String>,
    /// The last 60 checkpoints and savepoints, oldest first.
    pub history: Vec<CheckpointView>,
    pub config: CheckpointConfigView,
}

impl CheckpointsView {
    /// The newest completed checkpoint (not savepoint).
    pub fn latest_completed(&self) -> Option<&CheckpointView> {
        self.history.iter().rev().find(|c| c.status == CheckpointStatus::Completed && !c.savepoint)
    }

    pub fn latest_failed(&self) -> Option<&CheckpointView> {
        self.history.iter().rev().find(|c| c.status == CheckpointStatus::Failed)
    }

    pub fn latest_savepoint(&self) -> Option<&CheckpointView> {
        self.history.iter().rev().find(|c| c.status == CheckpointStatus::Completed && c.savepoint)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckpointStatus {
    #[default]
    InProgress,
    Completed,
    Failed,
}

/// One checkpoint or savepoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointView {
    pub id: u64,
    pub savepoint: bool,
    pub status: CheckpointStatus,
    /// Wall-clock ms when it was triggered.
    pub trigger_time_ms: u64,
    /// From trigger to stored metadata (or to its failure).
    pub duration_ms: u64,
    /// The longest synchronous part of a subtask, and the longest asynchronous part.
    pub sync_ms: u64,
    pub async_ms: u64,
    /// Full size (shared files included), and what was written for it (incremental).
    pub bytes: u64,
    pub incremental_bytes: u64,
    pub location: String,
    /// Why it failed.
    pub failure: Option<String>,
}

/// How the job checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointConfigView {
    /// 0: checkpointing is off.
    pub interval_ms: u64,
    /// `EXACTLY_ONCE` or `AT_LEAST_ONCE`.
    pub mode: String,
    pub timeout_ms: u64,
    pub min_pause_ms: u64,
    pub max_concurrent: u32,
    pub retained: u32,
    pub storage: String,
}

/// A failure of the job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionView {
    /// Wall-clock ms.
    pub time_ms: u64,
    /// The attempt it ended (from 1).
    pub attempt: u32,
    pub message: String,
    /// Whether a restart followed.
    pub restarted: bool,
}

/// A gauge an operator's coordinator publishes (`kafka_consumer_lag` with its topic and
/// partition), in base units.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GaugeView {
    /// snake_case, without the `eddy_` prefix.
    pub name: String,
    pub help: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}
