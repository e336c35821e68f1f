//! Async I/O inside jobs, with futures on tokio's timers: a timeout fails the job by
//! default and gives the fallback of an overriding function; an error fails the job naming
//! the cause and the attempts; results go out also when no input comes (the operator asks
//! the task to wake it); the capacity bounds the requests in flight; unordered results
//! never fall behind a watermark that came after their records. (Against a real HTTP
//! service, with a SIGKILL and a restore: eddy-bench's `tests/async_io.rs`.)

use eddy::async_io::{async_function, AsyncDataStream, AsyncFunction, AsyncRetryStrategy};
use eddy::prelude::*;
use eddy::time::{WatermarkGenerator, WatermarkOutput};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn sleep_ms(ms: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(ms))
}

#[test]
fn a_timeout_fails_the_job_unless_the_function_gives_a_fallback() {
    let env = Env::new();
    let slow = async_function(|i: u64| async move {
        sleep_ms(2_000).await;
        Ok(vec![i])
    });
    AsyncDataStream::unordered_wait(&env.from_sequence(0, 3), slow, Duration::from_millis(50), 10)
        .add_sink(CollectSink::new());
    let error = env.execute("times out").unwrap_err().to_string();
    assert!(error.contains("gave no result within its timeout of 50ms"), "{error}");
    assert!(error.contains("AsyncFunction::timeout is not overridden"), "{error}");

    /// Odd records are slow and get a fallback.
    #[derive(Clone)]
    struct WithFallback;
    impl RichFunction for WithFallback {}
    impl AsyncFunction<u64, (u64, String)> for WithFallback {
        // Not an `async fn`: its future would borrow `self`, and a request's must not.
        #[allow(clippy::manual_async_fn)]
        fn async_invoke(
            &self,
            i: u64,
        ) -> impl std::future::Future<Output = FunctionResult<Vec<(u64, String)>>> + Send + 'static {
            async move {
                if i % 2 == 1 {
                    sleep_ms(2_000).await;
                }
                Ok(vec![(i, "answer".to_string())])
            }
        }
        fn timeout(&self, i: &u64) -> FunctionResult<Vec<(u64, String)>> {
            Ok(vec![(*i, "fallback".to_string())])
        }
    }
    let env = Env::new();
    let sink = CollectSink::new();
    AsyncDataStream::ordered_wait(&env.from_sequence(0, 5), WithFallback, Duration::from_millis(50), 10)
        .add_sink(sink.clone());
    env.execute("fallback").unwrap();
    let mut got = sink.take();
    got.sort();
    let expected: Vec<(u64, String)> =
        (0..6).map(|i| (i, if i % 2 == 1 { "fallback" } else { "answer" }.to_string())).collect();
    assert_eq!(got, expected);
}

#[test]
fn an_error_fails_the_job_naming_its_cause_and_the_attempts_made() {
    let failing = |i: u64| async move {
        if i == 7 {
            return Err(format!("HTTP 500 for {i}").into());
        }
        Ok(vec![i])
    };
    let env = Env::new();
    AsyncDataStream::unordered_wait(&env.from_sequence(0, 9), async_function(failing), Duration::from_secs(5), 4)
        .add_sink(CollectSink::new());
    let error = env.execute("fails").unwrap_err().to_string();
    assert!(error.contains("an async I/O request failed after 1 attempt(s): HTTP 500 for 7"), "{error}");

    let env = Env::new();
    let retry = AsyncRetryStrategy::fixed_delay(2, Duration::from_millis(5)).if_error(|_| true);
    AsyncDataStream::ordered_wait_with_retry(
        &env.from_sequence(0, 9),
        async_function(failing),
        Duration::from_secs(5),
        4,
        retry,
    )
    .add_sink(CollectSink::new());
    let error = env.execute("fails after retries").unwrap_err().to_string();
    assert!(error.contains("failed after 3 attempt(s): HTTP 500 for 7"), "{error}");
}

