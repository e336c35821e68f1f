//! The cause under an error, kept as the error it was (an I/O error, RocksDB's, the
//! object store's), and an error printed with its causes.
//!
//! An error type whose variant wraps another names it as its `#[source]` and leaves it
//! out of its own `Display`: a caller who prints only the top says what failed, and
//! [`chain`] prints what failed and why, down to the root, each once.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// A cause kept as it was: cheap to clone (errors that carry one stay `Clone`, and cross
/// threads), compared by its text (errors that carry one stay `PartialEq` for tests).
#[derive(Clone)]
pub struct Cause(Arc<dyn Error + Send + Sync>);

impl Cause {
    /// `error`, kept with its own causes.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        Cause(Arc::new(error))
    }

    /// A cause known only by its text (a fault injected by the simulator, a panic's
    /// message, a cause that crossed processes as text).
    pub fn message(text: impl Into<String>) -> Self {
        let boxed: Box<dyn Error + Send + Sync> = text.into().into();
        Cause(Arc::from(boxed))
    }

    /// The error kept, to look into (`downcast_ref`).
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Error for Cause {
    // The kept error's own causes go on the chain after its text.
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Cause {}

impl From<std::io::Error> for Cause {
    fn from(error: std::io::Error) -> Self {
        Cause::new(error)
    }
}

/// `error` and each of its causes, joined by ": " (a cause whose text its wrapper already
/// ends with is not printed twice, for errors outside eddy that print their source).
pub fn chain<E: Error + ?Sized>(error: &E) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !said.is_empty() && !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot store checkpoint 3")]
    struct Store {
        #[source]
        source: Cause,
    }

    #[test]
    fn a_chain_prints_each_cause_once_down_to_the_root() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        let error = Store { source: Cause::new(io) };
        assert_eq!(error.to_string(), "cannot store checkpoint 3");
        assert_eq!(chain(&error), "cannot store checkpoint 3: permission denied");
        assert!(error.source.get().downcast_ref::<std::io::Error>().is_some());
        assert_eq!(Cause::message("x"), Cause::message("x"));
    }
}
