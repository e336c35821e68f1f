//! Running a job from this process: the one place that chooses how ([`ExecutionMode`]),
//! and the local thread launch.
//!
//! - this file: [`LocalExecutor::execute`] picks the mode once: locally on threads,
//!   simulated on one thread, as a task executor of a cluster job (when a TaskManager
//!   started this process for it), submitted to a cluster as the job's JobMaster, or as
//!   a cluster job's JobMaster started again by a TaskManager;
//! - `local`: an attempt's subtasks on threads of this process (or stepped by the
//!   simulator), coordinated by the JobMaster ([`crate::jobmaster`]);
//! - `simulation`: the deterministic simulator and its seeded faults.
//!
//! The JobMaster (restarts, checkpoints, savepoints) is the same in every mode but the
//! task executor's, which runs subtasks for a JobMaster elsewhere.

mod local;
mod simulation;

use crate::jobmaster::remote::RemoteLauncher;
use crate::jobmaster::takeover;
use crate::jobmaster::{ClusterTarget, JobMaster, JobResult};
use eddy_runtime::cluster::task_executor;
use eddy_runtime::error::JobError;
use eddy_runtime::graph::StreamGraph;
use eddy_types::{Clock, ManualClock, RunSeed, SystemClock};
use local::LocalLauncher;
use simulation::Simulator;
use std::sync::Arc;

/// How a job runs, chosen once from its configuration and the process it runs in.
#[derive(Debug, Clone)]
pub enum ExecutionMode {
    /// On threads of this process (the embedded default).
    Local,
    /// Every subtask on this thread in a seeded order, on a simulated clock, with seeded
    /// faults (`Env::simulate`).
    Simulated { seed: u64, faults: u32 },
    /// This process is a task executor a TaskManager started for a cluster job: it runs
    /// its slots' subtasks for the job's JobMaster (the TaskManager set
    /// `eddy_rpc::launch::LAUNCH_ENV`; no flag of the program's is read).
    TaskExecutor,
    /// Submitted to a cluster (`Env::set_cluster`): this process is the job's JobMaster.
    Cluster(Box<ClusterTarget>),
    /// A TaskManager started this process as the job's JobMaster again, after the process
    /// that ran it died (`eddy_rpc::launch::JOB_MASTER_ENV`): it takes the job over from
    /// its latest checkpoint.
    JobMasterTakeover,
}

impl ExecutionMode {
    /// The mode of `graph`'s job in this process, or why its configuration asks for two
    /// at once.
    pub fn of(graph: &StreamGraph) -> Result<Self, JobError> {
        let (config, services) = (&graph.config, &graph.services);
        if let Some(simulation) = config.simulation {
            if services.cluster.is_some() {
                let message = "a simulated job runs on one thread of this process: it cannot be submitted to a \
                    cluster too (drop `simulate` or `set_cluster`)";
                return Err(JobError::InvalidJob { job: graph.job_name.clone(), message: message.into() });
            }
            return Ok(ExecutionMode::Simulated { seed: simulation.seed, faults: simulation.faults });
        }
        if eddy_rpc::launch::job_master_launched() {
            return Ok(ExecutionMode::JobMasterTakeover);
        }
        if eddy_rpc::launch::launched() {
            return Ok(ExecutionMode::TaskExecutor);
        }
        Ok(match &services.cluster {
            Some(target) => ExecutionMode::Cluster(Box::new(target.clone())),
            None => ExecutionMode::Local,
        })
    }
}

/// Runs jobs from this process.
pub struct LocalExecutor {
    clock: Arc<dyn Clock>,
}

impl Default for LocalExecutor {
    fn default() -> Self {
        Self::new()
    }
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

    /// Runs the job to completion (all sources exhausted), restarting from the latest
    /// completed checkpoint on failures as the restart strategy allows, in the job's
    /// [`ExecutionMode`]. In a task executor it returns once this process's subtasks
    /// ended, with a result that says so ([`JobResult::task_executor`]).
    pub fn execute(&self, graph: StreamGraph) -> Result<JobResult, JobError> {
        let mode = ExecutionMode::of(&graph)?;
        match mode {
            ExecutionMode::Local => {
                let launcher = LocalLauncher { clock: self.clock.clone(), simulator: None };
                JobMaster { launcher: &launcher }.run(graph)
            }
            ExecutionMode::Simulated { seed, faults } => {
                let clock = ManualClock::new(0);
                let simulator = Simulator::new(RunSeed(seed), faults, clock.clone());
                let launcher = LocalLauncher { clock: Arc::new(clock), simulator: Some(simulator) };
                JobMaster { launcher: &launcher }.run(graph)
            }
            ExecutionMode::TaskExecutor => {
                let job = graph.job_name.clone();
                task_executor::run(graph).map(|()| JobResult::of_task_executor(job))
            }
            ExecutionMode::Cluster(target) => RemoteLauncher::execute(*target, self.clock.clone(), graph, None),
            ExecutionMode::JobMasterTakeover => takeover::run(self.clock.clone(), graph),
        }
    }
}
