//! The logics of the built-in operators: how each kind of user function handles a record.
//! Keyed logics set the current key of the state backend before calling the function.

use super::one_input::OneInputLogic;
use super::timers::{InternalTimers, TimeDomain};
use super::two_input::TwoInputLogic;
use crate::function::*;
use crate::key::KeyScope;
use crate::time::TimestampFn;
use eddy_runtime::output::try_each_record;
use eddy_runtime::{Collector, Output};
use eddy_state::keyed::Timer;
use eddy_state::OperatorStateStore;
use eddy_types::Key;
use eddy_types::KeyHash;
use std::marker::PhantomData;
use std::vec::Drain;

/// The lifecycle of a plain closure: nothing to do.
#[derive(Clone, Copy, Default)]
pub(crate) struct NoLifecycle;
impl RichFunction for NoLifecycle {}

#[derive(Clone)]
pub(crate) struct MapLogic<F>(pub(crate) F, pub(crate) NoLifecycle);

impl<I, O, F: FnMut(I) -> O + 'static> OneInputLogic<I, O> for MapLogic<F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.1
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        main.collect((self.0)(record));
        Ok(())
    }
}

#[derive(Clone)]
pub(crate) struct FilterLogic<F>(pub(crate) F, pub(crate) NoLifecycle);

impl<I, F: FnMut(&I) -> bool + 'static> OneInputLogic<I, I> for FilterLogic<F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.1
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<I>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        if (self.0)(&record) {
            main.collect(record);
        }
        Ok(())
    }
}

#[derive(Clone)]
pub(crate) struct FlatMapLogic<F>(pub(crate) F, pub(crate) NoLifecycle);

impl<I, O, F: FnMut(I, &mut Collector<'_, O>) + 'static> OneInputLogic<I, O> for FlatMapLogic<F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.1
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        (self.0)(record, &mut Collector::new(main));
        Ok(())
    }
}

/// A rich map; `key` is set on a keyed stream so that the function can use keyed state.
#[derive(Clone)]
pub(crate) struct RichMapLogic<I, K: Key, F> {
    pub(crate) function: F,
    pub(crate) key: Option<KeyScope<I, K>>,
}

impl<I: 'static, O, K: Key, F: RichMapFunction<I, O>> OneInputLogic<I, O> for RichMapLogic<I, K, F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        if let Some(key) = &mut self.key {
            key.enter(&record)?;
        }
        main.collect(self.function.map(record)?);
        Ok(())
    }
    #[inline]
    fn process_batch(
        &mut self,
        records: &mut Drain<'_, I>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let function = &mut self.function;
        let map = |record| {
            main.collect(function.map(record)?);
            Ok(())
        };
        each_maybe_keyed(self.key.as_mut(), records, hashes, stop, map)
    }
}

#[derive(Clone)]
pub(crate) struct RichFlatMapLogic<I, K: Key, F> {
    pub(crate) function: F,
    pub(crate) key: Option<KeyScope<I, K>>,
}

impl<I: 'static, O, K: Key, F: RichFlatMapFunction<I, O>> OneInputLogic<I, O> for RichFlatMapLogic<I, K, F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        if let Some(key) = &mut self.key {
            key.enter(&record)?;
        }
        self.function.flat_map(record, &mut Collector::new(main))
    }
    #[inline]
    fn process_batch(
        &mut self,
        records: &mut Drain<'_, I>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let function = &mut self.function;
        let flat_map = |record| function.flat_map(record, &mut Collector::new(&mut *main));
        each_maybe_keyed(self.key.as_mut(), records, hashes, stop, flat_map)
    }
}

#[derive(Clone)]
pub(crate) struct ProcessLogic<F>(pub(crate) F);

impl<I, O, F: ProcessFunction<I, O>> OneInputLogic<I, O> for ProcessLogic<F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.0
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.0.process_element(record, &mut Context { side }, &mut Collector::new(main))
    }
}

pub(crate) struct KeyedProcessLogic<I, K: Key, F> {
    pub(crate) function: F,
    pub(crate) key: KeyScope<I, K>,
    /// The stream's timestamps, for `ctx.timestamp()`.
    pub(crate) timestamps: Option<TimestampFn<I>>,
}

