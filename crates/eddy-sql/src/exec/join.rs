//! Inner joins of insert-only inputs: a regular join keeps every row of both sides per
//! key (until `table.exec.state.ttl`), an interval join keeps rows only while the other
//! side's matches can still arrive (eddy's interval join), a window join until its window
//! ended.

use super::window::key_bytes;
use super::{list_descriptor, Translator};
use crate::error::SqlError;
use crate::expr::Expr;
use crate::plan::{JoinStrategy, Plan};
use crate::row::Row;
use crate::value::Value;
use eddy_api::join::{join_function, JoinContext};
use eddy_api::{DataStream, FunctionResult, KeyedCoProcessFunction, KeyedContext, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ListState;
use std::sync::Arc;

/// The joined row of a left and a right row's fields, if the condition holds for it.
pub(super) fn joined(left: &[Value], right: &[Value], condition: &Option<Arc<Expr>>) -> Result<Option<Row>, String> {
    let mut fields = Vec::with_capacity(left.len() + right.len());
    fields.extend_from_slice(left);
    fields.extend_from_slice(right);
    if let Some(c) = condition {
        if !c.eval_condition(&fields).map_err(|e| e.0)? {
            return Ok(None);
        }
    }
    Ok(Some(Row::insert(fields)))
}

#[allow(clippy::too_many_arguments)]
pub fn join(
    translator: &mut Translator<'_>,
    (left, left_plan): (DataStream<Row>, &Plan),
    (right, right_plan): (DataStream<Row>, &Plan),
    (left_keys, right_keys): (&[usize], &[usize]),
    condition: Option<Expr>,
    strategy: &JoinStrategy,
    name: &str,
    uid: &str,
) -> Result<DataStream<Row>, SqlError> {
    let condition = condition.map(Arc::new);
    let (lk, rk) = (Arc::new(left_keys.to_vec()), Arc::new(right_keys.to_vec()));
    // A NULL key equals nothing (SQL's `=`): such rows can never join.
    let (lnull, rnull) = (lk.clone(), rk.clone());
    let left = left.filter(move |r: &Row| lnull.iter().all(|k| !r.fields[*k].is_null()));
    let right = right.filter(move |r: &Row| rnull.iter().all(|k| !r.fields[*k].is_null()));
    let stream = match strategy {
        JoinStrategy::Interval { left_time, right_time, lower, upper } => {
            let (lt, rt) = (*left_time, *right_time);
            let left = left.with_timestamps(move |r: &Row| r.fields[lt].as_millis().unwrap_or(i64::MIN));
            let right = right.with_timestamps(move |r: &Row| r.fields[rt].as_millis().unwrap_or(i64::MIN));
            let left = left.key_by(move |r: &Row| key_bytes(r, &lk));
            let right = right.key_by(move |r: &Row| key_bytes(r, &rk));
            // lower <= l.t - r.t <= upper, i.e. r.t in [l.t - upper, l.t - lower].
            left.interval_join(&right).between(-*upper, -*lower).process(join_function(
                move |l: &Row, r: &Row, _ctx: &mut JoinContext<'_, '_, Vec<u8>>, out: &mut Collector<'_, Row>| {
                    // The condition's bounds hold already; its other conjuncts are checked.
                    if let Ok(Some(row)) = joined(&l.fields, &r.fields, &condition) {
                        out.collect(row);
                    }
                },
            ))
        }
        JoinStrategy::Regular | JoinStrategy::Window { .. } => {
            let ttl_ms = translator.config.state_ttl_ms;
            let left = left.key_by(move |r: &Row| key_bytes(r, &lk));
            let right = right.key_by(move |r: &Row| key_bytes(r, &rk));
            let _ = (left_plan, right_plan);
            // A window join's rows go when their window ended (the watermark passed it).
            let window_ends = match strategy {
                JoinStrategy::Window { left_end, right_end } => Some((*left_end, *right_end)),
                _ => None,
            };
            left.connect(&right).co_process(RegularJoin { condition, ttl_ms, window_ends, state: None })
        }
    };
    Ok(stream.name(name).uid(uid))
}

/// Every row of both sides per key; each new row meets the other side's rows.
#[derive(Clone)]
struct RegularJoin {
    condition: Option<Arc<Expr>>,
    ttl_ms: u64,
    /// For a window join: the window end column of each side; the key's rows are cleared
    /// when the watermark passes the end.
    window_ends: Option<(usize, usize)>,
    state: Option<(ListState<Row>, ListState<Row>)>,
}

impl RichFunction for RegularJoin {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let left = ctx.get_list_state(&list_descriptor("left-rows", self.ttl_ms))?;
        let right = ctx.get_list_state(&list_descriptor("right-rows", self.ttl_ms))?;
        self.state = Some((left, right));
        Ok(())
    }
}

impl RegularJoin {
    fn on_row(
        &mut self,
        row: Row,
        from_left: bool,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        if let Some((left_end, right_end)) = self.window_ends {
            let end = row.fields[if from_left { left_end } else { right_end }].as_millis().unwrap_or(i64::MIN);
            let mut timers = ctx.timer_service();
            if end - 1 <= timers.current_watermark() {
                // Its window ended: late, dropped as Flink's window join drops it.
                return Ok(());
            }
            timers.register_event_time_timer(end - 1)?;
        }
        let (left, right) = self.state.as_ref().ok_or("the join is used before open (bug)")?;
        let (own, other) = if from_left { (left, right) } else { (right, left) };
        for other_row in other.get()? {
            let pair = if from_left {
                joined(&row.fields, &other_row.fields, &self.condition)?
            } else {
                joined(&other_row.fields, &row.fields, &self.condition)?
            };
            if let Some(r) = pair {
                out.collect(r);
            }
        }
        own.add(row)?;
        Ok(())
    }
}

impl KeyedCoProcessFunction<Vec<u8>, Row, Row, Row> for RegularJoin {
    fn process_element1(
        &mut self,
        value: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        self.on_row(value, true, ctx, out)
    }

    fn process_element2(
        &mut self,
        value: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        self.on_row(value, false, ctx, out)
    }

    fn on_timer(
        &mut self,
        _timestamp: i64,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        _out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        // A window join's window ended: its rows can meet no other.
        let (left, right) = self.state.as_ref().ok_or("the join is used before open (bug)")?;
        left.clear()?;
        right.clear()?;
        Ok(())
    }
}
