//! The job graph as the runtime sees it: nodes (operators) with their factories and
//! output ports, edges with their partitioning, and the chaining plan.
//!
//! The runtime never sees record types: each port carries a [`PortType`] made by the API
//! with the type known, which creates that type's channels, writers and drivers. Erased
//! values (`Box<dyn Any>`) are only downcast while a chain is built, never per record.

mod chaining;
mod config;
mod port;
mod rescale;
mod validate;

pub use chaining::{plan_chains, ChainPlan};
pub use config::{
    Autoscaling, JobConfig, JobServices, RestoreFrom, RestoreMode, SavepointRequest, SchedulerMode, Simulation,
    StorageChoice,
};
pub use port::{receivers_of, Erased, ErasedOutput, ErasedSend, PortType, TypedPort, WriterTargets};
pub use validate::validate;

use crate::task::{MailboxReceiver, OperatorInfo, SourceOperator, TaskDriver, TaskShared};
use eddy_types::{MaxParallelism, NodeId};
use std::any::Any;
use std::rc::Rc;
use std::sync::Arc;

/// How an edge spreads records over the consumer's subtasks.
#[derive(Clone)]
pub enum Partitioning {
    Forward,
    Rebalance,
    Shuffle,
    Broadcast,
    /// By key group; holds a `KeySelectorFactory<T>` of the edge's record type.
    KeyGroups(Arc<dyn Any + Send + Sync>),
}

impl Partitioning {
    pub fn name(&self) -> &'static str {
        match self {
            Partitioning::Forward => "FORWARD",
            Partitioning::Rebalance => "REBALANCE",
            Partitioning::Shuffle => "SHUFFLE",
            Partitioning::Broadcast => "BROADCAST",
            Partitioning::KeyGroups(_) => "HASH",
        }
    }
}

/// Builds a source operator for one subtask from its info and its output ports.
pub type SourceFactory = Arc<dyn Fn(OperatorInfo, Vec<ErasedOutput>) -> Box<dyn SourceOperator> + Send + Sync>;
/// Builds a one-input operator (the erased output of its predecessor) for one subtask.
pub type OneInputFactory = Arc<dyn Fn(OperatorInfo, Vec<ErasedOutput>) -> ErasedOutput + Send + Sync>;
/// Builds a two-input operator (a `Box<dyn TwoInputOperator<A, B>>`, erased).
pub type TwoInputFactory = Arc<dyn Fn(OperatorInfo, Vec<ErasedOutput>) -> Erased + Send + Sync>;
/// Builds the driver of a two-input chain head from the operator and the channels of both
/// inputs.
pub type TwoInputDriverFactory = Arc<
    dyn Fn(Erased, Vec<ErasedSend>, Vec<ErasedSend>, MailboxReceiver, Rc<TaskShared>) -> Box<dyn TaskDriver>
        + Send
        + Sync,
>;

/// How a node's operator is made.
#[derive(Clone)]
pub enum OperatorFactory {
    Source(SourceFactory),
    OneInput { operator: OneInputFactory, input: Arc<dyn PortType> },
    TwoInput { operator: TwoInputFactory, driver: TwoInputDriverFactory },
}

/// One output port of a node: the main output (tag `None`) or a side output.
#[derive(Clone)]
pub struct OutputPort {
    pub tag: Option<String>,
    pub port_type: Arc<dyn PortType>,
}

/// One operator of the logical graph.
#[derive(Clone)]
pub struct StreamNode {
    pub id: NodeId,
    pub name: String,
    pub uid: Option<String>,
    pub parallelism: u32,
    /// Its parallelism is the job's default (no `set_parallelism` of its own, not a
    /// non-parallel source): a rescale of the running job changes it.
    pub follows_default: bool,
    /// Needs a keyed state backend (it follows a `key_by`).
    pub keyed: bool,
    pub factory: OperatorFactory,
    pub outputs: Vec<OutputPort>,
    /// False when the user disabled chaining for this operator.
    pub chainable: bool,
    /// Its coordinator with the JobMaster (a source's split enumerator).
    pub coordinator: Option<crate::coordination::CoordinatorProvider>,
    /// What it must hold alone on a cluster (a Kafka sink's transactional ids): the
    /// JobManager refuses a second running job naming one.
    pub exclusive_resources: Vec<String>,
}

impl StreamNode {
    pub fn input_count(&self) -> usize {
        match self.factory {
            OperatorFactory::Source(_) => 0,
            OperatorFactory::OneInput { .. } => 1,
            OperatorFactory::TwoInput { .. } => 2,
        }
    }

    /// The uid the user set, or one derived from the node's place and name, which stays
    /// the same as long as the graph does.
    pub fn effective_uid(&self) -> String {
        self.uid.clone().unwrap_or_else(|| format!("{}-{}", self.id.0, self.name))
    }
}

/// A connection from an output port of one node to an input of another.
#[derive(Clone)]
pub struct StreamEdge {
    pub from: NodeId,
    pub from_port: usize,
    pub to: NodeId,
    /// 0 for one-input nodes; 0 or 1 for two-input nodes.
    pub to_input: usize,
    pub partitioning: Partitioning,
}

/// The whole job, ready to run.
#[derive(Clone)]
pub struct StreamGraph {
    pub job_name: String,
    pub max_parallelism: MaxParallelism,
    pub config: JobConfig,
    pub services: JobServices,
    pub nodes: Vec<StreamNode>,
    pub edges: Vec<StreamEdge>,
}

impl StreamGraph {
    /// The slots a job needs: one slot holds one subtask of every operator (slot
    /// sharing), so as many as its highest parallelism.
    pub fn slots_needed(&self) -> u32 {
        self.nodes.iter().map(|n| n.parallelism).max().unwrap_or(1)
    }

    /// What the job's operators must hold alone on a cluster, for its submission.
    pub fn exclusive_resources(&self) -> Vec<String> {
        self.nodes.iter().flat_map(|n| n.exclusive_resources.iter().cloned()).collect()
    }

    pub fn node(&self, id: NodeId) -> &StreamNode {
        &self.nodes[id.0 as usize]
    }

    /// Edges leaving port `port` of `node`.
    pub fn edges_from(&self, node: NodeId, port: usize) -> impl Iterator<Item = (usize, &StreamEdge)> {
        self.edges.iter().enumerate().filter(move |(_, e)| e.from == node && e.from_port == port)
    }

    /// Edges into `node`.
    pub fn edges_into(&self, node: NodeId) -> impl Iterator<Item = (usize, &StreamEdge)> {
        self.edges.iter().enumerate().filter(move |(_, e)| e.to == node)
    }

    /// A human-readable plan: one line per chain with parallelism and outgoing edges.
    pub fn describe(&self) -> String {
        let plan = plan_chains(self);
        let mut out = format!("job '{}' (max parallelism {})\n", self.job_name, self.max_parallelism.get());
        for head in &plan.heads {
            let node = self.node(*head);
            out.push_str(&format!("  {} (parallelism {})\n", plan.chain_name(self, *head), node.parallelism));
            for member in plan.members(*head) {
                for (index, edge) in self.edges.iter().enumerate() {
                    if edge.from == member && !plan.chained_edges[index] {
                        out.push_str(&format!(
                            "    --{}--> {}\n",
                            edge.partitioning.name(),
                            plan.chain_name(self, plan.head_of[edge.to.0 as usize])
                        ));
                    }
                }
            }
        }
        out
    }
}