impl<I, K: Key, F: Clone> Clone for KeyedProcessLogic<I, K, F> {
    fn clone(&self) -> Self {
        Self { function: self.function.clone(), key: self.key.clone(), timestamps: self.timestamps.clone() }
    }
}

impl<I: 'static, O, K: Key, F: KeyedProcessFunction<K, I, O>> OneInputLogic<I, O> for KeyedProcessLogic<I, K, F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }
    #[inline]
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.key.enter(&record)?;
        process_keyed(&mut self.function, &self.key, &self.timestamps, record, main, side, timers)
    }
    #[inline]
    fn process_batch(
        &mut self,
        records: &mut Drain<'_, I>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let (function, timestamps) = (&mut self.function, &self.timestamps);
        self.key.each_keyed(records, hashes, stop, |key, record| {
            process_keyed(function, key, timestamps, record, &mut *main, &mut *side, timers)
        })
    }
    fn on_timer(
        &mut self,
        timer: Timer,
        domain: TimeDomain,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult {
        self.key.adopt(timer.key());
        let mut ctx = KeyedContext::new(self.key.current(), side, Some(timers), Some(timer.time()), Some(domain))?;
        self.function.on_timer(timer.time(), &mut ctx, &mut Collector::new(main))
    }
}

/// The records of a batch through `each`, with their keys current on a keyed stream
/// (`key`), in passes ([`KeyScope::each_keyed`]), else one by one.
#[inline]
fn each_maybe_keyed<T, K: Key>(
    key: Option<&mut KeyScope<T, K>>,
    records: &mut Drain<'_, T>,
    hashes: &[KeyHash],
    stop: &mut dyn FnMut(usize) -> bool,
    mut each: impl FnMut(T) -> FunctionResult,
) -> FunctionResult {
    match key {
        Some(key) => key.each_keyed(records, hashes, stop, |_, record| each(record)),
        None => try_each_record(records, stop, each),
    }
}

/// A keyed process function on `record`, whose key is current.
#[inline]
fn process_keyed<I, O, K: Key, F: KeyedProcessFunction<K, I, O>>(
    function: &mut F,
    key: &KeyScope<I, K>,
    timestamps: &Option<TimestampFn<I>>,
    record: I,
    main: &mut dyn Output<O>,
    side: &mut SideOutputs,
    timers: Option<&InternalTimers>,
) -> FunctionResult {
    let mut ctx = record_context(key, timestamps, &record, side, timers)?;
    function.process_element(record, &mut ctx, &mut Collector::new(main))
}

/// The context of a keyed function called for `record`, whose key is current.
#[inline]
fn record_context<'a, T, K: Key>(
    key: &'a KeyScope<T, K>,
    timestamps: &Option<TimestampFn<T>>,
    record: &T,
    side: &'a mut SideOutputs,
    timers: Option<&'a InternalTimers>,
) -> Result<KeyedContext<'a, K>, FunctionError> {
    let timestamp = timestamps.as_ref().map(|f| f(record));
    KeyedContext::new(key.current(), side, timers, timestamp, None)
}

#[derive(Clone)]
pub(crate) struct SinkLogic<S>(pub(crate) S);

impl<T, S: Sink<T>> OneInputLogic<T, ()> for SinkLogic<S> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.0
    }
    #[inline]
    fn process(
        &mut self,
        record: T,
        _main: &mut dyn Output<()>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.0.invoke(record)
    }
    fn end_input(&mut self, _main: &mut dyn Output<()>) -> FunctionResult {
        self.0.finish()
    }
}

/// Co-flat-map; on keyed connected streams both sides set the current key.
#[derive(Clone)]
pub(crate) struct CoFlatMapLogic<A, B, K: Key, F> {
    pub(crate) function: F,
    pub(crate) keys: Option<(KeyScope<A, K>, KeyScope<B, K>)>,
}

