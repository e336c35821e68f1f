//! A task executor: the process a TaskManager starts for one attempt of one job, from the
//! job's own binary with the job's arguments (application mode). Its `main` runs as
//! usual up to `execute`, which finds `eddy_rpc::launch::LAUNCH_ENV` set
//! (`eddy_jobmaster::ExecutionMode::TaskExecutor`) and comes here instead of running
//! the job locally:
//!
//! 1. read the deployment from standard input (the TaskManager keeps that pipe open: its
//!    end means the TaskManager is gone, and so must this process be);
//! 2. say hello to the job's JobMaster with the graph this binary built, and wait for
//!    the start of the attempt (or a refusal, if the graphs differ);
//! 3. wire its slots' subtasks: in-process channels between them, network channels to
//!    the other executors ([`crate::network`]);
//! 4. run each subtask on its own thread, forward the JobMaster's control messages to
//!    their mailboxes and their reports and exits back;
//! 5. return once every subtask ended (`execute` returns a result that says it ran as a
//!    task executor; the job's own result is its JobMaster's).

use super::executor_link::{ExecutorHello, ExecutorMessage, StartTasks, TaskMetrics};
use super::fingerprint::describe;
use crate::channel::{ChannelCapacity, CHANNEL_BATCHES_MAX};
use crate::deployment::restore::{restore_plan, RestoreSource};
use crate::deployment::subtasks::{
    open_task_storage, prepare_subtasks, start_snapshot_workers, start_subtask_threads, SubtaskEnv, Subtasks, TaskExit,
};
use crate::deployment::wiring::{wire_placed, Placement};
use crate::error::JobError;
use crate::graph::{plan_chains, validate, ChainPlan, StreamGraph};
use crate::network::{start_receivers, start_sender, ChannelCounters, ChannelKey, InboundSet, OutboundSet};
use crate::task::{install_panic_capture, DeclineCause, Mailboxes, TaskReport};
use eddy_checkpoint::storage::{CheckpointStorage, SavepointTargets};
use eddy_rpc::frame::read_value;
use eddy_rpc::launch::Launch;
use eddy_rpc::slots::{slot_owners, ExecutorSlots};
use eddy_rpc::{start_heartbeats, ClusterError, Connection, PeerRole, Reader, Security};
use eddy_types::{RunSeed, SystemClock};
use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How often a task executor sends its subtasks' counters to the JobMaster (a few
/// hundred bytes each time).
const METRICS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Why a task executor cannot run its part of an attempt.
#[derive(Debug, thiserror::Error)]
pub enum TaskExecutorError {
    /// Its TaskManager, its JobMaster or another task executor could not be reached, or
    /// said something unexpected.
    #[error("{context}")]
    Cluster {
        context: String,
        #[source]
        source: ClusterError,
    },
    /// The job's checkpoint storage, or the state to restore, cannot be opened here.
    #[error("{context}")]
    Checkpoint {
        context: String,
        #[source]
        source: eddy_checkpoint::CheckpointError,
    },
    /// This process cannot do its part (a thread, a listener, the graph it built).
    #[error("{0}")]
    Local(String),
}

impl TaskExecutorError {
    fn cluster(context: impl Into<String>) -> impl FnOnce(ClusterError) -> Self {
        let context = context.into();
        move |source| TaskExecutorError::Cluster { context, source }
    }

    fn checkpoint(context: &str) -> impl FnOnce(eddy_checkpoint::CheckpointError) -> Self + '_ {
        move |source| TaskExecutorError::Checkpoint { context: context.to_string(), source }
    }
}

/// Runs this process as a task executor for `graph` until its subtasks of the attempt
/// ended, or says why it could not.
pub fn run(graph: StreamGraph) -> Result<(), JobError> {
    let job = graph.job_name.clone();
    match serve(graph) {
        Ok(()) => Ok(()),
        Err(error) => {
            tracing::error!(error = %eddy_types::chain(&error), "task executor failed");
            // The TaskManager keeps a task executor's last lines of standard error to
            // explain its exit, whatever the program does with the error.
            let error = match error {
                TaskExecutorError::Cluster { context, source } => {
                    JobError::Cluster { job, message: format!("task executor failed: {context}"), source: Some(source) }
                }
                TaskExecutorError::Checkpoint { context, source } => JobError::Checkpoint {
                    job,
                    message: format!("task executor failed: {context}"),
                    source: Some(source),
                },
                TaskExecutorError::Local(why) => {
                    JobError::Cluster { job, message: format!("task executor failed: {why}"), source: None }
                }
            };
            eprintln!("eddy task executor: {error}", error = eddy_types::chain(&error));
            Err(error)
        }
    }
}

