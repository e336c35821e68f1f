//! A job on a cluster, the JobMaster's side: it submits the job to the JobManager, and
//! runs each attempt on task executors. An attempt asks the JobManager for slots, waits
//! for the task executors the TaskManagers start to say hello (refusing one whose binary
//! builds another graph), starts them, and then coordinates them with the same
//! [`AttemptCoordinator`] as a local attempt: mailbox messages go out over each
//! executor's connection, reports and exits come back over it, and a connection lost
//! fails the executor's subtasks at once.

use super::coordinator::{AttemptCoordinator, CommandOutcome, RemoteHooks};
use super::job_client::{ExecutorJoin, JobClient};
use super::{Attempt, AttemptEnd, AttemptLauncher, JobMaster, JobResult, TaskExit};
use crossbeam_channel::{select, Select, Sender};
use eddy_rpc::messages::JobMasterMessage;
use eddy_rpc::slots::{slot_owners, ExecutorSlots};
use eddy_rpc::view::TaskExecutorView;
use eddy_rpc::ClusterTarget;
use eddy_rpc::{AttemptId, Connection, JobState, Reader, TaskManagerId};
use eddy_runtime::cluster::executor_link::{ExecutorMessage, RestoreTicket, StartTasks, TaskMetrics};
use eddy_runtime::cluster::fingerprint::{describe, first_difference};
use eddy_runtime::error::{FailureKind, JobError, TaskError};
use eddy_runtime::graph::{validate, ChainPlan, SchedulerMode, StreamGraph};
use eddy_runtime::task::{mailbox, MailboxReceiver, Mailboxes, TaskReport};
use eddy_types::{Clock, NodeId};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an attempt waits for its task executors to start and say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long subtasks may take to stop after a cancel before their executors are dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(30);
/// How often a connection's forwarder looks at the attempt's cancel flag.
const FORWARD_WAIT_MS: u64 = 20;

/// Runs a job's attempts on the cluster its [`JobClient`] submitted it to.
pub(crate) struct RemoteLauncher {
    clock: Arc<dyn Clock>,
    client: JobClient,
}

impl RemoteLauncher {
    /// Submits the job to the cluster's JobManager (or, `resume`, takes the job back under
    /// its id) and coordinates it from here until it ends; the JobManager hears how.
    pub(crate) fn execute(
        target: ClusterTarget,
        clock: Arc<dyn Clock>,
        graph: StreamGraph,
        resume: Option<eddy_rpc::JobId>,
    ) -> Result<JobResult, JobError> {
        let job = graph.job_name.clone();
        validate(&graph)?;
        let parallelism = graph.slots_needed();
        if resume.is_none() {
            super::restore::check_before_submit(&graph)?;
        }
        if target.detached && resume.is_none() {
            return submit_detached(&target, &graph);
        }
        let client =
            JobClient::submit(&target, &job, parallelism, graph.exclusive_resources(), resume).map_err(|source| {
                JobError::Cluster {
                    job: job.clone(),
                    message: format!("cannot submit the job to the JobManager at {}", target.jobmanager),
                    source: Some(source),
                }
            })?;
        let mut client = client;
        let board = graph.services.board.clone();
        if let Some(previous) = client.previous.take() {
            // Started by a takeover: the job's story goes on from where its lost
            // JobMaster left it (its start, restarts, the loss, its checkpoints).
            board.carry_on(*previous);
        }
        let launcher = RemoteLauncher { clock, client };
        let outcome = JobMaster { launcher: &launcher }.run(graph);
        // The job's last view: how it ended, nothing running, nothing pending.
        let _ = launcher.client.send(&JobMasterMessage::View(Box::new(board.view())));
        launcher.client.finish(match &outcome {
            Ok(result) if result.stopped => JobState::Stopped,
            Ok(_) => JobState::Finished,
            Err(JobError::Cancelled { .. }) => JobState::Canceled,
            Err(_) => JobState::Failed,
        });
        outcome
    }
}

/// Submits the job detached (`--detached`): prints the job's id, as Flink's CLI does,
/// and returns.
fn submit_detached(target: &ClusterTarget, graph: &StreamGraph) -> Result<JobResult, JobError> {
    let job = graph.job_name.clone();
    let id = JobClient::submit_detached(target, &job, graph.slots_needed(), graph.exclusive_resources()).map_err(
        |source| JobError::Cluster {
            job: job.clone(),
            message: format!("cannot submit the job to the JobManager at {}", target.jobmanager),
            source: Some(source),
        },
    )?;
    tracing::info!(job = %id, name = %job, "job submitted detached; its JobMaster starts on a TaskManager");
    println!("Job has been submitted with JobID {id}");
    Ok(JobResult { detached: Some(id), ..JobResult::new(job) })
}

