//! What a subtask counts as it runs, for `status`: records in and out, and the time its
//! output waited for room downstream (backpressure). Counted per batch, never per record,
//! and read from another thread.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct TaskCounters {
    pub records_in: AtomicU64,
    pub records_out: AtomicU64,
    pub backpressured_ns: AtomicU64,
}

impl TaskCounters {
    #[inline]
    pub fn add_in(&self, records: usize) {
        self.records_in.fetch_add(records as u64, Ordering::Relaxed);
    }

    #[inline]
    pub fn add_out(&self, records: usize) {
        self.records_out.fetch_add(records as u64, Ordering::Relaxed);
    }

    pub fn add_backpressured(&self, waited: std::time::Duration) {
        self.backpressured_ns.fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
    }

    /// (records in, records out, ms backpressured).
    pub fn read(&self) -> (u64, u64, u64) {
        (
            self.records_in.load(Ordering::Relaxed),
            self.records_out.load(Ordering::Relaxed),
            self.backpressured_ns.load(Ordering::Relaxed) / 1_000_000,
        )
    }
}
