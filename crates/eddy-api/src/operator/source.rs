//! The source operator: runs a [`SourceFunction`] at the head of a chain.

use super::core::OperatorCore;
use crate::function::{SourceFunction, SourceStep};
use crate::time::{WatermarkForward, WatermarkOutput};
use eddy_checkpoint::OperatorSnapshot;
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::graph::{ErasedOutput, SourceFactory};
use eddy_runtime::output::Discard;
use eddy_runtime::task::{OperatorInfo, SourceOperator, SourceStatus};
use eddy_runtime::{Collector, Lifecycle, Output, TaskError, TypedOutput};
use std::sync::Arc;

pub(crate) struct SourceOp<T, S> {
    function: S,
    main: Box<dyn Output<T>>,
    core: OperatorCore,
    /// What the source says of event time, and what of it went downstream.
    watermarks: WatermarkOutput,
    forward: WatermarkForward,
}

impl<T: 'static, S: SourceFunction<T>> SourceOp<T, S> {
    pub(crate) fn factory(prototype: S) -> SourceFactory {
        Arc::new(move |info: OperatorInfo, ports: Vec<ErasedOutput>| -> Box<dyn SourceOperator> {
            let (core, main) = OperatorCore::new(info, false, ports);
            let main = match main {
                Some(port) => TypedOutput::<T>::unerase(port),
                None => Box::new(Discard),
            };
            Box::new(Self {
                function: prototype.clone(),
                main,
                core,
                watermarks: WatermarkOutput::default(),
                forward: WatermarkForward::default(),
            })
        })
    }
}

impl<T, S: SourceFunction<T>> Lifecycle for SourceOp<T, S> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.core.open_with(&mut *self.main, &mut self.function)
    }

    fn flush(&mut self) -> Result<(), TaskError> {
        self.core.flush_with(&mut *self.main)
    }

    fn end_input(&mut self) -> Result<(), TaskError> {
        self.core.end_input_with(&mut *self.main)
    }

    fn close(&mut self) {
        self.core.close_with(&mut *self.main, &mut self.function);
    }

    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        self.core.snapshot_with(&mut *self.main, barrier, snapshots, &mut self.function)
    }

    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        self.core.notify_with(&mut *self.main, event, &mut self.function)
    }

    fn on_watermark(&mut self, watermark: eddy_types::Watermark) -> Result<(), TaskError> {
        self.core.watermark_with(&mut *self.main, watermark)
    }

    fn on_watermark_status(&mut self, status: eddy_types::WatermarkStatus) -> Result<(), TaskError> {
        self.core.watermark_status_with(&mut *self.main, status)
    }

    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), TaskError> {
        self.core.processing_time_with(&mut *self.main, now_ms)
    }

    fn handle_operator_event(&mut self, event: Vec<u8>) -> Result<(), TaskError> {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let result = self.function.handle_operator_event(&event);
        self.core.info.shared.leave(previous);
        result.map_err(|e| self.core.error(e))
    }
}

impl<T, S: SourceFunction<T>> SourceOperator for SourceOp<T, S> {
    fn emit(&mut self) -> SourceStatus {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let step = self.core.info.shared.source_step_records();
        let mut result = self.function.emit_batch(step, &mut Collector::new(&mut *self.main));
        if result.is_ok() {
            self.function.emit_watermarks(&mut self.watermarks);
            if let Err(error) = self.forward.forward(&mut self.watermarks, &mut *self.main) {
                result = Err(Box::new(error));
            }
        }
        self.core.info.shared.leave(previous);
        match result {
            Ok(SourceStep::More) => SourceStatus::More,
            Ok(SourceStep::Idle) => SourceStatus::Idle,
            Ok(SourceStep::Finished) => SourceStatus::Finished,
            Err(error) => {
                self.core.fail(error);
                SourceStatus::Idle
            }
        }
    }

    fn paused(&mut self) {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let result = self.function.while_paused();
        self.core.info.shared.leave(previous);
        if let Err(error) = result {
            self.core.fail(error);
        }
    }
}
