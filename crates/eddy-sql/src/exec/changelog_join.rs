//! Regular joins whose output updates (Flink's `StreamingJoinOperator` with retraction):
//! outer joins, and joins of inputs that retract. Each side keeps, per join key, its
//! distinct rows with how many times each is held and, for a side whose rows the join
//! keeps without a match, how many rows of the other side each one matches.
//!
//! A row that arrives meets the other side's rows of its key: each match is emitted
//! (`+I`, or `-D` when the row is a retraction). A row of a kept side without a match is
//! emitted padded with NULLs (`+I`); when its first match arrives the padded row is
//! deleted (`-D`), and when its last match is retracted it is emitted padded again.
//! A NULL key matches nothing, so such rows are only ever padded.

use super::value_descriptor;
use super::window::key_bytes;
use crate::expr::Expr;
use crate::plan::JoinType;
use crate::row::{Row, RowKind};
use crate::value::Value;
use eddy_api::{DataStream, FunctionResult, KeyedCoProcessFunction, KeyedContext, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ValueState;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A distinct row of one side.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Held {
    fields: Vec<Value>,
    /// How many times the row is held (inserted less retracted).
    count: i64,
    /// How many rows of the other side it matches (kept only for a padded side).
    matches: i64,
}

type HeldRows = ValueState<Vec<Held>>;

#[derive(Clone)]
struct ChangelogJoin {
    join_type: JoinType,
    condition: Option<Arc<Expr>>,
    /// The key columns of each side (a row with a NULL key matches nothing).
    keys: Arc<(Vec<usize>, Vec<usize>)>,
    widths: (usize, usize),
    ttl_ms: u64,
    /// The held rows of the left and the right side.
    state: Option<(HeldRows, HeldRows)>,
    /// The rows one record's meeting emits, gathered while the state is borrowed (kept to
    /// reuse its allocation).
    emitted: Vec<Row>,
}

impl RichFunction for ChangelogJoin {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let left = ctx.get_state(&value_descriptor("left-held-rows", self.ttl_ms))?;
        let right = ctx.get_state(&value_descriptor("right-held-rows", self.ttl_ms))?;
        self.state = Some((left, right));
        Ok(())
    }
}

impl ChangelogJoin {
    /// The joined row of a left and a right row (either padded with NULLs).
    fn joined(&self, left: Option<&[Value]>, right: Option<&[Value]>, kind: RowKind) -> Row {
        let mut fields = Vec::with_capacity(self.widths.0 + self.widths.1);
        match left {
            Some(l) => fields.extend_from_slice(l),
            None => fields.extend(std::iter::repeat_n(Value::Null, self.widths.0)),
        }
        match right {
            Some(r) => fields.extend_from_slice(r),
            None => fields.extend(std::iter::repeat_n(Value::Null, self.widths.1)),
        }
        Row { kind, fields }
    }

    fn matches(&self, left: &[Value], right: &[Value]) -> Result<bool, String> {
        let Some(c) = &self.condition else { return Ok(true) };
        let mut fields = Vec::with_capacity(left.len() + right.len());
        fields.extend_from_slice(left);
        fields.extend_from_slice(right);
        c.eval_condition(&fields).map_err(|e| e.0)
    }

    /// A row (of the side `from_left` says) meets one held row of the other side: if they
    /// match, the joined rows go to `emitted` (one per time the other row is held), with
    /// the other row's padded form deleted before its first match and back after its last
    /// when the other side is kept (`other_kept`), so that a sink keyed by it never sees
    /// the two out of order. Whether they matched.
    fn meet(
        &self,
        row: &[Value],
        from_left: bool,
        held: &Held,
        (sign, other_kept): (i64, bool),
        emitted: &mut Vec<Row>,
    ) -> Result<bool, String> {
        let (l, r) = ordered(from_left, row, &held.fields);
        if !self.matches(l, r)? {
            return Ok(false);
        }
        let padded_other =
            |kind| if from_left { self.joined(None, Some(r), kind) } else { self.joined(Some(l), None, kind) };
        let times = held.count.max(0) as usize;
        if other_kept && sign > 0 && held.matches == 0 {
            emitted.extend(std::iter::repeat_n(padded_other(RowKind::Delete), times));
        }
        let kind = if sign > 0 { RowKind::Insert } else { RowKind::Delete };
        emitted.extend(std::iter::repeat_n(self.joined(Some(l), Some(r), kind), times));
        if other_kept && sign < 0 && held.matches + sign == 0 {
            emitted.extend(std::iter::repeat_n(padded_other(RowKind::Insert), times));
        }
        Ok(true)
    }

