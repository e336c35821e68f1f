//! The interval join (Flink's `KeyedStream.IntervalJoin` and `IntervalJoinOperator`): a
//! record `a` of the first keyed stream meets every record `b` of the second with the
//! same key and `a.ts + lower <= b.ts <= a.ts + upper`, in event time only.
//!
//! Each side's records wait in keyed map state by timestamp (`left-buffer`,
//! `right-buffer`). A record first joins everything of the other side's buffer within its
//! bounds, then stays in its own buffer until the watermark passes the last time a record
//! of the other side could still meet it: an event-time timer at `ts + max(upper, 0)`
//! (left) or `ts + max(-lower, 0)` (right) removes it. Each of the two is a shift of `ts`,
//! so a timer at `t` is due for exactly the left records of `t - max(upper, 0)` and the
//! right records of `t - max(-lower, 0)`: one timer serves both sides and needs no
//! namespace. State stays bounded by the rate times the interval plus the watermark's lag.
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
                    "an interval join needs event time, and its {side} input has no timestamps: call \
                        assign_timestamps_and_watermarks (or with_timestamps) before key_by"
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
    fn notify_checkpoint_aborted(&mut self, checkpoint: eddy_types::CheckpointId) -> FunctionResult {
        self.function.notify_checkpoint_aborted(checkpoint)
    }
    fn notify_job_finished(&mut self) -> FunctionResult {
        self.function.notify_job_finished()
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

/// What a record of one side does, the same for both sides (Flink's
/// `IntervalJoinOperator.processElement`): it waits in its own buffer, meets the other
/// side's records at `timestamp + from ..= timestamp + to`, and is cleaned once the
/// watermark passes `timestamp + wait` (`wait` ≥ 0). `meet(own, other, own time, other
/// time, ctx, out)` calls the user's function with the pair in its order.
#[allow(clippy::too_many_arguments)]
fn join_record<K, Own: StateValue, Other: StateValue, O>(
    own: &Buffer<Own>,
    other: &Buffer<Other>,
    value: Own,
    timestamp: i64,
    (from, to): (i64, i64),
    wait: i64,
    ctx: &mut KeyedContext<'_, K>,
    out: &mut Collector<'_, O>,
    mut meet: impl FnMut(&Own, &Other, i64, i64, &mut KeyedContext<'_, K>, &mut Collector<'_, O>) -> FunctionResult,
) -> FunctionResult {
    buffer_record(own, timestamp, value.clone())?;
    let (from, to) = (timestamp.saturating_add(from), timestamp.saturating_add(to));
    for (other_time, records) in other.iter()? {
        if (from..=to).contains(&other_time) {
            for record in &records {
                meet(&value, record, timestamp, other_time, ctx, out)?;
            }
        }
    }
    ctx.timer_service().register_event_time_timer(timestamp.saturating_add(wait))?;
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
        let function = &mut self.function;
        let bounds = (self.lower, self.upper);
        join_record(left, right, value, timestamp, bounds, self.upper.max(0), ctx, out, |a, b, ta, tb, ctx, out| {
            function.process_element(a, b, &mut JoinContext { keyed: ctx, left: ta, right: tb }, out)
        })
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
        let function = &mut self.function;
        // The left records this one falls in the interval of.
        let bounds = (self.upper.saturating_neg(), self.lower.saturating_neg());
        let wait = self.lower.saturating_neg().max(0);
        join_record(right, left, value, timestamp, bounds, wait, ctx, out, |b, a, tb, ta, ctx, out| {
            function.process_element(a, b, &mut JoinContext { keyed: ctx, left: ta, right: tb }, out)
        })
    }

    fn on_timer(&mut self, timestamp: i64, _: &mut KeyedContext<'_, K>, _: &mut Collector<'_, O>) -> FunctionResult {
        let (left, right) = self.buffers.as_ref().ok_or("interval join used before open (bug)")?;
        // The inverses of the cleanup times set above: whichever side registered this
        // timer, both entries are due now.
        left.remove(&timestamp.saturating_sub(self.upper.max(0)))?;
        right.remove(&timestamp.saturating_sub(self.lower.saturating_neg().max(0)))?;
        Ok(())
    }
}
