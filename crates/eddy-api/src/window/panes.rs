//! Sliding event-time windows that share their panes, for incremental aggregates with the
//! default trigger: a record is added once, to its pane (a slice of gcd(size, slide)), not
//! to each of its size/slide windows; a window's result is the merge of its panes'
//! accumulators when it fires. What fires, what is late and what is dropped is exactly
//! what the window operator gives (see `operator.rs`):
//!
//! - A record all of whose windows are late (the newest one's end plus the allowed
//!   lateness is behind the watermark) is late; otherwise it goes into its pane.
//! - Its windows whose end the watermark passed, but not their end plus the allowed
//!   lateness, fire again at once (as Flink's `EventTimeTrigger` does in `onElement`).
//! - The first of its windows still to fire gets a timer at its end. A firing window sets
//!   the timer of the next one, if that one has any pane: so every window with contents
//!   fires once when the watermark passes its end.
//! - A pane goes once the last window holding it is past its end plus the allowed
//!   lateness: no record can reach that window any more, and every window before it has
//!   fired.
//!
//! Timers are keyed timers in the window's namespace (fire) or the pane's (drop), both
//! `TimeWindow`s told apart by their length; the panes are keyed state in their own
//! namespaces. Checkpoints, restores and rescales therefore need nothing of their own.

use super::assigner::{SlidingShape, WindowAssigner};
use super::function::{ProcessWindowFunction, WindowContext};
use super::operator::{check_timestamp, enter_namespace, set_namespace, NO_TIMERS};
use super::TimeWindow;
use super::Window;
use crate::function::{FunctionResult, OutputTag, RichFunction, SideOutputs};
use crate::key::KeyScope;
use crate::operator::one_input::OneInputLogic;
use crate::operator::timers::{InternalTimers, TimeDomain};
use crate::time::TimestampFn;
use eddy_runtime::{Collector, Output};
use eddy_state::keyed::Timer;
use eddy_state::{AggregateFunction, StateError, StateValue, ValueState, ValueStateDescriptor};
use eddy_types::Key;
use std::marker::PhantomData;
use std::sync::Arc;

fn gcd_start(timestamp: i64, offset: i64, length: i64) -> i64 {
    TimeWindow::window_start_with_offset(timestamp, offset, length)
}

/// The logic of a sliding window with shared panes.
pub(crate) struct PaneLogic<T, K, O, A, G: AggregateFunction, F> {
    pub(crate) key: KeyScope<T, K>,
    assigner: A,
    shape: SlidingShape,
    pane: i64,
    allowed_lateness: i64,
    late_tag: Option<OutputTag<T>>,
    timestamps: Option<TimestampFn<T>>,
    aggregate: Arc<G>,
    function: F,
    state: Option<ValueState<G::Acc>>,
    namespace: Vec<u8>,
    _types: PhantomData<fn() -> O>,
}

impl<T, K, O, A: Clone, G: AggregateFunction, F: Clone> Clone for PaneLogic<T, K, O, A, G, F> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            assigner: self.assigner.clone(),
            shape: self.shape,
            pane: self.pane,
            allowed_lateness: self.allowed_lateness,
            late_tag: self.late_tag.clone(),
            timestamps: self.timestamps.clone(),
            aggregate: self.aggregate.clone(),
            function: self.function.clone(),
            state: None,
            namespace: Vec::new(),
            _types: PhantomData,
        }
    }
}

impl<T, K, O, A, G: AggregateFunction, F> PaneLogic<T, K, O, A, G, F> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        key: KeyScope<T, K>,
        assigner: A,
        shape: SlidingShape,
        allowed_lateness: i64,
        late_tag: Option<OutputTag<T>>,
        timestamps: Option<TimestampFn<T>>,
        aggregate: G,
        function: F,
    ) -> Self {
        Self {
            key,
            assigner,
            pane: shape.pane(),
            shape,
            allowed_lateness,
            late_tag,
            timestamps,
            aggregate: Arc::new(aggregate),
            function,
            state: None,
            namespace: Vec::new(),
            _types: PhantomData,
        }
    }
}

