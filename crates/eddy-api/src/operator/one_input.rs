//! The one-input operator: map, filter, flat-map, process, keyed process, sinks.

use super::core::OperatorCore;
use super::timers::{InternalTimers, TimeDomain};
use crate::function::{FunctionResult, RichFunction, SideOutputs};
use eddy_checkpoint::OperatorSnapshot;
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::graph::{ErasedOutput, OneInputFactory};
use eddy_runtime::output::{try_each_record, Discard};
use eddy_runtime::task::OperatorInfo;
use eddy_runtime::{Lifecycle, Output, TaskError, TypedOutput};
use eddy_state::keyed::Timer;
use eddy_types::KeyHash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::vec::Drain;

/// What one record does in a one-input operator.
pub(crate) trait OneInputLogic<I, O>: 'static {
    fn function(&mut self) -> &mut dyn RichFunction;
    /// `timers`: a keyed operator's timer service (`None` when not keyed).
    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult;
    /// The records of a batch, from the front of `records` until it is empty or
    /// `stop(processed so far)` says to stop (see [`Output::collect_batch`]); a failure
    /// ends the batch. Keyed logic takes the batch in passes ([`KeyScope::each_keyed`]).
    ///
    /// [`KeyScope::each_keyed`]: crate::key::KeyScope::each_keyed
    #[inline]
    fn process_batch(
        &mut self,
        records: &mut Drain<'_, I>,
        _hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        try_each_record(records, stop, |record| self.process(record, main, side, timers))
    }
    /// All input has ended (a sink flushes here; async I/O emits what is in flight).
    fn end_input(&mut self, _main: &mut dyn Output<O>) -> FunctionResult {
        Ok(())
    }
    /// Whether the task must call [`OneInputLogic::on_processing_time`] again soon after
    /// this record or batch (async I/O while requests are in flight).
    #[inline]
    fn wants_wakeup(&self) -> bool {
        false
    }
    /// A watermark from upstream: `true` if the logic keeps it, to pass it on itself later
    /// through `main` in order with what it holds back (async I/O); `false` passes it on now.
    fn hold_watermark(&mut self, _watermark: eddy_types::Watermark, _main: &mut dyn Output<O>) -> FunctionResult<bool> {
        Ok(false)
    }
    /// A watermark status from upstream: `true` if the logic keeps it, as
    /// [`OneInputLogic::hold_watermark`] (an idle input must not be announced while
    /// records of it are still held back).
    fn hold_watermark_status(&mut self, _status: eddy_types::WatermarkStatus) -> bool {
        false
    }
    /// A timer of a keyed operator fired; its key and namespace are current.
    fn on_timer(
        &mut self,
        _timer: Timer,
        _domain: TimeDomain,
        _main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: &InternalTimers,
    ) -> FunctionResult {
        Ok(())
    }
    /// Processing time reached `now_ms` (also called once at open): what the logic does
    /// on its own clock (periodic watermarks). Returns when to be called next.
    fn on_processing_time(&mut self, _now_ms: i64, _main: &mut dyn Output<O>) -> FunctionResult<Option<i64>> {
        Ok(None)
    }
    /// Called once when the operator opens, with what it knows about itself and, keyed,
    /// its timers (restored ones among them).
    fn attach(&mut self, _info: &OperatorInfo, _timers: Option<&InternalTimers>) -> FunctionResult {
        Ok(())
    }
    /// Time in `domain` reached `time` (the watermark, or processing time), and the timers
    /// it passed fired: what the logic keeps outside the timer queues fires now (windows
    /// that fire from the window operator's ordered windows).
    fn on_time(
        &mut self,
        _domain: TimeDomain,
        _time: i64,
        _main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        Ok(())
    }
    /// Before the operator's state is snapshotted: what the logic keeps outside keyed state
    /// goes in, as keyed state and timers.
    fn before_snapshot(&mut self, _timers: Option<&InternalTimers>) -> FunctionResult {
        Ok(())
    }
    /// After the snapshot: takes out again what [`OneInputLogic::before_snapshot`] put in.
    fn after_snapshot(&mut self, _timers: Option<&InternalTimers>) -> FunctionResult {
        Ok(())
    }
    /// Whether the chain's source must wait (watermark alignment); `None`: not this
    /// operator's say.
    fn source_pause(&self) -> Option<bool> {
        None
    }
    /// Whether watermarks and watermark statuses from upstream pass on (false for an
    /// operator that makes its own, Flink's `TimestampsAndWatermarksOperator`: only the
    /// end of event time passes).
    fn passes_upstream_time(&self) -> bool {
        true
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

impl<I, O, L: OneInputLogic<I, O>> OneInputOperator<I, O, L> {
    /// Runs `work` on the logic as this operator (its metrics and failure slot): a
    /// failure goes into the task's failure slot; a logic that waits for something asks
    /// to be woken soon.
    #[inline]
    fn run(
        &mut self,
        work: impl FnOnce(&mut L, &mut dyn Output<O>, &mut SideOutputs, Option<&InternalTimers>) -> FunctionResult,
    ) {
        let shared = &self.core.info.shared;
        let previous = shared.enter(self.core.info.index);
        let core = &mut self.core;
        if let Err(error) = work(&mut self.logic, &mut *self.main, &mut core.side, core.timers.as_ref()) {
            self.core.fail(error);
        }
        if self.logic.wants_wakeup() {
            let shared = &self.core.info.shared;
            shared.request_processing_time(shared.processing_time() + 1);
        }
        self.core.info.shared.leave(previous);
    }
}

impl<I, O, L: OneInputLogic<I, O>> Output<I> for OneInputOperator<I, O, L> {
    #[inline]
    fn collect(&mut self, record: I) {
        self.run(|logic, main, side, timers| logic.process(record, main, side, timers));
    }

    #[inline]
    fn collect_batch(&mut self, records: &mut Drain<'_, I>, hashes: &[KeyHash], stop: &mut dyn FnMut(usize) -> bool) {
        self.run(|logic, main, side, timers| logic.process_batch(records, hashes, stop, main, side, timers));
    }
}

impl<I, O, L: OneInputLogic<I, O>> Lifecycle for OneInputOperator<I, O, L> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.core.open_with(&mut *self.main, self.logic.function())?;
        let attached = self.logic.attach(&self.core.info, self.core.timers.as_ref());
        attached.map_err(|e| self.core.error(e))?;
        let now_ms = self.core.info.shared.processing_time();
        self.logic_processing_time(now_ms)
    }

    fn flush(&mut self) -> Result<(), TaskError> {
        self.core.flush_with(&mut *self.main)
    }

    fn end_input(&mut self) -> Result<(), TaskError> {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let finished = self.logic.end_input(&mut *self.main);
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
        let shared = self.core.info.shared.clone();
        let previous = shared.enter(self.core.info.index);
        let held = self.logic.before_snapshot(self.core.timers.as_ref());
        shared.leave(previous);
        held.map_err(|e| self.core.error(e))?;
        let snapshot = self.core.snapshot_with(&mut *self.main, barrier, snapshots, self.logic.function());
        let previous = shared.enter(self.core.info.index);
        let back = self.logic.after_snapshot(self.core.timers.as_ref());
        shared.leave(previous);
        snapshot?;
        back.map_err(|e| self.core.error(e))
    }

    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        self.core.notify_with(&mut *self.main, event, self.logic.function())
    }

    fn on_watermark(&mut self, watermark: eddy_types::Watermark) -> Result<(), TaskError> {
        if !self.logic.passes_upstream_time() && watermark != eddy_types::Watermark::MAX {
            return Ok(());
        }
        let previous = self.core.info.shared.enter(self.core.info.index);
        let held = self.logic.hold_watermark(watermark, &mut *self.main);
        self.core.info.shared.leave(previous);
        if held.map_err(|e| self.core.error(e))? {
            return Ok(());
        }
        let (logic, main) = (&mut self.logic, &mut self.main);
        self.core.advance_watermark(watermark, &mut |timer, domain, timers, side, _state| {
            logic.on_timer(timer, domain, &mut **main, side, timers)
        })?;
        self.logic_time(TimeDomain::EventTime, watermark.0)?;
        self.core.watermark_with(&mut *self.main, watermark)
    }

    fn on_watermark_status(&mut self, status: eddy_types::WatermarkStatus) -> Result<(), TaskError> {
        if !self.logic.passes_upstream_time() || self.logic.hold_watermark_status(status) {
            return Ok(());
        }
        self.core.watermark_status_with(&mut *self.main, status)
    }

    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), TaskError> {
        let (logic, main) = (&mut self.logic, &mut self.main);
        self.core.advance_processing_time(now_ms, &mut |timer, domain, timers, side, _state| {
            logic.on_timer(timer, domain, &mut **main, side, timers)
        })?;
        self.logic_time(TimeDomain::ProcessingTime, now_ms)?;
        self.logic_processing_time(now_ms)?;
        self.core.processing_time_with(&mut *self.main, now_ms)
    }
}

impl<I, O, L: OneInputLogic<I, O>> OneInputOperator<I, O, L> {
    /// What the logic fires itself when time moves on (see [`OneInputLogic::on_time`]).
    fn logic_time(&mut self, domain: TimeDomain, time: i64) -> Result<(), TaskError> {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let core = &mut self.core;
        let fired = self.logic.on_time(domain, time, &mut *self.main, &mut core.side, core.timers.as_ref());
        self.core.info.shared.leave(previous);
        fired.map_err(|e| self.core.error(e))?;
        self.core.info.shared.check()
    }

    /// The logic's own processing-time work, and its next request.
    fn logic_processing_time(&mut self, now_ms: i64) -> Result<(), TaskError> {
        let shared = self.core.info.shared.clone();
        let previous = shared.enter(self.core.info.index);
        let next = self.logic.on_processing_time(now_ms, &mut *self.main);
        shared.leave(previous);
        if let Some(time) = next.map_err(|e| self.core.error(e))? {
            shared.request_processing_time(time);
        }
        if let Some(paused) = self.logic.source_pause() {
            shared.set_source_paused(paused);
        }
        shared.check()
    }
}
