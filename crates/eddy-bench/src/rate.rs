//! Caps a subtask's record rate by sleeping once per block of records.

use std::time::{Duration, Instant};

const BLOCK_RECORDS: u64 = 1024;

/// Lets `events_per_second` records through per second (0 = unlimited).
#[derive(Clone)]
pub struct RateLimiter {
    events_per_second: u64,
    started: Option<Instant>,
    seen: u64,
}

impl RateLimiter {
    pub fn new(events_per_second: u64) -> Self {
        Self { events_per_second, started: None, seen: 0 }
    }

    #[inline]
    pub fn admit(&mut self) {
        if self.events_per_second == 0 {
            return;
        }
        self.seen += 1;
        if !self.seen.is_multiple_of(BLOCK_RECORDS) {
            return;
        }
        let started = *self.started.get_or_insert_with(Instant::now);
        let due = Duration::from_secs_f64(self.seen as f64 / self.events_per_second as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
