//! The two-input operator: connect with co-flat-map, keyed co-process, broadcast process.

use super::core::OperatorCore;
use super::timers::{InternalTimers, TimeDomain};
use crate::function::{FunctionResult, RichFunction, SideOutputs};
use eddy_checkpoint::OperatorSnapshot;
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::graph::{receivers_of, Erased, ErasedOutput, TwoInputDriverFactory, TwoInputFactory};
use eddy_runtime::output::{try_each_record, Discard};
use eddy_runtime::task::{OperatorInfo, TwoInputDriver, TwoInputOperator};
use eddy_runtime::{Lifecycle, Output, TaskError, TypedOutput};
use eddy_state::keyed::Timer;
use eddy_state::OperatorStateStore;
use eddy_types::KeyHash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::vec::Drain;

/// What a record of either input does.
pub(crate) trait TwoInputLogic<A, B, O>: 'static {
    fn function(&mut self) -> &mut dyn RichFunction;
    fn process1(
        &mut self,
        record: A,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult;
    fn process2(
        &mut self,
        record: B,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult;
    /// A batch of input 1, as [`OneInputLogic::process_batch`](super::one_input::OneInputLogic::process_batch).
    #[inline]
    #[allow(clippy::too_many_arguments)] // a record's arguments, the batch's and its key hashes
    fn process_batch1(
        &mut self,
        records: &mut Drain<'_, A>,
        _hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        try_each_record(records, stop, |record| self.process1(record, main, side, state, timers))
    }
    /// A batch of input 2, as [`TwoInputLogic::process_batch1`].
    #[inline]
    #[allow(clippy::too_many_arguments)] // a record's arguments, the batch's and its key hashes
    fn process_batch2(
        &mut self,
        records: &mut Drain<'_, B>,
        _hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        main: &mut dyn Output<O>,
        side: &mut SideOutputs,
        state: &mut OperatorStateStore,
        timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        try_each_record(records, stop, |record| self.process2(record, main, side, state, timers))
    }
    /// A timer of a keyed operator fired; its key and namespace are current.
    fn on_timer(
        &mut self,
        _timer: Timer,
        _domain: TimeDomain,
        _main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _state: &mut OperatorStateStore,
        _timers: &InternalTimers,
    ) -> FunctionResult {
        Ok(())
    }
}

pub(crate) struct TwoInputOp<A, B, O, L> {
    logic: L,
    main: Box<dyn Output<O>>,
    core: OperatorCore,
    _inputs: PhantomData<fn(A, B)>,
}

impl<A: crate::Data, B: crate::Data, O: 'static, L: TwoInputLogic<A, B, O>> TwoInputOp<A, B, O, L> {
    pub(crate) fn factory(prototype: L, keyed: bool) -> TwoInputFactory
    where
        L: Clone + Send + Sync,
    {
        Arc::new(move |info: OperatorInfo, ports: Vec<ErasedOutput>| -> Erased {
            let (core, main) = OperatorCore::new(info, keyed, ports);
            let main = match main {
                Some(port) => TypedOutput::<O>::unerase(port),
                None => Box::new(Discard),
            };
            let operator: Box<dyn TwoInputOperator<A, B>> =
                Box::new(Self { logic: prototype.clone(), main, core, _inputs: PhantomData });
            Box::new(operator)
        })
    }

    /// `second_first`: read input 2 to its end before input 1.
    pub(crate) fn driver_factory(second_first: bool) -> TwoInputDriverFactory {
        Arc::new(move |operator, first, second, mailbox, shared| {
            let operator = *operator
                .downcast::<Box<dyn TwoInputOperator<A, B>>>()
                .expect("two-input operator of the declared types");
            Box::new(TwoInputDriver::from_channels(
                receivers_of::<A>(first),
                receivers_of::<B>(second),
                operator,
                mailbox,
                shared,
                second_first,
            ))
        })
    }
}

impl<A, B, O, L: TwoInputLogic<A, B, O>> TwoInputOp<A, B, O, L> {
    /// Runs `work` on the logic as this operator (its metrics and failure slot): a
    /// failure goes into the task's failure slot.
    #[inline]
    fn run(
        &mut self,
        work: impl FnOnce(
            &mut L,
            &mut dyn Output<O>,
            &mut SideOutputs,
            &mut OperatorStateStore,
            Option<&InternalTimers>,
        ) -> FunctionResult,
    ) {
        let previous = self.core.info.shared.enter(self.core.info.index);
        let core = &mut self.core;
        let timers = core.timers.as_ref();
        if let Err(error) = work(&mut self.logic, &mut *self.main, &mut core.side, &mut core.operator_state, timers) {
            core.fail(error);
        }
        self.core.info.shared.leave(previous);
    }
}

impl<A, B, O, L: TwoInputLogic<A, B, O>> TwoInputOperator<A, B> for TwoInputOp<A, B, O, L> {
    #[inline]
    fn process1(&mut self, record: A) {
        self.run(|logic, main, side, state, timers| logic.process1(record, main, side, state, timers));
    }

    #[inline]
    fn process2(&mut self, record: B) {
        self.run(|logic, main, side, state, timers| logic.process2(record, main, side, state, timers));
    }

    #[inline]
    fn process_batch1(&mut self, records: &mut Drain<'_, A>, hashes: &[KeyHash], stop: &mut dyn FnMut(usize) -> bool) {
        self.run(|logic, main, side, state, timers| {
            logic.process_batch1(records, hashes, stop, main, side, state, timers)
        });
    }

    #[inline]
    fn process_batch2(&mut self, records: &mut Drain<'_, B>, hashes: &[KeyHash], stop: &mut dyn FnMut(usize) -> bool) {
        self.run(|logic, main, side, state, timers| {
            logic.process_batch2(records, hashes, stop, main, side, state, timers)
        });
    }
}

impl<A, B, O, L: TwoInputLogic<A, B, O>> Lifecycle for TwoInputOp<A, B, O, L> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.core.open_with(&mut *self.main, self.logic.function())
    }

    fn flush(&mut self) -> Result<(), TaskError> {
        self.core.flush_with(&mut *self.main)
    }

    fn end_input(&mut self) -> Result<(), TaskError> {
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
        let (logic, main) = (&mut self.logic, &mut self.main);
        self.core.advance_watermark(watermark, &mut |timer, domain, timers, side, state| {
            logic.on_timer(timer, domain, &mut **main, side, state, timers)
        })?;
        self.core.watermark_with(&mut *self.main, watermark)
    }

    fn on_watermark_status(&mut self, status: eddy_types::WatermarkStatus) -> Result<(), TaskError> {
        self.core.watermark_status_with(&mut *self.main, status)
    }

    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), TaskError> {
        let (logic, main) = (&mut self.logic, &mut self.main);
        self.core.advance_processing_time(now_ms, &mut |timer, domain, timers, side, state| {
            logic.on_timer(timer, domain, &mut **main, side, state, timers)
        })?;
        self.core.processing_time_with(&mut *self.main, now_ms)
    }
}
