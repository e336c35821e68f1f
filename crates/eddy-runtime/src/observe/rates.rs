//! Rates from samples of a subtask's counters. Records and bytes are counted a batch at a
//! time (up to 1,024 records), so their rates are taken over a sliding window of samples
//! ([`RATE_WINDOW`], as Flink's meters average over a time span): per second between two
//! samples they would jump by a batch. The shares of time (busy, backpressured, idle) are
//! measured continuously and follow the last second.

use eddy_rpc::view::{SubtaskCounters, SubtaskView};

/// How far back records and bytes per second look.
pub(crate) const RATE_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

/// `view`'s per-second figures: records and bytes from the counters `oldest` (the oldest
/// sample in the window, `window_ms` ago) to `now`; the shares of time from `before` (the
/// last sample, `elapsed_ms` ago) to `now`.
pub(crate) fn apply_windowed_rates(
    view: &mut SubtaskView,
    (oldest, window_ms): (&SubtaskCounters, u64),
    (before, elapsed_ms): (&SubtaskCounters, u64),
    now: &SubtaskCounters,
) {
    apply_rates(view, before, now, elapsed_ms);
    let mut windowed = SubtaskView::default();
    apply_rates(&mut windowed, oldest, now, window_ms);
    view.records_in_per_second = windowed.records_in_per_second;
    view.records_out_per_second = windowed.records_out_per_second;
    view.bytes_in_per_second = windowed.bytes_in_per_second;
    view.bytes_out_per_second = windowed.bytes_out_per_second;
}

/// `view`'s per-second figures from the counters `before` and `now`, `elapsed_ms` apart.
/// Counters that went backwards (a new attempt) count from zero.
pub(crate) fn apply_rates(view: &mut SubtaskView, before: &SubtaskCounters, now: &SubtaskCounters, elapsed_ms: u64) {
    // The subtask's own clock between the two samples (its busy, backpressured and idle
    // time add up to it) when it moved: a task executor's counters arrive some time after
    // they were read, and the sampler's interval would make the rates jitter.
    let lived = |c: &SubtaskCounters| c.busy_ms + c.backpressured_ms + c.idle_ms;
    let elapsed_ms = match lived(now).checked_sub(lived(before)) {
        Some(own) if own > 0 => own,
        _ => elapsed_ms,
    };
    if elapsed_ms == 0 {
        return;
    }
    let per_second = |a: u64, b: u64| b.checked_sub(a).unwrap_or(b) as f64 * 1000.0 / elapsed_ms as f64;
    view.records_in_per_second = per_second(before.records_in, now.records_in);
    view.records_out_per_second = per_second(before.records_out, now.records_out);
    view.bytes_in_per_second = per_second(before.bytes_in, now.bytes_in);
    view.bytes_out_per_second = per_second(before.bytes_out, now.bytes_out);
    // Time shares in ms per second, each at most 1000, and busy what the others leave.
    let share = |a: u64, b: u64| per_second(a, b).min(1000.0);
    view.backpressured_ms_per_second = share(before.backpressured_ms, now.backpressured_ms);
    view.idle_ms_per_second = share(before.idle_ms, now.idle_ms);
    view.busy_ms_per_second = (1000.0 - view.backpressured_ms_per_second - view.idle_ms_per_second).max(0.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_per_second_and_shares_add_up_to_a_second() {
        let before =
            SubtaskCounters { records_in: 100, busy_ms: 890, backpressured_ms: 10, idle_ms: 100, ..Default::default() };
        let now = SubtaskCounters {
            records_in: 2100,
            busy_ms: 2190,
            backpressured_ms: 510,
            idle_ms: 300,
            ..Default::default()
        };
        // The sampler's interval (2500 ms) is not the subtask's (2000 ms between its reads).
        let mut view = SubtaskView::default();
        apply_rates(&mut view, &before, &now, 2500);
        assert_eq!(view.records_in_per_second, 1000.0);
        assert_eq!(view.backpressured_ms_per_second, 250.0);
        assert_eq!(view.idle_ms_per_second, 100.0);
        assert_eq!(view.busy_ms_per_second, 650.0);
        assert_eq!(view.backpressure_level(), "low");
        // A new attempt's counters start again from zero.
        let restarted = SubtaskCounters { records_in: 50, busy_ms: 1000, ..Default::default() };
        apply_rates(&mut view, &now, &restarted, 1000);
        assert_eq!(view.records_in_per_second, 50.0);
    }

    /// Records counted a batch at a time: per second between two samples the rate jumps by
    /// a batch; over the window it is the steady rate.
    #[test]
    fn records_per_second_follow_the_window_and_shares_the_last_second() {
        let at = |records: u64, ms: u64, idle_ms: u64| SubtaskCounters {
            records_in: records,
            busy_ms: ms - idle_ms,
            idle_ms,
            ..Default::default()
        };
        // 10,240 records over 10 s, the last second's sample one batch (1,024) ahead of
        // the one before.
        let (oldest, before, now) = (at(0, 1000, 0), at(9216, 10_000, 0), at(10_240, 11_000, 500));
        let mut view = SubtaskView::default();
        apply_windowed_rates(&mut view, (&oldest, 10_000), (&before, 1000), &now);
        assert_eq!(view.records_in_per_second, 1024.0);
        assert_eq!(view.idle_ms_per_second, 500.0, "the shares follow the last second");
    }
}
