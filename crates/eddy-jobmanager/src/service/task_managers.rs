//! TaskManagers: one thread per TaskManager's connection, from its registration to its
//! loss (its slots go; every job with slots there hears of it).

use super::takeover;
use super::{Shared, TaskManager};
use eddy_rpc::messages::{JobMasterMessage, TaskManagerMessage};
use eddy_rpc::{Connection, JobId, Reader, TaskManagerId};
use std::sync::Arc;

/// Serves a TaskManager's connection: its registration, heartbeats and what its task
/// executors and JobMasters started again report, until it is lost.
pub(super) fn serve_task_manager(shared: &Arc<Shared>, connection: Connection, mut reader: Reader) {
    let (slots, binary, pid, host, metrics_address) = match reader.receive() {
        Ok(TaskManagerMessage::Register { slots, binary, pid, data_host, metrics_address }) => {
            (slots, binary, pid, data_host, metrics_address)
        }
        other => {
            tracing::warn!(peer = %connection.peer(), first = ?other.map(|m| format!("{m:?}")), "a TaskManager that \
                did not register; closed");
            return;
        }
    };
    let id = {
        let mut state = shared.state();
        state.next_task_manager += 1;
        let id = TaskManagerId(state.next_task_manager);
        let registered_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let names = (binary.clone(), eddy_rpc::launch::binary_name(&binary));
        let tm = TaskManager {
            connection: connection.clone(),
            slots,
            binary: names,
            host,
            pid,
            registered_ms,
            metrics_address,
        };
        state.task_managers.insert(id, tm);
        id
    };
    if connection.send(&TaskManagerMessage::Registered { id }).is_err() {
        return lose_task_manager(shared, id, "it went away while registering");
    }
    tracing::info!(task_manager = %id, slots, peer = %connection.peer(), pid, binary = %binary, "TaskManager joined");
    shared.slots_changed.notify_all();
    tell_slots_available(shared);
    let reason = loop {
        match reader.receive() {
            Ok(TaskManagerMessage::Heartbeat) => {}
            Ok(TaskManagerMessage::ExecutorExited { job, attempt, executor, status }) => {
                let client = shared
                    .state()
                    .jobs
                    .get(&job)
                    .filter(|j| j.allocations.contains_key(&attempt))
                    .and_then(|j| j.connection.clone());
                if let Some(client) = client {
                    let _ = client.send(&JobMasterMessage::ExecutorFailed { attempt, executor, status });
                }
            }
            Ok(TaskManagerMessage::JobMasterExited { job, takeover, status }) => {
                takeover::job_master_exited(shared, job, (id, takeover), &status)
            }
            Ok(other) => {
                tracing::warn!(task_manager = %id, message = ?other, "unexpected message from a TaskManager; ignored")
            }
            Err(e) => break eddy_rpc::chain(&e),
        }
    };
    lose_task_manager(shared, id, &reason);
}

/// A TaskManager left: its slots go, every job with slots there hears of it, and a
/// JobMaster it was starting again is started elsewhere.
pub(super) fn lose_task_manager(shared: &Arc<Shared>, id: TaskManagerId, reason: &str) {
    let clients: Vec<Connection> = {
        let mut state = shared.state();
        if state.task_managers.remove(&id).is_none() {
            return;
        }
        let starting: Vec<(JobId, takeover::TakingOver)> = state
            .jobs
            .iter()
            .filter_map(|(job, j)| j.taking_over_on.filter(|(tm, _)| *tm == id).map(|t| (*job, t)))
            .collect();
        drop(state);
        for (job, taking_over) in starting {
            let why = format!("its TaskManager {id} was lost: {reason}");
            takeover::job_master_exited(shared, job, taking_over, &why);
        }
        let mut state = shared.state();
        let mut clients = Vec::new();
        for job in state.jobs.values_mut() {
            let mut affected = false;
            for allocation in job.allocations.values_mut() {
                let before = allocation.len();
                allocation.retain(|(tm, _)| *tm != id);
                affected |= allocation.len() != before;
            }
            if affected {
                clients.extend(job.connection.clone());
            }
        }
        clients
    };
    tracing::warn!(task_manager = %id, reason, "TaskManager lost");
    for client in clients {
        let _ = client.send(&JobMasterMessage::TaskManagerLost { task_manager: id, reason: reason.to_string() });
    }
    shared.slots_changed.notify_all();
    tell_slots_available(shared);
}

/// Tells every running job how many slots it could hold now (reactive mode takes them).
pub(super) fn tell_slots_available(shared: &Shared) {
    let told: Vec<(Connection, u32)> = {
        let state = shared.state();
        let running = state.jobs.iter().filter(|(_, j)| j.ended.is_none());
        running.filter_map(|(id, j)| Some((j.connection.clone()?, state.available_to(*id)))).collect()
    };
    for (connection, slots) in told {
        let _ = connection.send(&JobMasterMessage::SlotsAvailable { slots });
    }
}
