//! The one error type of `eddy-checkpoint`.

/// What went wrong with a checkpoint or savepoint; messages name the file or checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The storage failed at `path`; `source` says why (the file system's or the object
    /// store's error, as it was).
    #[error("checkpoint storage I/O at '{path}'")]
    Io {
        path: String,
        #[source]
        source: eddy_types::Cause,
    },
    #[error("'{path}' is corrupt: {message}")]
    Corrupt { path: String, message: String },
    #[error("'{path}' was written by format version {found}; this eddy reads versions {oldest} to {supported}")]
    UnsupportedVersion { path: String, found: u32, oldest: u32, supported: u32 },
    #[error("no completed checkpoint in '{0}'")]
    NoCheckpoint(String),
    #[error(
        "state of task '{task}' is {bytes} bytes, above the JobManager memory storage cap of {cap} bytes; use a \
        checkpoint directory (filesystem storage) or raise the cap"
    )]
    StateTooLarge { task: String, bytes: usize, cap: usize },
    #[error("cannot encode checkpoint data")]
    Encode(#[source] eddy_types::Cause),
    #[error("cannot restore the latest checkpoint in '{dir}': {message}")]
    AmbiguousRestore { dir: String, message: String },
    #[error(
        "the job directory '{location}' is in use by another running process ({holder}); one job directory runs \
        one job at a time"
    )]
    InUse { location: String, holder: String },
    #[error("invalid checkpoint location '{location}': {message}")]
    InvalidLocation { location: String, message: String },
}

impl CheckpointError {
    /// Whether the checkpoint itself is damaged or unreadable by this eddy (a restore may
    /// fall back to an older one), rather than the storage failing to answer (a retry may
    /// read it: falling back would restore older state than sinks already committed).
    pub fn is_damaged_checkpoint(&self) -> bool {
        matches!(self, CheckpointError::Corrupt { .. } | CheckpointError::UnsupportedVersion { .. })
    }
}
