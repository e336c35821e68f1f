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

/// A total rate that changes in steps over time (`--rate-steps 4000:3,30000:6,4000:30`:
/// 4000 events a second for 3 s, then 30 000 for 6 s, then 4000; the last step lasts),
/// from the moment the first limiter of the process starts; each subtask takes its share.
/// For trying the autoscaler: the load steps up past what the job's parallelism can
/// take, then down.
#[derive(Debug, Clone)]
pub struct RateSteps {
    steps: Vec<(f64, f64)>,
}

/// When the first stepped limiter of this process started: the steps count from there.
static STEPS_EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

impl RateSteps {
    pub fn parse(text: &str) -> Result<Self, String> {
        let steps = text
            .split(',')
            .map(|step| {
                let (rate, seconds) = step.split_once(':').ok_or_else(|| format!("'{step}' is not RATE:SECONDS"))?;
                let rate: f64 = rate.trim().parse().map_err(|_| format!("'{rate}' is not a rate"))?;
                let seconds: f64 = seconds.trim().parse().map_err(|_| format!("'{seconds}' is not seconds"))?;
                if rate <= 0.0 || seconds <= 0.0 {
                    return Err(format!("'{step}': rate and seconds must be above 0"));
                }
                Ok((rate, seconds))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if steps.is_empty() {
            return Err("no steps".into());
        }
        Ok(Self { steps })
    }

    /// Records due in total between `from` and `to` seconds after the epoch.
    fn due_between(&self, from: f64, to: f64) -> f64 {
        let (mut start, mut due) = (0.0, 0.0);
        for (index, &(rate, seconds)) in self.steps.iter().enumerate() {
            let end = if index + 1 == self.steps.len() { f64::INFINITY } else { start + seconds };
            let overlap = (to.min(end) - from.max(start)).max(0.0);
            due += overlap * rate;
            start = end;
        }
        due
    }
}

/// Lets a subtask's share of stepped total rate through, sleeping a millisecond at a
/// time while it is ahead.
#[derive(Clone)]
pub struct SteppedLimiter {
    steps: std::sync::Arc<RateSteps>,
    share: f64,
    started: Option<f64>,
    seen: u64,
}

impl SteppedLimiter {
    /// `share`: this subtask's part of the total (1 / parallelism).
    pub fn new(steps: std::sync::Arc<RateSteps>, share: f64) -> Self {
        Self { steps, share, started: None, seen: 0 }
    }

    #[inline]
    pub fn admit(&mut self) {
        self.seen += 1;
        if !self.seen.is_multiple_of(64) {
            return;
        }
        let epoch = *STEPS_EPOCH.get_or_init(Instant::now);
        let now = || epoch.elapsed().as_secs_f64();
        let started = *self.started.get_or_insert_with(now);
        while self.steps.due_between(started, now()) * self.share < self.seen as f64 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