impl AttemptLauncher for RemoteLauncher {
    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    fn reactive_parallelism(&self, graph: &StreamGraph) -> Option<u32> {
        (graph.config.scheduler_mode == SchedulerMode::Reactive)
            .then(|| reactive_target(self.client.slots_available(), graph))
    }

    fn job_ended(&self, state: JobState) {
        let _ = self.client.send(&JobMasterMessage::State(state));
    }

    fn storage_opened(&self, job_dir: Option<&str>) {
        if let Some(dir) = job_dir {
            let _ = self.client.send(&JobMasterMessage::JobDirectory(dir.to_string()));
        }
    }

    /// One attempt on the cluster.
    fn launch(&self, attempt: Attempt<'_>, result: &mut JobResult) -> AttemptEnd {
        let client = &self.client;
        let Attempt { graph, plan, start, storage, retained, savepoint_storage } = attempt;
        let restore_source = start.restore.as_ref().map(|plan| plan.source().clone());
        let restore_source = restore_source.as_ref();
        let job = graph.job_name.clone();
        let cluster_error =
            |message: String| AttemptEnd::Failed(JobError::Cluster { job: job.clone(), message, source: None });
        let tasks: Vec<(NodeId, u32)> = plan.tasks(graph);
        let slots = graph.slots_needed();
        let attempt = client.next_attempt();
        // The leader this request goes to: a `Submitted` from a later one means it never
        // heard it.
        let mut asked_leader = client.leader_changes();
        let request = JobMasterMessage::RequestSlots {
            attempt,
            slots,
            timeout_ms: client.target.slot_timeout_ms,
            job_master: client.address.clone(),
            operator_parallelism: graph.operator_parallelism(),
        };
        if let Err(e) = client.send(&request) {
            // The JobManager died (a restart raced the news of its loss): the job fails
            // as on that news, saying so.
            tracing::error!(reason = %eddy_types::chain(&e), "lost the JobManager; the job fails");
            return cluster_error(format!(
                "lost the JobManager: cannot ask it for slots ({e}); no JobManager can take the job back, so it \
                 fails (its latest completed checkpoint stays, to restore it from)",
                e = eddy_types::chain(&e)
            ));
        }
        tracing::info!(job = %job, attempt = %attempt, slots, "asking the JobManager for slots");
        // TaskManagers lost while the JobManager answers: slots it gives there are gone.
        let mut lost_meanwhile = Vec::new();
        let executors = loop {
            match client.events.recv() {
                Ok(JobMasterMessage::SlotsAllocated { attempt: a, executors }) if a == attempt => break executors,
                Ok(JobMasterMessage::TaskManagerLost { task_manager, .. }) => lost_meanwhile.push(task_manager),
                Ok(JobMasterMessage::SlotsUnavailable { attempt: a, message }) if a == attempt => {
                    return cluster_error(message)
                }
                Ok(JobMasterMessage::Refused(why)) => return cluster_error(why),
                Ok(JobMasterMessage::Command { request, .. }) => reply_busy(client, request),
                // A new leader (high availability) since the request: it never heard it.
                Ok(JobMasterMessage::Submitted { .. }) if client.leader_changes() != asked_leader => {
                    asked_leader = client.leader_changes();
                    if let Err(e) = client.send(&request) {
                        return cluster_error(format!(
                            "cannot ask the new JobManager for slots: {e}",
                            e = eddy_types::chain(&e)
                        ));
                    }
                }
                Ok(_) => {}
                Err(_) => return cluster_error("lost the JobManager".into()),
            }
        };
        let release = || {
            let _ = client.send(&JobMasterMessage::ReleaseSlots { attempt });
        };
        if let Some(tm) = executors.iter().map(|e| e.task_manager).find(|tm| lost_meanwhile.contains(tm)) {
            release();
            return AttemptEnd::Failed(JobError::TaskFailed {
                job: job.clone(),
                operator: "(deployment)".into(),
                subtask: 0,
                parallelism: 1,
                kind: FailureKind::Cluster,
                message: format!("TaskManager {tm} was lost while its slots were given to the job"),
            });
        }
        let joined = match await_executors(client, graph, plan, (attempt, asked_leader), &executors) {
            Ok(joined) => joined,
            Err(end) => {
                release();
                return end;
            }
        };
        graph.services.board.set_task_executors(
            joined
                .iter()
                .map(|j| TaskExecutorView {
                    task_manager: j.hello.task_manager.0,
                    metrics_address: j.hello.metrics_address.clone(),
                })
                .collect(),
        );
        let parallelism = graph.slots_needed();
        let owners = match slot_owners(&executors, parallelism) {
            Ok(owners) => owners,
            Err(e) => {
                release();
                return cluster_error(format!("the JobManager sent {e}"));
            }
        };
        let owner = |subtask: u32| owners[subtask as usize].get();

        // Mailboxes here, forwarded over each executor's connection.
        let cancel = Arc::new(AtomicBool::new(false));
        let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<TaskExit>();
        let mut senders = Vec::new();
        let mut receivers: Vec<Vec<(u32, MailboxReceiver)>> = executors.iter().map(|_| Vec::new()).collect();
        let mut owned: Vec<Vec<usize>> = executors.iter().map(|_| Vec::new()).collect();
        let tasks_owner: Vec<usize> = tasks.iter().map(|(_, subtask)| owner(*subtask)).collect();
        for (index, (_, subtask)) in tasks.iter().enumerate() {
            let (tx, rx) = mailbox();
            senders.push(tx);
            receivers[owner(*subtask)].push((index as u32, rx));
            owned[owner(*subtask)].push(index);
        }
        let addresses: Vec<(ExecutorSlots, String)> =
            executors.iter().cloned().zip(joined.iter().map(|j| j.hello.data_address.clone())).collect();
        let restore = restore_source.map(|source| RestoreTicket {
            location: source.location.clone(),
            metadata: source.metadata.clone(),
            owned: source.owned,
            in_job_storage: source.owned || source.storage.describe() == storage.describe(),
            storage_root: source.storage.describe(),
        });
        let start_message = ExecutorMessage::Start(Box::new(StartTasks {
            executors: addresses,
            seed: start.seed.0,
            restore,
            job_dir: start.job_dir.clone(),
        }));
        // The restored metadata travels in the start: state kept inline (JobManager memory)
        // can outgrow a control frame, and would on every restart.
        if let Some(bytes) = eddy_rpc::frame::oversized(&start_message) {
            release();
            return AttemptEnd::Failed(JobError::Checkpoint {
                job: job.clone(),
                message: format!(
                    "the checkpoint to restore holds {bytes} bytes of state in the JobManager's memory, more than a \
                        control message carries ({}); use a checkpoint directory",
                    eddy_rpc::frame::MESSAGE_BYTES_MAX
                ),
                source: None,
            });
        }
        let attempt_over = Arc::new(AtomicBool::new(false));
        let metrics: Arc<Mutex<HashMap<u32, TaskMetrics>>> = Arc::default();
        let mut connections: Vec<(TaskManagerId, Connection)> = Vec::new();
        let mut threads = Vec::new();
        for (executor, (join, mailboxes)) in joined.into_iter().zip(receivers).enumerate() {
            let ExecutorJoin { connection, reader, hello } = join;
            let peer = format!("TaskManager {} (task executor at {})", hello.task_manager, connection.peer());
            connections.push((hello.task_manager, connection.clone()));
            let (tasks_here, reports, done) = (owned[executor].clone(), reports_tx.clone(), done_tx.clone());
            let metrics = metrics.clone();
            threads
                .push(std::thread::spawn(move || read_executor(reader, (reports, done, &metrics), tasks_here, &peer)));
            let (forward, cancel, over) = (connection.clone(), cancel.clone(), attempt_over.clone());
            threads.push(std::thread::spawn(move || forward_mailboxes(&forward, mailboxes, &cancel, &over)));
            if let Err(e) = connection.send(&start_message) {
                tracing::warn!(error = %eddy_types::chain(&e), "cannot start a task executor; its subtasks fail");
                connection.close();
            }
        }
        drop(reports_tx);
        drop(done_tx);
        tracing::info!(job = %job, attempt = %attempt, executors = executors.len(), subtasks = tasks.len(), "attempt \
            running on the cluster");

        let task_count = tasks.len();
        let mut run = AttemptCoordinator::new(
            (graph, plan),
            (storage, retained, savepoint_storage),
            (Mailboxes::new(senders), tasks, cancel),
            self.clock.clone(),
            start.next_checkpoint_id,
            false,
        );
        run.after_rescale = start.rescaled;
        run.autoscaler = start.autoscaler.clone();
        run.start_operator_coordinators(start.restore.as_deref());
        let announced: Vec<Connection> = connections.iter().map(|(_, c)| c.clone()).collect();
        run.hooks = Some(RemoteHooks {
            announce_savepoint: Box::new(move |id, dir| {
                for connection in &announced {
                    // Straight onto each connection, before any mailbox carries the trigger.
                    let _ = connection.send(&ExecutorMessage::SavepointTarget { id: id.0, dir: dir.to_string() });
                }
            }),
            reply: Box::new(|request, reply| {
                let _ = client.send(&JobMasterMessage::CommandReply { request, reply });
            }),
            slots_available: Box::new(|| client.slots_available()),
            publish_view: Box::new(|view| {
                let _ = client.send(&JobMasterMessage::View(Box::new(view)));
            }),
        });
        let sampled = metrics.clone();
        run.sampler = Some(Box::new(move || {
            let metrics = sampled.lock().unwrap_or_else(|e| e.into_inner());
            metrics.values().map(|m| (m.task as usize, m.counters)).collect()
        }));
        let connections_ref = &connections;
        let owned_ref = &owned;
        let task_managers: Vec<TaskManagerId> = tasks_owner.iter().map(|&e| executors[e].task_manager).collect();
        run.observe_attempt(Some(attempt.0), &|task| task_managers[task].0, start.restore.as_deref());
        let metrics_ref = &metrics;
        let mut on_event = |run: &mut AttemptCoordinator<'_>, event: JobMasterMessage, _result: &mut JobResult| {
            match event {
                JobMasterMessage::TaskManagerLost { task_manager, reason } => {
                    for (executor, (tm, connection)) in connections_ref.iter().enumerate() {
                        if *tm == task_manager {
                            // Its subtasks fail as the connection goes (a process stopped, not
                            // killed, keeps its sockets open).
                            connection.close();
                            if let Some(&first) = owned_ref[executor].first() {
                                run.task_failed(
                                    first,
                                    TaskError::Lost(format!("TaskManager {task_manager} was lost: {reason}")),
                                );
                            }
                        }
                    }
                }
                JobMasterMessage::ExecutorFailed { attempt: failed, executor, status } if failed == attempt => {
                    if let Some(&first) = owned_ref.get(executor.get()).and_then(|o| o.first()) {
                        run.task_failed(first, TaskError::Lost(format!("a task executor exited: {status}")));
                    }
                }
                JobMasterMessage::Refused(why) => {
                    // The JobManager is gone for good (its loss is seen at once when its
                    // process dies, after the heartbeat timeout when it falls silent): no
                    // slots, no restart, no commands can come any more, so the job fails
                    // now rather than run on unseen.
                    tracing::error!(reason = %why, "lost the JobManager; the job fails");
                    run.fail(JobError::Cluster {
                        job: job.clone(),
                        message: format!(
                            "{why}; no JobManager can take the job back, so it fails (its latest completed checkpoint \
                                stays, to restore it from)"
                        ),
                        source: None,
                    });
                }
                JobMasterMessage::Submitted { .. } if client.leader_changes() != asked_leader => {
                    // A new leader took the job back (high availability): the attempt's
                    // slots were the old leader's, whose TaskManagers stopped their task
                    // executors; it restarts from the latest checkpoint on the new
                    // leader's slots.
                    if let Some(first) = owned_ref.iter().find_map(|tasks| tasks.first().copied()) {
                        run.task_failed(
                            first,
                            TaskError::Lost(
                                "the JobManager changed (a new leader); the attempt's slots are void".into(),
                            ),
                        );
                    }
                }
                JobMasterMessage::SlotsAvailable { slots }
                    if graph.config.scheduler_mode == SchedulerMode::Reactive =>
                {
                    // Reactive mode grows into new slots now; it shrinks when an attempt
                    // loses a TaskManager and the next one takes what is left.
                    let target = reactive_target(slots, graph);
                    if target > graph.slots_needed() {
                        tracing::info!(job = %job, slots, to = target, "reactive mode: more slots; rescaling");
                        if let Err(why) = run.rescale_now(target, None) {
                            tracing::info!(job = %job, reason = %why, "reactive mode: no rescale now");
                        }
                    }
                }
                JobMasterMessage::Command { request, command } => {
                    let status = |run: &AttemptCoordinator<'_>| {
                        let counted = metrics_ref.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        run.status_text(&task_managers, &counted)
                    };
                    let message = match run.command(request, command, &status) {
                        CommandOutcome::Answer(reply) => JobMasterMessage::CommandReply { request, reply },
                        // The answer follows when the savepoint completed.
                        CommandOutcome::Pending(text) => JobMasterMessage::CommandProgress { request, text },
                    };
                    let _ = client.send(&message);
                }
                _ => {}
            }
        };
        // A subtask that does not stop within the grace period after a cancel must not hold
        // the job: its executor's connection goes, which fails what is left of it, and the
        // released slots make its TaskManager kill the process.
        let (watch_cancel, watch_over) = (run.cancel_flag(), attempt_over.clone());
        let watched: Vec<Connection> = connections.iter().map(|(_, c)| c.clone()).collect();
        threads.push(std::thread::spawn(move || {
            while !watch_cancel.load(Ordering::SeqCst) {
                if watch_over.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let deadline = Instant::now() + CANCEL_GRACE;
            while Instant::now() < deadline {
                if watch_over.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            tracing::warn!(
                grace_s = CANCEL_GRACE.as_secs(),
                "subtasks still running after a cancel; dropping their task executors"
            );
            for connection in watched {
                connection.close();
            }
        }));
        run.coordinate(&done_rx, &reports_rx, task_count, result, (&client.events, &mut on_event));
        attempt_over.store(true, Ordering::SeqCst);
        for (_, connection) in &connections {
            let _ = connection.send(&ExecutorMessage::CancelAttempt);
            connection.close();
        }
        release();
        for thread in threads {
            let _ = thread.join();
        }
        run.end(&reports_rx, result)
    }
}

