//! Slots (Flink's `SlotManager` and `ResourceManager`): how many each TaskManager has
//! free, and where an attempt's slots come from. A request waits (up to its timeout) until
//! the [`ResourceProvider`] can serve it; the one provider today is the standalone pool of
//! registered TaskManagers ([`StandalonePool`]). An active provider (Kubernetes) would go
//! beside it: it would start TaskManagers for what it cannot serve.

use super::{Allocation, Shared, State};
use eddy_rpc::launch::Deployment;
use eddy_rpc::messages::{JobMasterMessage, TaskManagerMessage};
use eddy_rpc::slots::ExecutorSlots;
use eddy_rpc::{AttemptId, Connection, ExecutorIndex, JobId, JobState, TaskManagerId};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where an attempt's slots come from (Flink's `ResourceManager`): asked under the
/// state's lock, again whenever slots free up or TaskManagers register, until the request
/// is served or times out.
pub(crate) trait ResourceProvider: Send + Sync {
    /// `slots` slots on TaskManagers of `binary` among what `state` holds now, or `None`
    /// if there are not enough yet.
    fn pick(&self, state: &State, slots: u32, binary: &str) -> Option<Allocation>;
    /// A request for `needed` slots waits, with `free` free: an active provider asks for
    /// TaskManagers here; the standalone pool waits for them to register.
    fn wanted(&self, needed: u32, free: u32) {
        let _ = (needed, free);
    }
}

/// The registered TaskManagers, as they are (Flink's standalone mode): slots are taken
/// from them in the order they joined, filling each before the next.
#[derive(Debug, Default)]
pub(crate) struct StandalonePool;

impl ResourceProvider for StandalonePool {
    fn pick(&self, state: &State, slots: u32, binary: &str) -> Option<Allocation> {
        let eligible: Vec<TaskManagerId> =
            state.task_managers.keys().copied().filter(|&id| state.runs(id, binary)).collect();
        if eligible.iter().fold(0u32, |total, &id| total.saturating_add(state.free(id))) < slots {
            return None;
        }
        let mut allocation: Allocation = Vec::new();
        let mut remaining = slots;
        for id in eligible {
            let take = state.free(id).min(remaining);
            if take > 0 {
                allocation.push((id, take));
                remaining -= take;
            }
            if remaining == 0 {
                break;
            }
        }
        Some(allocation)
    }
}

/// Slot accounting: what each TaskManager has free, from the allocations of every job.
impl State {
    pub(super) fn used(&self, task_manager: TaskManagerId) -> u32 {
        self.jobs
            .values()
            .flat_map(|j| j.allocations.values())
            .flatten()
            .filter(|(tm, _)| *tm == task_manager)
            .fold(0u32, |used, (_, n)| used.saturating_add(*n))
    }

    pub(super) fn free(&self, task_manager: TaskManagerId) -> u32 {
        self.task_managers.get(&task_manager).map_or(0, |tm| tm.slots.saturating_sub(self.used(task_manager)))
    }

    /// Whether TaskManager `task_manager` runs jobs of `binary` (any, when the job's
    /// binary is not known).
    pub(super) fn runs(&self, task_manager: TaskManagerId, binary: &str) -> bool {
        binary.is_empty() || self.task_managers.get(&task_manager).is_some_and(|tm| tm.binary.1 == binary)
    }

    /// The TaskManagers of another binary than `binary`, as a message names them, with
    /// what to do; `None` if every one runs it.
    pub(super) fn other_binaries(&self, job_name: &str, binary: &str) -> Option<String> {
        let others: Vec<String> = self
            .task_managers
            .iter()
            .filter(|(id, _)| !self.runs(**id, binary))
            .map(|(id, tm)| format!("TaskManager {id} runs '{}' ({})", tm.binary.1, tm.binary.0))
            .collect();
        if others.is_empty() {
            return None;
        }
        Some(format!(
            "job '{job_name}' is of binary '{binary}', and {}: a TaskManager runs the jobs of its own binary (it \
             starts it with the job's arguments). Start the TaskManagers from the job's binary: `{binary} \
             taskmanager --jobmanager HOST:PORT --secret-file FILE`",
            others.join(", ")
        ))
    }

    pub(super) fn free_total(&self) -> u32 {
        self.task_managers.keys().fold(0u32, |total, &id| total.saturating_add(self.free(id)))
    }

    /// The slots job `job` could hold: the free ones of TaskManagers of its binary, and
    /// its own.
    pub(super) fn available_to(&self, job: JobId) -> u32 {
        let Some(j) = self.jobs.get(&job) else { return self.free_total() };
        let own = j.allocations.values().flatten().fold(0u32, |total, (_, n)| total.saturating_add(*n));
        let free = self
            .task_managers
            .keys()
            .filter(|&&id| self.runs(id, &j.binary))
            .fold(0u32, |total, &id| total.saturating_add(self.free(id)));
        free.saturating_add(own)
    }

