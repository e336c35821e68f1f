//! Window aggregation and window table functions on eddy's windows: TUMBLE and HOP on
//! the tumbling and sliding assigners, SESSION on the session assigners, CUMULATE on an
//! assigner of its own; in event time or processing time.

use super::aggregate::{Accumulators, GroupAggregate};
use crate::error::SqlError;
use crate::plan::aggregate::AggregateCall;
use crate::plan::{Plan, WindowKind, WindowSpec};
use crate::row::Row;
use crate::types::TimeAttribute;
use crate::value::Value;
use eddy_api::window::{
    window_function, EventTimeSessionWindows, EventTimeTrigger, ProcessingTimeSessionWindows, ProcessingTimeTrigger,
    SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeWindow, TumblingEventTimeWindows,
    TumblingProcessingTimeWindows, WindowAssigner,
};
use eddy_api::{
    DataStream, FunctionResult, KeyedContext, KeyedProcessFunction, KeyedStream, RichFunction, RuntimeContext,
};
use eddy_runtime::Collector;
use eddy_state::{AggregateFunction, ValueState, ValueStateDescriptor};
use std::sync::Arc;
use std::time::Duration;

/// CUMULATE's windows: `[start, start + step)`, `[start, start + 2·step)` … up to `size`,
/// each firing at its own end (Flink's `CumulativeWindowAssigner`).
#[derive(Debug, Clone)]
pub struct CumulativeWindows<T> {
    step: i64,
    size: i64,
    offset: i64,
    trigger: T,
    event_time: bool,
}

impl<T: Clone + Send + Sync + 'static> WindowAssigner for CumulativeWindows<T> {
    type W = TimeWindow;
    type DefaultTrigger = T;

    fn assign_windows(&self, timestamp: i64, out: &mut Vec<TimeWindow>) {
        let start = TimeWindow::window_start_with_offset(timestamp, self.offset, self.size);
        let last_end = start + self.size;
        let first_end = TimeWindow::window_start_with_offset(timestamp, self.offset, self.step) + self.step;
        let mut end = first_end;
        while end <= last_end {
            out.push(TimeWindow::new(start, end));
            end += self.step;
        }
    }

    fn default_trigger(&self) -> T {
        self.trigger.clone()
    }

    fn is_event_time(&self) -> bool {
        self.event_time
    }

    fn time_window(&self, window: TimeWindow) -> Option<TimeWindow> {
        Some(window)
    }
}

fn ms(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

/// The rows of one (key, window): the keys, the aggregates, then window_start, window_end
/// and window_time (the end − 1 ms).
fn emit(results: &mut dyn Iterator<Item = Vec<Value>>, window: &TimeWindow, out: &mut Collector<'_, Row>) {
    for mut fields in results {
        fields.push(Value::timestamp_millis(window.start));
        fields.push(Value::timestamp_millis(window.end));
        fields.push(Value::timestamp_millis(window.end - 1));
        out.collect(Row::insert(fields));
    }
}

/// Keys of a row as bytes (the key every keyed SQL operator routes by).
pub fn key_bytes(row: &Row, keys: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 * keys.len());
    for k in keys {
        row.fields[*k].encode_key(&mut out);
    }
    out
}

fn aggregate_over<A>(keyed: &KeyedStream<Row, Vec<u8>>, assigner: A, function: GroupAggregate) -> DataStream<Row>
where
    A: WindowAssigner<W = TimeWindow>,
    A::DefaultTrigger: eddy_api::window::Trigger<Row, TimeWindow>,
{
    keyed.window(assigner).aggregate_with(
        function,
        window_function(
            |_key: &Vec<u8>,
             window: &TimeWindow,
             results: &mut dyn Iterator<Item = Vec<Value>>,
             out: &mut Collector<'_, Row>| { emit(results, window, out) },
        ),
    )
}

/// `GROUP BY keys, window` with `aggregates`: input rows are the grouping's
/// pre-projection, whose `window.time_column` is the rowtime the windows follow.
pub fn aggregate(
    input: DataStream<Row>,
    input_plan: &Plan,
    window: &WindowSpec,
    keys: &[usize],
    aggregates: &[AggregateCall],
    name: &str,
    uid: &str,
) -> Result<DataStream<Row>, SqlError> {
    let _ = input_plan;
    let time = window.time_column;
    let input = match window.time {
        TimeAttribute::Rowtime => {
            input.with_timestamps(move |row: &Row| row.fields[time].as_millis().unwrap_or(i64::MIN))
        }
        TimeAttribute::Proctime => input,
    };
    let key_columns = Arc::new(keys.to_vec());
    // Attached windows route by the window too: each (key, window) is a group.
    let routing = Arc::new(match window.kind {
        WindowKind::Attached => keys.iter().copied().chain([time, time + 1]).collect(),
        _ => keys.to_vec(),
    });
    let keyed = input.key_by(move |row: &Row| key_bytes(row, &routing));
    let function = GroupAggregate { keys: key_columns, calls: Arc::new(aggregates.to_vec()) };
    let event = window.time == TimeAttribute::Rowtime;
    if window.kind == WindowKind::Attached {
        return Ok(attached(keyed, window.time_column, function, event).name(name).uid(uid));
    }
    let stream = match (&window.kind, event) {
        (WindowKind::Tumble { size, offset }, true) => {
            aggregate_over(&keyed, TumblingEventTimeWindows::of(ms(*size)).with_offset(ms(*offset)), function)
        }
        (WindowKind::Tumble { size, offset }, false) => {
            aggregate_over(&keyed, TumblingProcessingTimeWindows::of(ms(*size)).with_offset(ms(*offset)), function)
        }
        (WindowKind::Hop { slide, size, offset }, true) => aggregate_over(
            &keyed,
            SlidingEventTimeWindows::of(ms(*size), ms(*slide)).with_offset(ms(*offset)),
            function,
        ),
        (WindowKind::Hop { slide, size, offset }, false) => aggregate_over(
            &keyed,
            SlidingProcessingTimeWindows::of(ms(*size), ms(*slide)).with_offset(ms(*offset)),
            function,
        ),
        (WindowKind::Cumulate { step, size, offset }, true) => aggregate_over(
            &keyed,
            CumulativeWindows {
                step: *step,
                size: *size,
                offset: *offset,
                trigger: EventTimeTrigger,
                event_time: true,
            },
            function,
        ),
        (WindowKind::Cumulate { step, size, offset }, false) => aggregate_over(
            &keyed,
            CumulativeWindows {
                step: *step,
                size: *size,
                offset: *offset,
                trigger: ProcessingTimeTrigger,
                event_time: false,
            },
            function,
        ),
        (WindowKind::Session { gap }, true) => {
            aggregate_over(&keyed, EventTimeSessionWindows::with_gap(ms(*gap)), function)
        }
        (WindowKind::Session { gap }, false) => {
            aggregate_over(&keyed, ProcessingTimeSessionWindows::with_gap(ms(*gap)), function)
        }
        (WindowKind::Attached, _) => unreachable!("handled above"),
    };
    Ok(stream.name(name).uid(uid))
}

