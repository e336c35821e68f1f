//! The CLI's side: `eddy list | status | savepoint | stop | cancel --jobmanager HOST:PORT`.

use eddy_runtime::cluster::auth::PeerRole;
use eddy_runtime::cluster::messages::{JobCommand, JobSummary, Message};
use eddy_runtime::cluster::{Connection, Reader, Security};
use eddy_runtime::error::ClusterError;

/// An authenticated CLI connection to a JobManager.
pub struct CliClient {
    connection: Connection,
    reader: Reader,
}

impl CliClient {
    pub fn connect(jobmanager: &str, security: &Security) -> Result<Self, ClusterError> {
        let stream = security.connect(jobmanager, PeerRole::Cli, "connecting to the JobManager")?;
        let (connection, reader) = Connection::new(stream, None)?;
        Ok(Self { connection, reader })
    }

    /// The jobs the JobManager knows, running and ended.
    pub fn list(&mut self) -> Result<Vec<JobSummary>, ClusterError> {
        self.connection.send(&Message::ListJobs)?;
        loop {
            match self.reader.receive()? {
                Message::Jobs(jobs) => return Ok(jobs),
                Message::Heartbeat => {}
                other => return Err(ClusterError::Protocol(format!("the JobManager answered `list` with {other:?}"))),
            }
        }
    }

    /// Sends `command` to job `job` (id or name) and waits for its answer; `progress`
    /// hears what the job says meanwhile. `Ok(Err(_))`: the job (or the JobManager)
    /// refused or failed the command.
    pub fn command(
        &mut self,
        job: &str,
        command: JobCommand,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Result<String, String>, ClusterError> {
        self.connection.send(&Message::JobCommand { job: job.to_string(), command })?;
        loop {
            match self.reader.receive()? {
                Message::CommandReply { reply, .. } => return Ok(reply),
                Message::CommandProgress { text, .. } => progress(&text),
                Message::Heartbeat => {}
                other => {
                    return Err(ClusterError::Protocol(format!("the JobManager answered a command with {other:?}")))
                }
            }
        }
    }
}
