//! The command line: its connections, and the commands it (or the REST API) asks of a
//! job, relayed to the job's JobMaster with who waits for the answer.

use super::{summary, Shared, Waiter};
use eddy_rpc::messages::{CliMessage, JobCommand, JobMasterMessage};
use eddy_rpc::{Connection, JobId, JobState, Reader};

pub(super) fn serve_cli(shared: &Shared, connection: Connection, mut reader: Reader) {
    loop {
        match reader.receive() {
            Ok(CliMessage::ListJobs) => {
                let jobs = shared.state_without_expired().jobs.iter().map(|(id, j)| summary(*id, j)).collect();
                let _ = connection.send(&CliMessage::Jobs(jobs));
            }
            Ok(CliMessage::JobCommand { job, command }) => {
                if let Err(message) = relay(shared, Waiter::Cli(connection.clone()), &job, command) {
                    let _ = connection.send(&CliMessage::CommandReply { reply: Err(message) });
                }
            }
            Ok(other) => {
                tracing::warn!(peer = %connection.peer(), message = ?other, "unexpected message from the CLI; ignored")
            }
            Err(_) => return,
        }
    }
}

/// Hands a CLI's command to the job it names (by id, or by name if one running job has
/// it); the job's answer goes back to the CLI.
pub(super) fn relay(shared: &Shared, waiter: Waiter, job: &str, command: JobCommand) -> Result<(), String> {
    let mut state = shared.state();
    let id = match job.parse::<u64>().map(JobId) {
        Ok(id) if state.jobs.contains_key(&id) => id,
        _ => {
            let running: Vec<JobId> =
                state.jobs.iter().filter(|(_, j)| j.name == job && j.ended.is_none()).map(|(id, _)| *id).collect();
            match running.as_slice() {
                [id] => *id,
                [] => return Err(format!("no running job '{job}' (`list` shows the jobs, by id and name)")),
                _ => return Err(format!("{} running jobs are named '{job}': name one by its id", running.len())),
            }
        }
    };
    let entry = &state.jobs[&id];
    if entry.ended.is_some() {
        return Err(format!("job {id} ('{}') already ended: {}", entry.name, entry.state));
    }
    if entry.state == JobState::Initializing {
        return Err(format!(
            "job {id} ('{}') is being taken over by a JobMaster started again; try again in a moment",
            entry.name
        ));
    }
    let Some(client) = entry.connection.clone() else {
        return Err(format!("job {id} ('{}') waits for its JobMaster to come back; try again in a moment", entry.name));
    };
    state.next_request += 1;
    let request = state.next_request;
    let from = if matches!(waiter, Waiter::Cli(_)) { "the CLI" } else { "the REST API" };
    state.waiting.insert(request, (waiter, id));
    drop(state);
    tracing::info!(job = %id, command = ?command, from, "relaying a command");
    client.send(&JobMasterMessage::Command { request, command }).map_err(|e| {
        // Answered here, not again when the job goes.
        shared.state().waiting.remove(&request);
        format!("cannot reach job {id}: {e}", e = eddy_rpc::chain(&e))
    })
}
