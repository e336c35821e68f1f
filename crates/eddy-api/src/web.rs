//! A job's own HTTP server (Flink's MiniCluster web UI): the REST API, the dashboard and
//! `/metrics` of a job running in this process, from its board
//! (`eddy_runtime::observe::JobBoard`); and a task executor's `/metrics` of its subtasks.
//! The server is `eddy-web`'s, there with the `web` feature (the `eddy` facade's `web`);
//! this file only wires a board into it. Without the feature a job that asks for a
//! server is refused, naming the feature.

#[cfg(feature = "web")]
pub use served::*;
#[cfg(not(feature = "web"))]
pub use unserved::*;

/// What a program built without the `web` feature answers where a server is asked for.
pub const NO_WEB: &str = "this program was built without eddy's `web` feature (the REST API, dashboard and \
                          /metrics): add features = [\"web\"] to its eddy dependency";

/// The id of the one job a local server shows, in its paths.
pub const LOCAL_JOB_ID: &str = "local";

#[cfg(not(feature = "web"))]
mod unserved {
    use super::NO_WEB;
    use eddy_runtime::observe::JobBoard;

    /// No server can run in this build; none is ever made.
    #[derive(Debug)]
    pub enum WebServer {}

    impl WebServer {
        pub fn url(&self) -> String {
            match *self {}
        }

        pub fn linger(&self, _: std::time::Duration) {
            match *self {}
        }
    }

    /// Refused: no server in this build.
    pub(crate) fn serve_local_job(bind: &str, _: JobBoard) -> Result<WebServer, String> {
        Err(format!("--rest-bind {bind}: {NO_WEB}"))
    }
}

#[cfg(feature = "web")]
mod served {
    use eddy_rpc::messages::JobCommand;
    use eddy_rpc::TlsConfig;
    use eddy_runtime::observe::{JobBoard, ServeMetrics};
    use eddy_web::{Answer, Backend, JobEntry, ProcessRole, Snapshot, WebOptions};
    use std::net::ToSocketAddrs;
    use std::sync::Arc;

    use super::LOCAL_JOB_ID;
    pub use eddy_web::WebServer;

    /// A board, shown as one job.
    struct BoardBackend {
        board: JobBoard,
        role: ProcessRole,
        /// `None`: the job's id on its cluster, which a task executor's board learns from its
        /// deployment.
        id: Option<String>,
    }

    impl Backend for BoardBackend {
        fn snapshot(&self) -> Snapshot {
            let view = self.board.view();
            let jobs = match view.state {
                None => Vec::new(),
                Some(state) => vec![JobEntry {
                    id: self.id.clone().or_else(|| self.board.job_id()).unwrap_or_else(|| view.name.clone()),
                    name: view.name.clone(),
                    state,
                    parallelism: view.vertices.iter().map(|v| v.parallelism).max().unwrap_or(0),
                    uptime_ms: view.duration_ms,
                    view: Some(view),
                }],
            };
            Snapshot { role: self.role, cluster: None, task_managers: Vec::new(), jobs, slots: None }
        }

        fn command(&self, job: &str, command: JobCommand, answer: Answer) -> Result<(), String> {
            if self.id.as_deref() != Some(job) || self.role != ProcessRole::LocalJob {
                return Err(format!("no job '{job}' here"));
            }
            self.board.command(command, answer);
            Ok(())
        }
    }

    /// Serves a local job's board at `bind`, a loopback address.
    pub(crate) fn serve_local_job(bind: &str, board: JobBoard) -> Result<WebServer, String> {
        let loopback = bind
            .to_socket_addrs()
            .map_err(|e| format!("--rest-bind {bind}: not an address: {e}", e = eddy_types::chain(&e)))?
            .all(|address| address.ip().is_loopback());
        if !loopback {
            return Err(format!(
            "--rest-bind {bind}: a job running on its own serves its REST API on a loopback address only (it has no \
                cluster secret to ask for); run it on a cluster to serve it further"
        ));
        }
        let backend = BoardBackend { board, role: ProcessRole::LocalJob, id: Some(LOCAL_JOB_ID.into()) };
        let options = WebOptions { bind: bind.to_string(), token: None, tls: None, dashboard: true };
        eddy_web::serve(options, Arc::new(backend)).map_err(|e| format!("--rest-bind: {e}", e = eddy_types::chain(&e)))
    }

    /// A task executor's `/metrics` of its own subtasks, behind the cluster's secret.
    #[derive(Debug)]
    pub(crate) struct TaskExecutorMetrics;

    impl ServeMetrics for TaskExecutorMetrics {
        fn serve(&self, board: JobBoard, host: &str, secret: &[u8], tls: Option<&TlsConfig>) -> Result<String, String> {
            let backend = BoardBackend { board, role: ProcessRole::TaskExecutor, id: None };
            let tls = tls.map(TlsConfig::server_config);
            let options = WebOptions { bind: format!("{host}:0"), token: Some(secret.to_vec()), tls, dashboard: false };
            let server = eddy_web::serve(options, Arc::new(backend)).map_err(|e| eddy_types::chain(&e))?;
            Ok(server.address.to_string())
        }
    }
}
