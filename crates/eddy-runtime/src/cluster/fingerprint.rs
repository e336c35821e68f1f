//! A job graph as one line per operator and edge, compared across processes: a
//! TaskManager whose binary builds another graph from the job's arguments (another
//! version of the code, another flag) is refused before anything runs, with the first
//! line that differs.

use crate::graph::{ChainPlan, Partitioning, StreamGraph};

/// The graph's lines: what must be equal for two processes to run one job together.
pub fn describe(graph: &StreamGraph, plan: &ChainPlan) -> Vec<String> {
    let mut lines = vec![format!("job '{}' max parallelism {}", graph.job_name, graph.max_parallelism.get())];
    for node in &graph.nodes {
        let ports: Vec<&str> = node.outputs.iter().map(|o| o.port_type.type_name()).collect();
        lines.push(format!(
            "operator {} '{}' uid '{}' parallelism {} outputs [{}]",
            node.id.0,
            node.name,
            node.effective_uid(),
            node.parallelism,
            ports.join(", ")
        ));
    }
    for (index, edge) in graph.edges.iter().enumerate() {
        let partitioning = match edge.partitioning {
            Partitioning::Forward => "forward",
            Partitioning::Rebalance => "rebalance",
            Partitioning::Shuffle => "shuffle",
            Partitioning::Broadcast => "broadcast",
            Partitioning::KeyGroups(_) => "key groups",
        };
        lines.push(format!(
            "edge {index}: {}:{} -> {} input {} {partitioning}{}",
            edge.from.0,
            edge.from_port,
            edge.to.0,
            edge.to_input,
            if plan.chained_edges[index] { " chained" } else { "" }
        ));
    }
    lines
}

/// The first difference between the JobMaster's graph and a TaskManager's, for the
/// error that refuses it.
pub fn first_difference(ours: &[String], theirs: &[String]) -> Option<String> {
    for (i, line) in ours.iter().enumerate() {
        match theirs.get(i) {
            Some(other) if other == line => {}
            Some(other) => return Some(format!("the job's binary has `{line}`, the TaskManager's `{other}`")),
            None => return Some(format!("the TaskManager's graph ends before `{line}`")),
        }
    }
    theirs.get(ours.len()).map(|extra| format!("the TaskManager's graph has more: `{extra}`"))
}
