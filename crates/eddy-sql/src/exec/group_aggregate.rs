//! Aggregation per key without a window (Flink's `GroupAggFunction`): each key keeps how
//! many rows it holds and one accumulator a call; every input row updates them and the
//! key's result row is emitted again: `+I` the first time, then `-U` of the old result
//! and `+U` of the new (nothing when the result did not change), and `-D` when the key's
//! last row was retracted (its state is cleared; a row that arrives later is `+I` again).
//!
//! Over an input that retracts, every accumulator can take a row back: COUNT, SUM and AVG
//! count down, MIN and MAX keep each value with its count (the next smallest is at hand
//! when the smallest goes), DISTINCT keeps a count per value and the inner accumulator
//! sees a value only when its count leaves or reaches 0.

use super::aggregate::{add_values, avg_result, avg_sum_type, subtract_values, sum_result, to_sum_type};
use super::{keyed_process, value_descriptor};
use crate::expr::compare_values;
use crate::plan::aggregate::{AggregateCall, AggregateKind};
use crate::row::{Row, RowKind};
use crate::value::Value;
use eddy_api::{DataStream, FunctionResult, KeyedContext, KeyedProcessFunction, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ValueState;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A value ordered as SQL orders it (a MIN/MAX's values are kept sorted by it).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Sorted(pub Value);

impl PartialEq for Sorted {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Sorted {}
impl PartialOrd for Sorted {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Sorted {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_values(&self.0, &other.0)
    }
}

/// One call's running value, able to take rows back.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum GroupAccumulator {
    Count(i64),
    /// The sum of the non-NULL values and how many there are (NULL when none).
    Sum {
        sum: Value,
        count: i64,
    },
    Avg {
        sum: Value,
        count: i64,
    },
    /// MIN or MAX of an insert-only input: the extreme so far.
    Extreme(Value),
    /// MIN or MAX of an input that retracts: every value with its count.
    Values(BTreeMap<Sorted, i64>),
    /// A DISTINCT call: the count of each value (by its key bytes) and the inner
    /// accumulator over the values whose count is above 0.
    Distinct {
        counts: BTreeMap<Vec<u8>, i64>,
        inner: Box<GroupAccumulator>,
    },
}

/// A key's rows and accumulators.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GroupState {
    /// Rows accumulated less rows retracted: at 0 the key's result is deleted.
    rows: i64,
    calls: Vec<GroupAccumulator>,
}

pub(super) fn fresh(call: &AggregateCall, retracts: bool, distinct: bool) -> GroupAccumulator {
    let min_max = matches!(call.kind, AggregateKind::Min | AggregateKind::Max);
    if distinct && call.distinct && !min_max {
        return GroupAccumulator::Distinct { counts: BTreeMap::new(), inner: Box::new(fresh(call, true, false)) };
    }
    match call.kind {
        AggregateKind::CountStar | AggregateKind::Count => GroupAccumulator::Count(0),
        AggregateKind::Sum => GroupAccumulator::Sum { sum: Value::Null, count: 0 },
        AggregateKind::Avg => GroupAccumulator::Avg { sum: Value::Null, count: 0 },
        AggregateKind::Min | AggregateKind::Max if retracts => GroupAccumulator::Values(BTreeMap::new()),
        AggregateKind::Min | AggregateKind::Max => GroupAccumulator::Extreme(Value::Null),
    }
}

/// Adds (`sign` 1) or takes back (`sign` -1) one row's value.
pub(super) fn apply(acc: &mut GroupAccumulator, call: &AggregateCall, value: &Value, sign: i64) {
    if value.is_null() && call.kind != AggregateKind::CountStar {
        return;
    }
    match acc {
        GroupAccumulator::Count(n) => *n += sign,
        GroupAccumulator::Sum { sum, count } => {
            let v = to_sum_type(value, &call.ty);
            *sum = if sign > 0 { add_values(sum, &v, &call.ty) } else { subtract_values(sum, &v, &call.ty) };
            *count += sign;
        }
        GroupAccumulator::Avg { sum, count } => {
            let ty = avg_sum_type(call);
            let v = to_sum_type(value, &ty);
            *sum = if sign > 0 { add_values(sum, &v, &ty) } else { subtract_values(sum, &v, &ty) };
            *count += sign;
        }
        GroupAccumulator::Extreme(extreme) => {
            let better = match call.kind {
                AggregateKind::Min => Ordering::Less,
                _ => Ordering::Greater,
            };
            if extreme.is_null() || compare_values(value, extreme) == better {
                *extreme = value.clone();
            }
        }
        GroupAccumulator::Values(values) => {
            let key = Sorted(value.clone());
            let n = values.entry(key.clone()).or_insert(0);
            *n += sign;
            if *n <= 0 {
                values.remove(&key);
            }
        }
        GroupAccumulator::Distinct { counts, inner } => {
            let mut bytes = Vec::new();
            value.encode_key(&mut bytes);
            let n = counts.entry(bytes.clone()).or_insert(0);
            let before = *n;
            *n += sign;
            let after = *n;
            if after <= 0 {
                counts.remove(&bytes);
            }
            // The inner call sees a value when it first comes and when it last goes.
            if before <= 0 && after > 0 {
                apply(inner, call, value, 1);
            } else if before > 0 && after <= 0 {
                apply(inner, call, value, -1);
            }
        }
    }
}

pub(super) fn result(acc: &GroupAccumulator, call: &AggregateCall) -> Value {
    match acc {
        GroupAccumulator::Count(n) => Value::Int(*n),
        GroupAccumulator::Sum { count: 0, .. } => Value::Null,
        GroupAccumulator::Sum { sum, .. } => sum_result(sum, call),
        GroupAccumulator::Avg { sum, count } => avg_result(sum, *count, call),
        GroupAccumulator::Extreme(v) => v.clone(),
        GroupAccumulator::Values(values) => {
            let extreme = match call.kind {
                AggregateKind::Min => values.keys().next(),
                _ => values.keys().next_back(),
            };
            extreme.map(|v| v.0.clone()).unwrap_or(Value::Null)
        }
        GroupAccumulator::Distinct { inner, .. } => result(inner, call),
    }
}

/// The eddy operator of a `GroupAggregate` node over the grouping's pre-projection.
#[derive(Clone)]
pub struct GroupAggregateFunction {
    keys: Arc<Vec<usize>>,
    calls: Arc<Vec<AggregateCall>>,
    /// Whether the input retracts (MIN and MAX then keep every value).
    input_retracts: bool,
    ttl_ms: u64,
    state: Option<ValueState<GroupState>>,
}

impl GroupAggregateFunction {
    fn results(&self, state: &GroupState, keys: &[Value]) -> Vec<Value> {
        let mut out = Vec::with_capacity(keys.len() + self.calls.len());
        out.extend_from_slice(keys);
        out.extend(state.calls.iter().zip(self.calls.iter()).map(|(a, c)| result(a, c)));
        out
    }
}

impl RichFunction for GroupAggregateFunction {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&value_descriptor("group-accumulators", self.ttl_ms))?);
        Ok(())
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for GroupAggregateFunction {
    fn process_element(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let state = self.state.as_ref().ok_or("the group aggregation is used before open (bug)")?;
        let accumulate = row.kind.is_accumulate();
        let keys: Vec<Value> = self.keys.iter().map(|k| row.fields[*k].clone()).collect();
        let current = state.take()?;
        let first = current.is_none();
        if first && !accumulate {
            // A retraction of a key without state (its state expired): nothing to take back.
            return Ok(());
        }
        let mut current = current.unwrap_or_else(|| GroupState {
            rows: 0,
            calls: self.calls.iter().map(|c| fresh(c, self.input_retracts, true)).collect(),
        });
        let before = (!first).then(|| self.results(&current, &keys));
        let sign = if accumulate { 1 } else { -1 };
        current.rows += sign;
        for (acc, call) in current.calls.iter_mut().zip(self.calls.iter()) {
            if let Some(f) = call.filter {
                if row.fields[f] != Value::Boolean(true) {
                    continue;
                }
            }
            let value = call.argument.map(|i| &row.fields[i]).unwrap_or(&Value::Null);
            apply(acc, call, value, sign);
        }
        if current.rows <= 0 {
            // The key's last row went: its result row goes too.
            if let Some(before) = before {
                out.collect(Row { kind: RowKind::Delete, fields: before });
            }
            return Ok(());
        }
        let after = self.results(&current, &keys);
        state.update(current)?;
        match before {
            None => out.collect(Row::insert(after)),
            // Unchanged: nothing to say, unless downstream state lives by TTL and needs
            // the refresh (as Flink's state retention does).
            Some(before) if before == after && self.ttl_ms == 0 => {}
            Some(before) => {
                out.collect(Row { kind: RowKind::UpdateBefore, fields: before });
                out.collect(Row { kind: RowKind::UpdateAfter, fields: after });
            }
        }
        Ok(())
    }
}

/// The `GroupAggregate` node's operators: rows keyed by the grouping's keys (all to one
/// subtask without keys, as Flink's global aggregation), then the aggregation.
pub fn group_aggregate(
    input: DataStream<Row>,
    keys: &[usize],
    calls: &[AggregateCall],
    input_retracts: bool,
    ttl_ms: u64,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let function = GroupAggregateFunction {
        keys: Arc::new(keys.to_vec()),
        calls: Arc::new(calls.to_vec()),
        input_retracts,
        ttl_ms,
        state: None,
    };
    keyed_process(input, keys, function, name, uid)
}
