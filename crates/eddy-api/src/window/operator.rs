//! The window operator, as Flink's `WindowOperator` (and `EvictingWindowOperator`) does
//! it, step for step, so that what fires, what is late and what is dropped is what Flink
//! gives on the same input:
//!
//! - A record goes into each of its windows that is not late (a window is late once the
//!   watermark passed its end plus the allowed lateness: its state is gone). A record all
//!   of whose windows are late is late itself if its timestamp plus the allowed lateness
//!   is behind the watermark: it goes to the late side output, or is dropped.
//! - The trigger is asked after the record is added; a firing hands the window's
//!   contents to the window function. Within the allowed lateness a window fires again,
//!   with all its contents, for every record that still comes.
//! - Each window gets a cleanup timer at its end plus the allowed lateness; when it fires
//!   the window's contents, trigger state and timers go.
//! - Session windows merge through the key's [`MergingWindowSet`].
//!
//! Contents are keyed state in the window's namespace: a [`ValueState`] of the
//! accumulator for incremental windows (`reduce`, `aggregate`), a [`ListState`] of the
//! elements and their timestamps for `process` and evicting windows.
//!
//! Except, on the heap backend, for windows that do not merge, have no evictor and are
//! fired by the time trigger of their domain (`EventTimeTrigger` without allowed lateness,
//! `ProcessingTimeTrigger`): their trigger and cleanup are one and the same moment, the
//! window's end, so they wait without timers in [`OrderedWindows`] and fire from there. A
//! snapshot sees them as keyed state and timers, written in just for it.

use super::assigner::WindowAssigner;
use super::evictor::Evictor;
use super::function::{ProcessWindowFunction, WindowContext};
use super::merging::{MergingState, MergingWindowSet};
use super::ordered::{key_hash, OrderedWindows};
use super::trigger::{EventTimeTrigger, ProcessingTimeTrigger, Trigger, TriggerContext};
use super::Window;
use crate::function::{FunctionResult, OutputTag, RichFunction, SideOutputs};
use crate::key::KeyScope;
use crate::operator::one_input::OneInputLogic;
use crate::operator::timers::{InternalTimers, TimeDomain};
use crate::time::TimestampFn;
use eddy_runtime::task::{OperatorInfo, TaskCounters};
use eddy_runtime::{Collector, Output};
use eddy_state::keyed::{with_backend, Timer, HEAP_BACKEND};
use eddy_state::{AggregateFunction, ListState, ListStateDescriptor, StateError, ValueState, ValueStateDescriptor};
use eddy_types::{assign_to_key_group, decode_whole_key, Key, KeyGroupRange, KeyHash, MaxParallelism};
use std::marker::PhantomData;
use std::sync::Arc;

/// Makes `window` (empty bytes: none) the namespace of the current key's state.
pub(crate) fn enter_namespace<W: Window>(scratch: &mut Vec<u8>, window: Option<&W>) -> Result<(), StateError> {
    scratch.clear();
    if let Some(window) = window {
        window.encode(scratch);
    }
    set_namespace(scratch)
}

/// Makes the encoded `namespace` current (empty: the key's own state).
pub(crate) fn set_namespace(namespace: &[u8]) -> Result<(), StateError> {
    with_backend("<window namespace>", |backend| {
        backend.set_current_namespace(namespace);
        Ok(())
    })
}

/// A window's contents in keyed state (in the current namespace).
pub(crate) trait WindowContents<T, W>: Clone + Send + Sync + 'static {
    /// What the window function gets per element.
    type Out;
    /// What moves when windows merge.
    type Raw;
    fn add(&mut self, value: T, timestamp: i64) -> FunctionResult;
    /// Calls `f` with the contents, unless the window has none.
    fn emit(
        &mut self,
        window: &W,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = Self::Out>) -> FunctionResult,
    ) -> FunctionResult;
    fn clear(&mut self) -> FunctionResult;
    /// Removes and returns the contents (a merged-away state window).
    fn take(&mut self) -> FunctionResult<Option<Self::Raw>>;
    /// [`WindowContents::emit`], then [`WindowContents::clear`]: a window that fires as it
    /// is cleaned up (its end, without allowed lateness).
    fn emit_and_clear(
        &mut self,
        window: &W,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = Self::Out>) -> FunctionResult,
    ) -> FunctionResult {
        self.emit(window, f)?;
        self.clear()
    }
    /// Merges contents taken from another window into this one's.
    fn merge(&mut self, raw: Self::Raw) -> FunctionResult;
    /// What [`OrderedWindows`] holds per key and window for these contents.
    type Held: 'static;
    /// Whether these contents can be held outside keyed state, in [`OrderedWindows`]
    /// (not with an evictor: it works on the state as it fires).
    fn can_hold(&self) -> bool;
    /// Adds `value` to what is held, in place; `None`: a key new in the window, whose
    /// contents are returned.
    fn hold(&self, held: Option<&mut Self::Held>, value: T, timestamp: i64) -> Option<Self::Held>;
    /// Calls `f` with contents held.
    fn emit_held(
        &self,
        held: Self::Held,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = Self::Out>) -> FunctionResult,
    ) -> FunctionResult;
    /// Writes contents held as the state of the current key in the current namespace, as
    /// [`WindowContents::add`] would have left it.
    fn store_held(&mut self, held: &Self::Held) -> FunctionResult;
}

