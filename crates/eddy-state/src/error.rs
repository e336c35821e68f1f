//! The one error type of `eddy-state`.

/// What went wrong with state: its [`StateErrorKind`], boxed.
///
/// Boxed because every state access returns a `Result<_, StateError>`: with the kind
/// inline (three strings, 72 bytes) a `Result<u64, _>` was returned through memory and
/// read back at once in pieces the CPU could not forward from the stores (a store-
/// forwarding stall after every state access: about half the samples of the closures
/// around W3's state accesses). A pointer keeps it in two registers.
#[derive(Debug)]
pub struct StateError(Box<StateErrorKind>);

impl StateError {
    /// What went wrong.
    pub fn kind(&self) -> &StateErrorKind {
        &self.0
    }
}

impl From<StateErrorKind> for StateError {
    #[cold]
    fn from(kind: StateErrorKind) -> Self {
        StateError(Box::new(kind))
    }
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// What went wrong with state. Messages name the state and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum StateErrorKind {
    #[error(
        "keyed state '{state}' used outside a keyed context: keyed state is only available in functions applied to \
        a KeyedStream (after key_by), and only while a record or timer of a key is being processed"
    )]
    NotKeyed { state: String },
    #[error(
        "keyed state '{state}' accessed without a current key: it can only be read or written while a record or \
        timer of a key is processed (not in open or close)"
    )]
    NoCurrentKey { state: String },
    #[error(
        "state '{name}' is declared twice with different types: first as {first}, now as {second}; give each state \
        its own name"
    )]
    IncompatibleDeclaration { name: String, first: String, second: String },
    #[error(
        "state '{name}' was checkpointed as {restored} and is declared as {declared} now: a restore cannot read it \
        as another type (types compare by their names without module paths)"
    )]
    RestoredTypeChanged { name: String, restored: String, declared: String },
    #[error(
        "state '{state}' is used before it was declared: declare it in open() of the function that uses it \
        (ctx.get_state(&descriptor) and the like)"
    )]
    NotDeclared { state: String },
    #[error(
        "state '{state}' was used re-entrantly (from inside a reduce or aggregate function of a state); state \
        functions must not access state"
    )]
    Reentrant { state: String },
    #[error(
        "state handle '{state}' belongs to another operator instance; declare state in open() of the function that \
        uses it"
    )]
    ForeignHandle { state: String },
    #[error(
        "key group {key_group} is not in this backend's range {range}; the key was routed to the wrong subtask \
        (internal error, please report)"
    )]
    KeyGroupOutOfRange { key_group: u32, range: String },
    #[error(
        "a record's key changed between the key_by that routed it (key hash {routed:#018x}) and the keyed \
        operator (key hash {read:#018x}): a key selector must return the same key for the same record every \
        time (no clock, random number or counter in it)"
    )]
    KeyChanged { routed: u64, read: u64 },
    #[error("a keyed state backend is already installed on this thread (internal error, please report)")]
    BackendAlreadyInstalled,
    #[error("cannot serialize state '{state}': {message}")]
    Serialize { state: String, message: String },
    #[error("cannot deserialize state '{state}': {message}; the snapshot is corrupt or was written for another type")]
    Deserialize { state: String, message: String },
    #[error("operator state redistribution: {0}")]
    Redistribution(String),
    /// The backend cannot go on, for the reason given (a corrupt snapshot, a limit).
    #[error("state backend: {0}")]
    Backend(String),
    /// The backend's storage failed doing `what` (RocksDB I/O, a local file): `source` is
    /// the storage's own error, as it was.
    #[error("state backend: {what}")]
    BackendFailed {
        what: String,
        #[source]
        source: eddy_types::Cause,
    },
}

#[cfg(test)]
mod tests {
    use super::{StateError, StateErrorKind};

    #[test]
    fn a_state_access_result_fits_in_two_registers_and_the_error_says_what_its_kind_says() {
        assert_eq!(std::mem::size_of::<Result<u64, StateError>>(), 16);
        assert_eq!(std::mem::size_of::<Result<(), StateError>>(), 8);
        let error = StateError::from(StateErrorKind::NoCurrentKey { state: "total".into() });
        assert!(matches!(error.kind(), StateErrorKind::NoCurrentKey { state } if state == "total"));
        assert_eq!(error.to_string(), StateErrorKind::NoCurrentKey { state: "total".into() }.to_string());
        assert!(error.to_string().starts_with("keyed state 'total' accessed without a current key"));
    }
}
