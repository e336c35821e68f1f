//! The async wait operator (Flink's `AsyncWaitOperator`): each record starts a request on
//! the async I/O runtime and waits in the [`ElementQueue`] with the watermarks between
//! records; outcomes come back over a channel and are emitted in the queue's order.
//!
//! - A full queue (`capacity` records) blocks the task until a request completes: the
//!   input backs up, as Flink's backpressure does.
//! - While requests are in flight the task asks to be woken every millisecond, so that
//!   outcomes go out also when no input comes.
//! - A checkpoint keeps the inputs of every queued record (operator list state); after a
//!   restore they are requested again, before any new record: each record's request is
//!   made at least once and its results are emitted exactly once.
//! - The end of input waits for every request.

use super::queue::{ElementQueue, Emit};
use super::retry::AsyncRetryStrategy;
use super::{runtime, AsyncFunction};
use crate::function::{FunctionError, FunctionResult, RichFunction, RuntimeContext, SideOutputs, SnapshotContext};
use crate::operator::one_input::OneInputLogic;
use crate::operator::timers::InternalTimers;
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use eddy_runtime::Output;
use eddy_state::ListStateDescriptor;
use eddy_types::{CheckpointId, Watermark};
use std::sync::Arc;
use std::time::Duration;

/// The operator list state holding the queued inputs.
const QUEUE_STATE: &str = "async-wait-queue";

/// How long a full queue waits for an outcome before it says so in the log.
const FULL_QUEUE_NOTICE: Duration = Duration::from_secs(30);

/// How a request ended.
enum Outcome<O> {
    Done(FunctionResult<Vec<O>>),
    TimedOut,
}

/// A request's id in the queue, and how it ended.
type Completion<O> = (u64, Outcome<O>);

pub(crate) struct AsyncWaitLogic<I, O, F> {
    function: F,
    /// The opened function, shared with the requests (every attempt calls it).
    invoker: Option<Arc<F>>,
    timeout: Duration,
    capacity: usize,
    retry: Option<AsyncRetryStrategy<O>>,
    ordered: bool,
    queue: ElementQueue<I, Outcome<O>>,
    outcomes: (Sender<Completion<O>>, Receiver<Completion<O>>),
    /// Inputs of the checkpoint restored from, requested again once the task runs.
    restored: Vec<I>,
    ready: Vec<Emit<I, Outcome<O>>>,
}

impl<I: Clone, O, F: Clone> AsyncWaitLogic<I, O, F> {
    pub(crate) fn new(
        function: F,
        timeout: Duration,
        capacity: usize,
        ordered: bool,
        retry: Option<AsyncRetryStrategy<O>>,
    ) -> Self {
        Self {
            function,
            invoker: None,
            timeout,
            capacity: capacity.max(1),
            retry,
            ordered,
            queue: ElementQueue::new(ordered),
            outcomes: unbounded(),
            restored: Vec::new(),
            ready: Vec::new(),
        }
    }
}

impl<I: Clone, O, F: Clone> Clone for AsyncWaitLogic<I, O, F> {
    /// A fresh instance of the prototype: its own queue and channel.
    fn clone(&self) -> Self {
        Self::new(self.function.clone(), self.timeout, self.capacity, self.ordered, self.retry.clone())
    }
}

impl<I, O, F> RichFunction for AsyncWaitLogic<I, O, F>
where
    I: crate::Data + Sync,
    O: Send + 'static,
    F: AsyncFunction<I, O>,
{
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let state = ctx.operator_state().list_state(&ListStateDescriptor::<I>::new(QUEUE_STATE))?;
        self.restored = state.as_slice().to_vec();
        self.function.initialize_state(ctx)
    }
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.function.open(ctx)?;
        self.invoker = Some(Arc::new(self.function.clone()));
        Ok(())
    }
    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        let mut pending = self.restored.clone();
        pending.extend(self.queue.snapshot());
        ctx.operator_state().list_state(&ListStateDescriptor::<I>::new(QUEUE_STATE))?.update(pending);
        self.function.snapshot_state(ctx)
    }
    fn notify_checkpoint_complete(&mut self, checkpoint: CheckpointId) -> FunctionResult {
        self.function.notify_checkpoint_complete(checkpoint)
    }
    fn notify_checkpoint_aborted(&mut self, checkpoint: CheckpointId) -> FunctionResult {
        self.function.notify_checkpoint_aborted(checkpoint)
    }
    fn notify_job_finished(&mut self) -> FunctionResult {
        self.function.notify_job_finished()
    }
    fn close(&mut self) -> FunctionResult {
        self.function.close()
    }
}

