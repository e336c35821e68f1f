//! The board a job's JobMaster keeps of it ([`JobView`]): the JobMaster changes it as the
//! job's events happen (an attempt starts, a checkpoint is triggered, completes or fails,
//! a failure restarts the job), and samples its subtasks' counters once a second; a REST
//! server, a Prometheus scrape or the JobManager read it.
//!
//! A task executor keeps one too, of its own subtasks only, for its `/metrics`.

use super::layout;
use super::rates::{apply_windowed_rates, RATE_WINDOW};
use super::CheckpointStats;
use crate::graph::{ChainPlan, StreamGraph};
use eddy_checkpoint::config::CheckpointingMode;
use eddy_rpc::messages::JobCommand;
use eddy_rpc::view::{
    CheckpointConfigView, CheckpointStatus, CheckpointView, GaugeView, JobView, SubtaskCounters, SubtaskView,
    TaskExecutorView,
};
use eddy_rpc::JobState;
use eddy_types::{Clock, NodeId, WallClock};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// How many checkpoints a view keeps.
const HISTORY_MAX: usize = 60;

/// A job's view, shared between the JobMaster that writes it and whoever reads it.
/// Cloning it shares it.
#[derive(Clone, Default)]
pub struct JobBoard {
    inner: Arc<Mutex<Board>>,
}

impl std::fmt::Debug for JobBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobBoard").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Board {
    view: JobView,
    started: Option<Instant>,
    /// Per task index of the running attempt (shown here): its vertex and its place among
    /// the vertex's subtasks in the view.
    places: HashMap<usize, (usize, usize)>,
    /// Each task's samples of its counters within the rates' window, oldest first, and
    /// when they were taken.
    last: HashMap<usize, std::collections::VecDeque<(Instant, SubtaskCounters)>>,
    /// Where this process serves `/metrics`, if it does.
    metrics_address: Option<String>,
    /// The job's id on its cluster, if a task executor's board knows it.
    job_id: Option<String>,
    /// Commands asked of the job here, not taken by its JobMaster yet.
    commands: Vec<(u64, JobCommand)>,
    /// Who waits for the answer to each command taken, by request.
    answers: HashMap<u64, Answer>,
    next_request: u64,
    /// The view a lost JobMaster last showed, for [`JobBoard::start_job`] to carry on (a
    /// JobMaster started by a takeover).
    carried: Option<JobView>,
}

impl Board {
    /// The job ended: its duration is final, nothing runs, no checkpoint is pending.
    fn finish(&mut self) {
        if let Some(started) = self.started {
            self.view.duration_ms = started.elapsed().as_millis() as u64;
        }
        for vertex in &mut self.view.vertices {
            for subtask in &mut vertex.subtasks {
                subtask.records_in_per_second = 0.0;
                subtask.records_out_per_second = 0.0;
                subtask.bytes_in_per_second = 0.0;
                subtask.bytes_out_per_second = 0.0;
                subtask.busy_ms_per_second = 0.0;
                subtask.backpressured_ms_per_second = 0.0;
                subtask.idle_ms_per_second = 0.0;
            }
        }
        self.view.fail_pending("the job ended");
    }
}

/// The job's story so far, from `previous` onto `view` (of the same job, planned anew):
/// its start, attempts, restarts, exceptions and checkpoints. Returns how long ago it
/// started.
fn carry_story(view: &mut JobView, previous: JobView) -> std::time::Duration {
    view.start_time_ms = previous.start_time_ms;
    view.attempt = previous.attempt;
    view.restarts = previous.restarts;
    view.exceptions = previous.exceptions;
    let (checkpoints, before) = (&mut view.checkpoints, previous.checkpoints);
    checkpoints.triggered = before.triggered;
    checkpoints.completed = before.completed;
    checkpoints.failed = before.failed;
    checkpoints.restored_from = before.restored_from;
    checkpoints.history = before.history;
    std::time::Duration::from_millis(WallClock.now_ms().saturating_sub(view.start_time_ms))
}

pub use eddy_rpc::messages::Answer;

impl JobBoard {
    fn board(&self) -> MutexGuard<'_, Board> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job as it is now.
    pub fn view(&self) -> JobView {
        let board = self.board();
        let mut view = board.view.clone();
        if let Some(started) = board.started {
            if !view.state.is_some_and(JobState::is_terminal) {
                view.duration_ms = started.elapsed().as_millis() as u64;
            }
        }
        view
    }

    /// Where this process serves `/metrics` (a task executor tells its JobMaster).
    pub fn set_metrics_address(&self, address: String) {
        self.board().metrics_address = Some(address);
    }

    pub fn metrics_address(&self) -> Option<String> {
        self.board().metrics_address.clone()
    }

    /// The job's id on its cluster (a task executor's board), for its metrics' labels.
    pub fn set_job_id(&self, id: String) {
        self.board().job_id = Some(id);
    }

    pub fn job_id(&self) -> Option<String> {
        self.board().job_id.clone()
    }

