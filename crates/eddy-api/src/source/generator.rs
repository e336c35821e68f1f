//! Flink's `DataGeneratorSource`: records made by a function of their index, at most so
//! many per second, so that failover, backpressure and windows can be tried on a small job
//! without preparing input.

use super::SequenceSource;
use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RANGES_STATE: &str = "data-generator-ranges";

/// Records `generator(i)` for `i` in `0..count` (`u64::MAX`: practically unbounded),
/// split into contiguous index ranges over the subtasks; the ranges still to generate are
/// even-split operator state, so a restore at any parallelism generates every index once.
/// `records_per_second` caps the whole source (each subtask its share; 0: no cap).
pub struct DataGeneratorSource<T> {
    count: u64,
    generator: Arc<dyn Fn(u64) -> T + Send + Sync>,
    records_per_second: u64,
    /// This subtask's share of the rate, and its inclusive index ranges still to emit.
    rate: f64,
    ranges: Vec<(u64, u64)>,
    /// When the rate's accounting started and how many records went since.
    started: Option<Instant>,
    emitted: u64,
}

impl<T> Clone for DataGeneratorSource<T> {
    fn clone(&self) -> Self {
        Self {
            count: self.count,
            generator: self.generator.clone(),
            records_per_second: self.records_per_second,
            rate: self.rate,
            ranges: self.ranges.clone(),
            started: None,
            emitted: 0,
        }
    }
}

impl<T> DataGeneratorSource<T> {
    pub fn new(count: u64, records_per_second: u64, generator: impl Fn(u64) -> T + Send + Sync + 'static) -> Self {
        Self {
            count,
            generator: Arc::new(generator),
            records_per_second,
            rate: 0.0,
            ranges: Vec::new(),
            started: None,
            emitted: 0,
        }
    }

    fn descriptor() -> ListStateDescriptor<(u64, u64)> {
        ListStateDescriptor::new(RANGES_STATE)
    }

    /// How many records the rate lets out now (`max` without a cap).
    fn allowed(&mut self, max: usize) -> usize {
        if self.rate <= 0.0 {
            return max;
        }
        let started = *self.started.get_or_insert_with(Instant::now);
        let due = (started.elapsed().as_secs_f64() * self.rate) as u64;
        due.saturating_sub(self.emitted).min(max as u64) as usize
    }
}

impl<T> RichFunction for DataGeneratorSource<T> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let (index, parallelism) = (ctx.index_of_this_subtask().0, ctx.number_of_parallel_subtasks());
        self.rate = self.records_per_second as f64 / f64::from(parallelism);
        let store = ctx.operator_state();
        let restored = store.is_restored();
        let state = store.list_state(&Self::descriptor())?;
        self.ranges = if restored {
            state.get()
        } else if self.count == 0 {
            Vec::new()
        } else {
            SequenceSource::split(0, self.count - 1, index, parallelism).into_iter().collect()
        };
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&Self::descriptor())?.update(self.ranges.clone());
        Ok(())
    }
}

impl<T: 'static> SourceFunction<T> for DataGeneratorSource<T> {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, T>) -> FunctionResult<SourceStep> {
        let Some(&(next, last)) = self.ranges.first() else {
            return Ok(SourceStep::Finished);
        };
        let allowed = self.allowed(max_records);
        if allowed == 0 {
            // Not due yet: wait a little, the task loop takes its messages meanwhile.
            std::thread::sleep(Duration::from_millis(1));
            return Ok(SourceStep::Idle);
        }
        let end = last.min(next.saturating_add(allowed as u64 - 1));
        for i in next..=end {
            out.collect((self.generator)(i));
        }
        self.emitted += end - next + 1;
        if end == last {
            self.ranges.remove(0);
        } else {
            self.ranges[0].0 = end + 1;
        }
        Ok(SourceStep::More)
    }
}
