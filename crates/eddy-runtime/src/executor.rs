//! The embedded local executor: runs a job graph in this process, one thread per subtask.
//!
//! It wires one bounded channel per input gate and subtask, hands every subtask its
//! receivers and its writers' senders, builds each chain on its own thread (operators
//! never cross threads), and waits. The first failure cancels the job: the cancel flag is
//! raised and every mailbox gets `Cancel`; the error names the operator and subtask.

use crate::error::{JobError, TaskError};
use crate::graph::{
    plan_chains, validate, ChainPlan, ErasedOutput, ErasedSend, OperatorFactory, Partitioning, PortType, StreamGraph,
    StreamNode,
};
use crate::task::{
    catch_task_panic, install_panic_capture, mailbox, Control, MailboxReceiver, MailboxSender, OperatorInfo,
    SourceDriver, StepResult, TaskDriver, TaskShared,
};
use eddy_types::{key_group_range_for_subtask, Clock, NodeId, SystemClock};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a finished job reports.
#[derive(Debug, Clone)]
pub struct JobResult {
    pub job_name: String,
    /// From the first subtask's start to the last subtask's end.
    pub duration: Duration,
}

/// Runs jobs in this process.
pub struct LocalExecutor {
    clock: Arc<dyn Clock>,
}

impl Default for LocalExecutor {
    fn default() -> Self {
        Self::new()
    }
}

/// The senders and channel ids a subtask's writer for one edge gets.
type WriterTargets = (Vec<ErasedSend>, Vec<u32>);

/// Everything one subtask needs from the executor, moved to its thread.
struct TaskSetup {
    head: NodeId,
    subtask: u32,
    /// Per input gate: the receiver and how many end-of-input markers to expect.
    inputs: Vec<(ErasedSend, usize)>,
    writers: HashMap<usize, WriterTargets>,
    mailbox: MailboxReceiver,
}

/// The channels into one input gate of a node, one per subtask.
struct Gate {
    port_type: Arc<dyn PortType>,
    senders: Vec<ErasedSend>,
    receivers: Vec<Option<ErasedSend>>,
    ends_expected: Vec<usize>,
    next_channel: u32,
}

impl LocalExecutor {
    /// An executor whose subtasks read the machine's clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock::new()))
    }

    /// An executor whose subtasks read time from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self { clock }
    }

    /// Runs the job to completion (all sources exhausted) or to its first failure.
    pub fn execute(&self, graph: StreamGraph) -> Result<JobResult, JobError> {
        let job = graph.job_name.clone();
        validate(&graph).map_err(|message| JobError::InvalidJob { job: job.clone(), message })?;
        install_panic_capture();
        let plan = plan_chains(&graph);
        let mut setups = wire(&graph, &plan);
        let graph = Arc::new(graph);
        let plan = Arc::new(plan);
        let cancel = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<(usize, Result<(), TaskError>)>();

        let started = Instant::now();
        let mut mailboxes: Vec<MailboxSender> = Vec::new();
        let mut handles = Vec::new();
        let mut names = Vec::new();
        for (index, (setup, mailbox_tx)) in setups.drain(..).enumerate() {
            let head = graph.node(setup.head);
            let name = format!("{} ({}/{})", plan.chain_name(&graph, setup.head), setup.subtask + 1, head.parallelism);
            names.push((setup.head, setup.subtask));
            mailboxes.push(mailbox_tx);
            let (graph, plan, done_tx) = (graph.clone(), plan.clone(), done_tx.clone());
            let shared_parts = (cancel.clone(), self.clock.clone());
            let handle = std::thread::Builder::new().name(name).spawn(move || {
                let result = run_task(&graph, &plan, setup, shared_parts);
                let _ = done_tx.send((index, result));
            });
            match handle {
                Ok(h) => handles.push(h),
                Err(e) => {
                    cancel.store(true, Ordering::SeqCst);
                    return Err(JobError::Internal { job, message: format!("cannot start a subtask thread: {e}") });
                }
            }
        }
        drop(done_tx);

        let mut first_failure: Option<(usize, TaskError)> = None;
        for _ in 0..handles.len() {
            let Ok((index, result)) = done_rx.recv() else { break };
            if let Err(error) = result {
                let is_root_cause = error != TaskError::Cancelled;
                if first_failure.as_ref().is_none_or(|(_, e)| *e == TaskError::Cancelled && is_root_cause) {
                    first_failure = Some((index, error));
                }
                if !cancel.swap(true, Ordering::SeqCst) {
                    for mailbox in &mailboxes {
                        let _ = mailbox.try_send(Control::Cancel);
                    }
                }
            }
        }
        for handle in handles {
            let _ = handle.join();
        }
        let duration = started.elapsed();
        match first_failure {
            None => Ok(JobResult { job_name: job, duration }),
            Some((_, TaskError::Cancelled)) => Err(JobError::Cancelled { job }),
            Some((index, error)) => {
                let (head, subtask) = names[index];
                let parallelism = graph.node(head).parallelism;
                let (operator, message) = match error {
                    TaskError::Operator { operator, message } => (operator, message),
                    other => (plan.chain_name(&graph, head), other.to_string()),
                };
                Err(JobError::TaskFailed { job, operator, subtask: subtask + 1, parallelism, message })
            }
        }
    }
}

