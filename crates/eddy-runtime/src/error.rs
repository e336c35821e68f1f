//! The one error type of `eddy-runtime`, split by who must act.

/// Why one subtask stopped.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TaskError {
    /// A user function returned an error or panicked; the user must act.
    #[error("operator '{operator}' failed: {message}")]
    Operator { operator: String, message: String },
    /// The state backend under an operator failed (RocksDB I/O, a snapshot that could not
    /// be made): not the user's code; whoever runs the job must act.
    #[error("the state backend of operator '{operator}' failed: {message}")]
    StateBackend { operator: String, message: String },
    /// The job is being cancelled (another subtask failed, or the user cancelled it).
    #[error("cancelled")]
    Cancelled,
    /// A bug in eddy; please report.
    #[error("internal error (please report): {0}")]
    Internal(String),
    /// The subtask lost its TaskManager, or a connection to another one (a process was
    /// killed, a machine or the network failed): whoever runs the cluster must act, and
    /// the job restarts under its restart strategy.
    #[error("{0}")]
    Lost(String),
    /// An operator's state does not read as the type it declares (the type changed since
    /// the checkpoint, or the snapshot is damaged): every restart would read the same
    /// bytes, so the job fails at once.
    #[error("operator '{operator}' cannot read its state: {message}")]
    StateUnreadable { operator: String, message: String },
    /// Records cannot cross to another process (their type does not serialize): the
    /// user must act, and no restart mends it.
    #[error("{0}")]
    Unsendable(String),
}

impl TaskError {
    /// The failure of operator `operator` (uid `uid`) whose function (or the state it
    /// used) returned `error`: the backend's failures and eddy's bugs are told apart from
    /// the user's.
    pub fn of_operator(operator: &str, uid: &str, error: &(dyn std::error::Error + 'static)) -> Self {
        use eddy_state::{StateError, StateErrorKind};
        let operator = operator.to_string();
        match error.downcast_ref::<StateError>().map(StateError::kind) {
            Some(StateErrorKind::Backend(message)) => TaskError::StateBackend { operator, message: message.clone() },
            // The cause crosses processes as text: the chain down to the storage's own error.
            Some(StateErrorKind::BackendFailed { what, source }) => {
                TaskError::StateBackend { operator, message: format!("{what}: {}", eddy_types::chain(source)) }
            }
            // The same declarations after every restart: the fixes are the user's.
            Some(e @ StateErrorKind::RestoredTypeChanged { .. }) => TaskError::StateUnreadable {
                operator,
                message: format!(
                    "{e}. Declare it with the type it had; or give the operator a new uid in place of '{uid}' \
                     (`.uid(\"…\")`) and restore with -n/--allow-non-restored-state, which drops the state of '{uid}'; \
                     a state the function declares itself can instead take another name"
                ),
            },
            // The same bytes, or the same declarations, after every restart: none mends them.
            Some(
                e @ (StateErrorKind::Deserialize { .. }
                | StateErrorKind::IncompatibleDeclaration { .. }
                | StateErrorKind::NotDeclared { .. }),
            ) => TaskError::StateUnreadable { operator, message: e.to_string() },
            Some(e @ (StateErrorKind::KeyGroupOutOfRange { .. } | StateErrorKind::BackendAlreadyInstalled)) => {
                TaskError::Internal(format!("operator '{operator}': {e}"))
            }
            _ => TaskError::Operator { operator, message: eddy_types::chain(error) },
        }
    }

    /// Who must act on this failure.
    pub fn kind(&self) -> FailureKind {
        match self {
            TaskError::Operator { .. } => FailureKind::UserCode,
            TaskError::StateBackend { .. } => FailureKind::StateBackend,
            TaskError::Cancelled | TaskError::Internal(_) => FailureKind::Internal,
            TaskError::Lost(_) => FailureKind::Cluster,
            TaskError::Unsendable(_) => FailureKind::Unsendable,
            TaskError::StateUnreadable { .. } => FailureKind::StateUnreadable,
        }
    }
}

/// What failed in a failed subtask, and so who must act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A user function returned an error or panicked.
    UserCode,
    /// The state backend (its storage, a snapshot of it).
    StateBackend,
    /// eddy itself; please report.
    Internal,
    /// A TaskManager or a connection between processes of the cluster.
    Cluster,
    /// A record type that cannot be serialized to cross processes: a restart cannot
    /// mend it, so the job fails at once.
    Unsendable,
    /// Restored state that does not read as its declared type, a state declared again as
    /// another type (or with a changed time to live), declared twice with different types,
    /// or used without being declared: no restart mends it.
    StateUnreadable,
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailureKind::UserCode => "",
            FailureKind::StateBackend => "state backend: ",
            FailureKind::Internal => "internal error (please report): ",
            FailureKind::Cluster => "cluster: ",
            FailureKind::Unsendable => "",
            FailureKind::StateUnreadable => "",
        })
    }
}

