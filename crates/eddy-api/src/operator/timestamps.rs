//! The operator a [`WatermarkStrategy`] becomes (Flink's `TimestampsAndWatermarksOperator`):
//! passes records on, feeds their timestamps to the subtask's watermark generator, and
//! emits what it makes: after a record (punctuated), every auto-watermark interval of
//! processing time (periodic), and idleness when nothing came for the strategy's timeout.
//! Watermarks from upstream are dropped, except the end of event time. In a watermark
//! alignment group it pauses its task's source while it is too far ahead.

use super::logic::NoLifecycle;
use super::one_input::OneInputLogic;
use super::timers::InternalTimers;
use crate::function::{FunctionError, FunctionResult, RichFunction, SideOutputs};
use crate::time::{
    AlignmentMember, TimestampFn, WatermarkForward, WatermarkGenerator, WatermarkOutput, WatermarkStrategy,
};
use eddy_runtime::task::OperatorInfo;
use eddy_runtime::Output;

pub(crate) struct TimestampsAndWatermarks<T> {
    strategy: WatermarkStrategy<T>,
    timestamps: TimestampFn<T>,
    /// Made on the first use, in the subtask.
    generator: Option<Box<dyn WatermarkGenerator<T>>>,
    output: WatermarkOutput,
    forward: WatermarkForward,
    /// A record came since the last periodic look.
    active_since_last_look: bool,
    last_active_ms: Option<i64>,
    /// Membership of a watermark alignment group, once open, and whether the source must
    /// wait.
    alignment: Option<(AlignmentMember, bool)>,
    lifecycle: NoLifecycle,
}

impl<T> Clone for TimestampsAndWatermarks<T> {
    fn clone(&self) -> Self {
        Self::new(self.strategy.clone(), self.timestamps.clone())
    }
}

impl<T> TimestampsAndWatermarks<T> {
    pub(crate) fn new(strategy: WatermarkStrategy<T>, timestamps: TimestampFn<T>) -> Self {
        Self {
            strategy,
            timestamps,
            generator: None,
            output: WatermarkOutput::default(),
            forward: WatermarkForward::default(),
            active_since_last_look: false,
            last_active_ms: None,
            alignment: None,
            lifecycle: NoLifecycle,
        }
    }

    /// Sends on what the generator put into its output.
    fn emit(&mut self, main: &mut dyn Output<T>) -> FunctionResult {
        let to_error = |e: eddy_runtime::TaskError| -> FunctionError { Box::new(e) };
        self.forward.forward(&mut self.output, main).map_err(to_error)
    }
}

impl<T: 'static> OneInputLogic<T, T> for TimestampsAndWatermarks<T> {
    fn function(&mut self) -> &mut dyn RichFunction {
        &mut self.lifecycle
    }

    #[inline]
    fn process(
        &mut self,
        record: T,
        main: &mut dyn Output<T>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        let timestamp = (self.timestamps)(&record);
        let generator = self.generator.get_or_insert_with(|| (self.strategy.generator)());
        generator.on_event(&record, timestamp, &mut self.output);
        self.active_since_last_look = true;
        if self.forward.idle {
            self.output.mark_active();
        }
        // The record first, then the watermark it may have moved on.
        main.collect(record);
        if self.output.watermark.is_some() || self.output.idle.is_some() {
            self.emit(main)?;
        }
        Ok(())
    }

    fn on_processing_time(&mut self, now_ms: i64, main: &mut dyn Output<T>) -> FunctionResult<Option<i64>> {
        let generator = self.generator.get_or_insert_with(|| (self.strategy.generator)());
        let last_active = *self.last_active_ms.get_or_insert(now_ms);
        if std::mem::take(&mut self.active_since_last_look) {
            self.last_active_ms = Some(now_ms);
        }
        match self.strategy.idleness_ms {
            Some(timeout)
                if now_ms.saturating_sub(last_active) >= timeout as i64 && self.last_active_ms == Some(last_active) =>
            {
                self.output.mark_idle()
            }
            _ => generator.on_periodic_emit(&mut self.output),
        }
        self.emit(main)?;
        let mut next = self.strategy.interval_ms;
        if let (Some((member, paused)), Some(alignment)) = (&mut self.alignment, &self.strategy.alignment) {
            // An idle source reports nothing: it holds nobody back.
            let own = (!self.forward.idle).then_some(self.forward.emitted);
            *paused = member.report(own);
            next = next.min(alignment.update_interval_ms);
        }
        Ok(Some(now_ms + next as i64))
    }

    fn attach(&mut self, info: &OperatorInfo, _timers: Option<&InternalTimers>) -> FunctionResult {
        if let Some(alignment) = &self.strategy.alignment {
            let member = AlignmentMember::join(alignment, info.seed.0, format!("{}-{}", info.uid, info.subtask));
            self.alignment = Some((member, false));
        }
        Ok(())
    }

    fn source_pause(&self) -> Option<bool> {
        self.alignment.as_ref().map(|(_, paused)| *paused)
    }

    fn passes_upstream_time(&self) -> bool {
        false
    }
}
