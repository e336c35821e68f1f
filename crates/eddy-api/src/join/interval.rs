//! The interval join (Flink's `KeyedStream.IntervalJoin` and `IntervalJoinOperator`): a
//! record `a` of the first keyed stream meets every record `b` of the second with the
//! same key and `a.ts + lower <= b.ts <= a.ts + upper`, in event time only.
//!
//! Each side's records wait in keyed map state by timestamp (`left-buffer`,
//! `right-buffer`). A record first joins everything of the other side's buffer within its
//! bounds, then stays in its own buffer until the watermark passes the last time a record
//! of the other side could still meet it: an event-time timer at `ts + upper` (left) or
//! `ts - lower` (right), at the record's own time if that is earlier, removes it. A timer
//! at time `t` is due for the left records of `t - upper` and the right records of
//! `t + lower` alike, so one timer serves both sides and needs no namespace. State stays
//! bounded by the rate times the interval plus the watermark's lag.
//!
//! A record behind the watermark is late: it is dropped, or goes to the side output the
//! job named for its side, and joins nothing (Flink's rule).

use crate::function::{FunctionResult, KeyedCoProcessFunction, KeyedContext, OutputTag, RichFunction, RuntimeContext};
use crate::stream::{DataStream, KeyedStream};
use crate::Data;
use eddy_runtime::Collector;
use eddy_state::{MapState, MapStateDescriptor, StateValue};
use eddy_types::Key;
use std::marker::PhantomData;

/// What a [`ProcessJoinFunction`] learns besides the pair: both timestamps, side outputs.
pub struct JoinContext<'a, 'b, K> {
    keyed: &'a mut KeyedContext<'b, K>,
    left: i64,
    right: i64,
}

impl<K> JoinContext<'_, '_, K> {
    /// The first (left) record's event time.
    pub fn left_timestamp(&self) -> i64 {
        self.left
    }

    /// The second (right) record's event time.
    pub fn right_timestamp(&self) -> i64 {
        self.right
    }

    /// The pair's event time: the later of the two (Flink's `getTimestamp`).
    pub fn timestamp(&self) -> i64 {
        self.left.max(self.right)
    }

    /// Emits to a side output.
    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        self.keyed.output(tag, value)
    }
}

impl<K: Key> JoinContext<'_, '_, K> {
    /// The pair's key.
    pub fn current_key(&self) -> &K {
        self.keyed.current_key()
    }
}

/// Flink's `ProcessJoinFunction`: called once for every pair an interval join makes.
pub trait ProcessJoinFunction<K, A, B, O>: RichFunction + Clone + Send + Sync + 'static {
    fn process_element(
        &mut self,
        left: &A,
        right: &B,
        ctx: &mut JoinContext<'_, '_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
}

/// A closure as a [`ProcessJoinFunction`]: see [`join_function`].
#[derive(Clone)]
pub struct JoinFn<F>(F);

impl<F> RichFunction for JoinFn<F> {}

