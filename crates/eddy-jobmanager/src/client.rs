//! The CLI's side: `eddy list | status | savepoint | stop | cancel --jobmanager HOST:PORT`.

use eddy_rpc::messages::{CliMessage, JobCommand, JobSummary};
use eddy_rpc::{ClusterError, Connection, PeerRole, Reader, Security};

/// How long the CLI looks for a leading JobManager (high availability).
const LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An authenticated CLI connection to a JobManager.
pub struct CliClient {
    connection: Connection,
    reader: Reader,
}

impl CliClient {
    /// Connects to the JobManager at `jobmanager`, or to the leader a high-availability
    /// address (`etcd://…`) names.
    pub fn connect(jobmanager: &str, security: &Security) -> Result<Self, ClusterError> {
        let jobmanager = &eddy_rpc::ha::locate_jobmanager(jobmanager, LEADER_WAIT)?;
        let stream = security.connect(jobmanager, PeerRole::Cli, "connecting to the JobManager")?;
        let (connection, reader) = Connection::new(stream, None)?;
        Ok(Self { connection, reader })
    }

    /// The jobs the JobManager knows, running and ended.
    pub fn list(&mut self) -> Result<Vec<JobSummary>, ClusterError> {
        self.connection.send(&CliMessage::ListJobs)?;
        match self.reader.receive()? {
            CliMessage::Jobs(jobs) => Ok(jobs),
            other => Err(ClusterError::Protocol(format!("the JobManager answered `list` with {other:?}"))),
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
        self.connection.send(&CliMessage::JobCommand { job: job.to_string(), command })?;
        loop {
            match self.reader.receive()? {
                CliMessage::CommandReply { reply } => return Ok(reply),
                CliMessage::CommandProgress { text } => progress(&text),
                other => {
                    return Err(ClusterError::Protocol(format!("the JobManager answered a command with {other:?}")))
                }
            }
        }
    }
}
