//! Collects a stream's records in memory, for tests and small jobs.

use crate::function::{FunctionResult, RichFunction, Sink};
use std::sync::{Arc, Mutex};

/// Records batches of this size before appending them to the shared list, so that the
/// shared lock is not taken per record.
const LOCAL_RECORDS_MAX: usize = 4096;

/// A sink whose records can be taken after the job ends. Clones share the same list; each
/// subtask buffers locally and appends in batches and at the end of input.
pub struct CollectSink<T> {
    shared: Arc<Mutex<Vec<T>>>,
    local: Vec<T>,
}

impl<T> Clone for CollectSink<T> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone(), local: Vec::new() }
    }
}

impl<T> Default for CollectSink<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> CollectSink<T> {
    pub fn new() -> Self {
        Self { shared: Arc::new(Mutex::new(Vec::new())), local: Vec::new() }
    }

    /// Takes every record collected so far (order across subtasks is unspecified).
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.shared.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn publish(&mut self) {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        shared.append(&mut self.local);
    }
}

impl<T> RichFunction for CollectSink<T> {}

impl<T: Send + Sync + 'static> Sink<T> for CollectSink<T> {
    #[inline]
    fn invoke(&mut self, value: T) -> FunctionResult {
        self.local.push(value);
        if self.local.len() >= LOCAL_RECORDS_MAX {
            self.publish();
        }
        Ok(())
    }

    fn finish(&mut self) -> FunctionResult {
        self.publish();
        Ok(())
    }
}
