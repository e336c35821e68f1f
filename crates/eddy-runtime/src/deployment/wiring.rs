//! Wiring: one bounded channel per producer and consumer subtask, and each subtask's thread,
//! which builds its chain (operators never cross threads) and drives it.

use super::restore::RestorePlan;
use crate::channel::{ChannelCapacity, CHANNEL_BATCHES_MIN};
use crate::error::TaskError;
use crate::graph::{
    ChainPlan, ErasedOutput, ErasedSend, OperatorFactory, Partitioning, StorageChoice, StreamGraph, StreamNode,
    WriterTargets,
};
use crate::network::{ChannelKey, InboundChannel, LostReason, OutboundChannels, Overtaking};
use crate::task::in_flight::{
    self, AnnouncementTarget, Backlog, ChannelLayout, ChannelOrigin, Inbox, InputLayout, KeyFilter, ReplayChannel,
};
use crate::task::UnalignedPolicy;
use crate::task::{
    catch_task_panic, mailbox, MailboxReceiver, MailboxSender, OperatorInfo, SourceDriver, Task, TaskCheckpointing,
    TaskDriver, TaskShared,
};
use crossbeam_channel::{Receiver, Sender};
use eddy_rpc::ExecutorIndex;
use eddy_types::{key_group_range_for_subtask, Clock, NodeId, RunSeed};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Everything one subtask needs from the executor, moved to its thread.
pub struct TaskSetup {
    pub head: NodeId,
    pub subtask: u32,
    /// Per input: one channel per producer subtask of every edge into it, in a fixed
    /// order (the aligner's channel indexes).
    pub inputs: Vec<Vec<ErasedSend>>,
    /// Per input, where each of its channels comes from, and what it holds read ahead.
    pub origins: Vec<Vec<(ChannelOrigin, Backlog)>>,
    /// Per input, where its producers in this process announce unaligned barriers.
    pub announcements: Vec<Inbox>,
    pub writers: HashMap<usize, WriterTargets>,
    pub mailbox: MailboxReceiver,
}

/// Creates one channel per producer and consumer subtask of every edge between chains,
/// and says which subtask gets which end. `capacity`: per input gate, shared out between
/// its channels (at least [`CHANNEL_BATCHES_MIN`] each) when bounded.
pub fn wire(graph: &StreamGraph, plan: &ChainPlan, capacity: ChannelCapacity) -> Vec<(TaskSetup, MailboxSender)> {
    wire_placed(graph, plan, capacity, None).0
}

/// Which task executor of a cluster attempt holds each subtask (by its slot), and which
/// one this process is.
pub struct Placement<'a> {
    pub owner: &'a dyn Fn(u32) -> ExecutorIndex,
    pub me: ExecutorIndex,
}

/// The network ends of a task executor's channels: per consuming executor, what this one
/// sends it; per producing executor, what this one receives from it.
#[derive(Default)]
pub struct RemoteWiring {
    pub outbound: HashMap<ExecutorIndex, OutboundChannels>,
    pub inbound: HashMap<ExecutorIndex, InboundWiring>,
}

/// The channels from one producing executor, and where their subtasks return credits.
pub struct InboundWiring {
    pub channels: HashMap<ChannelKey, Box<dyn InboundChannel>>,
    pub credits: (Sender<ChannelKey>, Receiver<ChannelKey>),
    pub lost: LostReason,
    pub initial_credit: u32,
}