/// `|left, right, ctx, out| …` as a process join function.
pub fn join_function<K, A, B, O, F>(f: F) -> JoinFn<F>
where
    F: FnMut(&A, &B, &mut JoinContext<'_, '_, K>, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
{
    JoinFn(f)
}

impl<K, A, B, O, F> ProcessJoinFunction<K, A, B, O> for JoinFn<F>
where
    F: FnMut(&A, &B, &mut JoinContext<'_, '_, K>, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
{
    fn process_element(
        &mut self,
        left: &A,
        right: &B,
        ctx: &mut JoinContext<'_, '_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        (self.0)(left, right, ctx, out);
        Ok(())
    }
}

impl<A: Data + Sync, K: Key> KeyedStream<A, K> {
    /// Joins with `other` over time (Flink's `intervalJoin`): name the interval with
    /// [`IntervalJoin::between`]. Both streams need timestamps; event time only.
    pub fn interval_join<B: Data + Sync>(&self, other: &KeyedStream<B, K>) -> IntervalJoin<A, B, K> {
        IntervalJoin { left: self.clone(), right: other.clone() }
    }
}

/// Two keyed streams to join over time.
pub struct IntervalJoin<A, B, K> {
    left: KeyedStream<A, K>,
    right: KeyedStream<B, K>,
}

impl<A: Data + Sync, B: Data + Sync, K: Key> IntervalJoin<A, B, K> {
    /// Pairs `a` with every `b` of its key with `a.ts + lower_ms <= b.ts <= a.ts +
    /// upper_ms` (milliseconds, either may be negative; `lower_ms <= upper_ms`).
    pub fn between(self, lower_ms: i64, upper_ms: i64) -> IntervalJoined<A, B, K> {
        IntervalJoined {
            left: self.left,
            right: self.right,
            lower: lower_ms,
            upper: upper_ms,
            lower_inclusive: true,
            upper_inclusive: true,
            left_late: None,
            right_late: None,
        }
    }
}

/// An interval join with its bounds (Flink's `IntervalJoined`): end it with `process`.
pub struct IntervalJoined<A, B, K> {
    left: KeyedStream<A, K>,
    right: KeyedStream<B, K>,
    lower: i64,
    upper: i64,
    lower_inclusive: bool,
    upper_inclusive: bool,
    left_late: Option<OutputTag<A>>,
    right_late: Option<OutputTag<B>>,
}

impl<A: Data + Sync, B: Data + Sync, K: Key> IntervalJoined<A, B, K> {
    /// `b.ts > a.ts + lower` instead of `>=`.
    pub fn lower_bound_exclusive(mut self) -> Self {
        self.lower_inclusive = false;
        self
    }

    /// `b.ts < a.ts + upper` instead of `<=`.
    pub fn upper_bound_exclusive(mut self) -> Self {
        self.upper_inclusive = false;
        self
    }

    /// First-input records behind the watermark go to side output `tag` of the result
    /// instead of being dropped (Flink's `sideOutputLeftLateData`).
    pub fn side_output_left_late_data(mut self, tag: &OutputTag<A>) -> Self {
        self.left_late = Some(tag.clone());
        self
    }

    /// Second-input records behind the watermark go to side output `tag` of the result
    /// (Flink's `sideOutputRightLateData`).
    pub fn side_output_right_late_data(mut self, tag: &OutputTag<B>) -> Self {
        self.right_late = Some(tag.clone());
        self
    }

    /// Calls `function` once for every pair.
    pub fn process<O: Data, F: ProcessJoinFunction<K, A, B, O>>(&self, function: F) -> DataStream<O> {
        let lower = if self.lower_inclusive { self.lower } else { self.lower.saturating_add(1) };
        let upper = if self.upper_inclusive { self.upper } else { self.upper.saturating_sub(1) };
        let mut problems = Vec::new();
        if lower > upper {
            problems.push(format!(
                "interval join: the lower bound ({} ms{}) is above the upper bound ({} ms{}), so no pair can meet",
                self.lower,
                if self.lower_inclusive { "" } else { ", exclusive" },
                self.upper,
                if self.upper_inclusive { "" } else { ", exclusive" },
            ));
        }
        for (side, has) in
            [("first", self.left.stream.timestamps.is_some()), ("second", self.right.stream.timestamps.is_some())]
        {
            if !has {
                problems.push(format!(
                    "an interval join needs event time, and its {side} input has no timestamps: call assign_timestamps_and_watermarks (or with_timestamps) before key_by"
                ));
            }
        }
        self.left.stream.env.inner.borrow_mut().problems.extend(problems);
        let operator = IntervalJoinOperator {
            function,
            lower,
            upper,
            left_late: self.left_late.clone(),
            right_late: self.right_late.clone(),
            buffers: None,
            _types: PhantomData,
        };
        self.left.connect(&self.right).co_process(operator).name("Interval Join")
    }
}

/// Records of one side waiting for the other, by timestamp.
type Buffer<T> = MapState<i64, Vec<T>>;

/// The interval join as a keyed co-process function over the two buffers.
struct IntervalJoinOperator<A, B, F> {
    function: F,
    /// Inclusive bounds, relative to the left record's time.
    lower: i64,
    upper: i64,
    left_late: Option<OutputTag<A>>,
    right_late: Option<OutputTag<B>>,
    buffers: Option<(Buffer<A>, Buffer<B>)>,
    _types: PhantomData<fn() -> (A, B)>,
}

impl<A, B, F: Clone> Clone for IntervalJoinOperator<A, B, F> {
    fn clone(&self) -> Self {
        Self {
            function: self.function.clone(),
            lower: self.lower,
            upper: self.upper,
            left_late: self.left_late.clone(),
            right_late: self.right_late.clone(),
            buffers: None,
            _types: PhantomData,
        }
    }
}

impl<A: StateValue, B: StateValue, F: RichFunction> RichFunction for IntervalJoinOperator<A, B, F> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.function.initialize_state(ctx)
    }
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let left = ctx.get_map_state(&MapStateDescriptor::new("left-buffer"))?;
        let right = ctx.get_map_state(&MapStateDescriptor::new("right-buffer"))?;
        self.buffers = Some((left, right));
        self.function.open(ctx)
    }
    fn snapshot_state(&mut self, ctx: &mut crate::function::SnapshotContext<'_>) -> FunctionResult {
        self.function.snapshot_state(ctx)
    }
    fn notify_checkpoint_complete(&mut self, checkpoint: eddy_types::CheckpointId) -> FunctionResult {
        self.function.notify_checkpoint_complete(checkpoint)
    }
    fn close(&mut self) -> FunctionResult {
        self.function.close()
    }
}

