//! The event-time temporal join (Flink's `TemporalJoin` against a versioned table): the
//! right side's rows are versions of its key, each valid from its time until the next
//! (a `-D` ends the key's last version; a `-U` says nothing the `+U` after it does not).
//! A left row waits until the watermark of both sides passes its time, then meets the
//! version of its key valid at that time: once, so the output appends. A left join pads a
//! row whose key had no version then with NULLs. Versions older than the one valid at the
//! watermark can meet no later row and go.

use super::window::key_bytes;
use crate::expr::Expr;
use crate::row::Row;
use crate::value::Value;
use eddy_api::{DataStream, FunctionResult, KeyedCoProcessFunction, KeyedContext, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::{ValueState, ValueStateDescriptor};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Left rows waiting for the watermark, by time.
type Waiting = BTreeMap<i64, Vec<Vec<Value>>>;
/// The key's versions by the time they begin (`None`: deleted then).
type Versions = BTreeMap<i64, Option<Vec<Value>>>;

#[derive(Clone)]
struct TemporalJoin {
    left_time: usize,
    right_time: usize,
    right_width: usize,
    condition: Option<Arc<Expr>>,
    left_outer: bool,
    state: Option<(ValueState<Waiting>, ValueState<Versions>)>,
}

impl RichFunction for TemporalJoin {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let waiting = ctx.get_state(&ValueStateDescriptor::new("waiting-left-rows"))?;
        let versions = ctx.get_state(&ValueStateDescriptor::new("right-versions"))?;
        self.state = Some((waiting, versions));
        Ok(())
    }
}

impl KeyedCoProcessFunction<Vec<u8>, Row, Row, Row> for TemporalJoin {
    fn process_element1(
        &mut self,
        row: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        _out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let (waiting, _) = self.state.as_ref().ok_or("the temporal join is used before open (bug)")?;
        let mut fields = row.fields;
        fields.pop(); // the key, computed before the exchange (see `temporal_join`)
        let Some(t) = fields[self.left_time].as_millis() else { return Ok(()) };
        ctx.timer_service().register_event_time_timer(t)?;
        waiting.update_with(Waiting::new, |w| w.entry(t).or_default().push(fields))?;
        Ok(())
    }

    fn process_element2(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        _out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let (_, versions) = self.state.as_ref().ok_or("the temporal join is used before open (bug)")?;
        let Some(t) = row.fields[self.right_time].as_millis() else { return Ok(()) };
        let version = match row.kind {
            crate::row::RowKind::UpdateBefore => return Ok(()),
            crate::row::RowKind::Delete => None,
            _ => Some(row.fields),
        };
        versions.update_with(Versions::new, |v| {
            v.insert(t, version);
        })?;
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let (waiting, versions) = self.state.as_ref().ok_or("the temporal join is used before open (bug)")?;
        let Some(mut rows) = waiting.take()? else { return Ok(()) };
        let later = rows.split_off(&(timestamp + 1));
        if !later.is_empty() {
            waiting.update(later)?;
        }
        let mut all = versions.take()?.unwrap_or_default();
        for (t, lefts) in rows {
            let version = all.range(..=t).next_back().and_then(|(_, v)| v.as_ref());
            for left in lefts {
                let mut matched = false;
                if let Some(right) = version {
                    let mut fields = left.clone();
                    fields.extend(right.iter().cloned());
                    let holds = match &self.condition {
                        Some(c) => c.eval_condition(&fields).map_err(|e| e.0)?,
                        None => true,
                    };
                    if holds {
                        matched = true;
                        out.collect(Row::insert(fields));
                    }
                }
                if !matched && self.left_outer {
                    let mut fields = left;
                    fields.extend(std::iter::repeat_n(Value::Null, self.right_width));
                    out.collect(Row::insert(fields));
                }
            }
        }
        // The version valid at the watermark is the oldest a later row can meet.
        if let Some((&valid, _)) = all.range(..=timestamp).next_back() {
            all = all.split_off(&valid);
        }
        if !all.is_empty() {
            versions.update(all)?;
        }
        Ok(())
    }
}

/// The `TemporalJoin` node: both sides keyed by the join key.
#[allow(clippy::too_many_arguments)]
pub fn temporal_join(
    (left, right): (DataStream<Row>, DataStream<Row>),
    (key_expressions, keys): (&[Expr], &[usize]),
    (left_time, right_time): (usize, usize),
    right_width: usize,
    condition: Option<Expr>,
    left_outer: bool,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let expressions = Arc::new(key_expressions.to_vec());
    // The left key is computed once, before the exchange, and travels as a last column
    // that the join drops (as Flink's planner computes it in a Calc before the join): the
    // key selector runs where a row is routed and again where it is processed, and an
    // expression with a function whose result changes between calls (the clock, a
    // function of the program's) would give the two different keys. A NULL key (or one
    // that fails to evaluate) meets no version: such rows share a key no right row has.
    // (The map's records carry no timestamp, which the join does not read: a left row's
    // time is its `left_time` column.)
    let left = left
        .map(move |mut r: Row| {
            let mut key = Vec::new();
            for e in expressions.iter() {
                match e.eval(&r.fields) {
                    Ok(v) if !v.is_null() => v.encode_key(&mut key),
                    _ => {
                        key = b"\xffNULL".to_vec();
                        break;
                    }
                }
            }
            r.fields.push(Value::Bytes(key.into()));
            r
        })
        .name(&format!("{name}: key"))
        .key_by(|r: &Row| match r.fields.last() {
            Some(Value::Bytes(key)) => key.to_vec(),
            _ => b"\xffNULL".to_vec(),
        });
    let keys = Arc::new(keys.to_vec());
    let right = right.key_by(move |r: &Row| key_bytes(r, &keys));
    let function = TemporalJoin {
        left_time,
        right_time,
        right_width,
        condition: condition.map(Arc::new),
        left_outer,
        state: None,
    };
    left.connect(&right).co_process(function).name(name).uid(uid)
}
