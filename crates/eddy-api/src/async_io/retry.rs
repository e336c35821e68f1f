//! Retries of async requests (Flink's `AsyncRetryStrategies`): a fixed delay or an
//! exponential backoff, retrying when a predicate on the results or on the error says so.
//! The retries run inside the request's timeout, as in Flink: the timeout bounds all
//! attempts together.

use crate::function::FunctionError;
use std::sync::Arc;
use std::time::Duration;

type ResultPredicate<O> = Arc<dyn Fn(&[O]) -> bool + Send + Sync>;
type ErrorPredicate = Arc<dyn Fn(&FunctionError) -> bool + Send + Sync>;

/// When and how often a request is tried again.
pub struct AsyncRetryStrategy<O> {
    /// Retries after the first attempt (Flink's `maxAttempts`).
    max_attempts: u32,
    initial_delay: Duration,
    max_delay: Duration,
    multiplier: f64,
    if_result: Option<ResultPredicate<O>>,
    if_error: Option<ErrorPredicate>,
}

impl<O> Clone for AsyncRetryStrategy<O> {
    fn clone(&self) -> Self {
        Self {
            max_attempts: self.max_attempts,
            initial_delay: self.initial_delay,
            max_delay: self.max_delay,
            multiplier: self.multiplier,
            if_result: self.if_result.clone(),
            if_error: self.if_error.clone(),
        }
    }
}

impl<O> AsyncRetryStrategy<O> {
    /// Up to `max_attempts` retries, `delay` apart (Flink's `FixedDelayRetryStrategy`).
    pub fn fixed_delay(max_attempts: u32, delay: Duration) -> Self {
        Self::exponential_backoff(max_attempts, delay, delay, 1.0)
    }

    /// Up to `max_attempts` retries, the first `initial_delay` after the failure, each
    /// next one `multiplier` times longer, at most `max_delay` (Flink's
    /// `ExponentialBackoffDelayRetryStrategy`).
    pub fn exponential_backoff(
        max_attempts: u32,
        initial_delay: Duration,
        max_delay: Duration,
        multiplier: f64,
    ) -> Self {
        Self { max_attempts, initial_delay, max_delay, multiplier, if_result: None, if_error: None }
    }

    /// Retries when `predicate` holds for the results (say, empty ones). Without a
    /// predicate nothing is retried, as in Flink.
    pub fn if_result(mut self, predicate: impl Fn(&[O]) -> bool + Send + Sync + 'static) -> Self {
        self.if_result = Some(Arc::new(predicate));
        self
    }

    /// Retries when `predicate` holds for the error.
    pub fn if_error(mut self, predicate: impl Fn(&FunctionError) -> bool + Send + Sync + 'static) -> Self {
        self.if_error = Some(Arc::new(predicate));
        self
    }

    /// Whether retry `attempt` (1 for the first retry) may still be made.
    pub(crate) fn can_retry(&self, attempt: u32) -> bool {
        attempt <= self.max_attempts
    }

    /// The wait before retry `attempt` (1 for the first retry).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let factor = self.multiplier.max(1.0).powi(attempt.saturating_sub(1).min(64) as i32);
        let delay = self.initial_delay.as_secs_f64() * factor;
        Duration::from_secs_f64(delay.min(self.max_delay.as_secs_f64()))
    }

    /// Whether this outcome asks for another attempt.
    pub(crate) fn wants_retry(&self, outcome: &Result<Vec<O>, FunctionError>) -> bool {
        match outcome {
            Ok(results) => self.if_result.as_ref().is_some_and(|p| p(results)),
            Err(error) => self.if_error.as_ref().is_some_and(|p| p(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_delays_grow_to_their_cap_and_fixed_ones_stay() {
        let exponential =
            AsyncRetryStrategy::<u8>::exponential_backoff(5, Duration::from_millis(10), Duration::from_millis(50), 2.0);
        let delays: Vec<u128> = (1..=5).map(|n| exponential.delay(n).as_millis()).collect();
        assert_eq!(delays, [10, 20, 40, 50, 50]);
        assert!(exponential.can_retry(5) && !exponential.can_retry(6), "five retries after the first attempt");
        let fixed = AsyncRetryStrategy::<u8>::fixed_delay(2, Duration::from_millis(7));
        assert_eq!(fixed.delay(1), fixed.delay(2));
    }

    #[test]
    fn only_what_a_predicate_names_is_retried() {
        let none = AsyncRetryStrategy::<u8>::fixed_delay(3, Duration::ZERO);
        assert!(!none.wants_retry(&Err("boom".into())) && !none.wants_retry(&Ok(vec![])));
        let some = none.if_result(|r| r.is_empty()).if_error(|e| e.to_string().contains("503"));
        assert!(some.wants_retry(&Ok(vec![])) && !some.wants_retry(&Ok(vec![1])));
        assert!(some.wants_retry(&Err("HTTP 503".into())) && !some.wants_retry(&Err("HTTP 404".into())));
    }
}
