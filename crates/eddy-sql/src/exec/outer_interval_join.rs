//! Outer interval joins (Flink's `TimeIntervalJoin` of a LEFT, RIGHT or FULL join whose
//! condition bounds one side's event time by the other's): the output only appends. A
//! row waits while a match can still arrive; a row of a kept side that matched nothing is
//! emitted padded with NULLs once the watermark passed the last time a match could have
//! (never retracted, unlike a regular outer join's padded row).
//!
//! With `lower <= l.t - r.t <= upper`, a left row can meet right rows up to `l.t - lower`
//! and a right row left rows up to `r.t + upper`: each is kept until the watermark passes
//! that time (an event-time timer of the key), then dropped, or emitted padded. A row that
//! arrives after that time meets what is held and is not kept. A NULL key or time matches
//! nothing: such a row of a kept side is emitted padded at once.

use super::join::joined;
use super::value_descriptor;
use super::window::key_bytes;
use crate::expr::Expr;
use crate::plan::JoinType;
use crate::row::Row;
use crate::value::Value;
use eddy_api::{DataStream, FunctionResult, KeyedCoProcessFunction, KeyedContext, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ValueState;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A held row of one side.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Held {
    fields: Vec<Value>,
    /// When the watermark passes this, no match can come any more.
    expires: i64,
    matched: bool,
}

/// The held rows of one side, per key.
type HeldRows = ValueState<Vec<Held>>;

#[derive(Clone)]
struct OuterIntervalJoin {
    join_type: JoinType,
    /// The whole join condition (its time bounds included).
    condition: Option<Arc<Expr>>,
    keys: Arc<(Vec<usize>, Vec<usize>)>,
    widths: (usize, usize),
    /// The rowtime column of each side.
    times: (usize, usize),
    /// `lower <= l.t - r.t <= upper`, in ms.
    bounds: (i64, i64),
    state: Option<(HeldRows, HeldRows)>,
}

impl RichFunction for OuterIntervalJoin {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let left = ctx.get_state(&value_descriptor("left-rows", 0))?;
        let right = ctx.get_state(&value_descriptor("right-rows", 0))?;
        self.state = Some((left, right));
        Ok(())
    }
}

impl OuterIntervalJoin {
    fn keeps(&self, left: bool) -> bool {
        if left {
            self.join_type.keeps_left()
        } else {
            self.join_type.keeps_right()
        }
    }

    /// A row of one side padded with NULLs for the other.
    fn padded(&self, fields: &[Value], left: bool) -> Row {
        let mut out = Vec::with_capacity(self.widths.0 + self.widths.1);
        if left {
            out.extend_from_slice(fields);
            out.extend(std::iter::repeat_n(Value::Null, self.widths.1));
        } else {
            out.extend(std::iter::repeat_n(Value::Null, self.widths.0));
            out.extend_from_slice(fields);
        }
        Row::insert(out)
    }

    fn on_row(
        &mut self,
        row: Row,
        left: bool,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        if !row.kind.is_accumulate() {
            return Err("an interval join takes insert-only input (bug: the planner let a retraction in)".into());
        }
        let (keys, time) = if left { (&self.keys.0, self.times.0) } else { (&self.keys.1, self.times.1) };
        let time = row.fields[time].as_millis();
        let (Some(time), false) = (time, keys.iter().any(|k| row.fields[*k].is_null())) else {
            if self.keeps(left) {
                out.collect(self.padded(&row.fields, left));
            }
            return Ok(());
        };
        let (left_state, right_state) = self.state.clone().ok_or("the join is used before open (bug)")?;
        let (own_state, other_state) = if left { (left_state, right_state) } else { (right_state, left_state) };
        // Meet the other side's held rows (taken and put back: they are few per key, and
        // their `matched` flags change).
        let mut matched = false;
        let mut others = other_state.take()?.unwrap_or_default();
        for held in others.iter_mut() {
            let (l, r) = if left { (&row.fields, &held.fields) } else { (&held.fields, &row.fields) };
            if let Some(joined) = joined(l, r, &self.condition)? {
                out.collect(joined);
                held.matched = true;
                matched = true;
            }
        }
        if !others.is_empty() {
            other_state.update(others)?;
        }
        let (lower, upper) = self.bounds;
        let expires = if left { time.saturating_sub(lower) } else { time.saturating_add(upper) };
        let mut timers = ctx.timer_service();
        if expires <= timers.current_watermark() {
            // No match can come any more: not kept.
            if self.keeps(left) && !matched {
                out.collect(self.padded(&row.fields, left));
            }
            return Ok(());
        }
        timers.register_event_time_timer(expires)?;
        let mut own = own_state.take()?.unwrap_or_default();
        own.push(Held { fields: row.fields, expires, matched });
        own_state.update(own)?;
        Ok(())
    }

    /// Drops the rows of one side no match can come for any more, emitting those of a
    /// kept side that matched nothing.
    fn expire(
        &self,
        state: &ValueState<Vec<Held>>,
        left: bool,
        watermark: i64,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let Some(mut rows) = state.take()? else { return Ok(()) };
        let keeps = self.keeps(left);
        rows.retain(|held| {
            if held.expires > watermark {
                return true;
            }
            if keeps && !held.matched {
                out.collect(self.padded(&held.fields, left));
            }
            false
        });
        if !rows.is_empty() {
            state.update(rows)?;
        }
        Ok(())
    }
}

impl KeyedCoProcessFunction<Vec<u8>, Row, Row, Row> for OuterIntervalJoin {
    fn process_element1(
        &mut self,
        row: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        self.on_row(row, true, ctx, out)
    }

    fn process_element2(
        &mut self,
        row: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        self.on_row(row, false, ctx, out)
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let (left_state, right_state) = self.state.clone().ok_or("the join is used before open (bug)")?;
        self.expire(&left_state, true, timestamp, out)?;
        self.expire(&right_state, false, timestamp, out)
    }
}

/// An outer interval join, keyed by the join keys.
#[allow(clippy::too_many_arguments)]
pub fn outer_interval_join(
    join_type: JoinType,
    (left, right): (DataStream<Row>, DataStream<Row>),
    widths: (usize, usize),
    (left_keys, right_keys): (&[usize], &[usize]),
    times: (usize, usize),
    bounds: (i64, i64),
    condition: Option<Expr>,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let (lk, rk) = (Arc::new(left_keys.to_vec()), Arc::new(right_keys.to_vec()));
    let (lt, rt) = times;
    let left = left.with_timestamps(move |r: &Row| r.fields[lt].as_millis().unwrap_or(i64::MIN));
    let right = right.with_timestamps(move |r: &Row| r.fields[rt].as_millis().unwrap_or(i64::MIN));
    let left = left.key_by(move |r: &Row| key_bytes(r, &lk));
    let right = right.key_by(move |r: &Row| key_bytes(r, &rk));
    let function = OuterIntervalJoin {
        join_type,
        condition: condition.map(Arc::new),
        keys: Arc::new((left_keys.to_vec(), right_keys.to_vec())),
        widths,
        times,
        bounds,
        state: None,
    };
    left.connect(&right).co_process(function).name(name).uid(uid)
}
