//! Work of a snapshot's asynchronous part that every copy of the snapshot shares.
//!
//! A finished task's final snapshot stands in for it in every later checkpoint (the
//! coordinator clones it into each), so the work that completes a snapshot (serializing
//! heap values, waiting for RocksDB's checkpoint files) must run once and its result serve
//! every copy: the first copy written runs it, the others take its result.

use crate::error::{StateError, StateErrorKind};
use std::sync::{Arc, Mutex, OnceLock};

/// The work itself: runs once, off the task thread.
pub type Work<T> = Box<dyn FnOnce() -> Result<T, StateError> + Send>;

/// Work run by the first clone that needs its result, kept for the others.
pub struct SharedWork<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    /// Taken by the one run.
    pending: Mutex<Option<Work<T>>>,
    /// The result, or the error's message (an error is not `Clone`).
    done: OnceLock<Result<T, eddy_types::Cause>>,
}

impl<T> Clone for SharedWork<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<T> SharedWork<T> {
    pub fn new(work: Work<T>) -> Self {
        Self { inner: Arc::new(Inner { pending: Mutex::new(Some(work)), done: OnceLock::new() }) }
    }

    /// Runs the work if no clone has, and returns its result; `what` names it in the error.
    pub fn result(&self, what: &str) -> Result<&T, StateError> {
        let done = self.inner.done.get_or_init(|| {
            let pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
            let work = pending.ok_or_else(|| eddy_types::Cause::message("the work was lost"))?;
            work().map_err(eddy_types::Cause::new)
        });
        done.as_ref().map_err(|cause| {
            StateError::from(StateErrorKind::BackendFailed {
                what: format!("{what} could not be completed"),
                source: cause.clone(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_work_runs_once_and_every_clone_gets_its_result() {
        let runs = Arc::new(AtomicU32::new(0));
        let counter = runs.clone();
        let work = SharedWork::new(Box::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(vec![1, 2, 3])
        }));
        let copies = [work.clone(), work.clone(), work];
        for copy in &copies {
            assert_eq!(copy.result("test").unwrap(), &vec![1, 2, 3]);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_failure_fails_every_clone_and_is_named() {
        let work: SharedWork<()> =
            SharedWork::new(Box::new(|| Err(StateError::from(StateErrorKind::Backend("disk full".into())))));
        for copy in [work.clone(), work] {
            let message = eddy_types::chain(&copy.result("snapshot of 'seen'").unwrap_err());
            assert!(message.contains("snapshot of 'seen'") && message.contains("disk full"), "{message}");
        }
    }
}
