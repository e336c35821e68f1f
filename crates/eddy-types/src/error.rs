//! The one error type of `eddy-types`.

/// What went wrong with a value of eddy's vocabulary; the user must act.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum TypesError {
    #[error("max parallelism {value} is out of bounds: it must be between 1 and {upper} (inclusive)")]
    MaxParallelismOutOfBounds { value: u32, upper: u32 },
    #[error(
        "parallelism {parallelism} of {what} is above its max parallelism {max_parallelism}; raise max parallelism \
        or lower the parallelism"
    )]
    ParallelismAboveMax { what: String, parallelism: u32, max_parallelism: u32 },
    #[error("parallelism of {what} must be at least 1, got {parallelism}")]
    ParallelismZero { what: String, parallelism: u32 },
    /// Records of type `type_name` could not be encoded or decoded for the network.
    #[error("records of type {type_name}: {message}")]
    Codec { type_name: &'static str, message: String },
}
