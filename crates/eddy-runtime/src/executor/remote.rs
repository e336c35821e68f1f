//! One attempt of a job on a cluster: the JobMaster's side. It asks the JobManager for
//! slots, waits for the task executors the TaskManagers start to say hello (refusing one
//! whose binary builds another graph), starts them, and then coordinates them with the
//! same [`AttemptRun`] as a local attempt: mailbox messages go out over each executor's
//! connection, reports and exits come back over it, and a connection lost fails the
//! executor's subtasks at once.

use super::attempt::{AttemptEnd, AttemptRun, AttemptStart, RemoteHooks, TaskExit};
use super::restore::RestoreSource;
use super::{JobResult, LocalExecutor};
use crate::cluster::fingerprint::{describe, first_difference};
use crate::cluster::job_client::{ExecutorJoin, JobClient};
use crate::cluster::messages::{
    slot_owners, ExecutorSlots, JobCommand, Message, RestoreTicket, StartTasks, TaskMetrics,
};
use crate::cluster::{Connection, Reader};
use crate::error::{FailureKind, JobError, TaskError};
use crate::graph::{ChainPlan, StreamGraph};
use crate::task::{mailbox, MailboxReceiver, Mailboxes, TaskReport};
use crossbeam_channel::{select, Select, Sender};
use eddy_checkpoint::retained::RetainedCheckpoints;
use eddy_checkpoint::storage::CheckpointStorage;
use eddy_types::NodeId;
use std::cell::RefCell;
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

