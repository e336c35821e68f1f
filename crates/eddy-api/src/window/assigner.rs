//! Window assigners: which windows a record belongs to (Flink's `WindowAssigner`s), and
//! for session windows how windows merge.

use super::trigger::{EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger};
use super::{GlobalWindow, TimeWindow, Window};
use std::time::Duration;

/// The shape of sliding windows: size, slide and offset, ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingShape {
    pub size: i64,
    pub slide: i64,
    pub offset: i64,
}

impl SlidingShape {
    /// The pane length: the largest slice every window start and end falls on.
    pub(crate) fn pane(&self) -> i64 {
        let (mut a, mut b) = (self.size, self.slide);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
}

/// Puts a record, by its timestamp, into windows.
pub trait WindowAssigner: Clone + Send + Sync + 'static {
    type W: Window;
    /// The trigger windows get unless the job sets another.
    type DefaultTrigger: Clone + Send + Sync + 'static;
    /// The windows of a record with `timestamp` (its event time, or the processing time
    /// for processing-time assigners), appended to `out`.
    fn assign_windows(&self, timestamp: i64, out: &mut Vec<Self::W>);
    fn default_trigger(&self) -> Self::DefaultTrigger;
    /// Whether windows follow event time (else processing time).
    fn is_event_time(&self) -> bool;
    /// Merging assigners (sessions) combine overlapping windows: `merge` is called with
    /// each group of more than one window and the window that covers them.
    fn merge_windows(&self, _windows: &[Self::W], _merge: &mut dyn FnMut(Vec<Self::W>, Self::W)) {}
    fn is_merging(&self) -> bool {
        false
    }
    /// Sliding event-time windows: their shape, so that windows can share panes.
    fn sliding_shape(&self) -> Option<SlidingShape> {
        None
    }
    /// This assigner's window for `window`, if its windows are time windows.
    fn time_window(&self, _window: TimeWindow) -> Option<Self::W> {
        None
    }
}

fn millis(duration: Duration) -> i64 {
    duration.as_millis() as i64
}

fn tumbling(timestamp: i64, size: i64, offset: i64, out: &mut Vec<TimeWindow>) {
    let start = TimeWindow::window_start_with_offset(timestamp, offset, size);
    out.push(TimeWindow::new(start, start + size));
}

/// The windows of `size` every `slide` that hold `timestamp`, latest first (Flink's order).
fn sliding(timestamp: i64, size: i64, slide: i64, offset: i64, out: &mut Vec<TimeWindow>) {
    let last_start = TimeWindow::window_start_with_offset(timestamp, offset, slide);
    let mut start = last_start;
    while start > timestamp - size {
        out.push(TimeWindow::new(start, start + size));
        start -= slide;
    }
}

macro_rules! time_assigner {
    ($(#[$doc:meta])* $name:ident, event_time: $event:expr, trigger: $trigger:ident,
     fields: { $($field:ident),* }, assign: |$self_:ident, $ts:ident, $out:ident| $assign:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            $($field: i64,)*
            offset: i64,
        }

        impl $name {
            /// Windows aligned to the epoch plus `offset` (Flink's `of(size, offset)`).
            pub fn with_offset(mut self, offset: Duration) -> Self {
                self.offset = millis(offset);
                self
            }
        }

        impl WindowAssigner for $name {
            type W = TimeWindow;
            type DefaultTrigger = $trigger;
            fn assign_windows(&$self_, $ts: i64, $out: &mut Vec<TimeWindow>) {
                $assign
            }
            fn default_trigger(&self) -> $trigger {
                $trigger
            }
            fn is_event_time(&self) -> bool {
                $event
            }
            fn time_window(&self, window: TimeWindow) -> Option<TimeWindow> {
                Some(window)
            }
            fn sliding_shape(&self) -> Option<SlidingShape> {
                self.shape()
            }
        }
    };
}

time_assigner!(
    /// Consecutive windows of one size in event time (Flink's `TumblingEventTimeWindows`).
    TumblingEventTimeWindows, event_time: true, trigger: EventTimeTrigger, fields: { size },
    assign: |self, timestamp, out| tumbling(timestamp, self.size, self.offset, out)
);
time_assigner!(
    /// Consecutive windows of one size in processing time.
    TumblingProcessingTimeWindows, event_time: false, trigger: ProcessingTimeTrigger, fields: { size },
    assign: |self, timestamp, out| tumbling(timestamp, self.size, self.offset, out)
);
time_assigner!(
    /// Windows of one size starting every `slide` in event time; a record is in
    /// size / slide of them (Flink's `SlidingEventTimeWindows`).
    SlidingEventTimeWindows, event_time: true, trigger: EventTimeTrigger, fields: { size, slide },
    assign: |self, timestamp, out| sliding(timestamp, self.size, self.slide, self.offset, out)
);
time_assigner!(
    /// Sliding windows in processing time.
    SlidingProcessingTimeWindows, event_time: false, trigger: ProcessingTimeTrigger, fields: { size, slide },
    assign: |self, timestamp, out| sliding(timestamp, self.size, self.slide, self.offset, out)
);

impl TumblingEventTimeWindows {
    pub fn of(size: Duration) -> Self {
        Self { size: millis(size).max(1), offset: 0 }
    }