    /// Whether a row matches any held row of the other side (all of them match without
    /// a condition beyond the keys).
    fn any_match(&self, row: &[Value], from_left: bool, other_state: &HeldRows) -> Result<bool, String> {
        if self.condition.is_none() {
            return Ok(true);
        }
        let any = other_state.with_value(|rows| -> Result<bool, String> {
            for held in rows.map(Vec::as_slice).unwrap_or_default() {
                let (l, r) = ordered(from_left, row, &held.fields);
                if self.matches(l, r)? {
                    return Ok(true);
                }
            }
            Ok(false)
        });
        any.map_err(|e| e.to_string())?
    }

    fn on_row(&mut self, row: Row, from_left: bool, out: &mut Collector<'_, Row>) -> FunctionResult {
        let (left_state, right_state) = self.state.clone().ok_or("the join is used before open (bug)")?;
        let (own_state, other_state) = if from_left { (left_state, right_state) } else { (right_state, left_state) };
        let (own_kept, other_kept) = if from_left {
            (self.join_type.keeps_left(), self.join_type.keeps_right())
        } else {
            (self.join_type.keeps_right(), self.join_type.keeps_left())
        };
        let own_keys = if from_left { &self.keys.0 } else { &self.keys.1 };
        let null_key = own_keys.iter().any(|k| row.fields[*k].is_null());
        let accumulate = row.kind.is_accumulate();
        let sign = if accumulate { 1 } else { -1 };
        let kind = if accumulate { RowKind::Insert } else { RowKind::Delete };
        // Meet the other side's rows in place (not a copy of them per record): the rows to
        // emit are gathered first, as the state is borrowed while they are met.
        let mut emitted = std::mem::take(&mut self.emitted);
        let matched = if null_key {
            0
        } else if other_kept && self.any_match(&row.fields, from_left, &other_state)? {
            // Each match changes the other row's match count (the rows are written only
            // when one matched: a write renews their time to live).
            let met = other_state.update_existing(|rows| -> Result<i64, String> {
                let mut matched = 0;
                for held in rows.iter_mut() {
                    if self.meet(&row.fields, from_left, held, (sign, true), &mut emitted)? {
                        matched += held.count;
                        held.matches += sign;
                    }
                }
                Ok(matched)
            })?;
            met.transpose()?.unwrap_or(0)
        } else if other_kept {
            0
        } else {
            other_state.with_value(|rows| -> Result<i64, String> {
                let mut matched = 0;
                for held in rows.map(Vec::as_slice).unwrap_or_default() {
                    if self.meet(&row.fields, from_left, held, (sign, false), &mut emitted)? {
                        matched += held.count;
                    }
                }
                Ok(matched)
            })??
        };
        for joined in emitted.drain(..) {
            out.collect(joined);
        }
        self.emitted = emitted;
        if own_kept && matched == 0 {
            out.collect(if from_left {
                self.joined(Some(&row.fields), None, kind)
            } else {
                self.joined(None, Some(&row.fields), kind)
            });
        }
        // Hold (or release) the row itself.
        let mut own_rows = own_state.take()?.unwrap_or_default();
        match own_rows.iter().position(|h| h.fields == row.fields) {
            Some(i) => {
                own_rows[i].count += sign;
                if own_rows[i].count <= 0 {
                    own_rows.swap_remove(i);
                }
            }
            None if accumulate => own_rows.push(Held { fields: row.fields, count: 1, matches: matched }),
            // A retraction of a row never held (its state expired): nothing to release.
            None => {}
        }
        if !own_rows.is_empty() {
            own_state.update(own_rows)?;
        }
        Ok(())
    }
}

/// (left, right) of a row of one side and one of the other.
fn ordered<'a>(from_left: bool, own: &'a [Value], other: &'a [Value]) -> (&'a [Value], &'a [Value]) {
    if from_left {
        (own, other)
    } else {
        (other, own)
    }
}

impl KeyedCoProcessFunction<Vec<u8>, Row, Row, Row> for ChangelogJoin {
    fn process_element1(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        self.on_row(row, true, out)
    }

    fn process_element2(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        self.on_row(row, false, out)
    }
}

/// A regular join whose output updates, keyed by the join keys.
#[allow(clippy::too_many_arguments)]
pub fn changelog_join(
    join_type: JoinType,
    (left, right): (DataStream<Row>, DataStream<Row>),
    widths: (usize, usize),
    (left_keys, right_keys): (&[usize], &[usize]),
    condition: Option<Expr>,
    ttl_ms: u64,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let (lk, rk) = (Arc::new(left_keys.to_vec()), Arc::new(right_keys.to_vec()));
    let left = left.key_by(move |r: &Row| key_bytes(r, &lk));
    let right = right.key_by(move |r: &Row| key_bytes(r, &rk));
    let function = ChangelogJoin {
        join_type,
        condition: condition.map(Arc::new),
        keys: Arc::new((left_keys.to_vec(), right_keys.to_vec())),
        widths,
        ttl_ms,
        state: None,
        emitted: Vec::new(),
    };
    left.connect(&right).co_process(function).name(name).uid(uid)
}
