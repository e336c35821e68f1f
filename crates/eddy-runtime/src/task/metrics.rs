//! What a subtask counts as it runs, for `status`, the REST API and `/metrics`: records in
//! and out, the time its output waited for room downstream (backpressure), the time it
//! waited for input (idle), its last barrier alignment, and its input and output
//! watermarks. Counted per batch or per
//! wait, never per record, and read from another thread.

use eddy_rpc::view::SubtaskCounters;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// No watermark yet.
const NO_WATERMARK: i64 = i64::MIN;

#[derive(Debug)]
pub struct TaskCounters {
    pub records_in: AtomicU64,
    pub records_out: AtomicU64,
    pub backpressured_ns: AtomicU64,
    pub idle_ns: AtomicU64,
    /// Bytes of its records on network channels (the network threads count them).
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Records a window operator dropped as late (no side output took them).
    late_records_dropped: AtomicU64,
    /// How long the last barrier alignment took.
    alignment_us: AtomicU64,
    input_watermark: AtomicI64,
    output_watermark: AtomicI64,
    /// When the subtask was deployed: its busy time is what the wall clock spent that was
    /// neither idle nor backpressured.
    started: std::time::Instant,
}

impl Default for TaskCounters {
    fn default() -> Self {
        TaskCounters {
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            backpressured_ns: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            late_records_dropped: AtomicU64::new(0),
            alignment_us: AtomicU64::new(0),
            input_watermark: AtomicI64::new(NO_WATERMARK),
            output_watermark: AtomicI64::new(NO_WATERMARK),
            started: std::time::Instant::now(),
        }
    }
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

    pub fn add_idle(&self, waited: std::time::Duration) {
        self.idle_ns.fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
    }

    /// A frame of `bytes` arrived for the subtask on a network channel (per frame, on the
    /// network thread).
    pub fn add_bytes_in(&self, bytes: usize) {
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A frame of `bytes` of the subtask's output left on a network channel.
    pub fn add_bytes_out(&self, bytes: usize) {
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A window operator dropped a record that came too late for every window it belongs
    /// to (rare: counted one at a time).
    pub fn late_record_dropped(&self) {
        self.late_records_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// A barrier alignment ended, after `took`.
    pub fn aligned(&self, took: std::time::Duration) {
        self.alignment_us.store(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// The watermark of the subtask's input advanced.
    pub fn input_watermark(&self, watermark: i64) {
        self.input_watermark.store(watermark, Ordering::Relaxed);
    }

    /// The subtask sent a watermark on.
    pub fn output_watermark(&self, watermark: i64) {
        self.output_watermark.store(watermark, Ordering::Relaxed);
    }

    /// Everything, as the views carry it.
    pub fn snapshot(&self) -> SubtaskCounters {
        let watermark = |w: &AtomicI64| Some(w.load(Ordering::Relaxed)).filter(|&w| w != NO_WATERMARK);
        let backpressured_ms = self.backpressured_ns.load(Ordering::Relaxed) / 1_000_000;
        let idle_ms = self.idle_ns.load(Ordering::Relaxed) / 1_000_000;
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        SubtaskCounters {
            records_in: self.records_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            busy_ms: elapsed_ms.saturating_sub(backpressured_ms + idle_ms),
            backpressured_ms,
            idle_ms,
            alignment_us: self.alignment_us.load(Ordering::Relaxed),
            late_records_dropped: self.late_records_dropped.load(Ordering::Relaxed),
            input_watermark: watermark(&self.input_watermark),
            output_watermark: watermark(&self.output_watermark),
        }
    }
}

/// Times a task's barrier alignments (per barrier, never per record).
#[derive(Debug, Default)]
pub struct AlignmentTimer {
    started: Option<std::time::Instant>,
}

impl AlignmentTimer {
    /// A barrier arrived; `first`: it starts a checkpoint's alignment here; `done`: the
    /// alignment completed with it.
    pub fn on_barrier(&mut self, first: bool, done: bool, counters: &TaskCounters) {
        if first {
            self.started = Some(std::time::Instant::now());
        }
        if done {
            if let Some(started) = self.started.take() {
                counters.aligned(started.elapsed());
            }
        }
    }
}