impl<T, K, O, A, G, F> PaneLogic<T, K, O, A, G, F>
where
    T: 'static,
    K: Key,
    O: 'static,
    A: WindowAssigner,
    G: AggregateFunction<In = T>,
    G::Acc: StateValue,
    F: ProcessWindowFunction<G::Out, O, K, A::W>,
{
    fn state(&mut self) -> Result<ValueState<G::Acc>, StateError> {
        if self.state.is_none() {
            self.state = Some(ValueState::declare(&ValueStateDescriptor::new("window-panes"))?);
        }
        Ok(self.state.clone().expect("declared above"))
    }

    fn enter(&mut self, window: &TimeWindow) -> Result<(), StateError> {
        enter_namespace(&mut self.namespace, Some(window))
    }

    /// When a window ending at `end` is gone: its end plus the allowed lateness (the end
    /// of time if that overflows).
    fn cleanup_time(&self, end: i64) -> i64 {
        (end - 1).checked_add(self.allowed_lateness).unwrap_or(i64::MAX)
    }

    fn window(&self, end: i64) -> TimeWindow {
        TimeWindow::new(end - self.shape.size, end)
    }

    /// The merged accumulator of the window ending at `end`, if it has any pane.
    fn contents(&mut self, end: i64) -> FunctionResult<Option<G::Acc>> {
        let state = self.state()?;
        let mut merged: Option<G::Acc> = None;
        let mut start = end - self.shape.size;
        while start < end {
            self.enter(&TimeWindow::new(start, start + self.pane))?;
            if let Some(acc) = state.value()? {
                merged = Some(match merged {
                    Some(m) => self.aggregate.merge(m, acc),
                    None => acc,
                });
            }
            start += self.pane;
        }
        Ok(merged)
    }

    /// Fires the window ending at `end` if it has contents; whether it had.
    fn fire(
        &mut self,
        end: i64,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult<bool> {
        let Some(acc) = self.contents(end)? else { return Ok(false) };
        let result = self.aggregate.get_result(&acc);
        let window = self
            .assigner
            .time_window(self.window(end))
            .ok_or("sliding panes need an assigner of time windows (internal error)")?;
        // The function's own keyed state is the key's (the panes set theirs as they go).
        set_namespace(&[])?;
        let current = self.key.current();
        let mut ctx = WindowContext { window: &window, timers, side };
        self.function.process(current.get(), &mut ctx, &mut std::iter::once(result), &mut Collector::new(main))?;
        Ok(true)
    }
}

impl<T, K, O, A, G, F> OneInputLogic<T, O> for PaneLogic<T, K, O, A, G, F>
where
    T: 'static,
    K: Key,
    O: 'static,
    A: WindowAssigner,
    G: AggregateFunction<In = T>,
    G::Acc: StateValue,
    F: ProcessWindowFunction<G::Out, O, K, A::W>,
{
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }

    fn process(
        &mut self,
        record: T,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let timers = timers.ok_or(NO_TIMERS)?;
        let timestamp = self.timestamps.as_ref().map(|f| f(&record)).ok_or("an event-time window needs timestamps")?;
        let timestamp = check_timestamp(timestamp)?;
        let watermark = timers.watermark().0;
        let SlidingShape { size, slide, offset } = self.shape;
        // The newest window holding the record starts at its slide; it is the last to go.
        let newest_end = gcd_start(timestamp, offset, slide) + size;
        if self.cleanup_time(newest_end) <= watermark {
            if timestamp.saturating_add(self.allowed_lateness) <= watermark {
                if let Some(tag) = &self.late_tag {
                    side.emit(tag, record);
                }
            }
            return Ok(());
        }
        self.key.enter(&record)?;
        let pane_start = gcd_start(timestamp, offset, self.pane);
        let pane = TimeWindow::new(pane_start, pane_start + self.pane);
        self.enter(&pane)?;
        let aggregate = self.aggregate.clone();
        let mut new_pane = false;
        self.state()?.update_with(
            || {
                new_pane = true;
                aggregate.create_accumulator()
            },
            |acc| {
                let previous = std::mem::replace(acc, aggregate.create_accumulator());
                *acc = aggregate.add(record, previous);
            },
        )?;
        if new_pane {
            // Dropped once the newest window holding the pane is gone, one ms after its
            // cleanup, so that the window's own timers of that time fire first.
            let last_end = gcd_start(pane_start, offset, slide) + size;
            let drop_at = self.cleanup_time(last_end);
            if drop_at != i64::MAX {
                timers.register(TimeDomain::EventTime, drop_at + 1)?;
            }
        }
        // The record's windows, oldest first: ends from the first after its timestamp.
        let mut end = gcd_start(timestamp - size, offset, slide) + size;
        if end <= timestamp {
            end += slide;
        }
        let mut timer_set = false;
        while end <= newest_end {
            if end - 1 > watermark {
                if !timer_set {
                    self.enter(&self.window(end))?;
                    timers.register(TimeDomain::EventTime, end - 1)?;
                    timer_set = true;
                }
            } else if self.cleanup_time(end) > watermark {
                // Past its end, within the allowed lateness: fires again with the record.
                self.fire(end, main, side, timers)?;
            }
            end += slide;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        timer: Timer,
        _domain: TimeDomain,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult {
        let window = TimeWindow::decode(timer.namespace()).ok_or_else(|| {
            format!("a window timer's namespace does not decode as a window: {:?}", timer.namespace())
        })?;
        self.key.adopt(timer.key());
        if window.end - window.start == self.pane {
            // A pane's last window is gone.
            return Ok(self.state()?.clear()?);
        }
        let end = window.end;
        self.fire(end, main, side, timers)?;
        // The next window gets its timer if it has a pane already; one that gets its first
        // record later sets its own.
        let next = end + self.shape.slide;
        let mut start = next - self.shape.size;
        let state = self.state()?;
        while start < next {
            self.enter(&TimeWindow::new(start, start + self.pane))?;
            if state.value()?.is_some() {
                self.enter(&self.window(next))?;
                timers.register(TimeDomain::EventTime, next - 1)?;
                break;
            }
            start += self.pane;
        }
        Ok(())
    }
}
