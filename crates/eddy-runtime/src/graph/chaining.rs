//! Which operators run fused in one subtask: an edge is chained when it is forward, both
//! ends have the same parallelism, the consumer has that one input only, and neither end
//! opted out. Records then cross it as a plain function call.

use super::{OperatorFactory, Partitioning, StreamGraph};
use eddy_types::NodeId;

/// The result of chaining: which edges are fused and which node heads each chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPlan {
    pub chained_edges: Vec<bool>,
    /// For each node, the head of its chain.
    pub head_of: Vec<NodeId>,
    /// Chain heads in node order.
    pub heads: Vec<NodeId>,
}

impl ChainPlan {
    /// Nodes of the chain headed by `head`, head first.
    pub fn members(&self, head: NodeId) -> Vec<NodeId> {
        (0..self.head_of.len() as u32).map(NodeId).filter(|n| self.head_of[n.0 as usize] == head).collect()
    }

    /// The attempt's tasks (chain head, subtask) in the order every process numbers them:
    /// a task's index is its position here.
    pub fn tasks(&self, graph: &StreamGraph) -> Vec<(NodeId, u32)> {
        self.heads
            .iter()
            .flat_map(|&head| (0..graph.node(head).parallelism).map(move |subtask| (head, subtask)))
            .collect()
    }

    /// Flink-style chain name: `Source: numbers -> Map -> Filter`.
    pub fn chain_name(&self, graph: &StreamGraph, head: NodeId) -> String {
        self.members(head).iter().map(|n| graph.node(*n).name.as_str()).collect::<Vec<_>>().join(" -> ")
    }
}

/// Decides chaining for a graph whose nodes are in topological order (the API adds a node
/// only after its inputs, so node order is topological).
pub fn plan_chains(graph: &StreamGraph) -> ChainPlan {
    let mut chained_edges = vec![false; graph.edges.len()];
    let mut head_of: Vec<NodeId> = graph.nodes.iter().map(|n| n.id).collect();
    for node in &graph.nodes {
        let inputs: Vec<usize> = graph.edges_into(node.id).map(|(i, _)| i).collect();
        if inputs.len() != 1 || !matches!(node.factory, OperatorFactory::OneInput { .. }) || !node.chainable {
            continue;
        }
        let edge = &graph.edges[inputs[0]];
        let upstream = graph.node(edge.from);
        if matches!(edge.partitioning, Partitioning::Forward)
            && upstream.parallelism == node.parallelism
            && upstream.chainable
        {
            chained_edges[inputs[0]] = true;
            head_of[node.id.0 as usize] = head_of[edge.from.0 as usize];
        }
    }
    let heads = graph.nodes.iter().map(|n| n.id).filter(|n| head_of[n.0 as usize] == *n).collect();
    ChainPlan { chained_edges, head_of, heads }
}