/// [`wire`] for the subtasks `placement` gives this process (all of them without one):
/// channels between two of its subtasks stay in-process; a channel to or from another
/// executor gets a network end ([`RemoteWiring`]).
pub fn wire_placed(
    graph: &StreamGraph,
    plan: &ChainPlan,
    capacity: ChannelCapacity,
    placement: Option<Placement<'_>>,
) -> (Vec<(TaskSetup, MailboxSender)>, RemoteWiring) {
    let owner = |subtask: u32| placement.as_ref().map_or(ExecutorIndex(0), |p| (p.owner)(subtask));
    let me = placement.as_ref().map_or(ExecutorIndex(0), |p| p.me);
    let mut remote = RemoteWiring::default();
    // Producer channels per gate (node, input) and consumer subtask, for the share.
    let mut producers: HashMap<(NodeId, usize), usize> = HashMap::new();
    for (index, edge) in graph.edges.iter().enumerate() {
        if !plan.chained_edges[index] {
            let from = graph.node(edge.from);
            let per_consumer = match edge.partitioning {
                Partitioning::Forward => 1,
                _ => from.parallelism as usize,
            };
            *producers.entry((edge.to, edge.to_input)).or_default() += per_consumer;
        }
    }
    let mut gates: HashMap<(NodeId, usize, u32), Vec<ErasedSend>> = HashMap::new();
    let mut origins: HashMap<(NodeId, usize, u32), Vec<(ChannelOrigin, Backlog)>> = HashMap::new();
    let mut inboxes: HashMap<(NodeId, usize, u32), Inbox> = HashMap::new();
    let mut writers: HashMap<(usize, u32), WriterTargets> = HashMap::new();
    // With unaligned checkpoints, barriers overtake the network queues (with an aligned
    // timeout, once it passed at the producer: see `Overtaking`).
    let checkpoint = &graph.config.checkpoint;
    let overtake = checkpoint.unaligned;
    let aligned_timeout = (checkpoint.aligned_checkpoint_timeout_ms > 0)
        .then(|| std::time::Duration::from_millis(checkpoint.aligned_checkpoint_timeout_ms));
    for (index, edge) in graph.edges.iter().enumerate() {
        if plan.chained_edges[index] {
            continue;
        }
        let from = graph.node(edge.from);
        let to = graph.node(edge.to);
        let port_type = &from.outputs[edge.from_port].port_type;
        let channel_capacity = match capacity {
            ChannelCapacity::Bounded(batches) => {
                let share = batches / producers[&(edge.to, edge.to_input)].max(1);
                ChannelCapacity::Bounded(share.max(CHANNEL_BATCHES_MIN))
            }
            unbounded => unbounded,
        };
        for producer in 0..from.parallelism {
            let targets: Vec<u32> = match edge.partitioning {
                Partitioning::Forward => vec![producer],
                _ => (0..to.parallelism).collect(),
            };
            let mut senders = Vec::with_capacity(targets.len());
            let mut credits = Vec::with_capacity(targets.len());
            let mut announce = Vec::with_capacity(targets.len());
            let from_uid = from.effective_uid();
            // Which of the edges from this port into this input (for in-flight records).
            let nth = graph.edges[..index]
                .iter()
                .filter(|e| {
                    (e.from, e.from_port, e.to, e.to_input) == (edge.from, edge.from_port, edge.to, edge.to_input)
                })
                .count() as u32;
            let producer_here = owner(producer) == me;
            for target in targets {
                let consumer_here = owner(target) == me;
                let key = ChannelKey { edge: index as u16, from: producer as u16, to: target as u16 };
                let gate = (edge.to, edge.to_input, target);
                let backlog = Backlog::default();
                if consumer_here {
                    let origin = ChannelOrigin {
                        from_uid: from_uid.clone(),
                        from_port: edge.from_port as u32,
                        nth,
                        producer,
                        producers: from.parallelism,
                    };
                    origins.entry(gate).or_default().push((origin, backlog.clone()));
                }
                match (producer_here, consumer_here) {
                    (true, true) => {
                        let (sender, receiver) = port_type.channel(channel_capacity);
                        senders.push(sender);
                        credits.push(0);
                        let channels = gates.entry(gate).or_default();
                        let inbox = inboxes.entry(gate).or_insert_with(crossbeam_channel::unbounded);
                        let channel = channels.len();
                        announce.push(Some(AnnouncementTarget { inbox: inbox.0.clone(), channel, backlog }));
                        channels.push(receiver);
                    }
                    (true, false) => {
                        // The producer's queue, drained by the connection to the consumer.
                        let (sender, receiver) = port_type.channel(channel_capacity);
                        senders.push(sender);
                        // Unaligned barriers are announced to the connection, which sends
                        // them ahead of the queue (the consumer's channel index is its own).
                        let overtaking = if overtake {
                            let (inbox, announcements) = crossbeam_channel::unbounded();
                            announce.push(Some(AnnouncementTarget { inbox, channel: 0, backlog: backlog.clone() }));
                            Some(Overtaking { announcements, backlog, aligned_timeout })
                        } else {
                            announce.push(None);
                            None
                        };
                        // The consumer grants as many credits as a queue holds batches.
                        credits.push(match channel_capacity {
                            ChannelCapacity::Bounded(batches) => batches,
                            ChannelCapacity::Unbounded => 0,
                        });
                        // Debloated batches go one per frame (per credit); single-record
                        // batches (no buffer timeout) are not debloated and keep packing.
                        let debloated = graph.config.buffer_debloat.is_some() && graph.config.buffer_timeout_ms > 0;
                        let outbound = port_type.outbound(receiver, debloated, overtaking);
                        remote.outbound.entry(owner(target)).or_default().push((key, outbound));
                    }
                    (false, true) => {
                        // Bounded by the credits the consumer grants, not by the queue.
                        let queue = port_type.channel(ChannelCapacity::Unbounded);
                        let initial_credit = match channel_capacity {
                            ChannelCapacity::Bounded(batches) => batches as u32,
                            ChannelCapacity::Unbounded => u32::MAX / 2,
                        };
                        let inbound = remote.inbound.entry(owner(producer)).or_insert_with(|| InboundWiring {
                            channels: HashMap::new(),
                            credits: crossbeam_channel::unbounded(),
                            lost: LostReason::default(),
                            initial_credit,
                        });
                        let channels = gates.entry(gate).or_default();
                        let announce = overtake.then(|| {
                            let inbox = inboxes.entry(gate).or_insert_with(crossbeam_channel::unbounded);
                            (inbox.0.clone(), channels.len())
                        });
                        let (network_end, input) = port_type.remote_channel(
                            queue,
                            key,
                            inbound.credits.0.clone(),
                            inbound.lost.clone(),
                            announce,
                        );
                        inbound.channels.insert(key, network_end);
                        channels.push(input);
                    }
                    (false, false) => {}
                }
            }
            if producer_here {
                writers.insert((index, producer), WriterTargets { senders, credits, announce });
            }
        }
    }

    let mut setups = Vec::new();
    for &head in &plan.heads {
        let node = graph.node(head);
        let members = plan.members(head);
        for subtask in (0..node.parallelism).filter(|s| owner(*s) == me) {
            let inputs = (0..node.input_count())
                .map(|input| gates.remove(&(head, input, subtask)).expect("validated: every input is connected"))
                .collect();
            let input_origins = (0..node.input_count())
                .map(|input| origins.remove(&(head, input, subtask)).unwrap_or_default())
                .collect();
            // Kept open (sender and receiver): a closed channel would wake every wait.
            let announcements = (0..node.input_count())
                .map(|input| inboxes.remove(&(head, input, subtask)).unwrap_or_else(crossbeam_channel::unbounded))
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
            setups.push((
                TaskSetup {
                    head,
                    subtask,
                    inputs,
                    origins: input_origins,
                    announcements,
                    writers: own_writers,
                    mailbox: mailbox_rx,
                },
                mailbox_tx,
            ));
        }
    }
    (setups, remote)
}