/// Adds `record` at `timestamp` to `buffer`.
fn buffer_record<T: StateValue>(buffer: &Buffer<T>, timestamp: i64, record: T) -> FunctionResult {
    let mut records = buffer.get(&timestamp)?.unwrap_or_default();
    records.push(record);
    buffer.put(timestamp, records)?;
    Ok(())
}

/// The record's event time, and whether it is behind the watermark.
fn timestamp_of<K>(ctx: &mut KeyedContext<'_, K>) -> Result<(i64, bool), crate::FunctionError> {
    let timestamp = ctx.timestamp().ok_or("an interval join's input has no timestamps (bug: checked when built)")?;
    Ok((timestamp, timestamp < ctx.timer_service().current_watermark()))
}

impl<K, A, B, O, F> KeyedCoProcessFunction<K, A, B, O> for IntervalJoinOperator<A, B, F>
where
    K: Key,
    A: StateValue,
    B: StateValue,
    F: ProcessJoinFunction<K, A, B, O>,
{
    fn process_element1(
        &mut self,
        value: A,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        let (timestamp, late) = timestamp_of(ctx)?;
        if late {
            if let Some(tag) = &self.left_late {
                ctx.output(tag, value);
            }
            return Ok(());
        }
        let (left, right) = self.buffers.as_ref().ok_or("interval join used before open (bug)")?;
        buffer_record(left, timestamp, value.clone())?;
        let (from, to) = (timestamp.saturating_add(self.lower), timestamp.saturating_add(self.upper));
        for (right_time, records) in right.iter()? {
            if right_time < from || right_time > to {
                continue;
            }
            let mut join = JoinContext { keyed: ctx, left: timestamp, right: right_time };
            for record in &records {
                self.function.process_element(&value, record, &mut join, out)?;
            }
        }
        let cleanup = if self.upper > 0 { timestamp.saturating_add(self.upper) } else { timestamp };
        ctx.timer_service().register_event_time_timer(cleanup)?;
        Ok(())
    }

    fn process_element2(
        &mut self,
        value: B,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        let (timestamp, late) = timestamp_of(ctx)?;
        if late {
            if let Some(tag) = &self.right_late {
                ctx.output(tag, value);
            }
            return Ok(());
        }
        let (left, right) = self.buffers.as_ref().ok_or("interval join used before open (bug)")?;
        buffer_record(right, timestamp, value.clone())?;
        // The left records this one falls in the interval of.
        let (from, to) = (timestamp.saturating_sub(self.upper), timestamp.saturating_sub(self.lower));
        for (left_time, records) in left.iter()? {
            if left_time < from || left_time > to {
                continue;
            }
            let mut join = JoinContext { keyed: ctx, left: left_time, right: timestamp };
            for record in &records {
                self.function.process_element(record, &value, &mut join, out)?;
            }
        }
        let cleanup = if self.lower < 0 { timestamp.saturating_sub(self.lower) } else { timestamp };
        ctx.timer_service().register_event_time_timer(cleanup)?;
        Ok(())
    }

    fn on_timer(&mut self, timestamp: i64, _: &mut KeyedContext<'_, K>, _: &mut Collector<'_, O>) -> FunctionResult {
        let (left, right) = self.buffers.as_ref().ok_or("interval join used before open (bug)")?;
        // The inverses of the cleanup times set above: whichever side registered this
        // timer, both entries are due now.
        left.remove(&(if self.upper > 0 { timestamp.saturating_sub(self.upper) } else { timestamp }))?;
        right.remove(&(if self.lower < 0 { timestamp.saturating_add(self.lower) } else { timestamp }))?;
        Ok(())
    }
}
