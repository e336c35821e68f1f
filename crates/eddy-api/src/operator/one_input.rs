//! The one-input operator: map, filter, flat-map, process, keyed process, sinks.

use super::core::OperatorCore;
use crate::function::{FunctionResult, RichFunction, SideOutputs};
use eddy_checkpoint::OperatorSnapshot;
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::graph::{ErasedOutput, OneInputFactory};
use eddy_runtime::output::Discard;
use eddy_runtime::task::OperatorInfo;
use eddy_runtime::{Lifecycle, Output, TaskError, TypedOutput};
use std::marker::PhantomData;
use std::sync::Arc;

/// What one record does in a one-input operator.
pub(crate) trait OneInputLogic<I, O>: 'static {
    fn function(&mut self) -> &mut dyn RichFunction;
    fn process(&mut self, record: I, main: &mut dyn Output<O>, side: &mut SideOutputs) -> FunctionResult;
    /// All input has ended (a sink flushes here).
    fn end_input(&mut self) -> FunctionResult {
        Ok(())
    }
}

pub(crate) struct OneInputOperator<I, O, L> {
    logic: L,
    main: Box<dyn Output<O>>,
    core: OperatorCore,
    _input: PhantomData<fn(I)>,
}

impl<I: 'static, O: 'static, L: OneInputLogic<I, O>> OneInputOperator<I, O, L> {
    /// A factory for the runtime: clones `prototype` per subtask. `O = ()` marks a sink,
    /// whose main output is discarded.
    pub(crate) fn factory(prototype: L, keyed: bool) -> OneInputFactory
    where
        L: Clone + Send + Sync,
    {
        Arc::new(move |info: OperatorInfo, ports: Vec<ErasedOutput>| {
            let (core, main) = OperatorCore::new(info, keyed, ports);
            let main = match main {
                Some(port) => TypedOutput::<O>::unerase(port),
                None => Box::new(Discard),
            };
            TypedOutput::<I>::erase(Box::new(Self { logic: prototype.clone(), main, core, _input: PhantomData }))
        })
    }
}

impl<I, O, L: OneInputLogic<I, O>> Output<I> for OneInputOperator<I, O, L> {
    #[inline]
    fn collect(&mut self, record: I) {
        let shared = &self.core.info.shared;
        let previous = shared.enter(self.core.info.index);
        if let Err(error) = self.logic.process(record, &mut *self.main, &mut self.core.side) {
            self.core.fail(error);
        }
        self.core.info.shared.leave(previous);
    }
}

impl<I, O, L: OneInputLogic<I, O>> Lifecycle for OneInputOperator<I, O, L> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.core.open_with(&mut *self.main, self.logic.function())
    }

    fn flush(&mut self) -> Result<(), TaskError> {
        self.core.flush_with(&mut *self.main)
    }

    fn end_input(&mut self) -> Result<(), TaskError> {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let finished = self.logic.end_input();
        self.core.info.shared.leave(previous);
        finished.map_err(|e| self.core.error(e))?;
        self.core.end_input_with(&mut *self.main)
    }

    fn close(&mut self) {
        self.core.close_with(&mut *self.main, self.logic.function());
    }

    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        self.core.snapshot_with(&mut *self.main, barrier, snapshots, self.logic.function())
    }

    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        self.core.notify_with(&mut *self.main, event, self.logic.function())
    }

    fn on_watermark(&mut self, watermark: eddy_types::Watermark) -> Result<(), TaskError> {
        self.core.watermark_with(&mut *self.main, watermark)
    }
}
