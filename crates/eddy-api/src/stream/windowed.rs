//! [`WindowedStream`]: a keyed stream cut into windows (after `window`, `count_window`),
//! configured with a trigger, an evictor, allowed lateness and a late-data side output,
//! and ended by a window function.

use super::{DataStream, KeyedStream};
use crate::function::{FunctionResult, OutputTag, RichFunction, RuntimeContext};
use crate::window::operator::{AggregateContents, ListContents, WindowLogic, WindowSpec};
use crate::window::panes::PaneLogic;
use crate::window::{
    CountEvictor, CountTrigger, Evictor, GlobalWindows, ProcessWindowFunction, PurgingTrigger, Trigger, WindowAssigner,
    WindowContext,
};
use crate::Data;
use eddy_runtime::Collector;
use eddy_state::{AggregateFunction, StateValue};
use eddy_types::Key;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// A keyed stream in windows (Flink's `WindowedStream`).
pub struct WindowedStream<T, K, A: WindowAssigner, Tr> {
    keyed: KeyedStream<T, K>,
    spec: WindowSpec<T, A, Tr>,
    evictor: Option<Arc<dyn Evictor<T, A::W>>>,
}

impl<T: Data + Sync, K: Key> KeyedStream<T, K> {
    /// Windows of `assigner`, fired by its default trigger (Flink's `window`).
    pub fn window<A: WindowAssigner>(&self, assigner: A) -> WindowedStream<T, K, A, A::DefaultTrigger> {
        if assigner.is_event_time() && self.stream.timestamps.is_none() {
            self.stream.env.inner.borrow_mut().problems.push(
                "an event-time window needs timestamps, and its stream has none: call assign_timestamps_and_watermarks \
                    (or with_timestamps) before key_by".to_string(),
            );
        }
        let spec = WindowSpec {
            trigger: assigner.default_trigger(),
            assigner,
            allowed_lateness: 0,
            late_tag: None,
            timestamps: self.stream.timestamps.clone(),
            default_trigger: true,
        };
        WindowedStream { keyed: self.clone(), spec, evictor: None }
    }

    /// Windows of `size` records per key, each fired once full (Flink's `countWindow`).
    pub fn count_window(&self, size: u64) -> WindowedStream<T, K, GlobalWindows, PurgingTrigger<CountTrigger>> {
        self.window(GlobalWindows).trigger(PurgingTrigger::of(CountTrigger::of(size)))
    }

    /// The last `size` records per key, fired every `slide` records (Flink's sliding
    /// `countWindow`).
    pub fn count_window_sliding(&self, size: u64, slide: u64) -> WindowedStream<T, K, GlobalWindows, CountTrigger> {
        self.window(GlobalWindows).evictor(CountEvictor::of(size as usize)).trigger(CountTrigger::of(slide))
    }
}

impl<T: Data + Sync, K: Key, A: WindowAssigner, Tr: Trigger<T, A::W>> WindowedStream<T, K, A, Tr> {
    /// Fires by `trigger` instead of the assigner's default.
    pub fn trigger<Tr2: Trigger<T, A::W>>(self, trigger: Tr2) -> WindowedStream<T, K, A, Tr2> {
        let spec = WindowSpec {
            assigner: self.spec.assigner,
            trigger,
            allowed_lateness: self.spec.allowed_lateness,
            late_tag: self.spec.late_tag,
            timestamps: self.spec.timestamps,
            default_trigger: false,
        };
        WindowedStream { keyed: self.keyed, spec, evictor: self.evictor }
    }

    /// Thins a firing window's elements (windows then keep every element).
    pub fn evictor(mut self, evictor: impl Evictor<T, A::W>) -> Self {
        self.evictor = Some(Arc::new(evictor));
        self
    }

    /// Keeps event-time windows this long past their end: records that come meanwhile
    /// update them and fire them again (Flink's `allowedLateness`).
    pub fn allowed_lateness(mut self, lateness: Duration) -> Self {
        self.spec.allowed_lateness = lateness.as_millis() as i64;
        self
    }

    /// Records too late for all their windows go to side output `tag` of the result
    /// instead of being dropped (Flink's `sideOutputLateData`).
    pub fn side_output_late_data(mut self, tag: &OutputTag<T>) -> Self {
        self.spec.late_tag = Some(tag.clone());
        self
    }

    fn check_merging(&self) {
        if self.spec.assigner.is_merging() && !self.spec.trigger.can_merge() {
            self.keyed
                .stream
                .env
                .inner
                .borrow_mut()
                .problems
                .push("session (merging) windows need a trigger that can merge; this trigger cannot".to_string());
        }
    }

    /// All elements of a firing window to `function` (Flink's `process`).
    pub fn process<O: Data, F: ProcessWindowFunction<T, O, K, A::W>>(&self, function: F) -> DataStream<O> {
        self.check_merging();
        let contents = ListContents::new(self.evictor.clone());
        let logic = WindowLogic::new(self.keyed.scope(), self.spec.clone(), contents, function);
        self.keyed.stream.one_input("Window", logic, true)
    }

