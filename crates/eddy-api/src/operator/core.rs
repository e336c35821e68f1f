//! What all operators share: their info, operator state, side outputs, the keyed backend
//! when they are keyed, and turning function errors into task errors that name them.

use super::timers::{InternalTimers, TimeDomain};
use crate::function::{FunctionError, FunctionResult, RichFunction, RuntimeContext, SideOutputs, SnapshotContext};
use eddy_checkpoint::{OperatorSnapshot, SnapshotKind};
use eddy_runtime::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_runtime::task::{OperatorInfo, FINAL_CHECKPOINT};
use eddy_runtime::{Output, PortOutput, TaskError};
use eddy_state::keyed::{install_backend, take_backend, with_backend, BackendInstance, Timer};
use eddy_state::OperatorStateStore;

pub(crate) struct OperatorCore {
    pub(crate) info: OperatorInfo,
    pub(crate) keyed: bool,
    pub(crate) operator_state: OperatorStateStore,
    pub(crate) side: SideOutputs,
    /// A keyed operator's timers, once open.
    pub(crate) timers: Option<InternalTimers>,
}

/// What a timer callback gets: the timer (its key and namespace are current), the timer
/// service, the side outputs and operator state (broadcast state).
pub(crate) type OnTimer<'a> =
    dyn FnMut(Timer, TimeDomain, &InternalTimers, &mut SideOutputs, &mut OperatorStateStore) -> FunctionResult + 'a;

impl OperatorCore {
    /// Splits the ports handed over by the runtime into the main output (port 0) and the
    /// side outputs (by tag).
    pub(crate) fn new(
        info: OperatorInfo,
        keyed: bool,
        ports: Vec<Box<dyn PortOutput>>,
    ) -> (Self, Option<Box<dyn PortOutput>>) {
        let mut main = None;
        let mut side = Vec::new();
        for (port, tag) in ports.into_iter().zip(info.output_tags.iter()) {
            match tag {
                None => main = Some(port),
                Some(tag) => side.push((tag.clone(), port)),
            }
        }
        let operator_state = match &info.restored {
            Some(snapshot) => OperatorStateStore::restored_from(snapshot.operator.clone()),
            None => OperatorStateStore::new(),
        };
        let side = SideOutputs::new(side, info.shared.clone(), info.index);
        let core = Self { info, keyed, operator_state, side, timers: None };
        (core, main)
    }

    pub(crate) fn error(&self, error: FunctionError) -> TaskError {
        TaskError::of_operator(&self.info.name, &self.info.uid, &*error)
    }

    /// Records a per-record failure; the task loop picks it up after the batch.
    #[inline]
    pub(crate) fn fail(&self, error: FunctionError) {
        self.info.shared.fail_with(self.error(error));
    }

    /// Opens side outputs, installs the keyed backend, then runs the function's
    /// `initialize_state` and `open`.
    pub(crate) fn open(&mut self, function: &mut dyn RichFunction) -> Result<(), TaskError> {
        for port in self.side.ports() {
            port.open()?;
        }
        if self.keyed {
            let name = format!("{}-{}", self.info.uid, self.info.subtask);
            let instance = BackendInstance {
                name: &name,
                subtask: self.info.subtask,
                range: self.info.key_group_range,
                max_parallelism: self.info.max_parallelism,
                seed: self.info.seed.derive(name.as_bytes()),
                ttl_clock: self.info.ttl_clock.clone(),
            };
            let restored = self.info.restored.as_ref().and_then(|s| s.keyed.clone());
            let backend = self.info.state_backend.create(&instance, restored).map_err(|e| self.error(e.into()))?;
            install_backend(backend).map_err(|e| TaskError::Internal(eddy_types::chain(&e)))?;
            let timers = InternalTimers::declare(self.info.shared.clone()).map_err(|e| self.error(e.into()))?;
            self.timers = Some(timers);
        }
        let previous = self.info.shared.enter(self.info.index);
        let mut ctx = RuntimeContext::new(&self.info, self.keyed, &mut self.operator_state);
        let result = function.initialize_state(&mut ctx).and_then(|()| function.open(&mut ctx));
        self.info.shared.leave(previous);
        result.map_err(|e| self.error(e))
    }

    pub(crate) fn flush(&mut self) -> Result<(), TaskError> {
        self.side.ports().try_for_each(|p| p.flush())
    }

    /// Ends the side outputs (the function is closed later, after the final snapshot).
    pub(crate) fn end_input(&mut self) -> Result<(), TaskError> {
        self.side.ports().try_for_each(|p| p.end_input())
    }

    /// Runs the function's `close`, releases the keyed backend and the side outputs.
    pub(crate) fn close(&mut self, function: &mut dyn RichFunction) {
        let previous = self.info.shared.enter(self.info.index);
        if let Err(error) = function.close() {
            self.fail(error);
        }
        self.info.shared.leave(previous);
        self.side.ports().for_each(|p| p.close());
        if self.keyed {
            self.timers = None;
            take_backend();
        }
    }