/// A window table function by itself: each row once per window it falls in, with the
/// window's columns appended.
pub fn table_function(
    input: DataStream<Row>,
    input_plan: &Plan,
    window: &WindowSpec,
    name: &str,
    uid: &str,
) -> Result<DataStream<Row>, SqlError> {
    let _ = input_plan;
    let time = window.time_column;
    let (step, size, offset, cumulate) = match window.kind {
        WindowKind::Tumble { size, offset } => (size, size, offset, false),
        WindowKind::Hop { slide, size, offset } => (slide, size, offset, false),
        WindowKind::Cumulate { step, size, offset } => (step, size, offset, true),
        WindowKind::Session { .. } | WindowKind::Attached => {
            return Err(SqlError::unsupported(
                None,
                "a SESSION window table function that is not aggregated (sessions merge as rows arrive)",
            ))
        }
    };
    let proctime = window.time == TimeAttribute::Proctime;
    let stream = input.flat_map(move |row: Row, out: &mut Collector<'_, Row>| {
        let t = if proctime {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
        } else {
            match row.fields[time].as_millis() {
                Some(t) => t,
                None => return,
            }
        };
        let mut windows = Vec::new();
        if cumulate {
            CumulativeWindows { step, size, offset, trigger: EventTimeTrigger, event_time: true }
                .assign_windows(t, &mut windows);
        } else {
            let last_start = TimeWindow::window_start_with_offset(t, offset, step);
            let mut start = last_start;
            while start > t - size {
                windows.push(TimeWindow::new(start, start + size));
                start -= step;
            }
            windows.reverse();
        }
        for w in windows {
            let mut fields = row.fields.clone();
            fields.push(Value::timestamp_millis(w.start));
            fields.push(Value::timestamp_millis(w.end));
            fields.push(Value::timestamp_millis(w.end - 1));
            out.collect(Row { kind: row.kind, fields });
        }
    });
    Ok(stream.name(name).uid(uid))
}

/// Aggregation over windows the rows carry (`start` and `start + 1` are their window's
/// columns): per (key, window) an accumulator, emitted when the watermark (or the clock)
/// passes the window's end.
fn attached(
    keyed: KeyedStream<Row, Vec<u8>>,
    start: usize,
    function: GroupAggregate,
    event_time: bool,
) -> DataStream<Row> {
    keyed.process(AttachedWindowAggregate { start, function, event_time, state: None })
}

#[derive(Clone)]
struct AttachedWindowAggregate {
    start: usize,
    function: GroupAggregate,
    event_time: bool,
    state: Option<ValueState<(i64, i64, Accumulators)>>,
}

impl RichFunction for AttachedWindowAggregate {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&ValueStateDescriptor::new("window-accumulators"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for AttachedWindowAggregate {
    fn process_element(
        &mut self,
        row: Row,
        ctx: &mut KeyedContext<'_, Vec<u8>>,
        _out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let (Some(start), Some(end)) = (row.fields[self.start].as_millis(), row.fields[self.start + 1].as_millis())
        else {
            return Ok(());
        };
        let mut timers = ctx.timer_service();
        if self.event_time && end - 1 <= timers.current_watermark() {
            // Late: its window fired already (Flink drops it too).
            return Ok(());
        }
        let state = self.state.as_ref().ok_or("the window aggregation is used before open (bug)")?;
        let (_, _, acc) = state.value()?.unwrap_or_else(|| (start, end, self.function.create_accumulator()));
        state.update((start, end, self.function.add(row, acc)))?;
        if self.event_time {
            timers.register_event_time_timer(end - 1)?;
        } else {
            timers.register_processing_time_timer(end - 1)?;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        _timestamp: i64,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let state = self.state.as_ref().ok_or("the window aggregation is used before open (bug)")?;
        if let Some((start, end, acc)) = state.value()? {
            emit(&mut std::iter::once(self.function.get_result(&acc)), &TimeWindow::new(start, end), out);
            state.clear()?;
        }
        Ok(())
    }
}