/// Waits for one hello per executor of `attempt`, checking each one's graph.
fn await_executors(
    client: &JobClient,
    graph: &StreamGraph,
    plan: &ChainPlan,
    (attempt, leader): (AttemptId, u32),
    executors: &[ExecutorSlots],
) -> Result<Vec<ExecutorJoin>, AttemptEnd> {
    let job = graph.job_name.clone();
    let ours = describe(graph, plan);
    let mut joined: Vec<Option<ExecutorJoin>> = executors.iter().map(|_| None).collect();
    let deadline = Instant::now() + HELLO_TIMEOUT;
    let lost = |message: String| {
        AttemptEnd::Failed(JobError::TaskFailed {
            job: job.clone(),
            operator: "(deployment)".into(),
            subtask: 0,
            parallelism: 1,
            kind: FailureKind::Cluster,
            message,
        })
    };
    let refused = |message: String| AttemptEnd::Failed(JobError::Cluster { job: job.clone(), message, source: None });
    while joined.iter().any(Option::is_none) {
        select! {
            recv(client.executors) -> join => {
                let Ok(join) = join else { return Err(refused("the JobMaster stopped listening".into())) };
                let hello = &join.hello;
                if hello.attempt != attempt || hello.executor.get() >= joined.len() {
                    join.connection.close();
                    continue;
                }
                let tm = executors[hello.executor.get()].task_manager;
                if let Some(difference) = first_difference(&ours, &hello.graph) {
                    let message = format!(
                        "TaskManager {tm} (binary {}) builds a different graph from the job's arguments: {difference}",
                        hello.binary
                    );
                    let _ = join.connection.send(&ExecutorMessage::Refused(message.clone()));
                    join.connection.close();
                    tracing::error!(task_manager = %tm, %message, "task executor refused");
                    return Err(refused(message));
                }
                let executor = hello.executor.get();
                joined[executor] = Some(join);
            }
            recv(client.events) -> event => match event {
                Ok(JobMasterMessage::ExecutorFailed { attempt: a, executor, status }) if a == attempt => {
                    let tm = executors.get(executor.get()).map_or(TaskManagerId::default(), |e| e.task_manager);
                    return Err(refused(format!(
                        "the task executor on TaskManager {tm} exited before it could run the job: {status}"
                    )));
                }
                Ok(JobMasterMessage::TaskManagerLost { task_manager, reason })
                    if executors.iter().any(|e| e.task_manager == task_manager) => {
                    return Err(lost(format!("TaskManager {task_manager} was lost while deploying: {reason}")));
                }
                Ok(JobMasterMessage::Refused(why)) => return Err(refused(why)),
                Ok(JobMasterMessage::Submitted { .. }) if client.leader_changes() != leader => {
                    return Err(lost("the JobManager changed (a new leader) while the attempt was deployed".into()));
                }
                Ok(JobMasterMessage::Command { request, .. }) => reply_busy(client, request),
                Ok(_) => {}
                Err(_) => return Err(refused("lost the JobManager".into())),
            },
            default(deadline.saturating_duration_since(Instant::now())) => {
                let missing: Vec<String> = joined
                    .iter()
                    .enumerate()
                    .filter(|(_, j)| j.is_none())
                    .map(|(e, _)| format!("TaskManager {}", executors[e].task_manager))
                    .collect();
                return Err(lost(format!(
                    "no task executor from {} said hello within {} s",
                    missing.join(", "),
                    HELLO_TIMEOUT.as_secs()
                )));
            }
        }
    }
    Ok(joined.into_iter().flatten().collect())
}

