//! The one error type of `eddy-rpc`: why a cluster process cannot go on, or why a peer
//! was refused.

/// Why a cluster process (JobManager, TaskManager, CLI, a job's JobMaster, a task
/// executor) cannot go on, or why a peer was refused. Each names the peer or the file.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    /// The secret file is missing, unreadable or too short.
    #[error("{0}")]
    Secret(String),
    /// A peer was refused, or refused this process (secret, protocol version, role).
    #[error("refused: {0}")]
    Refused(String),
    /// A connection could not be made, broke, or carried something unreadable.
    #[error("{peer}: {context}: {message}")]
    Io { peer: String, context: String, message: String },
    /// The peer sent something this process did not expect at this point.
    #[error("{0}")]
    Protocol(String),
    /// A command line or configuration that cannot work.
    #[error("{0}")]
    Config(String),
}

impl ClusterError {
    /// An I/O failure on the connection to `peer` while doing `context`.
    pub fn io(peer: &str, context: &str, error: std::io::Error) -> Self {
        let message = match error.kind() {
            std::io::ErrorKind::UnexpectedEof => "the connection was closed".to_string(),
            std::io::ErrorKind::ConnectionRefused => "connection refused (is it running, at this address?)".to_string(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "no answer in time".to_string(),
            _ => error.to_string(),
        };
        ClusterError::Io { peer: peer.to_string(), context: context.to_string(), message }
    }
}
