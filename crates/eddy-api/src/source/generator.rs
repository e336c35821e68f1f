//! Flink's `DataGeneratorSource`: records made by a function of their index, at most so
//! many per second, so that failover, backpressure and windows can be tried on a small job
//! without preparing input.

use super::number_sequence::{range_enumerator, Next, RangeReader};
use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::coordination::CoordinatorProvider;
use eddy_runtime::Collector;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Its readers' state: the index ranges they hold (the name earlier eddy used for the
/// same ranges, so its checkpoints still restore).
const RANGES_STATE: &str = "data-generator-ranges";

/// Records `generator(i)` for `i` in `0..count` (`u64::MAX`: practically unbounded). The
/// indexes are range splits that the source's split enumerator hands to readers that ask
/// (as [`super::NumberSequenceSource`]); the ranges still to generate are in the
/// enumerator's and the readers' state, so a restore at any parallelism generates every
/// index once. `records_per_second` caps the whole source (each subtask its share; 0: no
/// cap).
pub struct DataGeneratorSource<T> {
    count: u64,
    generator: Arc<dyn Fn(u64) -> T + Send + Sync>,
    records_per_second: u64,
    /// This subtask's share of the rate.
    rate: f64,
    reader: RangeReader,
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
            reader: self.reader.clone(),
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
            reader: RangeReader::new(RANGES_STATE),
            started: None,
            emitted: 0,
        }
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
        self.rate = self.records_per_second as f64 / f64::from(ctx.number_of_parallel_subtasks());
        self.reader.initialize(ctx)
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        self.reader.snapshot(ctx)
    }
}

impl<T: 'static> SourceFunction<T> for DataGeneratorSource<T> {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, T>) -> FunctionResult<SourceStep> {
        let allowed = self.allowed(max_records);
        if allowed == 0 {
            // Not due yet: wait a little, the task loop takes its messages meanwhile.
            std::thread::sleep(Duration::from_millis(1));
            return Ok(SourceStep::Idle);
        }
        Ok(match self.reader.take(allowed as u64)? {
            Next::Range(next, last) => {
                for i in next..=last {
                    out.collect((self.generator)(i));
                }
                self.emitted += last - next + 1;
                SourceStep::More
            }
            Next::Idle => {
                // Waiting for a range is no credit: the rate starts again when it comes.
                (self.started, self.emitted) = (None, 0);
                SourceStep::Idle
            }
            Next::Finished => SourceStep::Finished,
        })
    }

    fn coordinator(&self) -> Option<CoordinatorProvider> {
        // `count` 0: an empty range.
        Some(match self.count.checked_sub(1) {
            Some(last) => range_enumerator(0, last),
            None => range_enumerator(1, 0),
        })
    }

    fn handle_operator_event(&mut self, event: &[u8]) -> FunctionResult {
        self.reader.on_event(event)
    }
}
