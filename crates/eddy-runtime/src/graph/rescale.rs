//! A graph at another parallelism: what rescaling a running job changes (Flink's adaptive
//! scheduler changes each vertex's parallelism within its bounds). Operators that follow
//! the job's default parallelism take the new one; operators with a parallelism of their
//! own, and non-parallel sources, keep theirs. The result is checked like any graph: a
//! forward edge whose two ends would no longer match refuses the rescale.
//!
//! Task executors and a JobMaster taken over rebuild the graph from the job's arguments,
//! at the parallelism the program set: they apply the running parallelism of every
//! operator ([`StreamGraph::operator_parallelism`]) as the JobMaster hands it over.

use super::validate::first_problem;
use super::StreamGraph;
use crate::error::JobError;

impl StreamGraph {
    /// The graph with every operator that follows the job's default parallelism at
    /// `parallelism`; an error naming what does not fit.
    pub fn rescaled(&self, parallelism: u32) -> Result<StreamGraph, JobError> {
        let refused = |why: String| JobError::InvalidJob {
            job: self.job_name.clone(),
            message: format!("cannot rescale to {parallelism}: {why}"),
        };
        if !self.nodes.iter().any(|n| n.follows_default) {
            return Err(refused(
                "every operator of the job has a parallelism of its own: none follows a rescale".into(),
            ));
        }
        let mut graph = self.clone();
        for node in graph.nodes.iter_mut().filter(|n| n.follows_default) {
            node.parallelism = parallelism;
        }
        first_problem(&graph).map_err(refused)?;
        Ok(graph)
    }

    /// Each operator's parallelism, in node order.
    pub fn operator_parallelism(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.parallelism).collect()
    }

    /// Sets each operator's parallelism (in node order) as the JobMaster runs it; an error
    /// if the list does not fit this graph.
    pub fn apply_operator_parallelism(&mut self, parallelism: &[u32]) -> Result<(), String> {
        if parallelism.len() != self.nodes.len() {
            return Err(format!(
                "the JobMaster runs {} operators, this binary built {}",
                parallelism.len(),
                self.nodes.len()
            ));
        }
        for (node, &p) in self.nodes.iter_mut().zip(parallelism) {
            node.parallelism = p;
        }
        first_problem(self)
    }
}
