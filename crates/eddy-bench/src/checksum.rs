//! The sink that folds a workload's checksum over what it receives: a sum of per-record
//! terms, kept in operator state and published only when the job finished (the final
//! checkpoint), so that the checksum survives failures and restores like any
//! exactly-once output.

use eddy::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Sums `term` (a record's part of the checksum; a function item, so that the call is
/// inlined) over what it receives.
pub struct ChecksumSink<T, F> {
    term: F,
    local: u64,
    total: Arc<AtomicU64>,
    _type: std::marker::PhantomData<fn(&T)>,
}

impl<T, F: Clone> Clone for ChecksumSink<T, F> {
    fn clone(&self) -> Self {
        Self { term: self.term.clone(), local: self.local, total: self.total.clone(), _type: std::marker::PhantomData }
    }
}

impl<T, F: Fn(&T) -> Result<u64, String>> ChecksumSink<T, F> {
    /// Adds `term` of every record into `total` when the job finished.
    pub fn new(term: F, total: Arc<AtomicU64>) -> Self {
        Self { term, local: 0, total, _type: std::marker::PhantomData }
    }
}

const CHECKSUM_STATE: &str = "checksum";

impl<T, F> RichFunction for ChecksumSink<T, F> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let state = ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new(CHECKSUM_STATE))?;
        self.local = state.as_slice().iter().fold(0u64, |a, b| a.wrapping_add(*b));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new(CHECKSUM_STATE))?.update(vec![self.local]);
        Ok(())
    }

    fn notify_job_finished(&mut self) -> FunctionResult {
        self.total.fetch_add(self.local, Ordering::SeqCst);
        Ok(())
    }
}

impl<T: 'static, F: Fn(&T) -> Result<u64, String> + Clone + Send + Sync + 'static> Sink<T> for ChecksumSink<T, F> {
    #[inline]
    fn invoke(&mut self, record: T) -> FunctionResult {
        self.local = self.local.wrapping_add((self.term)(&record)?);
        Ok(())
    }
}
