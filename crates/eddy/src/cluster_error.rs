//! The one error type of the facade's cluster commands: why a JobManager, a TaskManager or
//! a job-control command could not go on, with its cause kept as its `source`.

use eddy_rpc::ClusterError;

/// Why a cluster command could not go on. `Display` says what failed; the cause, when
/// there is one (the network's, etcd's, a file's error), is the `source`, and `Debug`
/// prints the whole chain, so that a `main` returning it ends with a readable line.
#[derive(thiserror::Error)]
pub enum CliError {
    /// Flags that cannot work together, or ask for what this binary was built without.
    #[error("{0}")]
    Usage(String),
    /// `what` failed on the cluster's side: a connection, etcd, the secret, TLS, a
    /// process's own sockets.
    #[error("{what}")]
    Cluster {
        what: String,
        #[source]
        source: ClusterError,
    },
    /// A local path that cannot be used.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The job, or the JobManager for it, refused the command, saying why.
    #[error("{0}")]
    Refused(String),
    /// The REST server could not start.
    #[error("{what}")]
    Web {
        what: String,
        #[source]
        source: eddy_types::Cause,
    },
}

impl CliError {
    /// `what` failed, for `source`.
    pub(crate) fn cluster(what: impl Into<String>) -> impl FnOnce(ClusterError) -> CliError {
        let what = what.into();
        move |source| CliError::Cluster { what, source }
    }
}

impl std::fmt::Debug for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&eddy_types::chain(self))
    }
}
