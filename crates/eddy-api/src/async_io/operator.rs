//! The async wait operator (Flink's `AsyncWaitOperator`): each record starts a request on
//! the async I/O runtime and waits in the [`ElementQueue`] with the watermarks between
//! records; outcomes come back over a channel and are emitted in the queue's order.
//!
//! - A full queue (`capacity` records) blocks the task until a request completes: the
//!   input backs up, as Flink's backpressure does.
//! - While requests are in flight the task asks to be woken every millisecond, so that
//!   outcomes go out also when no input comes.
//! - Upstream going idle is passed on only once the records held back are out: downstream
//!   would otherwise stop waiting for this input while its results still come.
//! - A checkpoint keeps the inputs of every queued record (operator list state); after a
//!   restore they are requested again, before any new record: each record's request is
//!   made at least once and its results are emitted exactly once.
//! - The end of input waits for every request. A cancel is noticed while waiting, and the
//!   requests still in flight are aborted when the operator goes away.
//! - A request that panics ends as an error, so nothing waits for it forever.

use super::queue::{ElementQueue, Emit};
use super::retry::AsyncRetryStrategy;
use super::{runtime, AsyncFunction};
use crate::function::{FunctionError, FunctionResult, RichFunction, RuntimeContext, SideOutputs, SnapshotContext};
use crate::operator::one_input::OneInputLogic;
use crate::operator::timers::InternalTimers;
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use eddy_runtime::task::OperatorInfo;
use eddy_runtime::Output;
use eddy_state::ListStateDescriptor;
use eddy_types::{CheckpointId, Watermark, WatermarkStatus};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The operator list state holding the queued inputs.
const QUEUE_STATE: &str = "async-wait-queue";

/// How long a full queue waits for an outcome before it says so in the log.
const FULL_QUEUE_NOTICE: Duration = Duration::from_secs(30);

/// How often a wait for an outcome looks whether the task was cancelled.
const CANCEL_CHECK: Duration = Duration::from_millis(50);

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
    /// Inputs of the checkpoint restored from, requested again when the operator opens.
    restored: Vec<I>,
    ready: Vec<Emit<I, Outcome<O>>>,
    /// The requests in flight, to abort when the operator goes away.
    in_flight: HashMap<u64, tokio::task::AbortHandle>,
    /// The task's cancel flag (set in `attach`).
    cancelled: Option<Arc<AtomicBool>>,
    /// Upstream went idle while records were held: said downstream once they are out.
    idle_held: bool,
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
            in_flight: HashMap::new(),
            cancelled: None,
            idle_held: false,
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
        let pending = self.queue.snapshot();
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
        let (timeout, retry) = (self.timeout, self.retry.clone());
        let reply = Reply { id, sender: Some(self.outcomes.0.clone()) };
        let handle = runtime::spawn(async move {
            let mut reply = reply;
            let attempts = request(invoker, input, retry);
            let outcome = match tokio::time::timeout(timeout, attempts).await {
                Ok(result) => Outcome::Done(result),
                Err(_) => Outcome::TimedOut,
            };
            reply.send(outcome);
        })?;
        self.in_flight.insert(id, handle);
        Ok(())
    }

    /// Takes one outcome that arrived.
    fn complete(&mut self, (id, outcome): Completion<O>) {
        self.in_flight.remove(&id);
        self.queue.complete(id, outcome);
    }

    /// Blocks until one request ends, then emits what it frees. Fails when the task is
    /// cancelled meanwhile (the job is failing or stopping: nothing waits for the rest).
    fn wait_for_outcome(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        let mut waiting_since = Instant::now();
        loop {
            match self.outcomes.1.recv_timeout(CANCEL_CHECK) {
                Ok(completion) => {
                    self.complete(completion);
                    return self.emit_ready(main);
                }
                Err(RecvTimeoutError::Timeout) => {
                    if self.cancelled.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                        return Err("async I/O: the task was cancelled while requests were in flight".into());
                    }
                    if waiting_since.elapsed() >= FULL_QUEUE_NOTICE {
                        tracing::warn!(
                            in_flight = self.queue.records(),
                            "async I/O: no request completed in {} s; the input waits",
                            FULL_QUEUE_NOTICE.as_secs()
                        );
                        waiting_since = Instant::now();
                    }
                }
                // The operator holds a sender itself, so the channel stays open.
                Err(RecvTimeoutError::Disconnected) => return Err("async I/O: the request channel closed (bug)".into()),
            }
        }
    }

    /// Takes every outcome that arrived, and emits what may go out.
    fn poll(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        while let Ok(completion) = self.outcomes.1.try_recv() {
            self.complete(completion);
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
                Emit::Result(_, Outcome::Done(Err(error))) => Err(error),
                Emit::Result(input, Outcome::TimedOut) => match self.invoker.as_ref() {
                    Some(invoker) => match invoker.timeout(&input) {
                        Ok(records) => {
                            records.into_iter().for_each(|r| main.collect(r));
                            Ok(())
                        }
                        Err(source) => Err(AsyncIoError::TimedOut { timeout: self.timeout, source }.into()),
                    },
                    None => Err("async I/O used before open (bug)".into()),
                },
                Emit::Watermark(watermark) => {
                    main.on_watermark(Watermark(watermark)).map_err(|e| Box::new(e) as FunctionError)
                }
            };
        }
        self.ready = ready;
        if result.is_ok() && self.idle_held && self.queue.is_empty() {
            self.idle_held = false;
            main.on_watermark_status(WatermarkStatus::Idle).map_err(|e| Box::new(e) as FunctionError)?;
        }
        result
    }
}