/// Creates every channel and says which subtask gets which end.
fn wire(graph: &StreamGraph, plan: &ChainPlan) -> Vec<(TaskSetup, MailboxSender)> {
    let mut gates: HashMap<(NodeId, usize), Gate> = HashMap::new();
    let mut writers: HashMap<(usize, u32), WriterTargets> = HashMap::new();
    for (index, edge) in graph.edges.iter().enumerate() {
        if plan.chained_edges[index] {
            continue;
        }
        let from = graph.node(edge.from);
        let to = graph.node(edge.to);
        let gate = gates.entry((edge.to, edge.to_input)).or_insert_with(|| {
            let port_type = from.outputs[edge.from_port].port_type.clone();
            let (senders, receivers) = (0..to.parallelism).map(|_| port_type.channel()).unzip::<_, _, Vec<_>, Vec<_>>();
            Gate {
                port_type,
                senders,
                receivers: receivers.into_iter().map(Some).collect(),
                ends_expected: vec![0; to.parallelism as usize],
                next_channel: 0,
            }
        });
        for producer in 0..from.parallelism {
            let targets: Vec<usize> = match edge.partitioning {
                Partitioning::Forward => vec![producer as usize],
                _ => (0..to.parallelism as usize).collect(),
            };
            let channel = gate.next_channel;
            gate.next_channel += 1;
            let mut senders = Vec::with_capacity(targets.len());
            for &target in &targets {
                gate.ends_expected[target] += 1;
                senders.push(gate.port_type.clone_sender(&gate.senders[target]));
            }
            writers.insert((index, producer), (senders, vec![channel; targets.len()]));
        }
    }

    let mut setups = Vec::new();
    for &head in &plan.heads {
        let node = graph.node(head);
        let members = plan.members(head);
        for subtask in 0..node.parallelism {
            let inputs = (0..node.input_count())
                .map(|input| {
                    let gate = gates.get_mut(&(head, input)).expect("validated: every input is connected");
                    let receiver = gate.receivers[subtask as usize].take().expect("one receiver per subtask");
                    (receiver, gate.ends_expected[subtask as usize])
                })
                .collect();
            let mut own_writers = HashMap::new();
            for (index, edge) in graph.edges.iter().enumerate() {
                if members.contains(&edge.from) && !plan.chained_edges[index] {
                    if let Some(targets) = writers.remove(&(index, subtask)) {
                        own_writers.insert(index, targets);
                    }
                }
            }
            let (mailbox_tx, mailbox_rx) = mailbox();
            setups.push((TaskSetup { head, subtask, inputs, writers: own_writers, mailbox: mailbox_rx }, mailbox_tx));
        }
    }
    // `gates` drops its original senders here, so a gate disconnects when its producers end.
    setups
}