    /// This operator's state for `barrier`: the function's `snapshot_state` first (it
    /// writes operator state), then keyed and operator state serialized.
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        function: &mut dyn RichFunction,
    ) -> Result<OperatorSnapshot, TaskError> {
        let started = std::time::Instant::now();
        let previous = self.info.shared.enter(self.info.index);
        // The end-of-input snapshot of a finished task has no checkpoint of its own: it stands
        // in for the task in every later one.
        let checkpoint = (barrier.id != FINAL_CHECKPOINT).then_some(barrier.id);
        let result = function.snapshot_state(&mut SnapshotContext::new(checkpoint, &mut self.operator_state));
        self.info.shared.leave(previous);
        result.map_err(|e| self.error(e))?;
        let operator = self.operator_state.snapshot().map_err(|e| self.error(e.into()))?;
        let keyed = if self.keyed {
            // Savepoints are canonical (backend-independent); checkpoints may keep the
            // backend's files (RocksDB, incremental) when the storage keeps files.
            let canonical = barrier.kind == SnapshotKind::Savepoint || !self.info.native_snapshots;
            let id = barrier.id;
            let keyed = with_backend("<snapshot>", |backend| {
                let snapshot = backend.snapshot_for_checkpoint(id, canonical)?;
                Ok((snapshot, backend.take_snapshot_wait_micros()))
            });
            Some(keyed.map_err(|e| self.error(e.into()))?)
        } else {
            None
        };
        let (keyed, wait_micros) = match keyed {
            Some((keyed, wait_micros)) => (Some(keyed), wait_micros),
            None => (None, 0),
        };
        Ok(OperatorSnapshot {
            uid: self.info.uid.clone(),
            name: self.info.name.clone(),
            subtask: self.info.subtask,
            parallelism: self.info.parallelism,
            keyed,
            operator,
            sync_micros: started.elapsed().as_micros() as u64,
            wait_micros,
        })
    }

    /// The whole lifecycle with the operator's main output, shared by every operator shape:
    /// open downstream first, then this operator.
    pub(crate) fn open_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        function: &mut dyn RichFunction,
    ) -> Result<(), TaskError> {
        main.open()?;
        self.open(function)
    }

    pub(crate) fn flush_with<O>(&mut self, main: &mut dyn Output<O>) -> Result<(), TaskError> {
        main.flush()?;
        self.flush()
    }

    /// Passes a watermark on to the side outputs and the main output.
    pub(crate) fn watermark_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        watermark: eddy_types::Watermark,
    ) -> Result<(), TaskError> {
        self.side.ports().try_for_each(|p| p.on_watermark(watermark))?;
        main.on_watermark(watermark)
    }

    /// Passes a watermark status on to the side outputs and the main output.
    pub(crate) fn watermark_status_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        status: eddy_types::WatermarkStatus,
    ) -> Result<(), TaskError> {
        self.side.ports().try_for_each(|p| p.on_watermark_status(status))?;
        main.on_watermark_status(status)
    }

    /// Event time reached `watermark`: fires the event-time timers it passed, in time
    /// order (a keyed operator's; others have none).
    pub(crate) fn advance_watermark(
        &mut self,
        watermark: eddy_types::Watermark,
        on_timer: &mut OnTimer<'_>,
    ) -> Result<(), TaskError> {
        if let Some(timers) = &self.timers {
            timers.set_watermark(watermark);
        }
        self.fire_timers(TimeDomain::EventTime, watermark.0, on_timer)
    }

    /// Processing time reached `now_ms`: fires the processing-time timers due, then asks
    /// to hear about the next one.
    pub(crate) fn advance_processing_time(&mut self, now_ms: i64, on_timer: &mut OnTimer<'_>) -> Result<(), TaskError> {
        self.fire_timers(TimeDomain::ProcessingTime, now_ms, on_timer)?;
        if let Some(timers) = &self.timers {
            timers.request_next_processing_time().map_err(|e| self.error(e.into()))?;
        }
        Ok(())
    }

    fn fire_timers(&mut self, domain: TimeDomain, limit: i64, on_timer: &mut OnTimer<'_>) -> Result<(), TaskError> {
        let Some(timers) = &self.timers else { return Ok(()) };
        let previous = self.info.shared.enter(self.info.index);
        let result = loop {
            match timers.pop_due(domain, limit) {
                Ok(Some(timer)) => {
                    if let Err(error) = on_timer(timer, domain, timers, &mut self.side, &mut self.operator_state) {
                        break Err(error);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(error.into()),
            }
        };
        self.info.shared.leave(previous);
        result.map_err(|e| self.error(e))?;
        self.info.shared.check()
    }

    /// Passes processing time on to the side outputs and the main output.
    pub(crate) fn processing_time_with<O>(&mut self, main: &mut dyn Output<O>, now_ms: i64) -> Result<(), TaskError> {
        self.side.ports().try_for_each(|p| p.on_processing_time(now_ms))?;
        main.on_processing_time(now_ms)
    }

    /// Ends the side outputs and the main output.
    pub(crate) fn end_input_with<O>(&mut self, main: &mut dyn Output<O>) -> Result<(), TaskError> {
        self.end_input()?;
        main.end_input()
    }

    pub(crate) fn close_with<O>(&mut self, main: &mut dyn Output<O>, function: &mut dyn RichFunction) {
        main.close();
        self.close(function);
    }

    /// Snapshots this operator, then passes the barrier to its outputs.
    pub(crate) fn snapshot_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
        function: &mut dyn RichFunction,
    ) -> Result<(), TaskError> {
        snapshots.push(self.snapshot(barrier, function)?);
        for port in self.side.ports() {
            port.snapshot(barrier, snapshots)?;
        }
        main.snapshot(barrier, snapshots)
    }

    /// Tells the function, then everything downstream, what became of a checkpoint.
    pub(crate) fn notify_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        event: CheckpointEvent,
        function: &mut dyn RichFunction,
    ) -> Result<(), TaskError> {
        let previous = self.info.shared.enter(self.info.index);
        let result = match event {
            CheckpointEvent::Completed(FINAL_CHECKPOINT) => function.notify_job_finished(),
            CheckpointEvent::Completed(id) => function.notify_checkpoint_complete(id),
            CheckpointEvent::Aborted(id) => function.notify_checkpoint_aborted(id),
        };
        self.info.shared.leave(previous);
        result.map_err(|e| self.error(e))?;
        for port in self.side.ports() {
            port.notify_checkpoint(event)?;
        }
        main.notify_checkpoint(event)
    }
}
