//! The sink that folds a workload's checksum over what it receives: a sum of per-record
//! terms, kept in operator state and published only when the job finished (the final
//! checkpoint), so that the checksum survives failures and restores like any
//! exactly-once output.

use eddy::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A record's term of the checksum.
pub type Term<T> = fn(&T) -> Result<u64, String>;

pub struct ChecksumSink<T> {
    term: Term<T>,
    local: u64,
    total: Arc<AtomicU64>,
}

impl<T> Clone for ChecksumSink<T> {
    fn clone(&self) -> Self {
        Self { term: self.term, local: self.local, total: self.total.clone() }
    }
}

impl<T> ChecksumSink<T> {
    /// Adds `term` of every record into `total` when the job finished.
    pub fn new(term: Term<T>, total: Arc<AtomicU64>) -> Self {
        Self { term, local: 0, total }
    }
}

const CHECKSUM_STATE: &str = "checksum";

impl<T> RichFunction for ChecksumSink<T> {
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

impl<T: 'static> Sink<T> for ChecksumSink<T> {
    #[inline]
    fn invoke(&mut self, record: T) -> FunctionResult {
        self.local = self.local.wrapping_add((self.term)(&record)?);
        Ok(())
    }
}
