//! Top-N and deduplication over insert-only inputs, per partition key (a top-N over an
//! input that retracts is `retract_rank.rs`).
//!
//! A top-N (Flink's `AppendOnlyTopNFunction`) keeps the partition's best `rank_end` rows
//! in order; a row of equal sort key ranks after those that came before it. A new row
//! that enters the top inserts itself, and the row it pushes out is deleted; with the row
//! number as a column, every rank whose occupant changed is updated (`-U` of the old
//! occupant, `+U` of the new).
//!
//! A window TopN (Flink's `WindowRank`) keeps the same top per partition and window, and
//! emits it once, `+I` only, when the window ends (the watermark passes it); the window's
//! state goes with it, and in event time a row of a window that ended is dropped, as Flink
//! drops it (in processing time it is ranked with the window's other late rows).
//!
//! `ORDER BY … LIMIT n` is a top-N without partition keys (Flink's SortLimit).
//!
//! A deduplication (Flink's `RowTimeDeduplicateFunction` and the processing-time ones)
//! keeps one row per key: the last by time (a later or equal time replaces it, `-U`/`+U`)
//! or the first (only an earlier time replaces it; by arrival, nothing does).

use super::{keyed_process, value_descriptor};
use crate::expr::compare_values;
use crate::plan::{SortKey, WindowColumns};
use crate::row::{Row, RowKind};
use crate::types::TimeAttribute;
use crate::value::Value;
use eddy_api::{DataStream, FunctionResult, KeyedContext, KeyedProcessFunction, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ValueState;
use std::cmp::Ordering;
use std::sync::Arc;

/// How `a` sorts against `b` by `order`.
pub fn compare_rows(a: &Row, b: &Row, order: &[SortKey]) -> Ordering {
    for key in order {
        let (x, y) = (&a.fields[key.column], &b.fields[key.column]);
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) if key.nulls_first => Ordering::Less,
            (true, false) => Ordering::Greater,
            (false, true) if key.nulls_first => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) if key.ascending => compare_values(x, y),
            (false, false) => compare_values(x, y).reverse(),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

pub(super) fn with_rank(row: &Row, rank: usize, kind: RowKind) -> Row {
    let mut fields = Vec::with_capacity(row.fields.len() + 1);
    fields.extend_from_slice(&row.fields);
    fields.push(Value::Int(rank as i64));
    Row { kind, fields }
}

#[derive(Clone)]
pub struct TopN {
    order: Arc<Vec<SortKey>>,
    rank_end: usize,
    output_rank: bool,
    ttl_ms: u64,
    /// A window TopN: the window's columns (its end is when it is ranked).
    window: Option<WindowColumns>,
    state: Option<ValueState<Vec<Row>>>,
}

impl TopN {
    pub fn new(
        order: &[SortKey],
        rank_end: u64,
        output_rank: bool,
        ttl_ms: u64,
        window: Option<WindowColumns>,
    ) -> Self {
        let rank_end = rank_end.min(usize::MAX as u64) as usize;
        Self { order: Arc::new(order.to_vec()), rank_end, output_rank, ttl_ms, window, state: None }
    }

    /// Puts `row` into `top` after every row that sorts before it or equal to it: its
    /// place and the row it pushed out of the top, or `None` if it is not in the top.
    fn enter(&self, top: &mut Vec<Row>, row: Row) -> Option<(usize, Option<Row>)> {
        let at = top.partition_point(|r| compare_rows(r, &row, &self.order) != Ordering::Greater);
        if at >= self.rank_end {
            return None;
        }
        top.insert(at, Row { kind: RowKind::Insert, fields: row.fields });
        let pushed_out = (top.len() > self.rank_end).then(|| top.pop()).flatten();
        Some((at, pushed_out))
    }
}

impl RichFunction for TopN {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&value_descriptor("top-rows", self.ttl_ms))?);
        Ok(())
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for TopN {
    fn process_element(
        &mut self,
        row: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        if !row.kind.is_accumulate() {
            return Err("a top-N of eddy takes insert-only input (bug: the planner let a retraction in)".into());
        }
        let state = self.state.as_ref().ok_or("the top-N is used before open (bug)")?;
        if let Some(w) = self.window {
            // Ranked when the window ends; a row of a window that ended is late.
            let end = row.fields[w.end].as_millis().unwrap_or(i64::MIN);
            let mut timers = ctx.timer_service();
            match w.time {
                TimeAttribute::Rowtime if end - 1 <= timers.current_watermark() => return Ok(()),
                TimeAttribute::Rowtime => timers.register_event_time_timer(end - 1)?,
                // In processing time nothing is late, as in Flink's window rank: a row
                // after its window fired starts the window's state again, and its timer
                // (in the past) ranks what came late at once.
                TimeAttribute::Proctime => timers.register_processing_time_timer(end - 1)?,
            }
            let mut top = state.take()?.unwrap_or_default();
            self.enter(&mut top, row);
            state.update(top)?;
            return Ok(());
        }
        let mut top = state.take()?.unwrap_or_default();
        let Some((at, pushed_out)) = self.enter(&mut top, row) else {
            if !top.is_empty() {
                state.update(top)?;
            }
            return Ok(());
        };
        if self.output_rank {
            // Ranks at..top.len() have new occupants: the one before was one further down
            // (or the row pushed out, for the last rank; or none, if the top grew).
            for k in at..top.len() {
                let before = if k + 1 < top.len() { Some(&top[k + 1]) } else { pushed_out.as_ref() };
                match before {
                    Some(old) => {
                        out.collect(with_rank(old, k + 1, RowKind::UpdateBefore));
                        out.collect(with_rank(&top[k], k + 1, RowKind::UpdateAfter));
                    }
                    None => out.collect(with_rank(&top[k], k + 1, RowKind::Insert)),
                }
            }
        } else {
            // The row pushed out goes before the new one comes (a sink keyed by the
            // partition must not delete the newcomer).
            if let Some(old) = pushed_out {
                out.collect(Row { kind: RowKind::Delete, fields: old.fields });
            }
            out.collect(top[at].clone());
        }
        state.update(top)?;
        Ok(())
    }

    fn on_timer(
        &mut self,
        _timestamp: i64,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        // A window TopN's window ended: its top, once.
        let state = self.state.as_ref().ok_or("the top-N is used before open (bug)")?;
        for (k, row) in state.take()?.unwrap_or_default().into_iter().enumerate() {
            out.collect(if self.output_rank { with_rank(&row, k + 1, RowKind::Insert) } else { row });
        }
        Ok(())
    }
}

