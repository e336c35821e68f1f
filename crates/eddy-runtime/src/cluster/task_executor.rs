//! A task executor: the process a TaskManager starts for one attempt of one job, from the
//! job's own binary with the job's arguments (application mode). Its `main` runs as
//! usual up to `execute`, which finds [`LAUNCH_ENV`] set and comes here instead of running
//! the job locally:
//!
//! 1. read the deployment from standard input (the TaskManager keeps that pipe open: its
//!    end means the TaskManager is gone, and so must this process be);
//! 2. say hello to the job's JobMaster with the graph this binary built, and wait for
//!    the start of the attempt (or a refusal, if the graphs differ);
//! 3. wire its slots' subtasks: in-process channels between them, network channels to
//!    the other executors ([`super::data`]);
//! 4. run each subtask on its own thread, forward the JobMaster's control messages to
//!    their mailboxes and their reports and exits back;
//! 5. exit once every subtask ended.

use super::auth::{PeerRole, Secret};
use super::data::{start_receivers, start_sender, InboundSet, OutboundSet};
use super::fingerprint::describe;
use super::frame::{read_value, write_value, Connection};
use super::messages::{slot_owners, Deployment, ExecutorHello, ExecutorSlots, Message, StartTasks, TaskMetrics};
use super::{start_heartbeats, Heartbeats};
use super::{Security, TlsConfig, TlsFiles};
use crate::channel::{ChannelCapacity, CHANNEL_BATCHES_MAX};
use crate::error::TaskError;
use crate::executor::open_task_storage;
use crate::executor::restore::{restore_plan, RestoreSource};
use crate::executor::wiring::{run_task, wire_placed, Placement, TaskContext};
use crate::graph::{plan_chains, validate, StreamGraph};
use crate::task::{install_panic_capture, AsyncWorkers, Mailboxes, TaskCheckpointing, TaskReport};
use eddy_checkpoint::storage::{CheckpointStorage, SavepointTargets, TaskStateWriter};
use eddy_types::{RunSeed, SystemClock};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How often a task executor sends its subtasks' counters to the JobMaster (a few
/// hundred bytes each time).
const METRICS_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Set in a task executor's environment by the TaskManager that starts it.
pub const LAUNCH_ENV: &str = "EDDY_TASK_EXECUTOR";

/// What a TaskManager writes to a task executor's standard input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    pub deployment: Deployment,
    pub task_manager: u32,
    /// The host its data listener binds (the TaskManager's).
    pub data_host: String,
    pub secret: Vec<u8>,
    /// TLS on: the cluster's certificate files.
    pub tls: Option<TlsFiles>,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
}

impl Launch {
    pub fn write(&self, to: &mut impl std::io::Write) -> std::io::Result<()> {
        write_value(to, self)
    }
}

/// Whether this process is a task executor.
pub fn launched() -> bool {
    std::env::var_os(LAUNCH_ENV).is_some()
}

/// Runs this process as a task executor for `graph`, then exits it: the job's `main`
/// does not go on past `execute` here.
pub fn run(graph: StreamGraph) -> ! {
    let code = match serve(graph) {
        Ok(()) => 0,
        Err(message) => {
            tracing::error!(error = %message, "task executor failed");
            eprintln!("eddy task executor: {message}");
            1
        }
    };
    std::process::exit(code)
}