impl<A: 'static, B: 'static, O, K: Key, F: CoFlatMapFunction<A, B, O>> TwoInputLogic<A, B, O>
    for CoFlatMapLogic<A, B, K, F>
{
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }
    #[inline]
    fn process_batch1(
        &mut self,
        records: &mut Drain<'_, A>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let function = &mut self.function;
        let flat_map = |record| function.flat_map1(record, &mut Collector::new(&mut *main));
        each_maybe_keyed(self.keys.as_mut().map(|(key, _)| key), records, hashes, stop, flat_map)
    }
    #[inline]
    fn process_batch2(
        &mut self,
        records: &mut Drain<'_, B>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let function = &mut self.function;
        let flat_map = |record| function.flat_map2(record, &mut Collector::new(&mut *main));
        each_maybe_keyed(self.keys.as_mut().map(|(_, key)| key), records, hashes, stop, flat_map)
    }
    #[inline]
    fn process1(
        &mut self,
        record: A,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        if let Some((key, _)) = &mut self.keys {
            key.enter(&record)?;
        }
        self.function.flat_map1(record, &mut Collector::new(main))
    }
    #[inline]
    fn process2(
        &mut self,
        record: B,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        if let Some((_, key)) = &mut self.keys {
            key.enter(&record)?;
        }
        self.function.flat_map2(record, &mut Collector::new(main))
    }
}

pub(crate) struct KeyedCoProcessLogic<A, B, K: Key, F> {
    pub(crate) function: F,
    pub(crate) keys: (KeyScope<A, K>, KeyScope<B, K>),
    /// Each input's timestamps, for `ctx.timestamp()`.
    pub(crate) timestamps: (Option<TimestampFn<A>>, Option<TimestampFn<B>>),
}

impl<A, B, K: Key, F: Clone> Clone for KeyedCoProcessLogic<A, B, K, F> {
    fn clone(&self) -> Self {
        Self { function: self.function.clone(), keys: self.keys.clone(), timestamps: self.timestamps.clone() }
    }
}

impl<A: 'static, B: 'static, O, K: Key, F: KeyedCoProcessFunction<K, A, B, O>> TwoInputLogic<A, B, O>
    for KeyedCoProcessLogic<A, B, K, F>
{
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }
    #[inline]
    fn process_batch1(
        &mut self,
        records: &mut Drain<'_, A>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let (function, timestamps) = (&mut self.function, &self.timestamps.0);
        self.keys.0.each_keyed(records, hashes, stop, |key, record| {
            let mut ctx = record_context(key, timestamps, &record, &mut *side, timers)?;
            function.process_element1(record, &mut ctx, &mut Collector::new(&mut *main))
        })
    }
    #[inline]
    fn process_batch2(
        &mut self,
        records: &mut Drain<'_, B>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let (function, timestamps) = (&mut self.function, &self.timestamps.1);
        self.keys.1.each_keyed(records, hashes, stop, |key, record| {
            let mut ctx = record_context(key, timestamps, &record, &mut *side, timers)?;
            function.process_element2(record, &mut ctx, &mut Collector::new(&mut *main))
        })
    }
    #[inline]
    fn process1(
        &mut self,
        record: A,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.keys.0.enter(&record)?;
        let mut ctx = record_context(&self.keys.0, &self.timestamps.0, &record, side, timers)?;
        self.function.process_element1(record, &mut ctx, &mut Collector::new(main))
    }
    #[inline]
    fn process2(
        &mut self,
        record: B,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.keys.1.enter(&record)?;
        let mut ctx = record_context(&self.keys.1, &self.timestamps.1, &record, side, timers)?;
        self.function.process_element2(record, &mut ctx, &mut Collector::new(main))
    }
    fn on_timer(
        &mut self,
        timer: Timer,
        domain: TimeDomain,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        timers: &InternalTimers,
    ) -> FunctionResult {
        self.keys.0.adopt(timer.key());
        let mut ctx = KeyedContext::new(self.keys.0.current(), side, Some(timers), Some(timer.time()), Some(domain))?;
        self.function.on_timer(timer.time(), &mut ctx, &mut Collector::new(main))
    }
}

/// Input 1 is the data stream, input 2 the broadcast stream.
#[derive(Clone)]
pub(crate) struct BroadcastLogic<F>(pub(crate) F);