/// Incremental contents: one accumulator of an [`AggregateFunction`].
pub(crate) struct AggregateContents<F: AggregateFunction> {
    function: Arc<F>,
    state: Option<ValueState<F::Acc>>,
}

impl<F: AggregateFunction> Clone for AggregateContents<F> {
    fn clone(&self) -> Self {
        // A copy for another subtask declares its state there.
        Self { function: self.function.clone(), state: None }
    }
}

impl<F: AggregateFunction> AggregateContents<F> {
    pub(crate) fn new(function: F) -> Self {
        Self { function: Arc::new(function), state: None }
    }
}

impl<F> AggregateContents<F>
where
    F: AggregateFunction,
    F::Acc: eddy_state::StateValue,
{
    fn state(&mut self) -> Result<&ValueState<F::Acc>, StateError> {
        if self.state.is_none() {
            self.state = Some(ValueState::declare(&ValueStateDescriptor::new("window-contents"))?);
        }
        Ok(self.state.as_ref().expect("declared above"))
    }
}

impl<T, W, F> WindowContents<T, W> for AggregateContents<F>
where
    F: AggregateFunction<In = T>,
    F::Acc: eddy_state::StateValue,
    F::Out: 'static,
{
    type Out = F::Out;
    type Raw = F::Acc;

    #[inline]
    fn add(&mut self, value: T, _timestamp: i64) -> FunctionResult {
        let function = self.function.clone();
        let state = self.state()?;
        state.update_with(
            || function.create_accumulator(),
            |acc| {
                let previous = std::mem::replace(acc, function.create_accumulator());
                *acc = function.add(value, previous);
            },
        )?;
        Ok(())
    }

    fn emit(
        &mut self,
        _window: &W,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = F::Out>) -> FunctionResult,
    ) -> FunctionResult {
        let function = self.function.clone();
        match self.state()?.value()? {
            Some(acc) => f(&mut std::iter::once(function.get_result(&acc))),
            None => Ok(()),
        }
    }

    fn clear(&mut self) -> FunctionResult {
        Ok(self.state()?.clear()?)
    }

    fn take(&mut self) -> FunctionResult<Option<F::Acc>> {
        Ok(self.state()?.take()?)
    }

    fn emit_and_clear(
        &mut self,
        _window: &W,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = F::Out>) -> FunctionResult,
    ) -> FunctionResult {
        let function = self.function.clone();
        match self.state()?.take()? {
            Some(acc) => f(&mut std::iter::once(function.get_result(&acc))),
            None => Ok(()),
        }
    }

    fn merge(&mut self, raw: F::Acc) -> FunctionResult {
        let function = self.function.clone();
        let state = self.state()?;
        let merged = match state.value()? {
            Some(acc) => function.merge(acc, raw),
            None => raw,
        };
        Ok(state.update(merged)?)
    }

    type Held = F::Acc;

    fn can_hold(&self) -> bool {
        true
    }

    #[inline]
    fn hold(&self, held: Option<&mut F::Acc>, value: T, _timestamp: i64) -> Option<F::Acc> {
        let function = &self.function;
        match held {
            Some(acc) => {
                let previous = std::mem::replace(acc, function.create_accumulator());
                *acc = function.add(value, previous);
                None
            }
            None => Some(function.add(value, function.create_accumulator())),
        }
    }

    fn emit_held(
        &self,
        held: F::Acc,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = F::Out>) -> FunctionResult,
    ) -> FunctionResult {
        f(&mut std::iter::once(self.function.get_result(&held)))
    }

    fn store_held(&mut self, held: &F::Acc) -> FunctionResult {
        Ok(self.state()?.update(held.clone())?)
    }
}