fn serve(graph: StreamGraph) -> Result<(), String> {
    let mut stdin = std::io::stdin().lock();
    let launch: Launch = read_value(&mut stdin)
        .map_err(|e| format!("cannot read the deployment from the TaskManager: {e}"))?
        .ok_or("the TaskManager closed the pipe before the deployment")?;
    drop(stdin);
    // The TaskManager holds the other end: when it dies, so does this process.
    std::thread::Builder::new()
        .name("eddy-taskmanager-watch".into())
        .spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            eprintln!("eddy task executor: its TaskManager is gone; exiting");
            std::process::exit(3);
        })
        .map_err(|e| e.to_string())?;
    let deployment = launch.deployment.clone();
    let secret = Secret::from_bytes(&launch.secret).map_err(|e| e.to_string())?;
    let tls = match &launch.tls {
        None => None,
        Some(files) => Some(TlsConfig::from_files(files.clone()).map_err(|e| e.to_string())?),
    };
    let security = Security { secret, tls };
    let heartbeats = Heartbeats { interval_ms: launch.heartbeat_interval_ms, timeout_ms: launch.heartbeat_timeout_ms };
    validate(&graph).map_err(|m| format!("the job's graph is invalid here: {m}"))?;
    install_panic_capture();
    let plan = Arc::new(plan_chains(&graph));
    let graph = Arc::new(graph);
    let listener = TcpListener::bind((launch.data_host.as_str(), 0))
        .map_err(|e| format!("cannot listen for data on {}: {e}", launch.data_host))?;
    let data_address = listener.local_addr().map_err(|e| e.to_string())?.to_string();

    let stream = security
        .connect(&deployment.job_master, PeerRole::TaskExecutor, "reaching the job's JobMaster")
        .map_err(|e| e.to_string())?;
    let (connection, mut reader) = Connection::new(stream, Some(heartbeats.timeout())).map_err(|e| e.to_string())?;
    let binary = std::env::current_exe().map_or_else(|_| "?".into(), |p| p.display().to_string());
    connection
        .send(&Message::ExecutorHello(ExecutorHello {
            attempt: deployment.attempt,
            executor: deployment.executor,
            task_manager: launch.task_manager,
            graph: describe(&graph, &plan),
            data_address,
            binary,
        }))
        .map_err(|e| e.to_string())?;
    let stop_heartbeats = Arc::new(AtomicBool::new(false));
    start_heartbeats(connection.clone(), heartbeats, stop_heartbeats.clone());
    let start = loop {
        match reader.receive().map_err(|e| format!("the JobMaster went away before the start: {e}"))? {
            Message::StartTasks(start) => break start,
            Message::Heartbeat => {}
            Message::Refused(why) => return Err(format!("refused by the JobMaster: {why}")),
            Message::CancelAttempt => return Ok(()),
            other => return Err(format!("unexpected message before the start: {other:?}")),
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
    plan: &Arc<crate::graph::ChainPlan>,
    launch: &Launch,
    security: &Security,
    start: StartTasks,
    listener: TcpListener,
    connection: Connection,
    mut reader: super::frame::Reader,
) -> Result<(), String> {
    let attempt = launch.deployment.attempt;
    let me = launch.deployment.executor;
    let slots: Vec<ExecutorSlots> = start.executors.iter().map(|(s, _)| s.clone()).collect();
    let parallelism = graph.nodes.iter().map(|n| n.parallelism).max().unwrap_or(1);
    let owners = slot_owners(&slots, parallelism).map_err(|e| format!("the JobMaster sent {e}"))?;
    let owner = |subtask: u32| owners[subtask as usize] as u32;
    if me as usize >= start.executors.len() {
        return Err(format!("the JobMaster started {} executors, not this one ({me})", start.executors.len()));
    }
    let (setups, remote) =
        wire_placed(graph, plan, ChannelCapacity::Bounded(CHANNEL_BATCHES_MAX), Some(Placement { owner: &owner, me }));
    // The attempt's task indexes, as the JobMaster numbers them.
    let indexes: HashMap<_, usize> = plan.tasks(graph).into_iter().enumerate().map(|(i, t)| (t, i)).collect();

    let config = &graph.config;
    let storage = open_task_storage(config, start.job_dir.as_deref())
        .map_err(|e| format!("cannot open the checkpoint storage: {e}"))?;
    let savepoint_storage: Option<Arc<dyn CheckpointStorage>> = match &config.savepoint {
        None => None,
        Some(request) => {
            Some(config.storage_opener.open(&request.dir.to_string_lossy()).map_err(|e| format!("savepoint: {e}"))?)
        }
    };
    let restore = match &start.restore {
        None => None,
        Some(ticket) => {
            let source_storage = if ticket.in_job_storage {
                storage.clone()
            } else {
                config
                    .storage_opener
                    .open(&ticket.storage_root)
                    .map_err(|e| format!("cannot open the state to restore: {e}"))?
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
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let workers = AsyncWorkers::start(threads.min(setups.len().max(1) * 2))
        .map_err(|e| format!("cannot start the threads that write snapshots: {e}"))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let (reports_tx, reports_rx) = crossbeam_channel::unbounded::<TaskReport>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<(usize, Result<(), TaskError>)>();
    let clock: Arc<dyn eddy_types::Clock> = Arc::new(SystemClock::new());
    // Mailboxes by the attempt's task index; posted to without waiting (an outbox per
    // task), so a subtask with a full mailbox holds up nothing else.
    let mut mailbox_of: HashMap<u32, usize> = HashMap::new();
    let mut mailbox_senders = Vec::new();
    let mut handles = Vec::new();
    let mut all_counters = Vec::new();
    for (setup, mailbox_tx) in setups {
        let index = indexes[&(setup.head, setup.subtask)];
        mailbox_of.insert(index as u32, mailbox_senders.len());
        mailbox_senders.push(mailbox_tx);
        let writer = TaskStateWriter::new(
            storage.clone(),
            savepoint_storage.clone(),
            clock.clone(),
            plan.chain_name(graph, setup.head),
            setup.subtask,
            &graph.node(setup.head).effective_uid(),
        )
        .with_savepoint_targets(targets.clone());
        let counters = Arc::<crate::task::TaskCounters>::default();
        all_counters.push((index as u32, counters.clone()));
        let context = TaskContext {
            counters,
            cancel: cancel.clone(),
            clock: clock.clone(),
            checkpointing: TaskCheckpointing {
                task: index,
                reports: reports_tx.clone(),
                writer: Arc::new(writer),
                work: workers.queue(),
            },
            restore: restore.clone(),
            seed: RunSeed(start.seed),
            ttl_clock: None,
        };
        let name = format!(
            "{} ({}/{})",
            plan.chain_name(graph, setup.head),
            setup.subtask + 1,
            graph.node(setup.head).parallelism
        );
        let (graph, plan, done) = (graph.clone(), plan.clone(), done_tx.clone());
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let outcome = run_task(&graph, &plan, setup, context);
                    let _ = done.send((index, outcome));
                })
                .map_err(|e| format!("cannot start a subtask thread: {e}"))?,
        );
    }
    drop(reports_tx);
    drop(done_tx);
    let own_tasks = handles.len();

    // The network: receive from every producing executor, send to every consumer.
    let inbound = remote
        .inbound
        .into_iter()
        .map(|(executor, wiring)| {
            let producer = format!("task executor {} at {}", executor, start.executors[executor as usize].1);
            let set = InboundSet {
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
    start_receivers(listener, security.clone(), attempt, inbound).map_err(|e| e.to_string())?;
    for (executor, channels) in remote.outbound {
        let address = &start.executors[executor as usize].1;
        start_sender(address, security, attempt, me, OutboundSet { channels }, cancel.clone())
            .map_err(|e| format!("cannot open the data connection to task executor {executor}: {e}"))?;
    }
    tracing::info!(attempt, executor = me, subtasks = own_tasks, data_address = %data_address, "task executor running its subtasks");

    // What the subtasks counted, for `status`, every second.
    let (metrics_connection, metrics_cancel) = (connection.clone(), cancel.clone());
    std::thread::Builder::new()
        .name("eddy-task-metrics".into())
        .spawn(move || loop {
            let metrics = all_counters
                .iter()
                .map(|(task, counters)| {
                    let (records_in, records_out, backpressured_ms) = counters.read();
                    TaskMetrics { task: *task, records_in, records_out, backpressured_ms }
                })
                .collect();
            if metrics_connection.send(&Message::TaskMetrics(metrics)).is_err()
                || metrics_cancel.load(Ordering::Relaxed)
            {
                return;
            }
            std::thread::sleep(METRICS_INTERVAL);
        })
        .map_err(|e| e.to_string())?;

    // The JobMaster's messages, on a thread of their own.
    let control_cancel = cancel.clone();
    let opener = config.storage_opener.clone();
    let all_exited = Arc::new(AtomicBool::new(false));
    let done_reading = all_exited.clone();
    let mut mailboxes = Mailboxes::new(mailbox_senders);
    std::thread::Builder::new()
        .name("eddy-jobmaster-reader".into())
        .spawn(move || loop {
            // Heartbeats come every interval, so outboxes move on at least as often.
            mailboxes.flush();
            match reader.receive() {
                Ok(Message::Control { task, control }) => {
                    // In order, as the JobMaster posted them; a task gone ignores them.
                    if let Some(&mailbox) = mailbox_of.get(&task) {
                        mailboxes.post(mailbox, control);
                    }
                }
                Ok(Message::SavepointTarget { id, dir }) => match opener.open(&dir) {
                    Ok(storage) => targets.set(eddy_checkpoint::CheckpointId(id), storage),
                    Err(e) => tracing::error!(savepoint = id, dir, error = %e, "cannot open the savepoint directory; the savepoint will fail"),
                },
                Ok(Message::CancelAttempt) => {
                    control_cancel.store(true, Ordering::SeqCst);
                    mailboxes.cancel_all();
                }
                Ok(Message::Heartbeat) => {}
                Ok(other) => tracing::warn!(message = ?other, "unexpected message from the JobMaster; ignored"),
                Err(_) if done_reading.load(Ordering::SeqCst) => return,
                Err(e) => {
                    // Fenced off: the JobMaster may already run the next attempt, so this
                    // one's subtasks stop at once, without closing anything (a sink
                    // aborting its transaction could touch what the next attempt wrote).
                    // The next attempt cleans up what they leave.
                    tracing::error!(error = %e, "lost the JobMaster; this task executor stops now");
                    eprintln!("eddy task executor: lost the JobMaster ({e}); stopping");
                    std::process::exit(2);
                }
            }
        })
        .map_err(|e| e.to_string())?;

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
                    let _ = connection.send(&Message::Report(report));
                }
                let _ = connection.send(&Message::TaskExited { task: task as u32, outcome });
            }
            recv(reports_rx) -> report => {
                if let Ok(report) = report {
                    let _ = connection.send(&Message::Report(report));
                }
            }
        }
    }
    for handle in handles {
        let _ = handle.join();
    }
    workers.stop();
    while let Ok(report) = reports_rx.try_recv() {
        let _ = connection.send(&Message::Report(report));
    }
    tracing::info!(attempt, executor = me, peak_rss_mb = peak_rss_mb(), "task executor done");
    Ok(())
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
