//! Time is read, and waited for, through [`Clock`], so that tests (and a simulation) can
//! drive it by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A source of monotonic milliseconds. Implementations must never go backwards.
pub trait Clock: Send + Sync {
    /// Milliseconds since an arbitrary, fixed origin.
    fn now_ms(&self) -> u64;

    /// Waits `ms` milliseconds of this clock's time: the machine's clocks sleep; a clock
    /// driven by hand moves its time on and returns at once.
    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// The machine's monotonic clock.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}

/// Wall-clock milliseconds since the Unix epoch: for times that outlive the process
/// (state time-to-live stored in checkpoints). May jump; never used for intervals.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ms: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start_ms: u64) -> Self {
        Self { now_ms: Arc::new(AtomicU64::new(start_ms)) }
    }

    pub fn advance_ms(&self, delta_ms: u64) {
        self.now_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    fn sleep_ms(&self, ms: u64) {
        self.advance_ms(ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_time() {
        let clock = ManualClock::new(10);
        let other = clock.clone();
        assert_eq!(clock.now_ms(), 10);
        other.advance_ms(5);
        assert_eq!(clock.now_ms(), 15);
        let started = std::time::Instant::now();
        clock.sleep_ms(60_000);
        assert_eq!(other.now_ms(), 60_015, "a minute's sleep moves the time on");
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "and returns at once");
    }
}