/// What a subtask's thread gets besides its setup.
pub struct TaskContext {
    pub cancel: Arc<AtomicBool>,
    pub clock: Arc<dyn Clock>,
    /// Its index among the job's tasks, where its snapshots go, and its reports.
    pub checkpointing: TaskCheckpointing,
    pub restore: Option<Arc<RestorePlan>>,
    pub seed: RunSeed,
    /// Under simulation, the clock state time-to-live reads.
    pub ttl_clock: Option<Arc<dyn Clock>>,
    /// Where it counts its records and backpressure.
    pub counters: Arc<crate::task::TaskCounters>,
}

/// The body of a subtask's thread.
pub fn run_task(
    graph: &StreamGraph,
    plan: &ChainPlan,
    setup: TaskSetup,
    context: TaskContext,
) -> Result<(), TaskError> {
    let (mut task, shared) = build_task(graph, plan, setup, context)?;
    guarded(&shared, || task.run_on_thread().and_then(|()| shared.check()))?;
    shared.publish_accumulators();
    Ok(())
}

/// Builds a subtask's chain on the calling thread; a panic while building fails it.
pub fn build_task(
    graph: &StreamGraph,
    plan: &ChainPlan,
    setup: TaskSetup,
    context: TaskContext,
) -> Result<(Task, Rc<TaskShared>), TaskError> {
    let shared = TaskShared::with_clock(context.cancel, context.clock);
    shared.set_counters(context.counters.clone());
    if let Some(clock) = &context.ttl_clock {
        shared.set_processing_clock(clock.clone());
    }
    shared.set_checkpointing_mode(graph.config.checkpoint.mode);
    shared.set_buffer_timeout_ms(graph.config.buffer_timeout_ms);
    shared.set_buffer_debloat(graph.config.buffer_debloat);
    let checkpoint = &graph.config.checkpoint;
    shared.set_unaligned(UnalignedPolicy {
        enabled: checkpoint.unaligned,
        aligned_timeout: (checkpoint.aligned_checkpoint_timeout_ms > 0)
            .then(|| std::time::Duration::from_millis(checkpoint.aligned_checkpoint_timeout_ms)),
    });
    shared.set_checkpointing(context.checkpointing);
    let head = graph.node(setup.head);
    if let Some(restore) = &context.restore {
        // A source whose every subtask had finished when the checkpoint was taken is not
        // run again (Flink's FLIP-147); one that finished only in part runs, from its state.
        // A source with a coordinator (split enumerator) runs, to hear from it that no split
        // comes (its restored splits are done: it reads nothing).
        let finished = restore.source().metadata.is_finished(&head.effective_uid());
        if setup.inputs.is_empty() && head.coordinator.is_none() && finished {
            shared.set_finished_on_restore();
        }
    }
    let task = guarded(&shared, || {
        let builder = ChainBuilder {
            graph,
            plan,
            subtask: setup.subtask,
            shared: shared.clone(),
            writers: setup.writers,
            restore: context.restore,
            restore_cache: HashMap::new(),
            seed: context.seed,
            ttl_clock: context.ttl_clock,
        };
        let inputs = setup.origins.into_iter().zip(setup.announcements);
        let inputs = inputs
            .map(|(origins, announcements)| {
                let (origins, backlogs) = origins.into_iter().unzip();
                let (keep_open, announcements) = announcements;
                InputLayout { origins, keep_open, backlogs, announcements }
            })
            .collect();
        let task = Task::new(builder.driver(setup.head, setup.inputs, inputs, setup.mailbox));
        // A state that could not be restored fails the subtask before any operator opens:
        // opened on empty state, a two-phase-commit sink would abort what the checkpoint
        // pre-committed.
        shared.check()?;
        Ok(task)
    })?;
    Ok((task, shared))
}

