//! [`AllWindowedStream`]: a stream in windows without keys (after `window_all`,
//! `count_window_all`), at parallelism 1, as Flink's `windowAll`.
//!
//! It is a keyed window whose key is `()` for every record: one operator, one key, the
//! same triggers, evictors, lateness and functions (which see the key `&()`).

use super::{DataStream, WindowedStream};
use crate::function::OutputTag;
use crate::window::{
    CountTrigger, Evictor, GlobalWindows, ProcessWindowFunction, PurgingTrigger, Trigger, WindowAssigner,
};
use crate::Data;
use eddy_state::{AggregateFunction, StateValue};
use std::time::Duration;

/// A non-keyed stream in windows (Flink's `AllWindowedStream`): every record goes to one
/// subtask, whatever the job's parallelism.
pub struct AllWindowedStream<T, A: WindowAssigner, Tr> {
    windowed: WindowedStream<T, (), A, Tr>,
}

impl<T: Data + Sync> DataStream<T> {
    /// All records in windows of `assigner`, at parallelism 1 (Flink's `windowAll`).
    pub fn window_all<A: WindowAssigner>(&self, assigner: A) -> AllWindowedStream<T, A, A::DefaultTrigger> {
        AllWindowedStream { windowed: self.key_by(|_| ()).window(assigner) }
    }

    /// Windows of `size` records of the whole stream (Flink's `countWindowAll`).
    pub fn count_window_all(&self, size: u64) -> AllWindowedStream<T, GlobalWindows, PurgingTrigger<CountTrigger>> {
        AllWindowedStream { windowed: self.key_by(|_| ()).count_window(size) }
    }
}

impl<T: Data + Sync, A: WindowAssigner, Tr: Trigger<T, A::W>> AllWindowedStream<T, A, Tr> {
    /// Fires by `trigger` instead of the assigner's default.
    pub fn trigger<Tr2: Trigger<T, A::W>>(self, trigger: Tr2) -> AllWindowedStream<T, A, Tr2> {
        AllWindowedStream { windowed: self.windowed.trigger(trigger) }
    }

    /// Thins a firing window's elements.
    pub fn evictor(self, evictor: impl Evictor<T, A::W>) -> Self {
        AllWindowedStream { windowed: self.windowed.evictor(evictor) }
    }

    /// Keeps event-time windows this long past their end (Flink's `allowedLateness`).
    pub fn allowed_lateness(self, lateness: Duration) -> Self {
        AllWindowedStream { windowed: self.windowed.allowed_lateness(lateness) }
    }

    /// Records too late for all their windows go to side output `tag` of the result.
    pub fn side_output_late_data(self, tag: &OutputTag<T>) -> Self {
        AllWindowedStream { windowed: self.windowed.side_output_late_data(tag) }
    }

    /// All elements of a firing window to `function` (its key is `()`).
    pub fn process<O: Data, F: ProcessWindowFunction<T, O, (), A::W>>(&self, function: F) -> DataStream<O> {
        self.windowed.process(function).set_non_parallel()
    }

    /// Incrementally aggregated windows, the result through `function`.
    pub fn aggregate_with<G, O, F>(&self, aggregate: G, function: F) -> DataStream<O>
    where
        G: AggregateFunction<In = T> + Clone,
        G::Acc: StateValue,
        G::Out: 'static,
        O: Data,
        F: ProcessWindowFunction<G::Out, O, (), A::W>,
    {
        self.windowed.aggregate_with(aggregate, function).set_non_parallel()
    }

    /// Incrementally aggregated windows.
    pub fn aggregate<G>(&self, aggregate: G) -> DataStream<G::Out>
    where
        G: AggregateFunction<In = T> + Clone,
        G::Acc: StateValue,
        G::Out: Data,
    {
        self.windowed.aggregate(aggregate).set_non_parallel()
    }

    /// Incrementally reduced windows, the result through `function`.
    pub fn reduce_with<R, O, F>(&self, reduce: R, function: F) -> DataStream<O>
    where
        R: Fn(T, T) -> T + Clone + Send + Sync + 'static,
        O: Data,
        F: ProcessWindowFunction<T, O, (), A::W>,
    {
        self.windowed.reduce_with(reduce, function).set_non_parallel()
    }

    /// Incrementally reduced windows.
    pub fn reduce<R>(&self, reduce: R) -> DataStream<T>
    where
        R: Fn(T, T) -> T + Clone + Send + Sync + 'static,
    {
        self.windowed.reduce(reduce).set_non_parallel()
    }
}
