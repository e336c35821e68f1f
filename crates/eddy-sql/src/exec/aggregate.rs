//! Accumulators of the aggregate calls, and the eddy `AggregateFunction` that runs all of
//! a grouping's calls over one window: state per (key, window) is the key's values and one
//! accumulator a call.

use crate::expr::{compare_values, decimal};
use crate::plan::aggregate::{AggregateCall, AggregateKind};
use crate::row::Row;
use crate::types::{DataType, TypeKind};
use crate::value::Value;
use eddy_state::AggregateFunction;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One call's running value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Accumulator {
    Count(i64),
    /// The sum so far (NULL until a value came).
    Sum(Value),
    Min(Value),
    Max(Value),
    Avg {
        sum: Value,
        count: i64,
    },
    /// The distinct values (by their key bytes) the inner accumulator is computed over.
    Distinct(BTreeMap<Vec<u8>, Value>),
}

/// The key's values and each call's accumulator.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Accumulators {
    pub keys: Option<Vec<Value>>,
    pub calls: Vec<Accumulator>,
}

fn fresh(call: &AggregateCall) -> Accumulator {
    if call.distinct {
        return Accumulator::Distinct(BTreeMap::new());
    }
    match call.kind {
        AggregateKind::CountStar | AggregateKind::Count => Accumulator::Count(0),
        AggregateKind::Sum => Accumulator::Sum(Value::Null),
        AggregateKind::Min => Accumulator::Min(Value::Null),
        AggregateKind::Max => Accumulator::Max(Value::Null),
        AggregateKind::Avg => Accumulator::Avg { sum: Value::Null, count: 0 },
    }
}

