//! The cluster's HTTP servers: the JobManager's REST API, dashboard and `/metrics` (from
//! its state and the views its jobs' JobMasters send), and a TaskManager's `/metrics`.
//! The servers are `eddy-web`'s; a local job's is wired in `eddy_api::web`.

use eddy_jobmanager::JobManagerHandle;
use eddy_rpc::messages::JobCommand;
use eddy_rpc::Security;
use eddy_web::{Answer, Backend, JobEntry, ProcessRole, Snapshot, WebOptions, WebServer};
use std::sync::Arc;

/// The JobManager's state, as its REST API shows it.
struct JobManagerBackend(JobManagerHandle);

impl Backend for JobManagerBackend {
    fn snapshot(&self) -> Snapshot {
        let jobs = self
            .0
            .jobs()
            .into_iter()
            .map(|entry| JobEntry {
                id: entry.summary.id.to_string(),
                name: entry.summary.name,
                state: entry.summary.state,
                parallelism: entry.summary.parallelism,
                uptime_ms: entry.summary.uptime_ms,
                view: entry.view,
            })
            .collect();
        Snapshot {
            role: ProcessRole::JobManager,
            cluster: Some(self.0.overview()),
            task_managers: self.0.task_managers(),
            jobs,
            slots: None,
        }
    }

    fn command(&self, job: &str, command: JobCommand, answer: Answer) -> Result<(), String> {
        self.0.command(job, command, answer)
    }
}

/// A TaskManager's `/metrics`: its slots and its process.
struct TaskManagerBackend {
    slots: u32,
}

impl Backend for TaskManagerBackend {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            role: ProcessRole::TaskManager,
            cluster: None,
            task_managers: Vec::new(),
            jobs: Vec::new(),
            slots: Some(self.slots),
        }
    }

    fn command(&self, job: &str, _: JobCommand, _: Answer) -> Result<(), String> {
        Err(format!("a TaskManager runs no job's commands ('{job}'); ask the JobManager"))
    }
}

/// The cluster's credentials, as a server asks for them: the secret as a bearer token,
/// TLS when the cluster has it.
fn options(bind: &str, security: &Security, dashboard: bool) -> WebOptions {
    WebOptions {
        bind: bind.to_string(),
        token: Some(security.secret.bytes().to_vec()),
        tls: security.tls.as_ref().map(|tls| tls.server_config()),
        dashboard,
    }
}

pub(crate) fn serve_job_manager(
    bind: &str,
    handle: JobManagerHandle,
    security: &Security,
) -> Result<WebServer, String> {
    eddy_web::serve(options(bind, security, true), Arc::new(JobManagerBackend(handle)))
        .map_err(|e| format!("jobmanager --rest-bind: {e}"))
}

pub(crate) fn serve_task_manager(bind: &str, slots: u32, security: &Security) -> Result<WebServer, String> {
    eddy_web::serve(options(bind, security, false), Arc::new(TaskManagerBackend { slots }))
        .map_err(|e| format!("taskmanager --rest-bind: {e}"))
}