fn serve(graph: StreamGraph) -> Result<(), TaskExecutorError> {
    let local = TaskExecutorError::Local;
    let mut stdin = std::io::stdin().lock();
    let launch: Launch = read_value(&mut stdin)
        .map_err(|e| local(format!("cannot read the deployment from the TaskManager: {e}", e = eddy_types::chain(&e))))?
        .ok_or_else(|| local("the TaskManager closed the pipe before the deployment".into()))?;
    drop(stdin);
    // The TaskManager holds the other end: when it dies, so does this process.
    std::thread::Builder::new()
        .name("eddy-taskmanager-watch".into())
        .spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            eprintln!("eddy task executor: its TaskManager is gone; exiting");
            std::process::exit(3);
        })
        .map_err(|e| local(format!("cannot start a thread: {e}", e = eddy_types::chain(&e))))?;
    let deployment = launch.deployment.clone();
    let (security, heartbeats) = launch
        .credentials
        .open()
        .map_err(TaskExecutorError::cluster("the cluster's credentials from the TaskManager"))?;
    validate(&graph).map_err(|e| match e {
        JobError::InvalidJob { message, .. } => local(format!("the job's graph is invalid here: {message}")),
        other => local(format!("the job's graph is invalid here: {}", eddy_types::chain(&other))),
    })?;
    // The attempt's parallelism, which a rescale may have changed from the program's. A
    // binary that built another graph keeps its own: the JobMaster compares the graphs
    // and names the first difference.
    let graph = if deployment.operator_parallelism.is_empty() {
        graph
    } else {
        let mut running = graph.clone();
        match running.apply_operator_parallelism(&deployment.operator_parallelism) {
            Ok(()) => running,
            Err(why) => {
                tracing::warn!(reason = %why, "this binary's graph does not take the attempt's parallelism");
                graph
            }
        }
    };
    install_panic_capture();
    let plan = Arc::new(plan_chains(&graph));
    let graph = Arc::new(graph);
    let listener = TcpListener::bind((launch.data_host.as_str(), 0)).map_err(|e| {
        local(format!("cannot listen for data on {}: {e}", launch.data_host, e = eddy_types::chain(&e)))
    })?;
    let data_address = listener.local_addr().map_err(|e| local(eddy_types::chain(&e)))?.to_string();

    let stream = security
        .connect(&deployment.job_master, PeerRole::TaskExecutor, "reaching the job's JobMaster")
        .map_err(TaskExecutorError::cluster("reaching the job's JobMaster"))?;
    let (connection, mut reader) = Connection::new(stream, Some(heartbeats.timeout()))
        .map_err(TaskExecutorError::cluster("the connection to the JobMaster"))?;
    let binary = std::env::current_exe().map_or_else(|_| "?".into(), |p| p.display().to_string());
    graph.services.board.set_job_id(deployment.job.to_string());
    // Its own subtasks' `/metrics`, on the host its data listener is on; a server that
    // cannot start costs the metrics only, not the job.
    let metrics_address = graph.services.metrics_server.as_ref().and_then(|server| {
        let board = graph.services.board.clone();
        match server.serve(board, &launch.data_host, &launch.credentials.secret, security.tls.as_ref()) {
            Ok(address) => Some(address),
            Err(e) => {
                tracing::warn!(error = %e, "cannot serve /metrics of this task executor");
                None
            }
        }
    });
    connection
        .send(&ExecutorMessage::Hello(ExecutorHello {
            attempt: deployment.attempt,
            executor: deployment.executor,
            task_manager: launch.task_manager,
            graph: describe(&graph, &plan),
            data_address,
            binary,
            metrics_address,
        }))
        .map_err(TaskExecutorError::cluster("saying hello to the JobMaster"))?;
    let stop_heartbeats = Arc::new(AtomicBool::new(false));
    start_heartbeats(connection.clone(), heartbeats, stop_heartbeats.clone(), ExecutorMessage::Heartbeat);
    let start = loop {
        match reader.receive().map_err(TaskExecutorError::cluster("the JobMaster went away before the start"))? {
            ExecutorMessage::Start(start) => break start,
            ExecutorMessage::Heartbeat => {}
            ExecutorMessage::Refused(why) => return Err(local(format!("refused by the JobMaster: {why}"))),
            ExecutorMessage::CancelAttempt => return Ok(()),
            other => return Err(local(format!("unexpected message from the JobMaster before the start: {other:?}"))),
        }
    };
    let result = run_attempt(&graph, &plan, &launch, &security, *start, listener, connection.clone(), reader);
    stop_heartbeats.store(true, Ordering::Relaxed);
    connection.close();
    result
}