impl<I, O, F> AsyncWaitLogic<I, O, F>
where
    I: crate::Data + Sync,
    O: Send + 'static,
    F: AsyncFunction<I, O>,
{
    /// Queues `input` and starts its request, after waiting for room.
    fn submit(&mut self, input: I, main: &mut dyn Output<O>) -> FunctionResult {
        while self.queue.records() >= self.capacity {
            self.wait_for_outcome(main)?;
        }
        let id = self.queue.push_record(input.clone());
        let invoker = self.invoker.clone().ok_or("async I/O used before open (bug)")?;
        let (timeout, retry, sender) = (self.timeout, self.retry.clone(), self.outcomes.0.clone());
        runtime::spawn(async move {
            let attempts = request(invoker, input, retry);
            let outcome = match tokio::time::timeout(timeout, attempts).await {
                Ok(result) => Outcome::Done(result),
                Err(_) => Outcome::TimedOut,
            };
            // The operator is gone (the job failed or was cancelled): nobody waits.
            let _ = sender.send((id, outcome));
        })?;
        Ok(())
    }

    /// Blocks until one request ends, then emits what it frees.
    fn wait_for_outcome(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        loop {
            match self.outcomes.1.recv_timeout(FULL_QUEUE_NOTICE) {
                Ok((id, outcome)) => {
                    self.queue.complete(id, outcome);
                    return self.emit_ready(main);
                }
                Err(RecvTimeoutError::Timeout) => tracing::warn!(
                    in_flight = self.queue.records(),
                    "async I/O: no request completed in {} s; the input waits",
                    FULL_QUEUE_NOTICE.as_secs()
                ),
                Err(RecvTimeoutError::Disconnected) => return Err("async I/O: the request channel closed (bug)".into()),
            }
        }
    }

    /// Takes every outcome that arrived, and emits what may go out.
    fn poll(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        while let Ok((id, outcome)) = self.outcomes.1.try_recv() {
            self.queue.complete(id, outcome);
        }
        self.emit_ready(main)
    }

    fn emit_ready(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        let mut ready = std::mem::take(&mut self.ready);
        self.queue.drain_ready(&mut ready);
        let mut result = Ok(());
        for emit in ready.drain(..) {
            if result.is_err() {
                continue;
            }
            result = match emit {
                Emit::Result(_, Outcome::Done(Ok(records))) => {
                    records.into_iter().for_each(|r| main.collect(r));
                    Ok(())
                }
                Emit::Result(_, Outcome::Done(Err(error))) => Err(AsyncIoError::Failed(error).into()),
                Emit::Result(input, Outcome::TimedOut) => match self.invoker.as_ref() {
                    Some(invoker) => {
                        invoker.timeout(&input).map(|records| records.into_iter().for_each(|r| main.collect(r)))
                    }
                    None => Err("async I/O used before open (bug)".into()),
                },
                Emit::Watermark(watermark) => {
                    main.on_watermark(Watermark(watermark)).map_err(|e| Box::new(e) as FunctionError)
                }
            };
        }
        self.ready = ready;
        result
    }
}

/// The request for `input`, with its retries.
async fn request<I: Clone, O, F: AsyncFunction<I, O>>(
    invoker: Arc<F>,
    input: I,
    retry: Option<AsyncRetryStrategy<O>>,
) -> FunctionResult<Vec<O>> {
    let mut outcome = invoker.async_invoke(input.clone()).await;
    let Some(retry) = retry else { return outcome };
    let mut attempt = 1;
    while retry.wants_retry(&outcome) && retry.can_retry(attempt) {
        tokio::time::sleep(retry.delay(attempt)).await;
        outcome = invoker.async_invoke(input.clone()).await;
        attempt += 1;
    }
    outcome
}

/// Why a request failed the job.
#[derive(Debug, thiserror::Error)]
pub enum AsyncIoError {
    #[error("an async I/O request failed (no retry strategy retried it)")]
    Failed(#[source] FunctionError),
    #[error("an async I/O request did not complete within its timeout, and the function gives no results for a timeout (override AsyncFunction::timeout to emit a fallback)")]
    TimedOut,
}

impl<I, O, F> OneInputLogic<I, O> for AsyncWaitLogic<I, O, F>
where
    I: crate::Data + Sync,
    O: Send + 'static,
    F: AsyncFunction<I, O>,
{
    fn function(&mut self) -> &mut dyn RichFunction {
        self
    }

    fn process(
        &mut self,
        record: I,
        main: &mut dyn Output<O>,
        _side: &mut SideOutputs,
        _timers: Option<&InternalTimers>,
    ) -> FunctionResult {
        self.submit(record, main)?;
        self.poll(main)
    }

    fn wants_wakeup(&self) -> bool {
        !self.queue.is_empty()
    }

    fn hold_watermark(&mut self, watermark: Watermark, main: &mut dyn Output<O>) -> FunctionResult<bool> {
        self.poll(main)?;
        Ok(self.queue.push_watermark(watermark.0).is_none())
    }

    fn end_input(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        self.resubmit_restored(main)?;
        while !self.queue.is_empty() {
            self.wait_for_outcome(main)?;
        }
        Ok(())
    }

    fn on_processing_time(&mut self, now_ms: i64, main: &mut dyn Output<O>) -> FunctionResult<Option<i64>> {
        self.resubmit_restored(main)?;
        self.poll(main)?;
        Ok((!self.queue.is_empty()).then_some(now_ms + 1))
    }
}

impl<I, O, F> AsyncWaitLogic<I, O, F>
where
    I: crate::Data + Sync,
    O: Send + 'static,
    F: AsyncFunction<I, O>,
{
    /// The restored inputs go first, in their order (Flink requests them in `open`).
    fn resubmit_restored(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        if self.restored.is_empty() {
            return Ok(());
        }
        let restored = std::mem::take(&mut self.restored);
        tracing::info!(records = restored.len(), "async I/O: requesting the restored in-flight records again");
        for input in restored {
            self.submit(input, main)?;
        }
        Ok(())
    }
}
