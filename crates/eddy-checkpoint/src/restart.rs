//! Restart strategies (Flink's), as pure back-off state: told of each failure and the
//! time, they answer how long to wait before restarting, or that the job must fail.

/// Flink's restart strategies.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RestartStrategy {
    /// Fail the job on the first failure.
    None,
    /// Up to `attempts` restarts, `delay_ms` apart.
    FixedDelay { attempts: u32, delay_ms: u64 },
    /// Restart after `delay_ms` unless more than `max_failures` happened within `interval_ms`.
    FailureRate { max_failures: u32, interval_ms: u64, delay_ms: u64 },
    /// Delays growing by `multiplier` from `initial_ms` to `max_ms`, back to `initial_ms`
    /// after `reset_after_ms` without failure, each varied by ± `jitter` (a fraction).
    ExponentialDelay { initial_ms: u64, max_ms: u64, multiplier: f64, reset_after_ms: u64, jitter: f64 },
}

impl Default for RestartStrategy {
    /// Flink's default with checkpointing on: exponential delay, 1 s initial, 1 min max,
    /// ×1.5, reset after 1 h, jitter 0.1.
    fn default() -> Self {
        RestartStrategy::ExponentialDelay {
            initial_ms: 1_000,
            max_ms: 60_000,
            multiplier: 1.5,
            reset_after_ms: 3_600_000,
            jitter: 0.1,
        }
    }
}

/// A strategy's memory of past failures.
#[derive(Debug, Clone)]
pub struct RestartBackoff {
    strategy: RestartStrategy,
    restarts: u32,
    failure_times_ms: Vec<u64>,
    current_delay_ms: u64,
    last_failure_ms: Option<u64>,
    rng: u64,
}

impl RestartBackoff {
    pub fn new(strategy: RestartStrategy) -> Self {
        Self {
            strategy,
            restarts: 0,
            failure_times_ms: Vec::new(),
            current_delay_ms: 0,
            last_failure_ms: None,
            rng: 0x2545_F491_4F6C_DD1D,
        }
    }

    /// Restarts granted so far.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// A failure at `now_ms`: `Some(delay before restarting)`, or `None` to fail the job.
    pub fn on_failure(&mut self, now_ms: u64) -> Option<u64> {
        let delay = match &self.strategy {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { attempts, delay_ms } => (self.restarts < *attempts).then_some(*delay_ms),
            RestartStrategy::FailureRate { max_failures, interval_ms, delay_ms } => {
                self.failure_times_ms.push(now_ms);
                self.failure_times_ms.retain(|t| now_ms.saturating_sub(*t) < *interval_ms);
                (self.failure_times_ms.len() as u32 <= *max_failures).then_some(*delay_ms)
            }
            RestartStrategy::ExponentialDelay { initial_ms, max_ms, multiplier, reset_after_ms, jitter } => {
                let quiet = self.last_failure_ms.is_some_and(|t| now_ms.saturating_sub(t) >= *reset_after_ms);
                self.current_delay_ms = if self.current_delay_ms == 0 || quiet {
                    *initial_ms
                } else {
                    ((self.current_delay_ms as f64 * multiplier) as u64).min(*max_ms)
                };
                // xorshift: a jitter that tests can predict.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                let unit = (self.rng % 2001) as f64 / 1000.0 - 1.0;
                let varied = self.current_delay_ms as f64 * (1.0 + jitter * unit);
                Some(varied.max(0.0) as u64)
            }
        };
        self.last_failure_ms = Some(now_ms);
        if delay.is_some() {
            self.restarts += 1;
        }
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_fails_at_once_and_fixed_delay_counts_attempts() {
        assert_eq!(RestartBackoff::new(RestartStrategy::None).on_failure(0), None);
        let mut fixed = RestartBackoff::new(RestartStrategy::FixedDelay { attempts: 2, delay_ms: 10 });
        assert_eq!(fixed.on_failure(0), Some(10));
        assert_eq!(fixed.on_failure(5), Some(10));
        assert_eq!(fixed.on_failure(9), None);
    }

    #[test]
    fn failure_rate_looks_at_the_window() {
        let mut rate =
            RestartBackoff::new(RestartStrategy::FailureRate { max_failures: 2, interval_ms: 100, delay_ms: 1 });
        assert_eq!(rate.on_failure(0), Some(1));
        assert_eq!(rate.on_failure(50), Some(1));
        assert_eq!(rate.on_failure(90), None, "three failures within 100 ms");
        let mut rate =
            RestartBackoff::new(RestartStrategy::FailureRate { max_failures: 2, interval_ms: 100, delay_ms: 1 });
        for t in [0, 60, 120, 180, 240] {
            assert_eq!(rate.on_failure(t), Some(1), "failures spread out are fine");
        }
    }

    #[test]
    fn exponential_delay_grows_caps_jitters_and_resets() {
        let mut exp = RestartBackoff::new(RestartStrategy::default());
        let delays: Vec<u64> = (0..12).map(|i| exp.on_failure(i * 1000).unwrap()).collect();
        let bases = [1_000.0, 1_500.0, 2_250.0, 3_375.0];
        for (delay, base) in delays.iter().zip(bases) {
            assert!((*delay as f64 - base).abs() <= base * 0.1 + 1.0, "{delays:?}");
        }
        assert!(delays.iter().all(|d| *d <= 66_000), "capped at 1 min + 10%: {delays:?}");
        assert!(delays[11] >= 54_000, "reached the cap: {delays:?}");
        let after_quiet_hour = exp.on_failure(12_000 + 3_600_000).unwrap();
        assert!((900..=1_100).contains(&after_quiet_hour), "{after_quiet_hour}");
    }
}