    /// Asks the job's JobMaster for `command` (savepoint, stop, cancel); `answer` gets its
    /// answer. Refused at once when the job is not running here.
    pub fn command(&self, command: JobCommand, answer: Answer) {
        let mut board = self.board();
        if board.view.state != Some(JobState::Running) {
            let state = board.view.state.map_or("not started", JobState::name);
            drop(board);
            return answer(Err(format!("the job is not running ({state})")));
        }
        board.next_request += 1;
        let request = board.next_request;
        board.commands.push((request, command));
        board.answers.insert(request, answer);
    }

    /// The commands asked since the last call, by request.
    pub fn take_commands(&self) -> Vec<(u64, JobCommand)> {
        std::mem::take(&mut self.board().commands)
    }

    /// The answer to command `request`.
    pub fn answer(&self, request: u64, reply: Result<String, String>) {
        let answer = self.board().answers.remove(&request);
        if let Some(answer) = answer {
            answer(reply);
        }
    }

    /// Where the attempt's task executors serve `/metrics`.
    pub fn set_task_executors(&self, executors: Vec<TaskExecutorView>) {
        self.board().view.task_executors = executors;
    }

    /// A JobMaster started by a takeover carries on the job as its lost JobMaster last
    /// showed it: [`JobBoard::start_job`] keeps its story.
    pub fn carry_on(&self, previous: JobView) {
        let mut board = self.board();
        // Shown as it was until the job starts here (a JobMaster that fails before that
        // reports the story, not an empty view).
        board.view = previous.clone();
        board.carried = Some(previous);
    }

    /// A job starts: its graph, its checkpoint settings, no attempt yet (or, after
    /// [`JobBoard::carry_on`], the story of its lost JobMaster).
    pub fn start_job(&self, graph: &StreamGraph, plan: &ChainPlan, storage: String) {
        let carried = self.board().carried.take();
        self.plan_job(graph, plan, storage, carried);
    }

    /// The running job is planned anew (rescaled): its vertices change, its story stays.
    pub fn replan_job(&self, graph: &StreamGraph, plan: &ChainPlan, storage: String) {
        let previous = self.board().view.clone();
        self.plan_job(graph, plan, storage, Some(previous));
    }

    fn plan_job(&self, graph: &StreamGraph, plan: &ChainPlan, storage: String, previous: Option<JobView>) {
        let config = &graph.config;
        let checkpoint = &config.checkpoint;
        let mut board = self.board();
        board.started = Some(Instant::now());
        board.places.clear();
        board.last.clear();
        board.view = JobView {
            name: graph.job_name.clone(),
            state: Some(JobState::Created),
            start_time_ms: WallClock.now_ms(),
            max_parallelism: graph.max_parallelism.get(),
            vertices: layout::vertices(graph, plan),
            edges: layout::edges(graph, plan),
            ..JobView::default()
        };
        board.view.checkpoints.config = CheckpointConfigView {
            interval_ms: if config.checkpointing_enabled() { checkpoint.interval_ms } else { 0 },
            mode: match checkpoint.mode {
                CheckpointingMode::ExactlyOnce => "EXACTLY_ONCE",
                CheckpointingMode::AtLeastOnce => "AT_LEAST_ONCE",
            }
            .to_string(),
            timeout_ms: checkpoint.timeout_ms,
            min_pause_ms: checkpoint.min_pause_ms,
            max_concurrent: checkpoint.max_concurrent as u32,
            retained: checkpoint.retained as u32,
            storage,
        };
        if let Some(previous) = previous {
            let ago = carry_story(&mut board.view, previous);
            board.started = Instant::now().checked_sub(ago).or(board.started);
        }
    }

    /// An attempt starts with `tasks` (every task of the job, numbered by position) of
    /// which those `shown` are on this board, each on the TaskManager `task_manager_of`
    /// says; `number`: the attempt's number on the cluster (from 1), or `None` for the
    /// one after the last shown here.
    pub fn start_attempt(
        &self,
        number: Option<u32>,
        tasks: &[(NodeId, u32)],
        shown: &dyn Fn(usize) -> bool,
        task_manager_of: &dyn Fn(usize) -> u32,
        restored_from: Option<String>,
    ) {
        let mut board = self.board();
        let board = &mut *board;
        board.view.attempt = number.unwrap_or(board.view.attempt + 1);
        board.view.state = Some(JobState::Running);
        board.view.checkpoints.restored_from = restored_from;
        board.places.clear();
        board.last.clear();
        for vertex in &mut board.view.vertices {
            vertex.subtasks.clear();
        }
        for (index, (head, subtask)) in tasks.iter().enumerate() {
            if !shown(index) {
                continue;
            }
            let Some(v) = board.view.vertices.iter().position(|v| v.id == head.0) else { continue };
            let vertex = &mut board.view.vertices[v];
            board.places.insert(index, (v, vertex.subtasks.len()));
            vertex.subtasks.push(SubtaskView {
                index: *subtask,
                task_manager: task_manager_of(index),
                ..SubtaskView::default()
            });
        }
        board.view.fail_pending("its attempt ended");
    }