/// Runs part of a subtask's life; a panic in it fails the operator that was running.
pub fn guarded<R>(shared: &TaskShared, f: impl FnOnce() -> Result<R, TaskError>) -> Result<R, TaskError> {
    match catch_task_panic(f) {
        Ok(result) => result,
        Err(panic_message) => {
            Err(TaskError::Operator { operator: shared.current_operator_name(), message: panic_message })
        }
    }
}

/// Builds one subtask's chain, tail first, on the subtask's thread.
pub struct ChainBuilder<'a> {
    graph: &'a StreamGraph,
    plan: &'a ChainPlan,
    subtask: u32,
    shared: Rc<TaskShared>,
    writers: HashMap<usize, WriterTargets>,
    restore: Option<Arc<RestorePlan>>,
    /// The old task states this subtask read for its restore, by metadata entry.
    restore_cache: HashMap<usize, Vec<eddy_checkpoint::OperatorSnapshot>>,
    seed: RunSeed,
    ttl_clock: Option<Arc<dyn Clock>>,
}

impl ChainBuilder<'_> {
    fn info(&mut self, node: &StreamNode) -> OperatorInfo {
        let uid = node.effective_uid();
        let restored = match &self.restore {
            None => None,
            Some(plan) => {
                let state = plan.operator_state(
                    &uid,
                    self.subtask,
                    node.parallelism,
                    self.graph.max_parallelism,
                    &mut self.restore_cache,
                );
                match state {
                    Ok(state) => state,
                    Err(message) => {
                        // Checked before the subtask opens anything (`build_task`).
                        self.shared.fail_with(TaskError::StateBackend { operator: node.name.clone(), message });
                        None
                    }
                }
            }
        };
        if let Some(restored) = &restored {
            self.shared.restored(restored);
        }
        OperatorInfo {
            name: node.name.clone(),
            uid,
            subtask: self.subtask,
            parallelism: node.parallelism,
            max_parallelism: self.graph.max_parallelism,
            key_group_range: key_group_range_for_subtask(self.graph.max_parallelism, node.parallelism, self.subtask),
            index: self.shared.register_operator(&node.name),
            output_tags: node.outputs.iter().map(|o| o.tag.clone()).collect(),
            restored,
            state_backend: self.graph.services.state_backend.clone(),
            native_snapshots: matches!(self.graph.config.storage, StorageChoice::Directory(_)),
            coordinated: node.coordinator.is_some(),
            seed: self.seed,
            ttl_clock: self.ttl_clock.clone(),
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
                    } else if let Some(targets) = self.writers.remove(&index) {
                        outs.push(port_type.writer(
                            targets,
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
        let mut info = self.info(node);
        let in_flight = info.restored.as_mut().map(in_flight::take_from);
        if let Some(Err(message)) = in_flight {
            self.shared.fail_with(TaskError::StateBackend { operator: node.name.clone(), message });
        } else if in_flight.is_some_and(|channels| channels.is_ok_and(|c| c.iter().any(|c| !c.records.is_empty()))) {
            // Its input was a network of queues when the checkpoint was taken; chained now,
            // nothing could replay what was in flight there. Watermarks alone are dropped:
            // the chained operator gets its producer's watermarks directly.
            let message = "the unaligned checkpoint holds in-flight records into this operator, which is \
                           chained to its producer now: restore it with the chaining it had (or from a savepoint, \
                           which holds none)"
                .to_string();
            self.shared.fail_with(TaskError::StateBackend { operator: node.name.clone(), message });
        }
        let outputs = self.outputs(node);
        match &node.factory {
            OperatorFactory::OneInput { operator, .. } => operator(info, outputs),
            _ => unreachable!("only one-input operators are chained"),
        }
    }

    fn driver(
        mut self,
        head: NodeId,
        mut inputs: Vec<Vec<ErasedSend>>,
        layouts: Vec<InputLayout>,
        mailbox: MailboxReceiver,
    ) -> Box<dyn TaskDriver> {
        let node = self.graph.node(head);
        let mut info = self.info(node);
        let replay = self.replay(node, &mut info, &layouts);
        self.shared.set_channel_layout(ChannelLayout {
            head_uid: info.uid.clone(),
            head_name: node.name.clone(),
            subtask: self.subtask,
            parallelism: node.parallelism,
            inputs: layouts,
            replay,
        });
        let outputs = self.outputs(node);
        let shared = self.shared.clone();
        match &node.factory {
            OperatorFactory::Source(factory) => Box::new(SourceDriver::new(factory(info, outputs), mailbox, shared)),
            OperatorFactory::OneInput { operator, input } => {
                input.one_input_driver(inputs.remove(0), operator(info, outputs), mailbox, shared)
            }
            OperatorFactory::TwoInput { operator, driver } => {
                let second = inputs.remove(1);
                let first = inputs.remove(0);
                driver(operator(info, outputs), first, second, mailbox, shared)
            }
        }
    }

    /// The in-flight data of an unaligned checkpoint the head restores, taken out of its
    /// restored state: the channels this subtask replays before any input. A channel's
    /// watermarks go along only into the same channel of `layouts` (see
    /// [`in_flight`]'s overview).
    fn replay(&self, node: &StreamNode, info: &mut OperatorInfo, layouts: &[InputLayout]) -> Vec<ReplayChannel> {
        let Some(restored) = info.restored.as_mut() else { return Vec::new() };
        // Every restart would restore the same in-flight data (undecodable, or meant for an
        // edge the job does not have): the job fails at once rather than restart forever.
        let fail = |message: String| {
            self.shared.fail_with(TaskError::StateUnreadable { operator: node.name.clone(), message });
            Vec::new()
        };
        let channels = match in_flight::take_from(restored) {
            Ok(channels) => channels,
            Err(message) => return fail(message),
        };
        let mut replay = Vec::new();
        for channel in channels {
            let edge = self
                .graph
                .edges
                .iter()
                .filter(|e| {
                    e.to == node.id
                        && e.to_input == usize::from(channel.input)
                        && e.from_port as u32 == channel.from_port
                        && self.graph.node(e.from).effective_uid() == channel.from_uid
                })
                .nth(channel.nth as usize);
            let Some(edge) = edge else {
                if channel.records.is_empty() {
                    // Only watermarks of an edge the job no longer has: nothing to replay.
                    continue;
                }
                return fail(format!(
                    "the checkpoint holds in-flight records from operator uid '{}' into input {} of '{}', \
                     which this job no longer has",
                    channel.from_uid, channel.input, node.name
                ));
            };
            let watermarks_only = channel.records.is_empty();
            if (watermarks_only && channel.consumer_parallelism != node.parallelism)
                || !in_flight::keeps(&channel, &edge.partitioning, self.subtask, node.parallelism)
            {
                // (Watermarks only go nowhere at another parallelism: see `in_flight`.)
                continue;
            }
            let key_filter = match &edge.partitioning {
                Partitioning::KeyGroups(selector) if channel.consumer_parallelism != node.parallelism => {
                    Some(KeyFilter {
                        selector: selector.clone(),
                        range: info.key_group_range,
                        max_parallelism: self.graph.max_parallelism,
                    })
                }
                _ => None,
            };
            let input = usize::from(channel.input);
            let origins = layouts.get(input).map_or(&[][..], |layout| &layout.origins[..]);
            let same = origins.iter().position(|o| {
                (o.from_uid.as_str(), o.from_port, o.nth, o.producer, o.producers)
                    == (
                        channel.from_uid.as_str(),
                        channel.from_port,
                        channel.nth,
                        channel.producer,
                        channel.producer_parallelism,
                    )
            });
            let (watermarks, at) = match same {
                Some(at) if channel.consumer_parallelism == node.parallelism => (channel.watermarks, at),
                _ => (Vec::new(), 0),
            };
            replay.push(ReplayChannel { input, records: channel.records, key_filter, watermarks, channel: at });
        }
        replay
    }
}