/// `a + b` of two numbers of the sum's type (NULL is no value).
pub(super) fn add_values(a: &Value, b: &Value, ty: &DataType) -> Value {
    match (a, b, &ty.kind) {
        (Value::Null, x, _) | (x, Value::Null, _) => x.clone(),
        (Value::Int(x), Value::Int(y), _) => Value::Int(x.wrapping_add(*y)),
        (Value::Float(x), Value::Float(y), _) => Value::Float(x + y),
        (Value::Int(x), Value::Float(y), _) | (Value::Float(y), Value::Int(x), _) => Value::Float(*x as f64 + y),
        (_, _, TypeKind::Decimal { scale, .. }) => {
            let (ua, sa) = as_decimal(a);
            let (ub, sb) = as_decimal(b);
            decimal::add(ua, sa, ub, sb, *scale).map(|u| Value::Decimal(u, *scale)).unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }
}

/// `a - b` of two numbers of the sum's type (a retracted value taken off a sum).
pub(super) fn subtract_values(a: &Value, b: &Value, ty: &DataType) -> Value {
    let negated = match b {
        Value::Null => return a.clone(),
        Value::Int(y) => Value::Int(y.wrapping_neg()),
        Value::Float(y) => Value::Float(-y),
        Value::Decimal(u, s) => Value::Decimal(-u, *s),
        _ => Value::Null,
    };
    match a {
        // Nothing yet: the sum is the value's negation (a retraction before its row).
        Value::Null => negated,
        _ => add_values(a, &negated, ty),
    }
}

fn as_decimal(v: &Value) -> (i128, u8) {
    match v {
        Value::Int(i) => (*i as i128, 0),
        Value::Decimal(u, s) => (*u, *s),
        _ => (0, 0),
    }
}

/// The value as the sum's type (a DECIMAL(p, s) argument summed at DECIMAL(38, s)).
pub(super) fn to_sum_type(v: &Value, ty: &DataType) -> Value {
    match (v, &ty.kind) {
        (Value::Int(i), TypeKind::Float | TypeKind::Double) => Value::Float(*i as f64),
        (Value::Decimal(u, s), TypeKind::Decimal { scale, .. }) => {
            decimal::rescale(*u, *s, *scale).map(|u| Value::Decimal(u, *scale)).unwrap_or(Value::Null)
        }
        (other, _) => other.clone(),
    }
}

fn accumulate(acc: &mut Accumulator, call: &AggregateCall, value: &Value) {
    match acc {
        Accumulator::Count(n) => {
            if call.kind == AggregateKind::CountStar || !value.is_null() {
                *n += 1;
            }
        }
        Accumulator::Sum(sum) => {
            if !value.is_null() {
                *sum = add_values(sum, &to_sum_type(value, &call.ty), &call.ty);
            }
        }
        Accumulator::Min(min) => {
            if !value.is_null() && (min.is_null() || compare_values(value, min).is_lt()) {
                *min = value.clone();
            }
        }
        Accumulator::Max(max) => {
            if !value.is_null() && (max.is_null() || compare_values(value, max).is_gt()) {
                *max = value.clone();
            }
        }
        Accumulator::Avg { sum, count } => {
            if !value.is_null() {
                let sum_type = avg_sum_type(call);
                *sum = add_values(sum, &to_sum_type(value, &sum_type), &sum_type);
                *count += 1;
            }
        }
        Accumulator::Distinct(values) => {
            if !value.is_null() {
                let mut bytes = Vec::new();
                value.encode_key(&mut bytes);
                values.entry(bytes).or_insert_with(|| value.clone());
            }
        }
    }
}

/// AVG sums at the argument's own scale (a DECIMAL at DECIMAL(38, s)), then divides.
pub(super) fn avg_sum_type(call: &AggregateCall) -> DataType {
    match call.argument_type.as_ref().map(|t| &t.kind) {
        Some(TypeKind::Decimal { scale, .. }) => DataType::decimal(38, *scale),
        Some(TypeKind::Float | TypeKind::Double) => DataType::double(),
        _ => DataType::bigint(),
    }
}

fn merge(a: Accumulator, b: Accumulator, call: &AggregateCall) -> Accumulator {
    match (a, b) {
        (Accumulator::Count(x), Accumulator::Count(y)) => Accumulator::Count(x + y),
        (Accumulator::Sum(x), Accumulator::Sum(y)) => Accumulator::Sum(add_values(&x, &y, &call.ty)),
        (Accumulator::Min(x), Accumulator::Min(y)) => {
            let mut m = Accumulator::Min(x);
            accumulate(&mut m, call, &y);
            m
        }
        (Accumulator::Max(x), Accumulator::Max(y)) => {
            let mut m = Accumulator::Max(x);
            accumulate(&mut m, call, &y);
            m
        }
        (Accumulator::Avg { sum: s1, count: c1 }, Accumulator::Avg { sum: s2, count: c2 }) => {
            Accumulator::Avg { sum: add_values(&s1, &s2, &avg_sum_type(call)), count: c1 + c2 }
        }
        (Accumulator::Distinct(mut x), Accumulator::Distinct(y)) => {
            x.extend(y);
            Accumulator::Distinct(x)
        }
        (a, _) => a,
    }
}

fn result(acc: &Accumulator, call: &AggregateCall) -> Value {
    match acc {
        Accumulator::Count(n) => Value::Int(*n),
        Accumulator::Sum(v) => sum_result(v, call),
        Accumulator::Min(v) | Accumulator::Max(v) => v.clone(),
        Accumulator::Avg { sum, count } => avg_result(sum, *count, call),
        Accumulator::Distinct(values) => {
            let plain = AggregateCall { distinct: false, ..call.clone() };
            let mut inner = fresh(&plain);
            for v in values.values() {
                accumulate(&mut inner, &plain, v);
            }
            result(&inner, &plain)
        }
    }
}

/// A SUM's result: an integer sum wraps at its type's width, as Flink's Java sums do.
pub(super) fn sum_result(sum: &Value, call: &AggregateCall) -> Value {
    match sum {
        Value::Int(s) => Value::Int(match call.ty.kind {
            TypeKind::TinyInt => *s as i8 as i64,
            TypeKind::SmallInt => *s as i16 as i64,
            TypeKind::Int => *s as i32 as i64,
            _ => *s,
        }),
        other => other.clone(),
    }
}

/// An AVG's result: the sum divided by the count, in the result's type (NULL of none).
pub(super) fn avg_result(sum: &Value, count: i64, call: &AggregateCall) -> Value {
    if count == 0 {
        return Value::Null;
    }
    match (sum, &call.ty.kind) {
        (Value::Int(s), k) if k.is_integer() => Value::Int(s / count),
        (Value::Float(s), _) => Value::Float(s / count as f64),
        (Value::Decimal(u, s), TypeKind::Decimal { scale, .. }) => {
            decimal::divide(*u, *s, count as i128, 0, *scale).map(|u| Value::Decimal(u, *scale)).unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }
}

/// Every call of a grouping over the rows of one window. Input rows are the grouping's
/// pre-projection (keys, arguments, filters); the result is the keys then each call's
/// value.
#[derive(Clone)]
pub struct GroupAggregate {
    pub keys: Arc<Vec<usize>>,
    pub calls: Arc<Vec<AggregateCall>>,
}

impl AggregateFunction for GroupAggregate {
    type In = Row;
    type Acc = Accumulators;
    type Out = Vec<Value>;

    fn create_accumulator(&self) -> Accumulators {
        Accumulators { keys: None, calls: self.calls.iter().map(fresh).collect() }
    }

    fn add(&self, row: Row, mut acc: Accumulators) -> Accumulators {
        if acc.keys.is_none() {
            acc.keys = Some(self.keys.iter().map(|k| row.fields[*k].clone()).collect());
        }
        for (a, call) in acc.calls.iter_mut().zip(self.calls.iter()) {
            if let Some(f) = call.filter {
                if row.fields[f] != Value::Boolean(true) {
                    continue;
                }
            }
            let value = call.argument.map(|i| &row.fields[i]).unwrap_or(&Value::Null);
            accumulate(a, call, value);
        }
        acc
    }

    fn get_result(&self, acc: &Accumulators) -> Vec<Value> {
        let mut out = acc.keys.clone().unwrap_or_default();
        out.extend(acc.calls.iter().zip(self.calls.iter()).map(|(a, c)| result(a, c)));
        out
    }

    fn merge(&self, a: Accumulators, b: Accumulators) -> Accumulators {
        let keys = a.keys.or(b.keys);
        let calls = a.calls.into_iter().zip(b.calls).zip(self.calls.iter()).map(|((x, y), c)| merge(x, y, c)).collect();
        Accumulators { keys, calls }
    }
}