/// All elements with their timestamps, thinned by an optional evictor when the window
/// fires.
pub(crate) struct ListContents<T, W> {
    evictor: Option<Arc<dyn Evictor<T, W>>>,
    state: Option<ListState<(i64, T)>>,
}

impl<T, W> Clone for ListContents<T, W> {
    fn clone(&self) -> Self {
        Self { evictor: self.evictor.clone(), state: None }
    }
}

impl<T: eddy_state::StateValue, W> ListContents<T, W> {
    pub(crate) fn new(evictor: Option<Arc<dyn Evictor<T, W>>>) -> Self {
        Self { evictor, state: None }
    }

    fn state(&mut self) -> Result<&ListState<(i64, T)>, StateError> {
        if self.state.is_none() {
            self.state = Some(ListState::declare(&ListStateDescriptor::new("window-contents"))?);
        }
        Ok(self.state.as_ref().expect("declared above"))
    }
}

impl<T: eddy_state::StateValue, W: Window> WindowContents<T, W> for ListContents<T, W> {
    type Out = T;
    type Raw = Vec<(i64, T)>;

    fn add(&mut self, value: T, timestamp: i64) -> FunctionResult {
        Ok(self.state()?.add((timestamp, value))?)
    }

    fn emit(&mut self, window: &W, f: &mut dyn FnMut(&mut dyn Iterator<Item = T>) -> FunctionResult) -> FunctionResult {
        let evictor = self.evictor.clone();
        let state = self.state()?;
        let mut elements = state.get()?;
        if elements.is_empty() {
            return Ok(());
        }
        match evictor {
            None => f(&mut elements.into_iter().map(|(_, value)| value)),
            Some(evictor) => {
                let before = elements.len();
                evictor.evict_before(&mut elements, window);
                f(&mut elements.iter().map(|(_, value)| value.clone()))?;
                evictor.evict_after(&mut elements, window);
                if elements.len() != before {
                    state.update(elements)?;
                }
                Ok(())
            }
        }
    }

    fn clear(&mut self) -> FunctionResult {
        Ok(self.state()?.clear()?)
    }

    fn take(&mut self) -> FunctionResult<Option<Vec<(i64, T)>>> {
        let state = self.state()?;
        let elements = state.get()?;
        state.clear()?;
        Ok((!elements.is_empty()).then_some(elements))
    }

    fn merge(&mut self, raw: Vec<(i64, T)>) -> FunctionResult {
        Ok(self.state()?.add_all(raw)?)
    }

    type Held = Vec<(i64, T)>;

    fn can_hold(&self) -> bool {
        self.evictor.is_none()
    }

    #[inline]
    fn hold(&self, held: Option<&mut Vec<(i64, T)>>, value: T, timestamp: i64) -> Option<Vec<(i64, T)>> {
        match held {
            Some(elements) => {
                elements.push((timestamp, value));
                None
            }
            None => Some(vec![(timestamp, value)]),
        }
    }

    fn emit_held(
        &self,
        held: Vec<(i64, T)>,
        f: &mut dyn FnMut(&mut dyn Iterator<Item = T>) -> FunctionResult,
    ) -> FunctionResult {
        f(&mut held.into_iter().map(|(_, value)| value))
    }

    fn store_held(&mut self, held: &Vec<(i64, T)>) -> FunctionResult {
        Ok(self.state()?.add_all(held.clone())?)
    }
}

/// How a windowed stream is set up (the `WindowedStream` builder's settings).
pub(crate) struct WindowSpec<T, A, Tr> {
    pub(crate) assigner: A,
    pub(crate) trigger: Tr,
    pub(crate) allowed_lateness: i64,
    pub(crate) late_tag: Option<OutputTag<T>>,
    pub(crate) timestamps: Option<TimestampFn<T>>,
    /// The assigner's own trigger (no `trigger` call): sliding windows may share panes.
    pub(crate) default_trigger: bool,
}

impl<T, A: Clone, Tr: Clone> Clone for WindowSpec<T, A, Tr> {
    fn clone(&self) -> Self {
        Self {
            assigner: self.assigner.clone(),
            trigger: self.trigger.clone(),
            allowed_lateness: self.allowed_lateness,
            late_tag: self.late_tag.clone(),
            timestamps: self.timestamps.clone(),
            default_trigger: self.default_trigger,
        }
    }
}