/// The body of a subtask's thread.
fn run_task(
    graph: &StreamGraph,
    plan: &ChainPlan,
    setup: TaskSetup,
    (cancel, clock): (Arc<AtomicBool>, Arc<dyn Clock>),
) -> Result<(), TaskError> {
    let shared = TaskShared::with_clock(cancel, clock);
    let outcome = catch_task_panic(|| -> Result<(), TaskError> {
        let mut driver =
            ChainBuilder { graph, plan, subtask: setup.subtask, shared: shared.clone(), writers: setup.writers }
                .driver(setup.head, setup.inputs, setup.mailbox);
        let result = (|| {
            driver.open()?;
            while driver.step()? == StepResult::Continue {}
            Ok(())
        })();
        driver.close();
        result
    });
    match outcome {
        Ok(result) => result,
        Err(panic_message) => {
            Err(TaskError::Operator { operator: shared.current_operator_name(), message: panic_message })
        }
    }
}

/// Builds one subtask's chain, tail first, on the subtask's thread.
struct ChainBuilder<'a> {
    graph: &'a StreamGraph,
    plan: &'a ChainPlan,
    subtask: u32,
    shared: Rc<TaskShared>,
    writers: HashMap<usize, WriterTargets>,
}

impl ChainBuilder<'_> {
    fn info(&self, node: &StreamNode) -> OperatorInfo {
        OperatorInfo {
            name: node.name.clone(),
            uid: node.effective_uid(),
            subtask: self.subtask,
            parallelism: node.parallelism,
            max_parallelism: self.graph.max_parallelism,
            key_group_range: key_group_range_for_subtask(self.graph.max_parallelism, node.parallelism, self.subtask),
            index: self.shared.register_operator(&node.name),
            output_tags: node.outputs.iter().map(|o| o.tag.clone()).collect(),
            shared: self.shared.clone(),
        }
    }

    /// The outputs of every port of `node`: chained operators, writers, or both.
    fn outputs(&mut self, node: &StreamNode) -> Vec<ErasedOutput> {
        let graph = self.graph;
        (0..node.outputs.len())
            .map(|port| {
                let port_type = &node.outputs[port].port_type;
                let mut outs: Vec<ErasedOutput> = Vec::new();
                for (index, edge) in graph.edges_from(node.id, port) {
                    if self.plan.chained_edges[index] {
                        outs.push(self.chained_operator(graph.node(edge.to)));
                    } else if let Some((targets, channel_ids)) = self.writers.remove(&index) {
                        outs.push(port_type.writer(
                            targets,
                            channel_ids,
                            &edge.partitioning,
                            self.subtask,
                            graph.max_parallelism,
                            self.shared.clone(),
                        ));
                    }
                }
                match outs.len() {
                    0 => port_type.discard(),
                    1 => outs.pop().expect("one output"),
                    _ => port_type.fan_out(outs),
                }
            })
            .collect()
    }

    fn chained_operator(&mut self, node: &StreamNode) -> ErasedOutput {
        let info = self.info(node);
        let outputs = self.outputs(node);
        match &node.factory {
            OperatorFactory::OneInput { operator, .. } => operator(info, outputs),
            _ => unreachable!("only one-input operators are chained"),
        }
    }

    fn driver(
        mut self,
        head: NodeId,
        mut inputs: Vec<(ErasedSend, usize)>,
        mailbox: MailboxReceiver,
    ) -> Box<dyn TaskDriver> {
        let node = self.graph.node(head);
        let info = self.info(node);
        let outputs = self.outputs(node);
        let shared = self.shared.clone();
        match &node.factory {
            OperatorFactory::Source(factory) => Box::new(SourceDriver::new(factory(info, outputs), mailbox, shared)),
            OperatorFactory::OneInput { operator, input } => {
                let (receiver, ends) = inputs.remove(0);
                input.one_input_driver(receiver, ends, operator(info, outputs), mailbox, shared)
            }
            OperatorFactory::TwoInput { operator, driver } => {
                let second = inputs.remove(1);
                let first = inputs.remove(0);
                driver(operator(info, outputs), first, second, mailbox, shared)
            }
        }
    }
}