#[test]
fn results_go_out_while_no_input_comes() {
    // Record n+1 enters only once n's result was emitted: without the operator asking to
    // be woken, n's result would wait for the next record, which waits for it. The async
    // operator runs in a task of its own, so that the waiting source does not block it.
    let env = Env::new();
    env.set_parallelism(1);
    env.set_buffer_timeout(0);
    let emitted = Arc::new(AtomicUsize::new(0));
    let gate = emitted.clone();
    let trickle = env.from_sequence(0, 19).map(move |i| {
        let started = Instant::now();
        while gate.load(Ordering::SeqCst) < i as usize {
            assert!(started.elapsed() < Duration::from_secs(20), "record {i} waited 20 s for the result before it");
            std::thread::sleep(Duration::from_millis(1));
        }
        i
    });
    let answer = async_function(|i: u64| async move {
        sleep_ms(5).await;
        Ok(vec![i * 10])
    });
    let counter = emitted.clone();
    let sink = CollectSink::new();
    AsyncDataStream::ordered_wait(&trickle, answer, Duration::from_secs(5), 100)
        .disable_chaining()
        .map(move |v: u64| {
            counter.fetch_add(1, Ordering::SeqCst);
            v
        })
        .add_sink(sink.clone());
    env.execute("trickle").unwrap();
    assert_eq!(sink.take(), (0..20).map(|i| i * 10).collect::<Vec<u64>>());
}

#[test]
fn the_capacity_bounds_the_requests_in_flight() {
    let env = Env::new();
    env.set_parallelism(1);
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (in_flight, max_seen) = (now.clone(), most.clone());
    let counted = async_function(move |i: u64| {
        let (in_flight, max_seen) = (in_flight.clone(), max_seen.clone());
        async move {
            let n = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            max_seen.fetch_max(n, Ordering::SeqCst);
            sleep_ms(10).await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(vec![i])
        }
    });
    let sink = CollectSink::new();
    AsyncDataStream::unordered_wait(&env.from_sequence(0, 59), counted, Duration::from_secs(5), 3)
        .add_sink(sink.clone());
    env.execute("capacity").unwrap();
    assert_eq!(sink.take().len(), 60);
    assert_eq!(most.load(Ordering::SeqCst), 3, "at most, and at some point exactly, 3 requests in flight");
}

/// The watermark after every record: the largest timestamp so far − 1.
struct PerRecord(i64);

impl WatermarkGenerator<u64> for PerRecord {
    fn on_event(&mut self, _: &u64, timestamp: i64, output: &mut WatermarkOutput) {
        self.0 = self.0.max(timestamp);
        output.emit_watermark(self.0 - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut WatermarkOutput) {}
}

#[test]
fn unordered_results_never_fall_behind_a_later_watermark() {
    // Record i at time 10·i; early records of every 20 answer last. Were a watermark
    // passed on before the results of records before it, those results would be late
    // for their windows.
    let env = Env::new();
    env.set_parallelism(1);
    let timed = env.from_sequence(0, 199).assign_timestamps_and_watermarks(
        WatermarkStrategy::for_generator(|| PerRecord(i64::MIN)).with_timestamp_assigner(|i: &u64| *i as i64 * 10),
    );
    let reversed = async_function(|i: u64| async move {
        sleep_ms(20 - i % 20).await;
        Ok(vec![i])
    });
    let late = OutputTag::<u64>::new("late");
    let counts = AsyncDataStream::unordered_wait(&timed, reversed, Duration::from_secs(5), 50)
        .set_parallelism(2)
        .with_timestamps(|i: &u64| *i as i64 * 10)
        .window_all(TumblingEventTimeWindows::of(Duration::from_millis(100)))
        .side_output_late_data(&late)
        .process(eddy::window::window_function(
            |_: &(), w: &TimeWindow, records: &mut dyn Iterator<Item = u64>, out: &mut Collector<'_, (i64, usize)>| {
                out.collect((w.start, records.count()))
            },
        ));
    let (sink, late_sink) = (CollectSink::new(), CollectSink::new());
    counts.add_sink(sink.clone());
    counts.side_output(&late).add_sink(late_sink.clone());
    env.execute("unordered in event time").unwrap();
    assert_eq!(late_sink.take(), Vec::<u64>::new(), "no result fell behind its watermark");
    let mut got = sink.take();
    got.sort();
    assert_eq!(got, (0..20).map(|w| (w * 100, 10)).collect::<Vec<_>>());
}