/// Why a job could not be built or did not finish.
///
/// `Display` says what failed; the cause, when one was kept, is its `source`, down to the
/// storage's or the network's own error. `Debug` prints the whole chain
/// ([`eddy_types::chain`]), so that `fn main() -> Result<(), Box<dyn Error>>` ends a
/// failed job with a readable line, with its causes, instead of a struct dump.
#[derive(Clone, thiserror::Error, PartialEq, Eq)]
pub enum JobError {
    /// The job graph is invalid; the message names the operator and what to change.
    #[error("invalid job '{job}': {message}")]
    InvalidJob { job: String, message: String },
    /// A subtask failed; the job was cancelled. `subtask` is 0-based like every subtask
    /// index; the message counts from 1, as Flink's `(2/4)` does.
    /// `kind` says who must act: the user's code, the state backend, or eddy.
    #[error(
        "job '{job}' failed: operator '{operator}' (subtask {}/{parallelism}) failed: {kind}{message}",
        .subtask + 1
    )]
    TaskFailed { job: String, operator: String, subtask: u32, parallelism: u32, kind: FailureKind, message: String },
    #[error("job '{job}' was cancelled")]
    Cancelled { job: String },
    /// Checkpoints could not be taken, stored or restored. `source`, when the storage
    /// said why, tells a damaged checkpoint from a storage that did not answer
    /// ([`eddy_checkpoint::CheckpointError::is_damaged_checkpoint`]).
    #[error("job '{job}': {message}")]
    Checkpoint {
        job: String,
        message: String,
        #[source]
        source: Option<eddy_checkpoint::CheckpointError>,
    },
    /// Checkpoints failed more often in a row than tolerated, the final checkpoint could
    /// not be stored, or the state to restart from could not be read: the job fails over
    /// and restarts under its restart strategy, as a failed task does (Flink's
    /// `CheckpointFailureManager`).
    #[error("job '{job}': {message}")]
    CheckpointFailover {
        job: String,
        message: String,
        #[source]
        source: Option<eddy_checkpoint::CheckpointError>,
    },
    #[error("job '{job}': internal error (please report): {message}")]
    Internal { job: String, message: String },
    /// The coordinator of an operator (a source's split enumerator, with the JobMaster)
    /// failed: the attempt restarts under the restart strategy, as after a task failure,
    /// unless no restart can mend it (bad settings, unreadable restored state).
    #[error("job '{job}' failed: the coordinator of operator '{operator}' failed: {message}")]
    CoordinatorFailed { job: String, operator: String, message: String, restartable: bool },
    /// The cluster cannot run the job: too few slots, a TaskManager whose binary builds
    /// another graph, the JobManager gone, a refused secret. The message says which;
    /// `source`, the connection's error when there was one.
    #[error("job '{job}': {message}")]
    Cluster {
        job: String,
        message: String,
        #[source]
        source: Option<ClusterError>,
    },
}

pub use eddy_rpc::ClusterError;

impl JobError {
    /// Whether the restart strategy may restart the job after this error.
    pub fn is_restartable(&self) -> bool {
        match self {
            JobError::TaskFailed { kind, .. } => {
                !matches!(kind, FailureKind::Unsendable | FailureKind::StateUnreadable)
            }
            JobError::CheckpointFailover { .. } => true,
            JobError::CoordinatorFailed { restartable, .. } => *restartable,
            _ => false,
        }
    }
}

impl std::fmt::Debug for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&eddy_types::chain(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_state::{StateError, StateErrorKind};

    #[test]
    fn a_functions_error_says_whether_the_user_the_backend_or_eddy_must_act() {
        let backend = StateError::from(StateErrorKind::Backend("IO error: No space left on device".into()));
        let error = TaskError::of_operator("count", "count", &backend);
        assert_eq!(
            error,
            TaskError::StateBackend { operator: "count".into(), message: "IO error: No space left on device".into() }
        );
        assert_eq!(error.kind(), FailureKind::StateBackend);
        let misuse = StateError::from(StateErrorKind::NoCurrentKey { state: "total".into() });
        assert_eq!(TaskError::of_operator("count", "count", &misuse).kind(), FailureKind::UserCode);
        let bug = StateError::from(StateErrorKind::BackendAlreadyInstalled);
        assert_eq!(TaskError::of_operator("count", "count", &bug).kind(), FailureKind::Internal);
        let user: Box<dyn std::error::Error + Send + Sync> = "bad record".into();
        assert_eq!(
            TaskError::of_operator("parse", "parse", &*user),
            TaskError::Operator { operator: "parse".into(), message: "bad record".into() }
        );
        let failed = JobError::TaskFailed {
            job: "j".into(),
            operator: "count".into(),
            subtask: 0,
            parallelism: 2,
            kind: FailureKind::StateBackend,
            message: "IO error".into(),
        };
        assert_eq!(
            failed.to_string(),
            "job 'j' failed: operator 'count' (subtask 1/2) failed: state backend: IO error"
        );
    }

    #[test]
    fn a_cause_is_kept_once_from_the_storage_to_the_jobs_failure() {
        let disk = std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
        let storage = eddy_checkpoint::CheckpointError::Io { path: "/ckpt/chk-3".into(), source: disk.into() };
        let error = JobError::Checkpoint {
            job: "j".into(),
            message: "cannot store checkpoint 3".into(),
            source: Some(storage),
        };
        // Display says what failed; the chain (Debug, the board's exceptions) says why, each once.
        assert_eq!(error.to_string(), "job 'j': cannot store checkpoint 3");
        assert_eq!(
            format!("{error:?}"),
            "job 'j': cannot store checkpoint 3: checkpoint storage I/O at '/ckpt/chk-3': No space left on device"
        );
        let source = std::error::Error::source(&error).and_then(std::error::Error::source).unwrap();
        assert_eq!(source.to_string(), "No space left on device");

        let rocksdb = std::io::Error::other("IO error: While appending to file: 000012.log: No space left on device");
        let backend = StateError::from(StateErrorKind::BackendFailed {
            what: "RocksDB write".into(),
            source: eddy_types::Cause::new(rocksdb),
        });
        assert_eq!(
            TaskError::of_operator("count", "count", &backend),
            TaskError::StateBackend {
                operator: "count".into(),
                message: "RocksDB write: IO error: While appending to file: 000012.log: No space left on device".into()
            }
        );
    }
}
