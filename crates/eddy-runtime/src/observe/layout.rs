//! A job's vertices (its chains) and the edges between them, as the views show them.

use crate::graph::{ChainPlan, StreamGraph};
use eddy_rpc::view::{EdgeView, VertexView};

/// The vertices of `graph` chained by `plan`, in the order data flows, without subtasks.
pub(crate) fn vertices(graph: &StreamGraph, plan: &ChainPlan) -> Vec<VertexView> {
    plan.heads
        .iter()
        .map(|&head| VertexView {
            id: head.0,
            name: plan.chain_name(graph, head),
            uid: graph.node(head).uid.clone().unwrap_or_else(|| format!("node-{}", head.0)),
            parallelism: graph.node(head).parallelism,
            operators: plan.members(head).iter().map(|n| graph.node(*n).name.clone()).collect(),
            subtasks: Vec::new(),
            state_bytes: 0,
        })
        .collect()
}

/// The edges between chains (the chained ones are inside a vertex), once per pair and
/// strategy.
pub(crate) fn edges(graph: &StreamGraph, plan: &ChainPlan) -> Vec<EdgeView> {
    let mut edges: Vec<EdgeView> = Vec::new();
    for (index, edge) in graph.edges.iter().enumerate() {
        if plan.chained_edges[index] {
            continue;
        }
        let view = EdgeView {
            source: plan.head_of[edge.from.0 as usize].0,
            target: plan.head_of[edge.to.0 as usize].0,
            ship_strategy: edge.partitioning.name().to_string(),
        };
        if !edges.contains(&view) {
            edges.push(view);
        }
    }
    edges
}
