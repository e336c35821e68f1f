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
    /// A connection could not be made, broke, or carried something unreadable: `source`
    /// says why (the network's own error, or what the end of a connection means here).
    #[error("{peer}: {context}")]
    Io {
        peer: String,
        context: String,
        #[source]
        source: eddy_types::Cause,
    },
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
        use eddy_types::Cause;
        // What the commonest kinds mean here, in words; any other error as it was.
        let source = match error.kind() {
            std::io::ErrorKind::UnexpectedEof => Cause::message("the connection was closed"),
            std::io::ErrorKind::ConnectionRefused => {
                Cause::message("connection refused (is it running, at this address?)")
            }
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Cause::message("no answer in time"),
            _ => Cause::new(error),
        };
        Self::broken(peer, context, source)
    }

    /// The connection to `peer` failed while doing `context`, for `source`.
    pub fn broken(peer: &str, context: &str, source: eddy_types::Cause) -> Self {
        ClusterError::Io { peer: peer.to_string(), context: context.to_string(), source }
    }
}
