//! The elements of a collection, in order (non-parallel).

use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;
use std::sync::Arc;

const OFFSET_STATE: &str = "collection-offset";

/// Flink's `fromCollection`; the number of elements emitted is its operator state.
#[derive(Clone, Debug)]
pub struct CollectionSource<T> {
    elements: Arc<Vec<T>>,
    offset: usize,
}

impl<T> CollectionSource<T> {
    pub fn new(elements: Vec<T>) -> Self {
        Self { elements: Arc::new(elements), offset: 0 }
    }
}

impl<T> RichFunction for CollectionSource<T> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let state = ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new(OFFSET_STATE))?;
        self.offset = state.as_slice().first().copied().unwrap_or(0) as usize;
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state()
            .list_state(&ListStateDescriptor::<u64>::new(OFFSET_STATE))?
            .update(vec![self.offset as u64]);
        Ok(())
    }
}

impl<T: Clone + Send + Sync + 'static> SourceFunction<T> for CollectionSource<T> {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, T>) -> FunctionResult<SourceStep> {
        if self.offset >= self.elements.len() {
            return Ok(SourceStep::Finished);
        }
        let end = self.elements.len().min(self.offset + max_records);
        for element in &self.elements[self.offset..end] {
            out.collect(element.clone());
        }
        self.offset = end;
        Ok(SourceStep::More)
    }
}
