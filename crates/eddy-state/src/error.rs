//! The one error type of `eddy-state`.

/// What went wrong with state. Messages name the state and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("keyed state '{state}' used outside a keyed context: keyed state is only available in functions applied to a KeyedStream (after key_by), and only while a record or timer of a key is being processed")]
    NotKeyed { state: String },
    #[error("keyed state '{state}' accessed without a current key: it can only be read or written while a record or timer of a key is processed (not in open or close)")]
    NoCurrentKey { state: String },
    #[error("state '{name}' is declared twice with different types: first as {first}, now as {second}; give each state its own name")]
    IncompatibleDeclaration { name: String, first: String, second: String },
    #[error("state '{name}' was checkpointed as {restored} and is declared as {declared} now: a restore cannot read it as another type; keep its type (its name without module paths), or give the new state another name")]
    RestoredTypeChanged { name: String, restored: String, declared: String },
    #[error("state '{state}' is used before it was declared: declare it in open() of the function that uses it (ctx.get_state(&descriptor) and the like)")]
    NotDeclared { state: String },
    #[error("state '{state}' was used re-entrantly (from inside a reduce or aggregate function of a state); state functions must not access state")]
    Reentrant { state: String },
    #[error("state handle '{state}' belongs to another operator instance; declare state in open() of the function that uses it")]
    ForeignHandle { state: String },
    #[error("key group {key_group} is not in this backend's range {range}; the key was routed to the wrong subtask (internal error, please report)")]
    KeyGroupOutOfRange { key_group: u32, range: String },
    #[error("a keyed state backend is already installed on this thread (internal error, please report)")]
    BackendAlreadyInstalled,
    #[error("cannot serialize state '{state}': {message}")]
    Serialize { state: String, message: String },
    #[error("cannot deserialize state '{state}': {message}; the snapshot is corrupt or was written for another type")]
    Deserialize { state: String, message: String },
    #[error("operator state redistribution: {0}")]
    Redistribution(String),
    /// The backend's storage failed (RocksDB I/O…).
    #[error("state backend: {0}")]
    Backend(String),
}