#[derive(Clone)]
struct Deduplicate {
    keep_last: bool,
    /// The rowtime column, or `None` in processing time (arrival order).
    rowtime: Option<usize>,
    ttl_ms: u64,
    state: Option<ValueState<Row>>,
}

impl RichFunction for Deduplicate {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&value_descriptor("kept-row", self.ttl_ms))?);
        Ok(())
    }
}

impl Deduplicate {
    /// Whether `row` replaces the kept row `kept` (Flink's `isDuplicate`).
    fn replaces(&self, kept: &Row, row: &Row) -> bool {
        let Some(t) = self.rowtime else { return self.keep_last };
        let time = |r: &Row| r.fields[t].as_millis().unwrap_or(i64::MIN);
        if self.keep_last {
            time(kept) <= time(row)
        } else {
            time(row) < time(kept)
        }
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for Deduplicate {
    fn process_element(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        if !row.kind.is_accumulate() {
            return Err("a deduplication of eddy takes insert-only input (bug: the planner let a retraction in)".into());
        }
        let state = self.state.as_ref().ok_or("the deduplication is used before open (bug)")?;
        let row = Row { kind: RowKind::Insert, fields: row.fields };
        // Decided on the kept row in place: most rows of a keep-first deduplication change
        // nothing, and then nothing is copied or written.
        match state.with_value(|kept| kept.map(|kept| self.replaces(kept, &row)))? {
            None => {
                out.collect(row.clone());
                state.update(row)?;
            }
            Some(true) => {
                // Taken, not cloned (gone if its time to live ended since it was read).
                match state.take()? {
                    Some(kept) => {
                        out.collect(Row { kind: RowKind::UpdateBefore, fields: kept.fields });
                        out.collect(Row { kind: RowKind::UpdateAfter, fields: row.fields.clone() });
                    }
                    None => out.collect(row.clone()),
                }
                state.update(row)?;
            }
            Some(false) => {}
        }
        Ok(())
    }
}

/// The `Deduplicate` node: rows keyed by `keys`, one kept per key.
pub fn deduplicate(
    input: DataStream<Row>,
    keys: &[usize],
    keep_last: bool,
    (time_column, time): (usize, TimeAttribute),
    ttl_ms: u64,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let rowtime = (time == TimeAttribute::Rowtime).then_some(time_column);
    let function = Deduplicate { keep_last, rowtime, ttl_ms, state: None };
    keyed_process(input, keys, function, name, uid)
}