    pub(super) fn slots_total(&self) -> u32 {
        self.task_managers.values().fold(0u32, |total, tm| total.saturating_add(tm.slots))
    }
}

/// A job's request for the slots of one attempt.
pub(super) struct SlotRequest {
    pub(super) job: JobId,
    /// The JobMaster that asked: its successor's requests are its own.
    pub(super) generation: u32,
    pub(super) name: String,
    pub(super) attempt: AttemptId,
    pub(super) slots: u32,
    pub(super) timeout_ms: u64,
    pub(super) job_master: String,
    pub(super) args: Arc<Vec<String>>,
    /// The job's binary: only TaskManagers of it are given.
    pub(super) binary: String,
    /// The job's first request for slots.
    pub(super) first: bool,
    pub(super) operator_parallelism: Vec<u32>,
}

/// Waits (up to the request's timeout) for enough free slots, takes them from the
/// TaskManagers in the order they joined, deploys a task executor to each, and tells the
/// job where its subtasks run.
pub(super) fn allocate(shared: &Shared, request: SlotRequest, client: &Connection) {
    let SlotRequest { job, attempt, slots, .. } = request;
    // A timeout beyond any deadline a clock can hold waits "for ever" (a year).
    let deadline = Instant::now()
        .checked_add(Duration::from_millis(request.timeout_ms))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600));
    let mut state = shared.state();
    let mut told_waiting = false;
    loop {
        match state.jobs.get(&job) {
            Some(j) if j.ended.is_none() && j.generation == request.generation && j.state != JobState::Initializing => {
            }
            _ => return,
        }
        let eligible = state.task_managers.keys().any(|&id| state.runs(id, &request.binary));
        if request.first && !eligible && !state.task_managers.is_empty() {
            // A new job, and every TaskManager here runs another binary: waiting would end
            // the same way, later, and the likely fix is to start the right ones. (A job
            // that ran waits for its TaskManagers to come back, as before.)
            let message = state.other_binaries(&request.name, &request.binary).unwrap_or_default();
            tracing::warn!(job = %job, attempt = %attempt, %message, "no TaskManager of the job's binary");
            drop(state);
            let _ = client.send(&JobMasterMessage::SlotsUnavailable { attempt, message });
            return;
        }
        if let Some(allocation) = shared.resources.pick(&state, slots, &request.binary) {
            let mut executors = Vec::new();
            let mut deployments = Vec::new();
            let mut first_slot = 0;
            for (executor, &(task_manager, n)) in allocation.iter().enumerate() {
                executors.push(ExecutorSlots { task_manager, first_slot, slots: n });
                first_slot += n;
                let deployment = Deployment {
                    job,
                    job_name: request.name.clone(),
                    attempt,
                    executor: ExecutorIndex(executor as u32),
                    args: request.args.to_vec(),
                    job_master: request.job_master.clone(),
                    operator_parallelism: request.operator_parallelism.clone(),
                };
                deployments.push((state.task_managers[&task_manager].connection.clone(), deployment));
            }
            if let Some(j) = state.jobs.get_mut(&job) {
                j.allocations.insert(attempt, allocation.clone());
                j.state = JobState::Running;
                j.takeovers_in_a_row = 0;
            }
            drop(state);
            tracing::info!(job = %job, attempt = %attempt, slots, task_managers = %describe(&allocation), "slots \
                allocated; deploying");
            for (connection, deployment) in deployments {
                // A TaskManager that cannot be told is lost: its reader says so, and the
                // job hears it.
                let _ = connection.send(&TaskManagerMessage::Deploy(deployment));
            }
            let _ = client.send(&JobMasterMessage::SlotsAllocated { attempt, executors });
            return;
        }
        let now = Instant::now();
        if now >= deadline {
            let mut message = format!(
                "the job needs {slots} slots (its highest parallelism); the cluster has {} free of {} on {} \
                    TaskManager(s), and no more came within {} ms (--slot-timeout-ms)",
                state.free_total(),
                state.slots_total(),
                state.task_managers.len(),
                request.timeout_ms
            );
            if let Some(others) = state.other_binaries(&request.name, &request.binary) {
                message.push_str(&format!("; {others}"));
            }
            tracing::warn!(job = %job, attempt = %attempt, %message, "slot request timed out");
            drop(state);
            let _ = client.send(&JobMasterMessage::SlotsUnavailable { attempt, message });
            return;
        }
        if !told_waiting {
            told_waiting = true;
            tracing::info!(job = %job, attempt = %attempt, needed = slots, free = state.free_total(), "waiting for \
                slots");
            shared.resources.wanted(slots, state.free_total());
        }
        state = shared.slots_changed.wait_timeout(state, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// An allocation as the log shows it: `[(TaskManager, slots there), …]`.
pub(super) fn describe(allocation: &Allocation) -> String {
    let pairs: Vec<String> = allocation.iter().map(|(tm, slots)| format!("({tm}, {slots})")).collect();
    format!("[{}]", pairs.join(", "))
}
