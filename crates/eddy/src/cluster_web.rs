//! The cluster's HTTP servers: the JobManager's REST API, dashboard and `/metrics` (from
//! its state and the views its jobs' JobMasters send), and a TaskManager's `/metrics`.
//! The servers are `eddy-web`'s, there with the `web` feature; a local job's is wired in
//! `eddy_api::web`. Without the feature `--rest-bind` is refused, naming it.

#[cfg(feature = "web")]
pub(crate) use served::*;
#[cfg(not(feature = "web"))]
pub(crate) use unserved::*;

#[cfg(not(feature = "web"))]
mod unserved {
    use crate::cluster_error::CliError;
    use eddy_api::web::{WebServer, NO_WEB};
    use eddy_jobmanager::JobManagerHandle;
    use eddy_rpc::Security;

    pub(crate) fn serve_job_manager(bind: &str, _: JobManagerHandle, _: &Security) -> Result<WebServer, CliError> {
        Err(CliError::Usage(format!("jobmanager --rest-bind {bind}: {NO_WEB}")))
    }

    pub(crate) fn serve_task_manager(bind: &str, _: u32, _: &Security) -> Result<(WebServer, String), CliError> {
        Err(CliError::Usage(format!("taskmanager --rest-bind {bind}: {NO_WEB}")))
    }
}

#[cfg(feature = "web")]
mod served {
    use crate::cluster_error::CliError;
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

        fn standing_by(&self) -> Option<String> {
            self.0.standing_by()
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
    ) -> Result<WebServer, CliError> {
        eddy_web::serve(options(bind, security, true), Arc::new(JobManagerBackend(handle))).map_err(|e| CliError::Web {
            what: format!("jobmanager --rest-bind {bind}"),
            source: eddy_types::Cause::new(e),
        })
    }

    /// The TaskManager's server, and the address its task executors' servers are reached at.
    pub(crate) fn serve_task_manager(
        bind: &str,
        slots: u32,
        security: &Security,
    ) -> Result<(WebServer, String), CliError> {
        let server =
            eddy_web::serve(options(bind, security, false), Arc::new(TaskManagerBackend { slots })).map_err(|e| {
                CliError::Web { what: format!("taskmanager --rest-bind {bind}"), source: eddy_types::Cause::new(e) }
            })?;
        let address = server.address.to_string();
        Ok((server, address))
    }
}
