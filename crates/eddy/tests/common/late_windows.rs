//! Events for the tests of watermarks in flight: 100 ms event-time windows per key, some
//! records late only behind the watermark right before them, and the lines a run without
//! failure commits ("W key start count" per window, "L key time" per late record).

use std::collections::{BTreeMap, BTreeSet};

/// The window size the reference assumes.
pub const WINDOW_MS: u64 = 100;

/// Event `i`, keyed `i % 3`, at `10 i` ms, except that from 300 on the two after each
/// window's first are 25 ms behind: in the window before, which the watermark right
/// before them closed (so each is late only if that very watermark, in flight or not,
/// is where it was).
pub fn timed_event(i: u64) -> (u64, i64) {
    let time = i as i64 * 10;
    (i % 3, if i >= 300 && matches!(i % 10, 1 | 2) { time - 25 } else { time })
}

/// Watermark = largest timestamp − 1, after every record.
pub struct EveryRecord(pub i64);

impl eddy::time::WatermarkGenerator<(u64, i64)> for EveryRecord {
    fn on_event(&mut self, _: &(u64, i64), timestamp: i64, output: &mut eddy::time::WatermarkOutput) {
        self.0 = self.0.max(timestamp);
        output.emit_watermark(self.0 - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut eddy::time::WatermarkOutput) {}
}

/// The sorted lines of a run without failure over events `0..events`: every delayed
/// event late, the others counted in their windows.
pub fn expected_lines(events: u64) -> Vec<String> {
    let mut counts: BTreeMap<(u64, i64), u64> = BTreeMap::new();
    let mut lines = Vec::new();
    for i in 0..events {
        let (key, time) = timed_event(i);
        if time == i as i64 * 10 {
            *counts.entry((key, time - time % WINDOW_MS as i64)).or_default() += 1;
        } else {
            lines.push(format!("L {key} {time}"));
        }
    }
    lines.extend(counts.into_iter().map(|((key, start), count)| format!("W {key} {start} {count}")));
    lines.sort();
    lines
}

/// What `got` (sorted) lacks and has beyond `expected`, a few of each; `None` if equal.
pub fn differences(got: &[String], expected: &[String]) -> Option<String> {
    if got == expected {
        return None;
    }
    let (got_set, want): (BTreeSet<_>, BTreeSet<_>) = (got.iter().collect(), expected.iter().collect());
    let missing: Vec<_> = want.difference(&got_set).take(10).collect();
    let unexpected: Vec<_> = got_set.difference(&want).take(10).collect();
    Some(format!("{} lines, expected {}; missing {missing:?}; unexpected {unexpected:?}", got.len(), expected.len()))
}