/// The logic of the window operator.
pub(crate) struct WindowLogic<T, K, O, A: WindowAssigner, Tr, C: WindowContents<T, A::W>, F> {
    pub(crate) key: KeyScope<T, K>,
    pub(crate) spec: WindowSpec<T, A, Tr>,
    pub(crate) contents: C,
    pub(crate) function: F,
    merging: Option<MergingState<A::W>>,
    /// Reused per record.
    windows: Vec<A::W>,
    namespace: Vec<u8>,
    /// Where late records dropped for want of a side output are counted (Flink's
    /// `numLateRecordsDropped`): the subtask's counters, once the operator opened.
    late_dropped: Option<Arc<TaskCounters>>,
    /// Windows that fire at their end without a timer per key (see [`OrderedWindows`]);
    /// `None`: every window's contents are keyed state, fired by timers.
    ordered: Option<OrderedWindows<A::W, C::Held>>,
    /// Windows that fire at this time or before go through keyed state and timers even
    /// so: restored windows, which came back as keyed state with their timers.
    restored_until: i64,
    /// The subtask's key groups (of its max parallelism): a record of another key group is
    /// a routing bug, refused at once as keyed state refuses it.
    key_groups: Option<(KeyGroupRange, MaxParallelism)>,
    _types: PhantomData<fn() -> O>,
}

impl<T, K, O, A: WindowAssigner, Tr: Clone, C: WindowContents<T, A::W>, F: Clone> Clone
    for WindowLogic<T, K, O, A, Tr, C, F>
{
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            spec: self.spec.clone(),
            contents: self.contents.clone(),
            function: self.function.clone(),
            merging: None,
            windows: Vec::new(),
            namespace: Vec::new(),
            late_dropped: None,
            ordered: None,
            restored_until: i64::MIN,
            key_groups: None,
            _types: PhantomData,
        }
    }
}

impl<T, K, O, A: WindowAssigner, Tr, C: WindowContents<T, A::W>, F> WindowLogic<T, K, O, A, Tr, C, F> {
    pub(crate) fn new(key: KeyScope<T, K>, spec: WindowSpec<T, A, Tr>, contents: C, function: F) -> Self {
        Self {
            key,
            spec,
            contents,
            function,
            merging: None,
            windows: Vec::new(),
            namespace: Vec::new(),
            late_dropped: None,
            ordered: None,
            restored_until: i64::MIN,
            key_groups: None,
            _types: PhantomData,
        }
    }
}

pub(crate) const NO_TIMERS: &str = "the window operator runs without its timer service (bug)";
const NO_ORDERED: &str = "the window operator has no ordered windows (bug)";

/// Timestamps this far from zero (about 146,000 years) leave room for window arithmetic
/// without overflow.
const TIMESTAMP_LIMIT: i64 = 1 << 62;

/// A record's timestamp, refused with a clear error where window arithmetic would
/// overflow (Flink refuses `Long.MIN_VALUE`, its "no timestamp").
pub(crate) fn check_timestamp(timestamp: i64) -> FunctionResult<i64> {
    if (-TIMESTAMP_LIMIT..=TIMESTAMP_LIMIT).contains(&timestamp) {
        Ok(timestamp)
    } else {
        Err(format!("record timestamp {timestamp} is out of range for windows (|t| <= 2^62 ms)").into())
    }
}

