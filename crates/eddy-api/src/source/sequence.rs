//! The numbers `from..=to`, split into contiguous ranges over the subtasks.

use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;

const RANGES_STATE: &str = "sequence-ranges";

/// Flink's `fromSequence`: subtask `j` of `p` reads the `j`-th of `p` contiguous ranges,
/// the first `count mod p` of them one longer. The ranges still to read are its operator
/// state (even-split), so a restore — also at another parallelism — resumes exactly.
#[derive(Clone, Debug)]
pub struct SequenceSource {
    from: u64,
    to: u64,
    /// Inclusive ranges `[next, last]` this subtask has still to emit.
    ranges: Vec<(u64, u64)>,
}

impl SequenceSource {
    pub fn new(from: u64, to: u64) -> Self {
        Self { from, to, ranges: Vec::new() }
    }

    /// The range subtask `index` of `parallelism` reads, `None` if it is empty.
    pub fn split(from: u64, to: u64, index: u32, parallelism: u32) -> Option<(u64, u64)> {
        if from > to {
            return None;
        }
        let count = u128::from(to - from) + 1;
        let p = u128::from(parallelism);
        let i = u128::from(index);
        let base = count / p;
        let longer = count % p;
        let start = i * base + i.min(longer);
        let len = base + u128::from(i < longer);
        (len > 0).then(|| (from + start as u64, from + (start + len - 1) as u64))
    }

    /// Takes up to `max` (at least 1) numbers from the front of the inclusive range
    /// `range`: the numbers taken, and whether the range is used up.
    pub(crate) fn take_front(range: &mut (u64, u64), max: u64) -> ((u64, u64), bool) {
        let (next, last) = *range;
        let end = last.min(next.saturating_add(max.max(1) - 1));
        if end < last {
            range.0 = end + 1;
        }
        ((next, end), end == last)
    }

    fn descriptor() -> ListStateDescriptor<(u64, u64)> {
        ListStateDescriptor::new(RANGES_STATE)
    }
}

impl RichFunction for SequenceSource {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let (index, parallelism) = (ctx.index_of_this_subtask().0, ctx.number_of_parallel_subtasks());
        let store = ctx.operator_state();
        let restored = store.is_restored();
        let state = store.list_state(&Self::descriptor())?;
        self.ranges = if restored {
            state.get()
        } else {
            Self::split(self.from, self.to, index, parallelism).into_iter().collect()
        };
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&Self::descriptor())?.update(self.ranges.clone());
        Ok(())
    }
}

impl SourceFunction<u64> for SequenceSource {
    #[inline]
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, u64>) -> FunctionResult<SourceStep> {
        let Some(range) = self.ranges.first_mut() else {
            return Ok(SourceStep::Finished);
        };
        let ((next, end), used_up) = Self::take_front(range, max_records as u64);
        for i in next..=end {
            out.collect(i);
        }
        if used_up {
            self.ranges.remove(0);
        }
        Ok(SourceStep::More)
    }
}
