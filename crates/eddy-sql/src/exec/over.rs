//! OVER aggregations (Flink's `OverAggregate`): per partition, each row gets the
//! aggregates of its frame, the rows up to it by its time attribute. In event time the
//! rows wait until the watermark passes them and are taken in time order (those of one
//! time in arrival order; a row behind the watermark when it comes is late and dropped,
//! as Flink drops it); in processing time each row is taken as it comes. A ROWS frame
//! covers the row and the `n` rows before it; a RANGE frame covers the rows at most the
//! interval older, and a row's peers of the same time too. The output appends.

use super::group_aggregate::{apply, fresh, result, GroupAccumulator};
use super::keyed_process;
use crate::plan::aggregate::AggregateCall;
use crate::plan::OverFrame;
use crate::row::Row;
use crate::types::TimeAttribute;
use crate::value::Value;
use eddy_api::{DataStream, FunctionResult, KeyedContext, KeyedProcessFunction, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::{ValueState, ValueStateDescriptor};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A partition's rows waiting for the watermark, the rows a later frame may still cover,
/// and (for an unbounded frame) the accumulators of every row so far.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct OverState {
    pending: BTreeMap<i64, Vec<Vec<Value>>>,
    history: VecDeque<(i64, Vec<Value>)>,
    accumulators: Vec<GroupAccumulator>,
}

#[derive(Clone)]
struct OverAggregate {
    time_column: usize,
    time: TimeAttribute,
    frame: OverFrame,
    calls: Arc<Vec<AggregateCall>>,
    state: Option<ValueState<OverState>>,
}

impl RichFunction for OverAggregate {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&ValueStateDescriptor::new("over-rows"))?);
        Ok(())
    }
}

impl OverAggregate {
    fn add(&self, accumulators: &mut [GroupAccumulator], row: &[Value]) {
        for (acc, call) in accumulators.iter_mut().zip(self.calls.iter()) {
            if let Some(f) = call.filter {
                if row[f] != Value::Boolean(true) {
                    continue;
                }
            }
            apply(acc, call, call.argument.map(|i| &row[i]).unwrap_or(&Value::Null), 1);
        }
    }

    fn fresh(&self) -> Vec<GroupAccumulator> {
        self.calls.iter().map(|c| fresh(c, false, true)).collect()
    }

    fn emit(&self, row: Vec<Value>, accumulators: &[GroupAccumulator], out: &mut Collector<'_, Row>) {
        let mut fields = row;
        fields.extend(accumulators.iter().zip(self.calls.iter()).map(|(a, c)| result(a, c)));
        out.collect(Row::insert(fields));
    }

    /// The rows of one time, in arrival order, each with its frame's aggregates.
    fn take(&self, state: &mut OverState, time: i64, rows: Vec<Vec<Value>>, out: &mut Collector<'_, Row>) {
        match (self.frame.rows, self.frame.preceding) {
            (true, None) => {
                for row in rows {
                    self.add(&mut state.accumulators, &row);
                    self.emit(row, &state.accumulators, out);
                }
            }
            (false, None) => {
                for row in &rows {
                    self.add(&mut state.accumulators, row);
                }
                for row in rows {
                    self.emit(row, &state.accumulators, out);
                }
            }
            (true, Some(n)) => {
                for row in rows {
                    let mut accumulators = self.fresh();
                    let skip = state.history.len().saturating_sub(n as usize);
                    for (_, earlier) in state.history.iter().skip(skip) {
                        self.add(&mut accumulators, earlier);
                    }
                    self.add(&mut accumulators, &row);
                    self.emit(row.clone(), &accumulators, out);
                    state.history.push_back((time, row));
                    while state.history.len() > n as usize {
                        state.history.pop_front();
                    }
                }
            }
            (false, Some(interval)) => {
                while state.history.front().is_some_and(|(t, _)| *t < time - interval) {
                    state.history.pop_front();
                }
                let mut accumulators = self.fresh();
                for (_, earlier) in &state.history {
                    self.add(&mut accumulators, earlier);
                }
                for row in &rows {
                    self.add(&mut accumulators, row);
                }
                for row in rows {
                    self.emit(row.clone(), &accumulators, out);
                    state.history.push_back((time, row));
                }
            }
        }
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for OverAggregate {
    fn process_element(
        &mut self,
        row: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let state = self.state.as_ref().ok_or("the OVER aggregation is used before open (bug)")?;
        let mut current =
            state.take()?.unwrap_or_else(|| OverState { accumulators: self.fresh(), ..Default::default() });
        let mut timers = ctx.timer_service();
        match self.time {
            TimeAttribute::Rowtime => {
                let Some(t) = row.fields[self.time_column].as_millis() else {
                    return state.update(current).map_err(Into::into);
                };
                if t <= timers.current_watermark() {
                    // Late: its frame's rows were taken already.
                    state.update(current)?;
                    return Ok(());
                }
                timers.register_event_time_timer(t)?;
                current.pending.entry(t).or_default().push(row.fields);
            }
            TimeAttribute::Proctime => {
                let now = timers.current_processing_time();
                self.take(&mut current, now, vec![row.fields], out);
            }
        }
        state.update(current)?;
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let state = self.state.as_ref().ok_or("the OVER aggregation is used before open (bug)")?;
        let Some(mut current) = state.take()? else { return Ok(()) };
        let later = current.pending.split_off(&(timestamp + 1));
        let due = std::mem::replace(&mut current.pending, later);
        for (time, rows) in due {
            self.take(&mut current, time, rows, out);
        }
        state.update(current)?;
        Ok(())
    }
}

/// The `OverAggregate` node: rows keyed by the partition (all to one subtask without one).
pub fn over_aggregate(
    input: DataStream<Row>,
    partition_keys: &[usize],
    (time_column, time): (usize, TimeAttribute),
    frame: OverFrame,
    calls: &[AggregateCall],
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let function = OverAggregate { time_column, time, frame, calls: Arc::new(calls.to_vec()), state: None };
    keyed_process(input, partition_keys, function, name, uid)
}
