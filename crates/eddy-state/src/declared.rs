//! State handles a function declares in `open()` and keeps in an `Option` until then.

use crate::error::{StateError, StateErrorKind};

/// A state handle kept in an `Option`, filled in `open()` (as Flink's functions keep a
/// `ValueState` field set in `open`): `self.count.declared("count")?` is the handle, or an
/// error that names the state, and the task's failure names the operator.
pub trait DeclaredState {
    type State;

    /// The handle, or [`StateErrorKind::NotDeclared`] naming state `name`.
    fn declared(&self, name: &str) -> Result<&Self::State, StateError>;
}

impl<S> DeclaredState for Option<S> {
    type State = S;

    fn declared(&self, name: &str) -> Result<&S, StateError> {
        self.as_ref().ok_or_else(|| StateError::from(StateErrorKind::NotDeclared { state: name.to_string() }))
    }
}
