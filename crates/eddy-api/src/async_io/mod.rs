//! Async I/O (Flink's `AsyncDataStream`): enriching each record from an external service
//! without blocking the task. The function is Rust `async`: a future per record, many in
//! flight per subtask, no thread per request.
//!
//! - here: [`AsyncFunction`], [`async_function`] for closures, and [`AsyncDataStream`]'s
//!   `unordered_wait` / `ordered_wait` and their `*_with_retry` forms.
//! - `retry.rs`: [`AsyncRetryStrategy`], fixed delay or exponential backoff.
//! - `queue.rs`: the queue of in-flight records and watermarks, ordered or not.
//! - `operator.rs`: the operator: capacity and backpressure, timeouts, checkpoints of
//!   the in-flight records, which are requested again after a restore.
//! - `runtime.rs`: the process's tokio runtime the requests run on.

mod operator;
mod queue;
mod retry;
mod runtime;

pub use operator::AsyncIoError;
pub use retry::AsyncRetryStrategy;

use crate::function::{FunctionResult, RichFunction};
use crate::stream::DataStream;
use crate::Data;
use operator::AsyncWaitLogic;
use std::future::Future;
use std::time::Duration;

/// Flink's `AsyncFunction`: starts the request for a record; the future's output are the
/// record's results (Flink's `ResultFuture.complete`), or an error, which fails the job
/// unless a retry strategy retries it.
///
/// `async_invoke` is called on eddy's async I/O runtime (tokio), where tokio's I/O and
/// timers work, once per attempt. `open` is the place to make clients: the requests call
/// a copy of the function made right after `open` (clients shared through an `Arc`, or
/// cheap to clone as most are), while `snapshot_state`, the checkpoint notifications and
/// `close` reach the original.
pub trait AsyncFunction<I, O>: RichFunction + Clone + Send + Sync + 'static {
    fn async_invoke(&self, input: I) -> impl Future<Output = FunctionResult<Vec<O>>> + Send + 'static;

    /// The request for `input` did not complete within the timeout (all its attempts
    /// together). By default the job fails; override it to emit a fallback instead.
    fn timeout(&self, _input: &I) -> FunctionResult<Vec<O>> {
        Err("AsyncFunction::timeout is not overridden, so a timeout fails the job (override it to emit a fallback)"
            .into())
    }
}

/// A closure as an [`AsyncFunction`]: see [`async_function`].
#[derive(Clone)]
pub struct AsyncFn<F>(F);

impl<F> RichFunction for AsyncFn<F> {}

/// `|input| async move { … Ok(vec![output]) }` as an async function.
pub fn async_function<I, O, F, Fut>(f: F) -> AsyncFn<F>
where
    F: Fn(I) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = FunctionResult<Vec<O>>> + Send + 'static,
{
    AsyncFn(f)
}

impl<I, O, F, Fut> AsyncFunction<I, O> for AsyncFn<F>
where
    F: Fn(I) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = FunctionResult<Vec<O>>> + Send + 'static,
{
    fn async_invoke(&self, input: I) -> impl Future<Output = FunctionResult<Vec<O>>> + Send + 'static {
        (self.0)(input)
    }
}

/// Flink's `AsyncDataStream`: adds an async I/O operator to a stream.
///
/// `capacity` is how many records may be in flight per subtask (Flink's default is 100);
/// when that many wait, the input waits. `timeout` bounds each record's request, retries
/// included.
pub struct AsyncDataStream;

impl AsyncDataStream {
    /// Results as their requests complete; never across a watermark.
    pub fn unordered_wait<I, O, F>(
        stream: &DataStream<I>,
        function: F,
        timeout: Duration,
        capacity: usize,
    ) -> DataStream<O>
    where
        I: Data + Sync,
        O: Data + Sync,
        F: AsyncFunction<I, O>,
    {
        Self::add(stream, function, timeout, capacity, false, None)
    }

    /// Results in the order of their records.
    pub fn ordered_wait<I, O, F>(
        stream: &DataStream<I>,
        function: F,
        timeout: Duration,
        capacity: usize,
    ) -> DataStream<O>
    where
        I: Data + Sync,
        O: Data + Sync,
        F: AsyncFunction<I, O>,
    {
        Self::add(stream, function, timeout, capacity, true, None)
    }

    /// [`AsyncDataStream::unordered_wait`], retrying requests as `retry` says.
    pub fn unordered_wait_with_retry<I, O, F>(
        stream: &DataStream<I>,
        function: F,
        timeout: Duration,
        capacity: usize,
        retry: AsyncRetryStrategy<O>,
    ) -> DataStream<O>
    where
        I: Data + Sync,
        O: Data + Sync,
        F: AsyncFunction<I, O>,
    {
        Self::add(stream, function, timeout, capacity, false, Some(retry))
    }

    /// [`AsyncDataStream::ordered_wait`], retrying requests as `retry` says.
    pub fn ordered_wait_with_retry<I, O, F>(
        stream: &DataStream<I>,
        function: F,
        timeout: Duration,
        capacity: usize,
        retry: AsyncRetryStrategy<O>,
    ) -> DataStream<O>
    where
        I: Data + Sync,
        O: Data + Sync,
        F: AsyncFunction<I, O>,
    {
        Self::add(stream, function, timeout, capacity, true, Some(retry))
    }

    fn add<I, O, F>(
        stream: &DataStream<I>,
        function: F,
        timeout: Duration,
        capacity: usize,
        ordered: bool,
        retry: Option<AsyncRetryStrategy<O>>,
    ) -> DataStream<O>
    where
        I: Data + Sync,
        O: Data + Sync,
        F: AsyncFunction<I, O>,
    {
        let mut problems = Vec::new();
        if capacity == 0 {
            problems.push("async I/O: the capacity must be at least 1 record in flight".to_string());
        }
        if timeout.is_zero() {
            problems.push(
                "async I/O: the timeout must be more than 0 (a retry strategy needs time to retry in)".to_string(),
            );
        }
        stream.env.inner.borrow_mut().problems.extend(problems);
        let name = if ordered { "Async Wait (ordered)" } else { "Async Wait (unordered)" };
        stream.one_input(name, AsyncWaitLogic::new(function, timeout, capacity, ordered, retry), false)
    }
}
