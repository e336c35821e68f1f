//! Windows (Flink's `org.apache.flink.streaming.api.windowing`): a keyed stream cut into
//! finite pieces by a [`WindowAssigner`], whose contents are keyed state in the window's
//! namespace, fired by a [`Trigger`], thinned by an [`Evictor`], and handed to a window
//! function.
//!
//! - here: the windows, [`TimeWindow`] and [`GlobalWindow`].
//! - `assigner.rs`: tumbling, sliding and session windows in event and processing time,
//!   and global windows.
//! - `trigger.rs`: when a window fires, and the built-in triggers.
//! - `evictor.rs`: count and time evictors.
//! - `function.rs`: [`ProcessWindowFunction`] and its context.
//! - `merging.rs`: the set of session windows of a key and how they merge.
//! - `panes.rs`: sliding windows of an incremental aggregate that share their panes, so
//!   that a record costs one state update, not one per window.
//! - `operator.rs`: the window operator, line for line Flink's `WindowOperator`: what is
//!   late, when state is cleaned up, allowed lateness and late records to a side output.
//! - `ordered.rs`: the open windows of the event-time or processing-time trigger, in the
//!   order they fire, without a timer per key and window (on the heap backend).
//!
//! Window contents live in the keyed state backend (heap or RocksDB) under the key's bytes
//! followed by the window's, so they are checkpointed, restored and rescaled by key group
//! like any keyed state; the timers that fire windows are the operator's keyed timers.
//! Non-merging windows without an evictor fired by the time trigger of their domain (event
//! time without allowed lateness, or processing time) are the exception on the heap: they wait in `ordered.rs`'s structure between checkpoints, and go into keyed
//! state and timers only for the moment a snapshot is taken.

mod assigner;
mod evictor;
mod function;
mod merging;
pub(crate) mod operator;
mod ordered;
pub(crate) mod panes;
mod trigger;

pub use assigner::{
    EventTimeSessionWindows, GlobalWindows, ProcessingTimeSessionWindows, SlidingEventTimeWindows,
    SlidingProcessingTimeWindows, TumblingEventTimeWindows, TumblingProcessingTimeWindows, WindowAssigner,
};
pub use evictor::{CountEvictor, Evictor, TimeEvictor};
pub use function::{window_function, ProcessWindowFunction, WindowContext, WindowFn};

/// The window function of a window without one: its results as they are.
pub(crate) fn function_pass_through() -> function::PassThrough {
    function::PassThrough
}
pub use trigger::{
    CountTrigger, EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger, Trigger, TriggerContext,
    TriggerResult,
};

/// A window: a namespace of keyed state, with the last timestamp it holds.
pub trait Window: eddy_state::StateValue + std::fmt::Debug + PartialEq + Eq + std::hash::Hash {
    /// The largest timestamp that still belongs to the window.
    fn max_timestamp(&self) -> i64;
    /// The window's bytes as a state namespace.
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Option<Self>;
}

/// The half-open interval `[start, end)` of event or processing time (Flink's
/// `TimeWindow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct TimeWindow {
    pub start: i64,
    pub end: i64,
}

impl TimeWindow {
    pub fn new(start: i64, end: i64) -> Self {
        Self { start, end }
    }

    pub fn start(&self) -> i64 {
        self.start
    }

    pub fn end(&self) -> i64 {
        self.end
    }

    /// Whether the two overlap or touch (session windows merge then).
    pub fn intersects(&self, other: &TimeWindow) -> bool {
        self.start <= other.end && self.end >= other.start
    }

    /// The smallest window covering both.
    pub fn cover(&self, other: &TimeWindow) -> TimeWindow {
        TimeWindow { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    /// The start of the window of `size` (with `offset`) that holds `timestamp` (Flink's
    /// `TimeWindow.getWindowStartWithOffset`).
    pub fn window_start_with_offset(timestamp: i64, offset: i64, size: i64) -> i64 {
        let remainder = (timestamp - offset) % size;
        if remainder < 0 {
            timestamp - (remainder + size)
        } else {
            timestamp - remainder
        }
    }
}

impl Window for TimeWindow {
    fn max_timestamp(&self) -> i64 {
        self.end - 1
    }

    /// The start, then the length, each zigzag-encoded without leading zero bytes: short
    /// (6 bytes for a second-long window of today), so that a key and its window most
    /// often fit the state tables' inline keys.
    fn encode(&self, out: &mut Vec<u8>) {
        write_compact(self.start, out);
        write_compact(self.end.wrapping_sub(self.start), out);
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let (start, rest) = read_compact(bytes)?;
        let (length, rest) = read_compact(rest)?;
        rest.is_empty().then(|| TimeWindow { start, end: start.wrapping_add(length) })
    }
}

/// A length byte, then the zigzag form's significant bytes, big-endian.
fn write_compact(value: i64, out: &mut Vec<u8>) {
    let zigzag = ((value << 1) ^ (value >> 63)) as u64;
    let bytes = zigzag.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    out.push((8 - skip) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

fn read_compact(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let (&len, rest) = bytes.split_first()?;
    let len = len as usize;
    if len > 8 || rest.len() < len {
        return None;
    }
    let mut full = [0u8; 8];
    full[8 - len..].copy_from_slice(&rest[..len]);
    let zigzag = u64::from_be_bytes(full);
    Some((((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64), &rest[len..]))
}

/// The one window of [`GlobalWindows`]: everything, fired only by a custom trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct GlobalWindow;

impl Window for GlobalWindow {
    fn max_timestamp(&self) -> i64 {
        i64::MAX
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.push(0);
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        (bytes == [0]).then_some(GlobalWindow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_windows_round_trip_through_their_namespace_bytes() {
        for (start, end) in [(0, 1000), (-5000, -4000), (1_700_000_000_000, 1_700_000_060_000), (i64::MIN, i64::MAX)] {
            let window = TimeWindow::new(start, end);
            let mut bytes = Vec::new();
            window.encode(&mut bytes);
            assert_eq!(TimeWindow::decode(&bytes), Some(window));
        }
        let mut bytes = Vec::new();
        TimeWindow::new(1_000_000, 1_001_000).encode(&mut bytes);
        assert!(bytes.len() <= 8, "short: {bytes:?}");
    }

    #[test]
    fn window_starts_follow_flink_for_negative_timestamps() {
        assert_eq!(TimeWindow::window_start_with_offset(1999, 0, 1000), 1000);
        assert_eq!(TimeWindow::window_start_with_offset(-1, 0, 1000), -1000);
        assert_eq!(TimeWindow::window_start_with_offset(-1000, 0, 1000), -1000);
        assert_eq!(TimeWindow::window_start_with_offset(5, 3, 10), 3);
    }
}