impl LocalExecutor {
    /// One attempt on the cluster `client` submitted the job to.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn remote_attempt(
        &self,
        client: &JobClient,
        graph: &Arc<StreamGraph>,
        plan: &Arc<ChainPlan>,
        start: AttemptStart,
        (storage, retained): (&Arc<dyn CheckpointStorage>, &RefCell<RetainedCheckpoints>),
        savepoint_storage: Option<Arc<dyn CheckpointStorage>>,
        restore_source: Option<&RestoreSource>,
        result: &mut JobResult,
    ) -> AttemptEnd {
        let job = graph.job_name.clone();
        let cluster_error = |message: String| AttemptEnd::Failed(JobError::Cluster { job: job.clone(), message });
        let tasks: Vec<(NodeId, u32)> = plan.tasks(graph);
        let slots = graph.nodes.iter().map(|n| n.parallelism).max().unwrap_or(1);
        let attempt = client.next_attempt();
        let request = Message::RequestSlots {
            attempt,
            slots,
            timeout_ms: client.target.slot_timeout_ms,
            job_master: client.address.clone(),
        };
        if let Err(e) = client.send(&request) {
            return cluster_error(format!("cannot ask the JobManager for slots: {e}"));
        }
        tracing::info!(job = %job, attempt, slots, "asking the JobManager for slots");
        // TaskManagers lost while the JobManager answers: slots it gives there are gone.
        let mut lost_meanwhile = Vec::new();
        let executors = loop {
            match client.events.recv() {
                Ok(Message::SlotsAllocated { attempt: a, executors }) if a == attempt => break executors,
                Ok(Message::TaskManagerLost { task_manager, .. }) => lost_meanwhile.push(task_manager),
                Ok(Message::SlotsUnavailable { attempt: a, message }) if a == attempt => return cluster_error(message),
                Ok(Message::Refused(why)) => return cluster_error(why),
                Ok(Message::Command { request, .. }) => reply_busy(client, request),
                Ok(_) => {}
                Err(_) => return cluster_error("lost the JobManager".into()),
            }
        };
        let release = || {
            let _ = client.send(&Message::ReleaseSlots { attempt });
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
        let joined = match self.await_executors(client, graph, plan, attempt, &executors) {
            Ok(joined) => joined,
            Err(end) => {
                release();
                return end;
            }
        };
        let parallelism = graph.nodes.iter().map(|n| n.parallelism).max().unwrap_or(1);
        let owners = match slot_owners(&executors, parallelism) {
            Ok(owners) => owners,
            Err(e) => {
                release();
                return cluster_error(format!("the JobManager sent {e}"));
            }
        };
        let owner = |subtask: u32| owners[subtask as usize];

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
        let start_message = Message::StartTasks(Box::new(StartTasks {
            executors: addresses,
            seed: start.seed.0,
            restore,
            job_dir: start.job_dir.clone(),
        }));
        // The restored metadata travels in the start: state kept inline (JobManager memory)
        // can outgrow a control frame, and would on every restart.
        if let Some(bytes) = crate::cluster::frame::oversized(&start_message) {
            release();
            return AttemptEnd::Failed(JobError::Checkpoint {
                job: job.clone(),
                message: format!(
                    "the checkpoint to restore holds {bytes} bytes of state in the JobManager's memory, more than a control message carries ({}); use a checkpoint directory",
                    crate::cluster::frame::MESSAGE_BYTES_MAX
                ),
            });
        }
        let attempt_over = Arc::new(AtomicBool::new(false));
        let metrics: Arc<Mutex<HashMap<u32, TaskMetrics>>> = Arc::default();
        let mut connections: Vec<(u32, Connection)> = Vec::new();
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
                tracing::warn!(error = %e, "cannot start a task executor; its subtasks fail");
                connection.close();
            }
        }
        drop(reports_tx);
        drop(done_tx);
        tracing::info!(job = %job, attempt, executors = executors.len(), subtasks = tasks.len(), "attempt running on the cluster");

        let task_count = tasks.len();
        let mut run = AttemptRun::new(
            (graph, plan),
            (storage, retained, savepoint_storage),
            (Mailboxes::new(senders), tasks, cancel),
            self.clock.clone(),
            start.next_checkpoint_id,
            false,
        );
        let announced: Vec<Connection> = connections.iter().map(|(_, c)| c.clone()).collect();
        run.hooks = Some(RemoteHooks {
            announce_savepoint: Box::new(move |id, dir| {
                for connection in &announced {
                    // Straight onto each connection, before any mailbox carries the trigger.
                    let _ = connection.send(&Message::SavepointTarget { id: id.0, dir: dir.to_string() });
                }
            }),
            reply: Box::new(|request, reply| {
                let _ = client.send(&Message::CommandReply { request, reply });
            }),
        });
        let connections_ref = &connections;
        let owned_ref = &owned;
        let task_managers: Vec<u32> = tasks_owner.iter().map(|&e| executors[e].task_manager).collect();
        let metrics_ref = &metrics;
        let mut on_event = |run: &mut AttemptRun<'_>, event: Message, result: &mut JobResult| match event {
            Message::TaskManagerLost { task_manager, reason } => {
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
            Message::ExecutorFailed { attempt: failed, executor, status } if failed == attempt => {
                if let Some(&first) = owned_ref.get(executor as usize).and_then(|o| o.first()) {
                    run.task_failed(first, TaskError::Lost(format!("a task executor exited: {status}")));
                }
            }
            Message::Refused(why) => {
                // The JobManager is gone: the attempt goes on (its executors are
                // connected here), but nothing can restart it; it fails at its end.
                tracing::error!(reason = %why, "lost the JobManager");
            }
            Message::Command { request, command } => {
                let stop = matches!(command, JobCommand::Stop { .. });
                let reply = match command {
                    JobCommand::Cancel => {
                        run.fail(JobError::Cancelled { job: run.graph.job_name.clone() });
                        Ok("cancelling".to_string())
                    }
                    JobCommand::Status => {
                        let counted = metrics_ref.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        Ok(run.status_text(attempt, &task_managers, &counted, result))
                    }
                    JobCommand::Savepoint { dir } | JobCommand::Stop { savepoint_dir: dir } => {
                        match run.savepoint_now(&dir, stop, request) {
                            // The answer follows when the savepoint completed.
                            Ok(progress) => {
                                let _ = client.send(&Message::CommandProgress { request, text: progress });
                                return;
                            }
                            Err(why) => Err(why),
                        }
                    }
                };
                let _ = client.send(&Message::CommandReply { request, reply });
            }
            _ => {}
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
            let _ = connection.send(&Message::CancelAttempt);
            connection.close();
        }
        release();
        for thread in threads {
            let _ = thread.join();
        }
        run.end(&reports_rx, result)
    }

    /// Waits for one hello per executor of `attempt`, checking each one's graph.
    fn await_executors(
        &self,
        client: &JobClient,
        graph: &StreamGraph,
        plan: &ChainPlan,
        attempt: u32,
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
        let refused = |message: String| AttemptEnd::Failed(JobError::Cluster { job: job.clone(), message });
        while joined.iter().any(Option::is_none) {
            select! {
                recv(client.executors) -> join => {
                    let Ok(join) = join else { return Err(refused("the JobMaster stopped listening".into())) };
                    let hello = &join.hello;
                    if hello.attempt != attempt || hello.executor as usize >= joined.len() {
                        join.connection.close();
                        continue;
                    }
                    let tm = executors[hello.executor as usize].task_manager;
                    if let Some(difference) = first_difference(&ours, &hello.graph) {
                        let message = format!(
                            "TaskManager {tm} (binary {}) builds a different graph from the job's arguments: {difference}",
                            hello.binary
                        );
                        let _ = join.connection.send(&Message::Refused(message.clone()));
                        join.connection.close();
                        tracing::error!(task_manager = tm, %message, "task executor refused");
                        return Err(refused(message));
                    }
                    let executor = hello.executor as usize;
                    joined[executor] = Some(join);
                }
                recv(client.events) -> event => match event {
                    Ok(Message::ExecutorFailed { attempt: a, executor, status }) if a == attempt => {
                        let tm = executors.get(executor as usize).map_or(0, |e| e.task_manager);
                        return Err(refused(format!(
                            "the task executor on TaskManager {tm} exited before it could run the job: {status}"
                        )));
                    }
                    Ok(Message::TaskManagerLost { task_manager, reason })
                        if executors.iter().any(|e| e.task_manager == task_manager) => {
                        return Err(lost(format!("TaskManager {task_manager} was lost while deploying: {reason}")));
                    }
                    Ok(Message::Refused(why)) => return Err(refused(why)),
                    Ok(Message::Command { request, .. }) => reply_busy(client, request),
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
        Ok(joined.into_iter().map(|j| j.expect("every executor joined")).collect())
    }
}

fn reply_busy(client: &JobClient, request: u64) {
    let reply = Err("the job is being deployed; try again in a moment".to_string());
    let _ = client.send(&Message::CommandReply { request, reply });
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
            Ok(Message::Report(report)) if report.task().is_none_or(|t| tasks.contains(&t)) => {
                let _ = reports.send(report);
            }
            Ok(Message::TaskExited { task, outcome }) if tasks.contains(&(task as usize)) => {
                if exited.insert(task as usize) {
                    let _ = done.send((task as usize, outcome));
                }
            }
            Ok(Message::TaskMetrics(counted)) => {
                let mut metrics = metrics.lock().unwrap_or_else(|e| e.into_inner());
                for task in counted {
                    metrics.insert(task.task, task);
                }
            }
            Ok(Message::Heartbeat) => {}
            Ok(other) => tracing::warn!(peer, message = ?other, "unexpected message from a task executor; ignored"),
            Err(e) => {
                for &task in tasks.iter().filter(|t| !exited.contains(t)) {
                    let _ = done.send((task, Err(TaskError::Lost(format!("lost {peer}: {e}")))));
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
                if connection.send(&Message::Control { task: *task, control }).is_err() {
                    return;
                }
            }
        }
        if cancelled && !cancel_sent {
            cancel_sent = true;
            if connection.send(&Message::CancelAttempt).is_err() {
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

impl AttemptRun<'_> {
    /// What `status` prints: per subtask, where it runs, its records and backpressure;
    /// then the last checkpoints.
    pub(crate) fn status_text(
        &self,
        attempt: u32,
        task_managers: &[u32],
        metrics: &HashMap<u32, TaskMetrics>,
        result: &JobResult,
    ) -> String {
        use std::fmt::Write;
        let mut text = String::new();
        let _ = writeln!(
            text,
            "job '{}': attempt {attempt}, {} restarts, {} checkpoints completed",
            self.graph.job_name, result.restarts, result.checkpoints_completed
        );
        let _ = writeln!(
            text,
            "{:<40} {:>4} {:>14} {:>14} {:>14}",
            "SUBTASK", "TM", "RECORDS IN", "RECORDS OUT", "BACKPRESSURED"
        );
        for index in 0..self.task_count() {
            let counted = metrics.get(&(index as u32)).cloned().unwrap_or_default();
            let _ = writeln!(
                text,
                "{:<40} {:>4} {:>14} {:>14} {:>13.1}s",
                self.subtask_name(index),
                task_managers.get(index).copied().unwrap_or(0),
                counted.records_in,
                counted.records_out,
                counted.backpressured_ms as f64 / 1000.0
            );
        }
        let recent = result.checkpoint_history.iter().rev().take(5).collect::<Vec<_>>();
        if recent.is_empty() {
            let _ = writeln!(text, "no checkpoint completed yet");
        }
        for checkpoint in recent {
            let _ = writeln!(
                text,
                "checkpoint {}: {} ms, {} bytes ({} written), {}",
                checkpoint.id,
                checkpoint.duration_ms,
                checkpoint.bytes,
                checkpoint.incremental_bytes,
                checkpoint.location
            );
        }
        text
    }
}
