//! Triggers: when a window's contents go to the window function (Flink's `Trigger` and
//! the built-in ones). A trigger sees one window of one key at a time; its timers and
//! state are that window's.

use crate::function::FunctionResult;
use crate::operator::timers::{InternalTimers, TimeDomain};
use eddy_state::{ReducingState, ReducingStateDescriptor};

use super::Window;

/// What a trigger decides (Flink's `TriggerResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerResult {
    Continue,
    /// Emit the window's contents, keep them.
    Fire,
    /// Drop the contents without emitting.
    Purge,
    FireAndPurge,
}

impl TriggerResult {
    pub fn is_fire(self) -> bool {
        matches!(self, TriggerResult::Fire | TriggerResult::FireAndPurge)
    }

    pub fn is_purge(self) -> bool {
        matches!(self, TriggerResult::Purge | TriggerResult::FireAndPurge)
    }
}

/// What a trigger may do for the window it is called for: read the times, set and delete
/// that window's timers. Its own state it declares like any keyed state (in the window's
/// namespace, which is current while it runs).
pub struct TriggerContext<'a> {
    pub(crate) timers: &'a InternalTimers,
}

impl TriggerContext<'_> {
    pub fn current_watermark(&self) -> i64 {
        self.timers.watermark().0
    }

    pub fn current_processing_time(&self) -> i64 {
        self.timers.processing_time()
    }

    pub fn register_event_time_timer(&mut self, time: i64) -> FunctionResult {
        Ok(self.timers.register(TimeDomain::EventTime, time)?)
    }

    pub fn register_processing_time_timer(&mut self, time: i64) -> FunctionResult {
        Ok(self.timers.register(TimeDomain::ProcessingTime, time)?)
    }

    pub fn delete_event_time_timer(&mut self, time: i64) -> FunctionResult {
        Ok(self.timers.delete(TimeDomain::EventTime, time)?)
    }

    pub fn delete_processing_time_timer(&mut self, time: i64) -> FunctionResult {
        Ok(self.timers.delete(TimeDomain::ProcessingTime, time)?)
    }
}

