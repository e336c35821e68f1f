//! The CLI's side: `eddy list | status | savepoint | stop | cancel --jobmanager HOST:PORT`.

use eddy_runtime::cluster::auth::{authenticate_client, PeerRole};
use eddy_runtime::cluster::messages::{JobCommand, JobSummary, Message};
use eddy_runtime::cluster::{Connection, Reader, Secret};
use eddy_runtime::error::ClusterError;
use std::net::TcpStream;

/// An authenticated CLI connection to a JobManager.
pub struct CliClient {
    connection: Connection,
    reader: Reader,
}

impl CliClient {
    pub fn connect(jobmanager: &str, secret: &Secret) -> Result<Self, ClusterError> {
        let mut stream = TcpStream::connect(jobmanager)
            .map_err(|e| ClusterError::io(jobmanager, "connecting to the JobManager", e))?;
        authenticate_client(&mut stream, secret, PeerRole::Cli)?;
        let (connection, reader) = Connection::new(stream, None)?;
        Ok(Self { connection, reader })
    }

    /// The jobs the JobManager knows, running and ended.
    pub fn list(&mut self) -> Result<Vec<JobSummary>, ClusterError> {
        self.connection.send(&Message::ListJobs)?;
        loop {
            match self.reader.next()? {
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
            match self.reader.next()? {
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