impl<T, K, O, A, Tr, C, F> WindowLogic<T, K, O, A, Tr, C, F>
where
    T: Clone + 'static,
    K: Key,
    O: 'static,
    A: WindowAssigner,
    Tr: Trigger<T, A::W>,
    C: WindowContents<T, A::W>,
    F: ProcessWindowFunction<C::Out, O, K, A::W>,
{
    /// When `window`'s state goes: its end plus the allowed lateness in event time (the
    /// end of time if that overflows), its end in processing time.
    fn cleanup_time(&self, window: &A::W) -> i64 {
        if self.spec.assigner.is_event_time() {
            window.max_timestamp().checked_add(self.spec.allowed_lateness).unwrap_or(i64::MAX)
        } else {
            window.max_timestamp()
        }
    }

    fn is_window_late(&self, window: &A::W, watermark: i64) -> bool {
        self.spec.assigner.is_event_time() && self.cleanup_time(window) <= watermark
    }

    fn is_element_late(&self, timestamp: i64, watermark: i64) -> bool {
        self.spec.assigner.is_event_time() && timestamp.saturating_add(self.spec.allowed_lateness) <= watermark
    }

    fn cleanup_domain(&self) -> TimeDomain {
        if self.spec.assigner.is_event_time() {
            TimeDomain::EventTime
        } else {
            TimeDomain::ProcessingTime
        }
    }

    /// The cleanup timer of `window` (whose namespace is current).
    fn register_cleanup_timer(&self, window: &A::W, timers: &InternalTimers) -> FunctionResult {
        let time = self.cleanup_time(window);
        if time != i64::MAX {
            timers.register(self.cleanup_domain(), time)?;
        }
        Ok(())
    }

    fn delete_cleanup_timer(&self, window: &A::W, timers: &InternalTimers) -> FunctionResult {
        let time = self.cleanup_time(window);
        if time != i64::MAX {
            timers.delete(self.cleanup_domain(), time)?;
        }
        Ok(())
    }

    fn merging_state(&mut self) -> Result<MergingState<A::W>, StateError> {
        if self.merging.is_none() {
            self.merging = Some(ValueState::declare(&ValueStateDescriptor::new("merging-window-set"))?);
        }
        Ok(self.merging.clone().expect("declared above"))
    }

    /// Hands the contents of `window` (its state window's namespace current) to the
    /// window function.
    fn emit(
        &mut self,
        window: &A::W,
        state_window: &A::W,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult {
        self.emit_then(window, state_window, main, side, timers, false)
    }

    /// [`Self::emit`], and clears the contents too when `clear`. The window function runs
    /// in the key's own namespace, so that keyed state it declared is the key's, as in
    /// Flink; the state window's namespace is current again afterwards.
    fn emit_then(
        &mut self,
        window: &A::W,
        state_window: &A::W,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
        clear: bool,
    ) -> FunctionResult {
        let current = self.key.current();
        let key = current.get();
        let function = &mut self.function;
        if !function.uses_keyed_state() {
            let mut call = |elements: &mut dyn Iterator<Item = C::Out>| {
                let mut ctx = WindowContext { window, timers, side: &mut *side };
                function.process(key, &mut ctx, elements, &mut Collector::new(&mut *main))
            };
            return if clear {
                self.contents.emit_and_clear(window, &mut call)
            } else {
                self.contents.emit(window, &mut call)
            };
        }
        let mut state_namespace = std::mem::take(&mut self.namespace);
        state_namespace.clear();
        state_window.encode(&mut state_namespace);
        let mut call = |elements: &mut dyn Iterator<Item = C::Out>| {
            set_namespace(&[])?;
            let mut ctx = WindowContext { window, timers, side: &mut *side };
            let result = function.process(key, &mut ctx, elements, &mut Collector::new(&mut *main));
            set_namespace(&state_namespace)?;
            result
        };
        let emitted =
            if clear { self.contents.emit_and_clear(window, &mut call) } else { self.contents.emit(window, &mut call) };
        self.namespace = state_namespace;
        emitted
    }

    /// Non-merging windows; true if every window was late.
    fn process_windows(
        &mut self,
        record: &T,
        timestamp: i64,
        windows: &[A::W],
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult<bool> {
        self.key.enter(record)?;
        let watermark = timers.watermark().0;
        let mut skipped = true;
        for window in windows {
            if self.is_window_late(window, watermark) {
                continue;
            }
            skipped = false;
            self.add_to_window(record, timestamp, window, main, side, timers)?;
        }
        Ok(skipped)
    }

    /// Adds `record` to the contents of `window` (not late) in keyed state, asks the
    /// trigger, and sets the cleanup timer. The record's key is current.
    fn add_to_window(
        &mut self,
        record: &T,
        timestamp: i64,
        window: &A::W,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult {
        enter_namespace(&mut self.namespace, Some(window))?;
        self.contents.add(record.clone(), timestamp)?;
        let result = self.spec.trigger.on_element(record, timestamp, window, &mut TriggerContext { timers })?;
        if result.is_fire() {
            self.emit(window, window, main, side, timers)?;
        }
        if result.is_purge() {
            self.contents.clear()?;
        }
        self.register_cleanup_timer(window, timers)
    }

    /// Non-merging windows of the time trigger of their domain, without allowed lateness:
    /// the record goes to the [`OrderedWindows`] (restored windows still go through keyed
    /// state).
    /// True if every window was late.
    fn process_ordered(
        &mut self,
        record: &T,
        timestamp: i64,
        windows: &[A::W],
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult<bool> {
        let hash = self.key.encode(record);
        if let Some((range, max_parallelism)) = self.key_groups {
            let key_group = assign_to_key_group(hash, max_parallelism);
            if !range.contains(key_group) {
                return Err(format!(
                    "a record of key group {} reached the window subtask of key groups {range:?} (a routing bug)",
                    key_group.0
                )
                .into());
            }
        }
        let watermark = timers.watermark().0;
        let mut skipped = true;
        let mut entered = false;
        for window in windows {
            if self.is_window_late(window, watermark) {
                continue;
            }
            skipped = false;
            // Without allowed lateness (or in processing time) the window fires and goes at
            // the same time, the end the default trigger fires it at.
            let fires_at = window.max_timestamp();
            if fires_at <= self.restored_until {
                if !entered {
                    self.key.enter_encoded(hash)?;
                    entered = true;
                }
                self.add_to_window(record, timestamp, window, main, side, timers)?;
                continue;
            }
            let (ordered, contents) = (self.ordered.as_mut().ok_or(NO_ORDERED)?, &self.contents);
            let opened = ordered.update(window, fires_at, self.key.encoded(), hash.0, |held| {
                contents.hold(held, record.clone(), timestamp)
            });
            if opened && !self.spec.assigner.is_event_time() {
                timers.request_processing_time(fires_at);
            }
        }
        Ok(skipped)
    }

    /// Fires the ordered windows whose end time passed (`watermark`: the watermark, or
    /// processing time), in order, each key's contents to the window function, and drops
    /// them.
    fn fire_ordered(
        &mut self,
        watermark: i64,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult {
        let Some(ordered) = self.ordered.as_mut() else { return Ok(()) };
        if ordered.next_firing().is_none_or(|time| time > watermark) {
            return Ok(());
        }
        let uses_keyed_state = self.function.uses_keyed_state();
        while let Some((window, mut keys)) = self.ordered.as_mut().and_then(|o| o.pop_due(watermark)) {
            for slot in keys.slots.drain(..) {
                let bytes = slot.key.as_slice();
                let key: K = decode_whole_key(bytes)
                    .ok_or_else(|| format!("a window's key does not decode: {bytes:?} (internal error)"))?;
                if uses_keyed_state {
                    // Its own keyed state is the key's, as when a timer fires it.
                    with_backend("<current key>", |backend| {
                        backend.set_current_key(bytes, KeyHash(key_hash(bytes))).map(|_| ())
                    })?;
                }
                let function = &mut self.function;
                let side = &mut *side;
                let main = &mut *main;
                self.contents.emit_held(slot.held, &mut |elements| {
                    let mut ctx = WindowContext { window: &window, timers, side: &mut *side };
                    function.process(&key, &mut ctx, elements, &mut Collector::new(&mut *main))
                })?;
            }
            if let Some(ordered) = self.ordered.as_mut() {
                ordered.recycle(keys);
            }
        }
        Ok(())
    }

    /// Writes the ordered windows into keyed state and timers (`store`), as the timer
    /// path keeps them, for a snapshot; or takes them out again (`!store`).
    fn ordered_into_keyed_state(&mut self, timers: Option<&InternalTimers>, store: bool) -> FunctionResult {
        let Some(ordered) = self.ordered.as_ref() else { return Ok(()) };
        if ordered.is_empty() {
            return Ok(());
        }
        let timers = timers.ok_or(NO_TIMERS)?;
        let domain = self.cleanup_domain();
        let mut namespace = std::mem::take(&mut self.namespace);
        for (window, fires_at, keys) in ordered.iter() {
            namespace.clear();
            window.encode(&mut namespace);
            for slot in keys {
                let bytes = slot.key.as_slice();
                with_backend("<window snapshot>", |backend| {
                    backend.set_current_key(bytes, KeyHash(key_hash(bytes)))?;
                    backend.set_current_namespace(&namespace);
                    Ok(())
                })?;
                if store {
                    self.contents.store_held(&slot.held)?;
                    timers.register(domain, fires_at)?;
                } else {
                    self.contents.clear()?;
                    timers.delete(domain, fires_at)?;
                }
            }
        }
        self.namespace = namespace;
        Ok(())
    }

    /// Session windows; true if the record's window was late.
    fn process_merging(
        &mut self,
        record: &T,
        timestamp: i64,
        windows: &[A::W],
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult<bool> {
        let watermark = timers.watermark().0;
        let merging = self.merging_state()?;
        enter_namespace::<A::W>(&mut self.namespace, None)?;
        let mut set = MergingWindowSet::load(&merging)?;
        let mut skipped = true;
        for window in windows {
            let actual = {
                let this = &mut *self;
                set.add_window(window.clone(), &this.spec.assigner.clone(), &mut |result, merged, target, sources| {
                    if this.spec.assigner.is_event_time()
                        && result.max_timestamp().saturating_add(this.spec.allowed_lateness) <= watermark
                    {
                        return Err(format!(
                            "the end of an event-time window cannot move behind the current watermark by merging \
                                (watermark {watermark}, window {result:?})"
                        )
                        .into());
                    }
                    if !this.spec.assigner.is_event_time() && result.max_timestamp() <= timers.processing_time() {
                        return Err(format!(
                            "the end of a processing-time window cannot move behind the current processing time by \
                                merging (window {result:?})"
                        )
                        .into());
                    }
                    enter_namespace(&mut this.namespace, Some(result))?;
                    this.spec.trigger.on_merge(result, &mut TriggerContext { timers })?;
                    for window in merged {
                        enter_namespace(&mut this.namespace, Some(window))?;
                        this.spec.trigger.clear(window, &mut TriggerContext { timers })?;
                        this.delete_cleanup_timer(window, timers)?;
                    }
                    let mut moved = Vec::with_capacity(sources.len());
                    for source in sources {
                        enter_namespace(&mut this.namespace, Some(source))?;
                        moved.extend(this.contents.take()?);
                    }
                    enter_namespace(&mut this.namespace, Some(target))?;
                    for raw in moved {
                        this.contents.merge(raw)?;
                    }
                    Ok(())
                })?
            };
            if self.is_window_late(&actual, watermark) {
                set.retire(&actual)?;
                continue;
            }
            skipped = false;
            let state_window = set.state_window(&actual).ok_or_else(|| {
                format!("window {actual:?} has no state window in the merging window set (internal error)")
            })?;
            enter_namespace(&mut self.namespace, Some(&state_window))?;
            self.contents.add(record.clone(), timestamp)?;
            enter_namespace(&mut self.namespace, Some(&actual))?;
            let result = self.spec.trigger.on_element(record, timestamp, &actual, &mut TriggerContext { timers })?;
            if result.is_fire() || result.is_purge() {
                enter_namespace(&mut self.namespace, Some(&state_window))?;
                if result.is_fire() {
                    self.emit(&actual, &state_window, main, side, timers)?;
                }
                if result.is_purge() {
                    self.contents.clear()?;
                }
                enter_namespace(&mut self.namespace, Some(&actual))?;
            }
            self.register_cleanup_timer(&actual, timers)?;
        }
        enter_namespace::<A::W>(&mut self.namespace, None)?;
        set.persist(&merging)?;
        Ok(skipped)
    }
}

impl<T, K, O, A, Tr, C, F> OneInputLogic<T, O> for WindowLogic<T, K, O, A, Tr, C, F>
where
    T: Clone + 'static,
    K: Key,
    O: 'static,
    A: WindowAssigner,
    Tr: Trigger<T, A::W>,
    C: WindowContents<T, A::W>,
    F: ProcessWindowFunction<C::Out, O, K, A::W>,
{
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.function
    }

    fn attach(&mut self, info: &OperatorInfo, timers: Option<&InternalTimers>) -> FunctionResult {
        self.late_dropped = Some(info.shared.counters());
        let assigner = &self.spec.assigner;
        // Fired by the time trigger of the assigner's domain at the end, gone at the same
        // time: nothing a timer per key and window would add. On the heap only (see
        // `ordered.rs`).
        let trigger = std::any::TypeId::of::<Tr>();
        let time_trigger = if assigner.is_event_time() {
            trigger == std::any::TypeId::of::<EventTimeTrigger>() && self.spec.allowed_lateness == 0
        } else {
            trigger == std::any::TypeId::of::<ProcessingTimeTrigger>()
        };
        let ordered = time_trigger
            && !assigner.is_merging()
            && self.contents.can_hold()
            && info.state_backend.name() == HEAP_BACKEND;
        if ordered {
            let timers = timers.ok_or(NO_TIMERS)?;
            self.restored_until = timers.last_time(self.cleanup_domain())?.unwrap_or(i64::MIN);
            self.key_groups = Some((info.key_group_range, info.max_parallelism));
            self.ordered = Some(OrderedWindows::new());
        }
        Ok(())
    }

    fn on_time(
        &mut self,
        domain: TimeDomain,
        time: i64,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        if self.ordered.is_none() || domain != self.cleanup_domain() {
            return Ok(());
        }
        let timers = timers.ok_or(NO_TIMERS)?;
        self.fire_ordered(time, main, side, timers)?;
        if domain == TimeDomain::ProcessingTime {
            // Asked for again after every call (see `TaskShared::take_due_processing_time`).
            if let Some(next) = self.ordered.as_ref().and_then(|o| o.next_firing()) {
                timers.request_processing_time(next);
            }
        }
        Ok(())
    }

    fn before_snapshot(&mut self, timers: Option<&InternalTimers>) -> FunctionResult {
        self.ordered_into_keyed_state(timers, true)
    }

    fn after_snapshot(&mut self, timers: Option<&InternalTimers>) -> FunctionResult {
        self.ordered_into_keyed_state(timers, false)
    }

    fn process(
        &mut self,
        record: T,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let timers = timers.ok_or(NO_TIMERS)?;
        // The record's own timestamp if the stream has them (triggers and evictors see it,
        // as in Flink, even in processing-time or global windows); processing-time
        // assigners place the record by the processing time.
        let timestamp = match &self.spec.timestamps {
            Some(timestamps) => check_timestamp(timestamps(&record))?,
            None => timers.processing_time(),
        };
        let placed_at = if self.spec.assigner.is_event_time() { timestamp } else { timers.processing_time() };
        let mut windows = std::mem::take(&mut self.windows);
        windows.clear();
        self.spec.assigner.assign_windows(placed_at, &mut windows);
        let skipped = if self.ordered.is_some() {
            self.process_ordered(&record, timestamp, &windows, main, side, timers)
        } else if self.spec.assigner.is_merging() {
            self.key
                .enter(&record)
                .map_err(Into::into)
                .and_then(|()| self.process_merging(&record, timestamp, &windows, main, side, timers))
        } else {
            self.process_windows(&record, timestamp, &windows, main, side, timers)
        };
        self.windows = windows;
        if skipped? && self.is_element_late(timestamp, timers.watermark().0) {
            match &self.spec.late_tag {
                Some(tag) => side.emit(tag, record),
                None => {
                    if let Some(counters) = &self.late_dropped {
                        counters.late_record_dropped();
                    }
                }
            }
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        timer: Timer,
        domain: TimeDomain,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: &InternalTimers,
    ) -> FunctionResult {
        let window = A::W::decode(timer.namespace()).ok_or_else(|| {
            format!("a window timer's namespace does not decode as a window: {:?}", timer.namespace())
        })?;
        self.key.adopt(timer.key());
        let time = timer.time();
        let (mut set, state_window) = if self.spec.assigner.is_merging() {
            let merging = self.merging_state()?;
            enter_namespace::<A::W>(&mut self.namespace, None)?;
            let set = MergingWindowSet::load(&merging)?;
            match set.state_window(&window) {
                // A timer of a window merged away or cleaned up: nothing left to do.
                None => return Ok(()),
                Some(state_window) => (Some((set, merging)), state_window),
            }
        } else {
            (None, window.clone())
        };
        // The timer made its window's namespace current, unless loading a session's
        // merging set left the key's own; a session's contents may be in another
        // window's namespace (its state window).
        let moved = self.spec.assigner.is_merging();
        if moved {
            enter_namespace(&mut self.namespace, Some(&window))?;
        }
        let mut ctx = TriggerContext { timers };
        let result = match domain {
            TimeDomain::EventTime => self.spec.trigger.on_event_time(time, &window, &mut ctx)?,
            TimeDomain::ProcessingTime => self.spec.trigger.on_processing_time(time, &window, &mut ctx)?,
        };
        let cleanup = domain == self.cleanup_domain() && time == self.cleanup_time(&window);
        if moved {
            enter_namespace(&mut self.namespace, Some(&state_window))?;
        }
        if result.is_fire() {
            // Firing as it is cleaned up: read and clear the contents at once.
            self.emit_then(&window, &state_window, main, side, timers, cleanup)?;
        }
        if result.is_purge() {
            self.contents.clear()?;
        }
        if cleanup {
            // Everything of the window goes: contents, trigger state and timers.
            if !result.is_fire() {
                self.contents.clear()?;
            }
            if moved {
                enter_namespace(&mut self.namespace, Some(&window))?;
            }
            self.spec.trigger.clear(&window, &mut TriggerContext { timers })?;
            if let Some((set, _)) = &mut set {
                set.retire(&window)?;
            }
        }
        if let Some((set, merging)) = &set {
            enter_namespace::<A::W>(&mut self.namespace, None)?;
            set.persist(merging)?;
        }
        Ok(())
    }
}