/// The parallelism reactive mode takes with `slots` available: all of them, up to the
/// max parallelism, at least 1.
fn reactive_target(slots: u32, graph: &StreamGraph) -> u32 {
    slots.min(graph.max_parallelism.get()).max(1)
}

fn reply_busy(client: &JobClient, request: u64) {
    let reply = Err("the job is being deployed; try again in a moment".to_string());
    let _ = client.send(&JobMasterMessage::CommandReply { request, reply });
}

/// An executor's reports, exits and counters; when its connection goes, its subtasks that
/// have not exited fail with the reason.
#[allow(clippy::type_complexity)]
fn read_executor(
    mut reader: Reader,
    (reports, done, metrics): (Sender<TaskReport>, Sender<TaskExit>, &Mutex<HashMap<u32, TaskMetrics>>),
    tasks: Vec<usize>,
    peer: &str,
) {
    let mut exited = HashSet::new();
    loop {
        match reader.receive() {
            // Only its own subtasks, each exiting once: anything else is a confused peer.
            Ok(ExecutorMessage::Report(report)) if report.task().is_none_or(|t| tasks.contains(&t)) => {
                let _ = reports.send(report);
            }
            Ok(ExecutorMessage::TaskExited { task, outcome }) if tasks.contains(&(task as usize)) => {
                if exited.insert(task as usize) {
                    let _ = done.send((task as usize, outcome));
                }
            }
            Ok(ExecutorMessage::TaskMetrics(counted)) => {
                let mut metrics = metrics.lock().unwrap_or_else(|e| e.into_inner());
                // Only its own subtasks' counters.
                for task in counted.into_iter().filter(|t| tasks.contains(&(t.task as usize))) {
                    metrics.insert(task.task, task);
                }
            }
            Ok(ExecutorMessage::Heartbeat) => {}
            Ok(other) => tracing::warn!(peer, message = ?other, "unexpected message from a task executor; ignored"),
            Err(e) => {
                for &task in tasks.iter().filter(|t| !exited.contains(t)) {
                    let _ =
                        done.send((task, Err(TaskError::Lost(format!("lost {peer}: {e}", e = eddy_types::chain(&e))))));
                }
                return;
            }
        }
    }
}

/// Sends what the coordinator posts to an executor's subtasks, in order, and the
/// attempt's cancellation once the cancel flag is set.
fn forward_mailboxes(
    connection: &Connection,
    mailboxes: Vec<(u32, MailboxReceiver)>,
    cancel: &AtomicBool,
    over: &AtomicBool,
) {
    let mut cancel_sent = false;
    loop {
        // Read the flag first: whatever was posted before it was set is sent before the
        // cancellation.
        let cancelled = cancel.load(Ordering::SeqCst);
        let mut sent = false;
        for (task, mailbox) in &mailboxes {
            while let Ok(control) = mailbox.try_recv() {
                sent = true;
                if connection.send(&ExecutorMessage::Control { task: *task, control }).is_err() {
                    return;
                }
            }
        }
        if cancelled && !cancel_sent {
            cancel_sent = true;
            if connection.send(&ExecutorMessage::CancelAttempt).is_err() {
                return;
            }
        }
        if over.load(Ordering::SeqCst) {
            return;
        }
        if !sent {
            let mut select = Select::new();
            for (_, mailbox) in &mailboxes {
                select.recv(mailbox);
            }
            let _ = select.ready_timeout(Duration::from_millis(FORWARD_WAIT_MS));
        }
    }
}