    /// Incrementally aggregated windows, the result through `function` (Flink's
    /// `aggregate(aggFunction, windowFunction)`). With an evictor the elements are kept
    /// and aggregated when the window fires.
    pub fn aggregate_with<G, O, F>(&self, aggregate: G, function: F) -> DataStream<O>
    where
        G: AggregateFunction<In = T> + Clone,
        G::Acc: StateValue,
        G::Out: 'static,
        O: Data,
        F: ProcessWindowFunction<G::Out, O, K, A::W>,
    {
        self.check_merging();
        if self.evictor.is_some() {
            return self.process(AggregateThen { aggregate: Arc::new(aggregate), function, _types: PhantomData });
        }
        if let (Some(shape), true) = (self.spec.assigner.sliding_shape(), self.spec.default_trigger) {
            let logic = PaneLogic::new(
                self.keyed.scope(),
                self.spec.assigner.clone(),
                shape,
                self.spec.allowed_lateness,
                self.spec.late_tag.clone(),
                self.spec.timestamps.clone(),
                aggregate,
                function,
            );
            return self.keyed.stream.one_input("Window", logic, true);
        }
        let logic =
            WindowLogic::new(self.keyed.scope(), self.spec.clone(), AggregateContents::new(aggregate), function);
        self.keyed.stream.one_input("Window", logic, true)
    }

    /// Incrementally aggregated windows (Flink's `aggregate`).
    pub fn aggregate<G>(&self, aggregate: G) -> DataStream<G::Out>
    where
        G: AggregateFunction<In = T> + Clone,
        G::Acc: StateValue,
        G::Out: Data,
    {
        self.aggregate_with(aggregate, crate::window::function_pass_through())
    }

    /// Incrementally reduced windows, the result through `function`.
    pub fn reduce_with<R, O, F>(&self, reduce: R, function: F) -> DataStream<O>
    where
        R: Fn(T, T) -> T + Clone + Send + Sync + 'static,
        O: Data,
        F: ProcessWindowFunction<T, O, K, A::W>,
    {
        self.aggregate_with(ReduceAggregate { reduce, _type: PhantomData }, function)
    }

    /// Incrementally reduced windows (Flink's `reduce`).
    pub fn reduce<R>(&self, reduce: R) -> DataStream<T>
    where
        R: Fn(T, T) -> T + Clone + Send + Sync + 'static,
    {
        self.reduce_with(reduce, crate::window::function_pass_through())
    }
}

/// A reduce function as an aggregate whose accumulator is the running value.
pub(crate) struct ReduceAggregate<T, R> {
    reduce: R,
    _type: PhantomData<fn() -> T>,
}

impl<T, R: Clone> Clone for ReduceAggregate<T, R> {
    fn clone(&self) -> Self {
        Self { reduce: self.reduce.clone(), _type: PhantomData }
    }
}

impl<T: Clone + 'static, R: Fn(T, T) -> T + Send + Sync + 'static> AggregateFunction for ReduceAggregate<T, R> {
    type In = T;
    type Acc = Option<T>;
    type Out = T;
    fn create_accumulator(&self) -> Option<T> {
        None
    }
    fn add(&self, value: T, accumulator: Option<T>) -> Option<T> {
        Some(match accumulator {
            Some(acc) => (self.reduce)(acc, value),
            None => value,
        })
    }
    fn get_result(&self, accumulator: &Option<T>) -> T {
        accumulator.clone().expect("a window's reduction exists once it holds a record")
    }
    fn merge(&self, a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some((self.reduce)(a, b)),
            (a, b) => a.or(b),
        }
    }
}

/// For evicting windows: aggregates the remaining elements, then runs the window function
/// on the result (Flink's `EvictingWindowOperator` with an aggregate).
struct AggregateThen<G, F, T> {
    aggregate: Arc<G>,
    function: F,
    _types: PhantomData<fn() -> T>,
}

impl<G, F: Clone, T> Clone for AggregateThen<G, F, T> {
    fn clone(&self) -> Self {
        Self { aggregate: self.aggregate.clone(), function: self.function.clone(), _types: PhantomData }
    }
}

impl<G: Send + Sync, F: RichFunction, T> RichFunction for AggregateThen<G, F, T> {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.function.open(ctx)
    }
    fn close(&mut self) -> FunctionResult {
        self.function.close()
    }
}

impl<T, O, K, W, G, F> ProcessWindowFunction<T, O, K, W> for AggregateThen<G, F, T>
where
    T: 'static,
    G: AggregateFunction<In = T>,
    F: ProcessWindowFunction<G::Out, O, K, W>,
{
    fn process(
        &mut self,
        key: &K,
        ctx: &mut WindowContext<'_, W>,
        elements: &mut dyn Iterator<Item = T>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        let aggregate = &self.aggregate;
        let accumulator = elements.fold(aggregate.create_accumulator(), |acc, value| aggregate.add(value, acc));
        let result = aggregate.get_result(&accumulator);
        self.function.process(key, ctx, &mut std::iter::once(result), out)
    }

    fn uses_keyed_state(&self) -> bool {
        self.function.uses_keyed_state()
    }
}