/// Runs this executor's subtasks of the attempt until every one ended.
#[allow(clippy::too_many_arguments)]
fn run_attempt(
    graph: &Arc<StreamGraph>,
    plan: &Arc<ChainPlan>,
    launch: &Launch,
    security: &Security,
    start: StartTasks,
    listener: TcpListener,
    connection: Connection,
    mut reader: Reader,
) -> Result<(), TaskExecutorError> {
    let local = TaskExecutorError::Local;
    let attempt = launch.deployment.attempt;
    let me = launch.deployment.executor;
    let slots: Vec<ExecutorSlots> = start.executors.iter().map(|(s, _)| s.clone()).collect();
    let parallelism = graph.slots_needed();
    let owners = slot_owners(&slots, parallelism).map_err(|e| local(format!("the JobMaster sent {e}")))?;
    let owner = |subtask: u32| owners[subtask as usize];
    if me.get() >= start.executors.len() {
        return Err(local(format!("the JobMaster started {} executors, not this one ({me})", start.executors.len())));
    }
    let (setups, remote) =
        wire_placed(graph, plan, ChannelCapacity::Bounded(CHANNEL_BATCHES_MAX), Some(Placement { owner: &owner, me }));
    // The attempt's task indexes, as the JobMaster numbers them.
    let indexes: HashMap<_, usize> = plan.tasks(graph).into_iter().enumerate().map(|(i, t)| (t, i)).collect();

    let config = &graph.config;
    let services = &graph.services;
    let storage = open_task_storage(graph, start.job_dir.as_deref())
        .map_err(TaskExecutorError::checkpoint("cannot open the checkpoint storage"))?;
    let storage_name = storage.describe();
    let savepoint_storage: Option<Arc<dyn CheckpointStorage>> = match &config.savepoint {
        None => None,
        Some(request) => Some(
            services
                .storage_opener
                .open(&request.dir.to_string_lossy())
                .map_err(TaskExecutorError::checkpoint("cannot open the savepoint directory"))?,
        ),
    };
    let restore = match &start.restore {
        None => None,
        Some(ticket) => {
            let source_storage = if ticket.in_job_storage {
                storage.clone()
            } else {
                services
                    .storage_opener
                    .open(&ticket.storage_root)
                    .map_err(TaskExecutorError::checkpoint("cannot open the state to restore"))?
            };
            let source = RestoreSource {
                storage: source_storage,
                location: ticket.location.clone(),
                metadata: ticket.metadata.clone(),
                owned: ticket.owned,
            };
            Some(Arc::new(restore_plan(graph, &source)))
        }
    };

    let targets = SavepointTargets::default();
    let workers = start_snapshot_workers(setups.len())
        .map_err(|e| local(format!("cannot start the threads that write snapshots: {e}", e = eddy_types::chain(&e))))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<TaskExit>();
    let env = SubtaskEnv {
        storage,
        savepoint_storage,
        savepoint_targets: targets.clone(),
        clock: Arc::new(SystemClock::new()),
        cancel: cancel.clone(),
        reports: reports_tx,
        work: workers.queue(),
        restore,
        seed: RunSeed(start.seed),
        ttl_clock: None,
    };
    let Subtasks { pending, mailboxes, counters: all_counters } =
        prepare_subtasks(graph, plan, setups, &env, &|head, subtask| indexes[&(head, subtask)]);
    // Its board shows its own subtasks.
    let board = services.board.clone();
    board.start_job(graph, plan, storage_name);
    let own: std::collections::HashSet<usize> = all_counters.iter().map(|(task, _)| *task).collect();
    board.start_attempt(
        Some(launch.deployment.attempt.0),
        &plan.tasks(graph),
        &|task| own.contains(&task),
        &|_| launch.task_manager.0,
        None,
    );
    drop(env);
    // Mailboxes by the attempt's task index; posted to without waiting (an outbox per
    // task), so a subtask with a full mailbox holds up nothing else.
    let mailbox_of: HashMap<u32, usize> =
        mailboxes.iter().enumerate().map(|(position, (index, _))| (*index as u32, position)).collect();
    let mailbox_senders = mailboxes.into_iter().map(|(_, mailbox)| mailbox).collect();
    let (handles, started) = start_subtask_threads(graph, plan, pending, &done_tx);
    drop(done_tx);
    if let Err(why) = started {
        cancel.store(true, Ordering::SeqCst);
        return Err(local(why));
    }
    let own_tasks = handles.len();

    // The network: receive from every producing executor, send to every consumer; each
    // channel counts its bytes for the subtask at this end.
    let by_task: HashMap<usize, Arc<crate::task::TaskCounters>> = all_counters.iter().cloned().collect();
    let counters_at = |keys: &mut dyn Iterator<Item = ChannelKey>, producing: bool| -> ChannelCounters {
        let mut counted = ChannelCounters::new();
        for key in keys {
            let Some(edge) = graph.edges.get(usize::from(key.edge)) else { continue };
            let (node, subtask) = if producing { (edge.from, key.from) } else { (edge.to, key.to) };
            let head = plan.head_of[node.0 as usize];
            if let Some(counters) = indexes.get(&(head, u32::from(subtask))).and_then(|task| by_task.get(task)) {
                counted.insert(key, counters.clone());
            }
        }
        counted
    };
    let inbound = remote
        .inbound
        .into_iter()
        .map(|(executor, wiring)| {
            let producer = format!("task executor {} at {}", executor, start.executors[executor.get()].1);
            let counters = counters_at(&mut wiring.channels.keys().copied(), false);
            let set = InboundSet {
                counters,
                channels: wiring.channels,
                initial_credit: wiring.initial_credit,
                credits: wiring.credits.1,
                lost: wiring.lost,
                producer,
            };
            (executor, set)
        })
        .collect();
    let data_address = listener.local_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
    start_receivers(listener, security.clone(), attempt, inbound)
        .map_err(TaskExecutorError::cluster("listening for data connections"))?;
    for (executor, channels) in remote.outbound {
        let address = &start.executors[executor.get()].1;
        let counters = counters_at(&mut channels.iter().map(|(key, _)| *key), true);
        start_sender(address, security, attempt, me, OutboundSet { channels, counters }, cancel.clone())
            .map_err(TaskExecutorError::cluster(format!("opening the data connection to task executor {executor}")))?;
    }
    tracing::info!(attempt = %attempt, executor = %me, subtasks = own_tasks, data_address = %data_address, "task \
        executor running its subtasks");

    // What the subtasks counted, for `status`, every METRICS_INTERVAL.
    let (metrics_connection, metrics_cancel) = (connection.clone(), cancel.clone());
    std::thread::Builder::new()
        .name("eddy-task-metrics".into())
        .spawn(move || loop {
            let metrics = all_counters
                .iter()
                .map(|(task, counters)| TaskMetrics { task: *task as u32, counters: counters.snapshot() })
                .collect::<Vec<_>>();
            board.sample(&metrics.iter().map(|m| (m.task as usize, m.counters)).collect::<Vec<_>>());
            if metrics_connection.send(&ExecutorMessage::TaskMetrics(metrics)).is_err()
                || metrics_cancel.load(Ordering::Relaxed)
            {
                return;
            }
            std::thread::sleep(METRICS_INTERVAL);
        })
        .map_err(|e| local(format!("cannot start a thread: {e}", e = eddy_types::chain(&e))))?;

    // The JobMaster's messages, on a thread of their own.
    let control_cancel = cancel.clone();
    let opener = services.storage_opener.clone();
    let all_exited = Arc::new(AtomicBool::new(false));
    let done_reading = all_exited.clone();
    let mut mailboxes = Mailboxes::new(mailbox_senders);
    std::thread::Builder::new()
        .name("eddy-jobmaster-reader".into())
        .spawn(move || loop {
            // Heartbeats come every interval, so outboxes move on at least as often.
            mailboxes.flush();
            match reader.receive() {
                Ok(ExecutorMessage::Control { task, control }) => {
                    // In order, as the JobMaster posted them; a task gone ignores them.
                    if let Some(&mailbox) = mailbox_of.get(&task) {
                        mailboxes.post(mailbox, control);
                    }
                }
                Ok(ExecutorMessage::SavepointTarget { id, dir }) => match opener.open(&dir) {
                    Ok(storage) => targets.set(eddy_checkpoint::CheckpointId(id), storage),
                    Err(e) => tracing::error!(savepoint = id, dir, error = %eddy_types::chain(&e), "cannot open the savepoint directory; \
                        the savepoint will fail"),
                },
                Ok(ExecutorMessage::CancelAttempt) => {
                    control_cancel.store(true, Ordering::SeqCst);
                    mailboxes.cancel_all();
                }
                Ok(ExecutorMessage::Heartbeat) => {}
                Ok(other) => tracing::warn!(message = ?other, "unexpected message from the JobMaster; ignored"),
                Err::<ExecutorMessage, _>(_) if done_reading.load(Ordering::SeqCst) => return,
                Err(e) => {
                    // Fenced off: the JobMaster may already run the next attempt, so this
                    // one's subtasks stop at once, without closing anything (a sink
                    // aborting its transaction could touch what the next attempt wrote).
                    // The next attempt cleans up what they leave.
                    tracing::error!(error = %eddy_types::chain(&e), "lost the JobMaster; this task executor stops now");
                    eprintln!("eddy task executor: lost the JobMaster ({e}); stopping", e = eddy_types::chain(&e));
                    std::process::exit(2);
                }
            }
        })
        .map_err(|e| local(format!("cannot start a thread: {e}", e = eddy_types::chain(&e))))?;

    let mut exited = 0;
    while exited < own_tasks {
        if exited + 1 == own_tasks {
            // The JobMaster closes the connection once it heard the last exit.
            all_exited.store(true, Ordering::SeqCst);
        }
        crossbeam_channel::select! {
            recv(done_rx) -> exit => {
                let Ok((task, outcome)) = exit else { break };
                exited += 1;
                while let Ok(report) = reports_rx.try_recv() {
                    send_report(&connection, report);
                }
                let _ = connection.send(&ExecutorMessage::TaskExited { task: task as u32, outcome });
            }
            recv(reports_rx) -> report => {
                if let Ok(report) = report {
                    send_report(&connection, report);
                }
            }
        }
    }
    for handle in handles {
        let _ = handle.join();
    }
    workers.stop();
    while let Ok(report) = reports_rx.try_recv() {
        send_report(&connection, report);
    }
    tracing::info!(attempt = %attempt, executor = %me, peak_rss_mb = peak_rss_mb(), "task executor done");
    Ok(())
}

/// Sends a subtask's report to the JobMaster. An acknowledgement too large for a control
/// message (state kept in the JobManager's memory above what a frame carries) becomes a
/// decline that says so: every later checkpoint would be as large, so the job fails at
/// once instead of waiting for acknowledgements that never come.
fn send_report(connection: &Connection, report: TaskReport) {
    let message = ExecutorMessage::Report(report);
    let Some(bytes) = eddy_rpc::frame::oversized(&message) else {
        let _ = connection.send(&message);
        return;
    };
    let ExecutorMessage::Report(TaskReport::Acknowledge { task, checkpoint, ack }) = message else {
        tracing::error!(bytes, "a report too large for a control message; dropped");
        return;
    };
    let reason = format!(
        "its acknowledgement holds {bytes} bytes, more than a control message carries ({}); use a checkpoint directory",
        eddy_rpc::frame::MESSAGE_BYTES_MAX
    );
    let declined = TaskReport::Declined { task, checkpoint, kind: ack.kind, reason, cause: DeclineCause::CannotFit };
    let _ = connection.send(&ExecutorMessage::Report(declined));
}

/// This process's peak resident memory in MiB (Linux; 0 elsewhere), for the log.
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb / 1024)
}