impl<I, B, O, F: BroadcastProcessFunction<I, B, O>> TwoInputLogic<I, B, O> for BroadcastLogic<F> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.0
    }
    #[inline]
    fn process1(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.0.process_element(record, &mut ReadOnlyContext { operator_state: state, side }, &mut Collector::new(main))
    }
    #[inline]
    fn process2(
        &mut self,
        record: B,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.0.process_broadcast_element(
            record,
            &mut BroadcastContext { operator_state: state, side },
            &mut Collector::new(main),
        )
    }
}

/// Input 1 is the keyed stream, input 2 the broadcast stream (Flink's
/// `KeyedBroadcastProcessFunction`): stream elements and timers have a current key and
/// read broadcast state; broadcast elements write it and have no key.
pub(crate) struct KeyedBroadcastLogic<I, K: Key, F> {
    pub(crate) function: F,
    pub(crate) key: KeyScope<I, K>,
    pub(crate) timestamps: Option<TimestampFn<I>>,
}

impl<I, K: Key, F: Clone> Clone for KeyedBroadcastLogic<I, K, F> {
    fn clone(&self) -> Self {
        Self { function: self.function.clone(), key: self.key.clone(), timestamps: self.timestamps.clone() }
    }
}

impl<I: 'static, B, O, K: Key, F: KeyedBroadcastProcessFunction<K, I, B, O>> TwoInputLogic<I, B, O>
    for KeyedBroadcastLogic<I, K, F>
{
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }
    #[inline]
    fn process_batch1(
        &mut self,
        records: &mut Drain<'_, I>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let (function, timestamps) = (&mut self.function, &self.timestamps);
        self.key.each_keyed(records, hashes, stop, |key, record| {
            let keyed = record_context(key, timestamps, &record, &mut *side, timers)?;
            let mut ctx = KeyedReadOnlyContext { keyed, operator_state: &mut *state };
            function.process_element(record, &mut ctx, &mut Collector::new(&mut *main))
        })
    }
    #[inline]
    fn process1(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.key.enter(&record)?;
        let keyed = record_context(&self.key, &self.timestamps, &record, side, timers)?;
        let mut ctx = KeyedReadOnlyContext { keyed, operator_state: state };
        self.function.process_element(record, &mut ctx, &mut Collector::new(main))
    }
    #[inline]
    fn process2(
        &mut self,
        record: B,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let mut ctx = BroadcastContext { operator_state: state, side };
        self.function.process_broadcast_element(record, &mut ctx, &mut Collector::new(main))
    }
    fn on_timer(
        &mut self,
        timer: Timer,
        domain: TimeDomain,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: &InternalTimers,
    ) -> FunctionResult {
        self.key.adopt(timer.key());
        let keyed = KeyedContext::new(self.key.current(), side, Some(timers), Some(timer.time()), Some(domain))?;
        let mut ctx = KeyedReadOnlyContext { keyed, operator_state: state };
        self.function.on_timer(timer.time(), &mut ctx, &mut Collector::new(main))
    }
}

/// Keyed reduce as a keyed process function: keeps the running reduction per key in a
/// `ValueState` and emits it after every record (Flink's `KeyedStream.reduce`).
pub(crate) struct Reducer<T, F> {
    pub(crate) reduce: F,
    pub(crate) state: Option<eddy_state::ValueState<T>>,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T: Clone, F: Clone> Clone for Reducer<T, F> {
    fn clone(&self) -> Self {
        Self { reduce: self.reduce.clone(), state: self.state.clone(), _type: PhantomData }
    }
}

impl<T: eddy_state::StateValue, F> RichFunction for Reducer<T, F> {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&eddy_state::ValueStateDescriptor::new("reduce"))?);
        Ok(())
    }
}

impl<K, T, F> KeyedProcessFunction<K, T, T> for Reducer<T, F>
where
    T: eddy_state::StateValue + Sync,
    F: Fn(T, T) -> T + Clone + Send + Sync + 'static,
{
    fn process_element(
        &mut self,
        value: T,
        _ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, T>,
    ) -> FunctionResult {
        let state = self.state.as_ref().ok_or("reduce state not declared")?;
        let reduced = match state.value()? {
            Some(previous) => (self.reduce)(previous, value),
            None => value,
        };
        state.update(reduced.clone())?;
        out.collect(reduced);
        Ok(())
    }
}
