//! Checks a job graph before it runs; every message names the operator and what to change.

use super::{OperatorFactory, Partitioning, StreamGraph};
use crate::error::JobError;
use std::collections::HashMap;

/// The first problem found, as the job's [`JobError::InvalidJob`].
pub fn validate(graph: &StreamGraph) -> Result<(), JobError> {
    first_problem(graph).map_err(|message| JobError::InvalidJob { job: graph.job_name.clone(), message })
}

/// `Err(message)` for the first problem found.
pub(super) fn first_problem(graph: &StreamGraph) -> Result<(), String> {
    if graph.nodes.is_empty() {
        return Err("the job has no operators; add a source and a sink".into());
    }
    if let Some(autoscaling) = &graph.config.autoscaling {
        autoscaling.check()?;
    }
    let backend = graph.services.state_backend.name();
    if graph.config.simulation.is_some() && backend != "heap" {
        return Err(format!(
            "a simulated run needs the heap state backend, not {backend}: RocksDB's background threads do not follow \
                the simulator's schedule"
        ));
    }
    let mut uids: HashMap<String, &str> = HashMap::new();
    let mut held: HashMap<&str, String> = HashMap::new();
    for node in &graph.nodes {
        let named = format!("operator '{}' (uid {})", node.name, node.effective_uid());
        for resource in &node.exclusive_resources {
            if let Some(other) = held.insert(resource, named.clone()) {
                return Err(format!(
                    "{other} and {named} both need {resource}, which one writer must hold alone (they would fence \
                     each other); give one of them another one"
                ));
            }
        }
        graph
            .max_parallelism
            .check_parallelism(&format!("operator '{}'", node.name), node.parallelism)
            .map_err(|e| eddy_types::chain(&e))?;
        if let Some(uid) = &node.uid {
            if let Some(other) = uids.insert(uid.clone(), &node.name) {
                return Err(format!(
                    "uid '{uid}' is used by operator '{other}' and by operator '{}'; uids must be unique",
                    node.name
                ));
            }
        }
        let inputs: Vec<usize> = graph.edges_into(node.id).map(|(_, e)| e.to_input).collect();
        match node.factory {
            OperatorFactory::Source(_) if !inputs.is_empty() => {
                return Err(format!("source '{}' cannot have inputs", node.name))
            }
            OperatorFactory::OneInput { .. } if inputs.is_empty() => {
                return Err(format!("operator '{}' has no input", node.name))
            }
            OperatorFactory::TwoInput { .. } if !(inputs.contains(&0) && inputs.contains(&1)) => {
                return Err(format!("two-input operator '{}' needs both inputs connected", node.name))
            }
            _ => {}
        }
    }
    for edge in &graph.edges {
        let from = graph.node(edge.from);
        let to = graph.node(edge.to);
        if matches!(edge.partitioning, Partitioning::Forward) && from.parallelism != to.parallelism {
            return Err(format!(
                "forward partitioning from '{}' (parallelism {}) to '{}' (parallelism {}) needs equal parallelism; use \
                    rebalance() or set the same parallelism",
                from.name, from.parallelism, to.name, to.parallelism
            ));
        }
        if edge.from_port >= from.outputs.len() {
            return Err(format!(
                "operator '{}' has no output port {} (bug in graph building)",
                from.name, edge.from_port
            ));
        }
    }
    Ok(())
}