    /// The subtasks' counters now, by task index: their rates over the window of samples
    /// (records, bytes) and since the last one (shares of time).
    pub fn sample(&self, counters: &[(usize, SubtaskCounters)]) {
        let now = Instant::now();
        let mut board = self.board();
        let board = &mut *board;
        for (task, counted) in counters {
            let Some(&(v, s)) = board.places.get(task) else { continue };
            let Some(subtask) = board.view.vertices.get_mut(v).and_then(|v| v.subtasks.get_mut(s)) else { continue };
            let samples = board.last.entry(*task).or_default();
            let ms = |at: Instant| now.duration_since(at).as_millis() as u64;
            if let (Some(&(first, oldest)), Some(&(last, before))) = (samples.front(), samples.back()) {
                apply_windowed_rates(subtask, (&oldest, ms(first)), (&before, ms(last)), counted);
            }
            subtask.counters = *counted;
            samples.push_back((now, *counted));
            while samples.front().is_some_and(|(at, _)| now.duration_since(*at) > RATE_WINDOW) {
                samples.pop_front();
            }
        }
    }

    /// What the operators' coordinators show now.
    pub fn set_coordinators(&self, status: Vec<String>, gauges: Vec<GaugeView>) {
        let mut board = self.board();
        board.view.coordinator_status = status;
        board.view.gauges = gauges;
    }

    pub fn checkpoint_triggered(&self, id: u64, savepoint: bool) {
        let mut board = self.board();
        let checkpoints = &mut board.view.checkpoints;
        checkpoints.triggered += 1;
        checkpoints.in_progress += 1;
        checkpoints.history.push(CheckpointView {
            id,
            savepoint,
            status: CheckpointStatus::InProgress,
            trigger_time_ms: WallClock.now_ms(),
            ..CheckpointView::default()
        });
        let excess = checkpoints.history.len().saturating_sub(HISTORY_MAX);
        checkpoints.history.drain(..excess);
    }

    /// A checkpoint (or savepoint) completed; `task_bytes` is each task's state in it, in
    /// task order.
    pub fn checkpoint_completed(&self, stats: &CheckpointStats, task_bytes: &[u64]) {
        let mut board = self.board();
        let board = &mut *board;
        let Some(checkpoint) = board.view.checkpoints.history.iter_mut().find(|c| c.id == stats.id.0) else {
            return;
        };
        if checkpoint.status != CheckpointStatus::InProgress {
            return;
        }
        checkpoint.status = CheckpointStatus::Completed;
        checkpoint.duration_ms = stats.duration_ms;
        checkpoint.sync_ms = stats.sync_ms;
        checkpoint.async_ms = stats.async_ms;
        checkpoint.bytes = stats.bytes;
        checkpoint.incremental_bytes = stats.incremental_bytes;
        checkpoint.location = stats.location.clone();
        let checkpoints = &mut board.view.checkpoints;
        checkpoints.in_progress = checkpoints.in_progress.saturating_sub(1);
        checkpoints.completed += 1;
        for vertex in &mut board.view.vertices {
            vertex.state_bytes = 0;
        }
        for (task, bytes) in task_bytes.iter().enumerate() {
            if let Some(vertex) = board.places.get(&task).and_then(|&(v, _)| board.view.vertices.get_mut(v)) {
                vertex.state_bytes += bytes;
            }
        }
    }

    /// A checkpoint that will never complete, and why.
    pub fn checkpoint_failed(&self, id: u64, reason: &str) {
        let mut board = self.board();
        let Some(checkpoint) = board.view.checkpoints.history.iter_mut().find(|c| c.id == id) else { return };
        if checkpoint.status != CheckpointStatus::InProgress {
            return;
        }
        checkpoint.status = CheckpointStatus::Failed;
        checkpoint.duration_ms = WallClock.now_ms().saturating_sub(checkpoint.trigger_time_ms);
        checkpoint.failure = Some(reason.to_string());
        let checkpoints = &mut board.view.checkpoints;
        checkpoints.in_progress = checkpoints.in_progress.saturating_sub(1);
        checkpoints.failed += 1;
    }

    /// The running attempt failed; `restarted`: the restart strategy restarts the job.
    pub fn attempt_failed(&self, message: String, restarted: bool) {
        let mut board = self.board();
        if restarted {
            board.view.restarts += 1;
        }
        board.view.push_exception(WallClock.now_ms(), message, restarted);
        board.view.state = Some(if restarted { JobState::Deploying } else { JobState::Failed });
        if !restarted {
            board.finish();
        }
        // A savepoint it was taking is gone with it.
        let unanswered: Vec<Answer> = board.answers.drain().map(|(_, answer)| answer).collect();
        board.commands.clear();
        drop(board);
        for answer in unanswered {
            answer(Err("the job failed before it answered; see its exceptions".into()));
        }
    }

    /// The job ended in `state`.
    pub fn ended(&self, state: JobState) {
        let mut board = self.board();
        board.finish();
        // Commands it will never take are answered.
        let unanswered: Vec<Answer> = board.answers.drain().map(|(_, answer)| answer).collect();
        board.commands.clear();
        board.view.state = Some(state);
        drop(board);
        for answer in unanswered {
            answer(Err(format!("the job ended ({state}) before it answered")));
        }
    }
}