/// Sends a request's outcome once; if the request ends without one (its future panicked
/// and was dropped), says so instead, so that the queue never waits for it forever.
struct Reply<O> {
    id: u64,
    sender: Option<Sender<Completion<O>>>,
}

impl<O> Reply<O> {
    fn send(&mut self, outcome: Outcome<O>) {
        if let Some(sender) = self.sender.take() {
            // The operator is gone (the job failed or was cancelled): nobody waits.
            let _ = sender.send((self.id, outcome));
        }
    }
}

impl<O> Drop for Reply<O> {
    fn drop(&mut self) {
        self.send(Outcome::Done(Err("the async I/O request panicked".into())));
    }
}

/// The request for `input`, with its retries; an error that ends them names how many
/// attempts were made.
async fn request<I: Clone, O, F: AsyncFunction<I, O>>(
    invoker: Arc<F>,
    input: I,
    retry: Option<AsyncRetryStrategy<O>>,
) -> FunctionResult<Vec<O>> {
    let mut outcome = invoker.async_invoke(input.clone()).await;
    let mut attempts = 1;
    if let Some(retry) = retry {
        while retry.wants_retry(&outcome) && retry.can_retry(attempts) {
            tokio::time::sleep(retry.delay(attempts)).await;
            outcome = invoker.async_invoke(input.clone()).await;
            attempts += 1;
        }
    }
    outcome.map_err(|source| AsyncIoError::Failed { attempts, source }.into())
}

/// Why a request failed the job. The cause is in the message too: a task's failure is
/// reported by its message.
#[derive(Debug, thiserror::Error)]
pub enum AsyncIoError {
    #[error("an async I/O request failed after {attempts} attempt(s): {source}")]
    Failed {
        attempts: u32,
        #[source]
        source: FunctionError,
    },
    #[error("an async I/O request gave no result within its timeout of {timeout:?}: {source}")]
    TimedOut {
        timeout: Duration,
        #[source]
        source: FunctionError,
    },
}

impl<I, O, F> Drop for AsyncWaitLogic<I, O, F> {
    /// Requests still in flight are of no use to anyone: they stop, rather than go on
    /// calling the service after the job failed or was cancelled.
    fn drop(&mut self) {
        self.in_flight.drain().for_each(|(_, request)| request.abort());
    }
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

    fn hold_watermark_status(&mut self, status: WatermarkStatus) -> bool {
        match status {
            // Downstream would stop waiting for this input while its results still come.
            WatermarkStatus::Idle if !self.queue.is_empty() => {
                self.idle_held = true;
                true
            }
            WatermarkStatus::Idle => false,
            WatermarkStatus::Active if self.idle_held => {
                // Never announced idle: nothing to take back.
                self.idle_held = false;
                true
            }
            WatermarkStatus::Active => false,
        }
    }

    fn wants_wakeup(&self) -> bool {
        !self.queue.is_empty()
    }

    fn hold_watermark(&mut self, watermark: Watermark, main: &mut dyn Output<O>) -> FunctionResult<bool> {
        self.poll(main)?;
        Ok(self.queue.push_watermark(watermark.0).is_none())
    }

    fn end_input(&mut self, main: &mut dyn Output<O>) -> FunctionResult {
        while !self.queue.is_empty() {
            self.wait_for_outcome(main)?;
        }
        Ok(())
    }

    fn attach(&mut self, info: &OperatorInfo, _timers: Option<&InternalTimers>) -> FunctionResult {
        self.cancelled = Some(info.shared.cancel_flag());
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
    /// The restored inputs go first, in their order (Flink requests them in `open`; here
    /// the first processing-time call, made when the operator opens).
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