/// Decides when a window fires (Flink's `Trigger`).
pub trait Trigger<T, W>: Clone + Send + Sync + 'static {
    fn on_element(
        &mut self,
        element: &T,
        timestamp: i64,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> FunctionResult<TriggerResult>;
    fn on_processing_time(
        &mut self,
        time: i64,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> FunctionResult<TriggerResult>;
    fn on_event_time(&mut self, time: i64, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult>;
    /// Whether it works with merging (session) windows.
    fn can_merge(&self) -> bool {
        false
    }
    /// Windows merged into `window`: set up what the merged window needs.
    fn on_merge(&mut self, _window: &W, _ctx: &mut TriggerContext<'_>) -> FunctionResult {
        Ok(())
    }
    /// The window is gone: delete its timers and state.
    fn clear(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult;
}

/// Fires when the watermark passes the window's end (the event-time assigners' default).
#[derive(Debug, Clone, Copy, Default)]
pub struct EventTimeTrigger;

impl<T, W: Window> Trigger<T, W> for EventTimeTrigger {
    fn on_element(&mut self, _: &T, _: i64, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        if window.max_timestamp() <= ctx.current_watermark() {
            // Late but within the allowed lateness: fire again at once.
            Ok(TriggerResult::Fire)
        } else {
            ctx.register_event_time_timer(window.max_timestamp())?;
            Ok(TriggerResult::Continue)
        }
    }
    fn on_processing_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn on_event_time(&mut self, time: i64, window: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(if time == window.max_timestamp() { TriggerResult::Fire } else { TriggerResult::Continue })
    }
    fn can_merge(&self) -> bool {
        true
    }
    fn on_merge(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult {
        if window.max_timestamp() > ctx.current_watermark() {
            ctx.register_event_time_timer(window.max_timestamp())?;
        }
        Ok(())
    }
    fn clear(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult {
        ctx.delete_event_time_timer(window.max_timestamp())
    }
}

/// Fires when processing time passes the window's end (the processing-time assigners'
/// default).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessingTimeTrigger;

impl<T, W: Window> Trigger<T, W> for ProcessingTimeTrigger {
    fn on_element(&mut self, _: &T, _: i64, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        ctx.register_processing_time_timer(window.max_timestamp())?;
        Ok(TriggerResult::Continue)
    }
    fn on_processing_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Fire)
    }
    fn on_event_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn can_merge(&self) -> bool {
        true
    }
    fn on_merge(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult {
        if window.max_timestamp() > ctx.current_processing_time() {
            ctx.register_processing_time_timer(window.max_timestamp())?;
        }
        Ok(())
    }
    fn clear(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult {
        ctx.delete_processing_time_timer(window.max_timestamp())
    }
}

/// Fires once a window holds `count` more records (Flink's `CountTrigger`); the count is
/// per window, in keyed state.
pub struct CountTrigger {
    max_count: u64,
    count: Option<ReducingState<u64>>,
}

impl Clone for CountTrigger {
    fn clone(&self) -> Self {
        // A copy for another subtask declares its state there.
        Self { max_count: self.max_count, count: None }
    }
}

impl CountTrigger {
    pub fn of(max_count: u64) -> Self {
        Self { max_count, count: None }
    }

    fn count(&mut self) -> FunctionResult<&ReducingState<u64>> {
        if self.count.is_none() {
            let descriptor = ReducingStateDescriptor::new("count-trigger", |a: u64, b: u64| a + b);
            self.count = Some(ReducingState::declare(&descriptor)?);
        }
        Ok(self.count.as_ref().expect("declared above"))
    }
}

impl<T, W: Window> Trigger<T, W> for CountTrigger {
    fn on_element(&mut self, _: &T, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        let max_count = self.max_count;
        let count = self.count()?;
        count.add(1)?;
        if count.get()?.unwrap_or(0) >= max_count {
            count.clear()?;
            return Ok(TriggerResult::Fire);
        }
        Ok(TriggerResult::Continue)
    }
    fn on_processing_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn on_event_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn clear(&mut self, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult {
        Ok(self.count()?.clear()?)
    }
}

/// Turns every firing of `inner` into a firing that purges the contents (Flink's
/// `PurgingTrigger`).
#[derive(Debug, Clone)]
pub struct PurgingTrigger<Tr>(pub Tr);

impl<Tr> PurgingTrigger<Tr> {
    pub fn of(inner: Tr) -> Self {
        PurgingTrigger(inner)
    }
}

fn purging(result: TriggerResult) -> TriggerResult {
    if result.is_fire() {
        TriggerResult::FireAndPurge
    } else {
        result
    }
}

impl<T, W, Tr: Trigger<T, W>> Trigger<T, W> for PurgingTrigger<Tr> {
    fn on_element(
        &mut self,
        element: &T,
        timestamp: i64,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> FunctionResult<TriggerResult> {
        self.0.on_element(element, timestamp, window, ctx).map(purging)
    }
    fn on_processing_time(
        &mut self,
        time: i64,
        window: &W,
        ctx: &mut TriggerContext<'_>,
    ) -> FunctionResult<TriggerResult> {
        self.0.on_processing_time(time, window, ctx).map(purging)
    }
    fn on_event_time(&mut self, time: i64, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        self.0.on_event_time(time, window, ctx).map(purging)
    }
    fn can_merge(&self) -> bool {
        self.0.can_merge()
    }
    fn on_merge(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult {
        self.0.on_merge(window, ctx)
    }
    fn clear(&mut self, window: &W, ctx: &mut TriggerContext<'_>) -> FunctionResult {
        self.0.clear(window, ctx)
    }
}

/// Never fires (the global window's default: it needs a trigger of its own).
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverTrigger;

impl<T, W> Trigger<T, W> for NeverTrigger {
    fn on_element(&mut self, _: &T, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn on_processing_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn on_event_time(&mut self, _: i64, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult<TriggerResult> {
        Ok(TriggerResult::Continue)
    }
    fn clear(&mut self, _: &W, _: &mut TriggerContext<'_>) -> FunctionResult {
        Ok(())
    }
}