    fn shape(&self) -> Option<SlidingShape> {
        None
    }
}

impl TumblingProcessingTimeWindows {
    pub fn of(size: Duration) -> Self {
        Self { size: millis(size).max(1), offset: 0 }
    }

    fn shape(&self) -> Option<SlidingShape> {
        None
    }
}

impl SlidingEventTimeWindows {
    pub fn of(size: Duration, slide: Duration) -> Self {
        Self { size: millis(size).max(1), slide: millis(slide).max(1), offset: 0 }
    }

    /// Windows that overlap share panes (a slide as long as the size is a tumbling window).
    fn shape(&self) -> Option<SlidingShape> {
        let shape = SlidingShape { size: self.size, slide: self.slide, offset: self.offset };
        (self.slide < self.size).then_some(shape)
    }
}

impl SlidingProcessingTimeWindows {
    pub fn of(size: Duration, slide: Duration) -> Self {
        Self { size: millis(size).max(1), slide: millis(slide).max(1), offset: 0 }
    }

    fn shape(&self) -> Option<SlidingShape> {
        None
    }
}

/// Merges windows that overlap or touch (Flink's `TimeWindow.mergeWindows`).
fn merge_time_windows(windows: &[TimeWindow], merge: &mut dyn FnMut(Vec<TimeWindow>, TimeWindow)) {
    let mut sorted = windows.to_vec();
    sorted.sort_by_key(|w| w.start);
    let mut current: Option<(TimeWindow, Vec<TimeWindow>)> = None;
    for candidate in sorted {
        current = match current.take() {
            None => Some((candidate, vec![candidate])),
            Some((cover, mut members)) if cover.intersects(&candidate) => {
                members.push(candidate);
                Some((cover.cover(&candidate), members))
            }
            Some((cover, members)) => {
                if members.len() > 1 {
                    merge(members, cover);
                }
                Some((candidate, vec![candidate]))
            }
        };
    }
    if let Some((cover, members)) = current {
        if members.len() > 1 {
            merge(members, cover);
        }
    }
}

/// Sessions in event time: a record opens `[t, t + gap)`, and windows of a key that
/// overlap or touch merge (Flink's `EventTimeSessionWindows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTimeSessionWindows {
    gap: i64,
}

impl EventTimeSessionWindows {
    pub fn with_gap(gap: Duration) -> Self {
        Self { gap: millis(gap).max(1) }
    }
}

/// Sessions in processing time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessingTimeSessionWindows {
    gap: i64,
}

impl ProcessingTimeSessionWindows {
    pub fn with_gap(gap: Duration) -> Self {
        Self { gap: millis(gap).max(1) }
    }
}

macro_rules! session_assigner {
    ($name:ident, $event:expr, $trigger:ident) => {
        impl WindowAssigner for $name {
            type W = TimeWindow;
            type DefaultTrigger = $trigger;
            fn assign_windows(&self, timestamp: i64, out: &mut Vec<TimeWindow>) {
                out.push(TimeWindow::new(timestamp, timestamp + self.gap));
            }
            fn default_trigger(&self) -> $trigger {
                $trigger
            }
            fn is_event_time(&self) -> bool {
                $event
            }
            fn merge_windows(&self, windows: &[TimeWindow], merge: &mut dyn FnMut(Vec<TimeWindow>, TimeWindow)) {
                merge_time_windows(windows, merge)
            }
            fn is_merging(&self) -> bool {
                true
            }
            fn time_window(&self, window: TimeWindow) -> Option<TimeWindow> {
                Some(window)
            }
        }
    };
}

session_assigner!(EventTimeSessionWindows, true, EventTimeTrigger);
session_assigner!(ProcessingTimeSessionWindows, false, ProcessingTimeTrigger);

/// One window for everything of a key; its default trigger never fires, so it needs a
/// trigger of its own (`count_window` uses [`super::CountTrigger`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GlobalWindows;

impl GlobalWindows {
    pub fn create() -> Self {
        GlobalWindows
    }
}

impl WindowAssigner for GlobalWindows {
    type W = GlobalWindow;
    type DefaultTrigger = NeverTrigger;
    fn assign_windows(&self, _timestamp: i64, out: &mut Vec<GlobalWindow>) {
        out.push(GlobalWindow);
    }
    fn default_trigger(&self) -> NeverTrigger {
        NeverTrigger
    }
    fn is_event_time(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_in_size_over_slide_sliding_windows_latest_first() {
        let mut out = Vec::new();
        SlidingEventTimeWindows::of(Duration::from_millis(1000), Duration::from_millis(300))
            .assign_windows(-2500, &mut out);
        let starts: Vec<i64> = out.iter().map(|w| w.start).collect();
        assert_eq!(starts, vec![-2700, -3000, -3300]);
    }

    #[test]
    fn touching_sessions_merge() {
        let windows = [TimeWindow::new(0, 300), TimeWindow::new(300, 600), TimeWindow::new(601, 900)];
        let mut merged = Vec::new();
        merge_time_windows(&windows, &mut |members, cover| merged.push((members, cover)));
        assert_eq!(merged, vec![(vec![TimeWindow::new(0, 300), TimeWindow::new(300, 600)], TimeWindow::new(0, 600))]);
    }
}
