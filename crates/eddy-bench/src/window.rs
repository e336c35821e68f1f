//! W3 `window`: an event-time tumbling window count per key, with watermarks that follow
//! the timestamps (no out-of-orderness).

use crate::checksum::{checksum_of_job, ChecksumSink};
use crate::generator::{splitmix64, Event};
use crate::rate::RateLimiter;
use crate::{Args, Report};
use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use eddy::time::WatermarkStrategy;
use eddy::window::{window_function, TimeWindow, TumblingEventTimeWindows};
use std::time::Duration;

/// What W3 keeps of an event: its key and timestamp.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Request {
    pub key: u64,
    pub timestamp_ms: i64,
}

/// Counts the records of a window (Flink's canonical count aggregate).
#[derive(Debug, Clone, Copy, Default)]
pub struct Count;

impl AggregateFunction for Count {
    type In = Request;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _value: Request, accumulator: u64) -> u64 {
        accumulator + 1
    }
    fn get_result(&self, accumulator: &u64) -> u64 {
        *accumulator
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// W3's checksum term of one emitted (key, window start, count).
pub fn checksum_term(&(key, start, count): &(u64, i64, u64)) -> Result<u64, String> {
    Ok(splitmix64(key ^ start as u64).wrapping_mul(count))
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let env = Env::new();
    args.configure(&env)?;
    let keys = args.keys();
    let window_ms = args.window_ms;
    let mut limiter = RateLimiter::new(args.rate / u64::from(args.parallelism));
    let counts = env
        .from_sequence(0, args.events - 1)
        .name("events")
        .uid("events")
        .map(move |i| {
            limiter.admit();
            let event = Event::generate(1, i, keys);
            Request { key: event.key, timestamp_ms: event.timestamp_ms as i64 }
        })
        .name("generate")
        .uid("generate")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|r: &Request| r.timestamp_ms)
                .with_auto_watermark_interval(Duration::from_millis(args.watermark_interval_ms)),
        )
        .name("timestamps")
        .uid("timestamps")
        .key_by(|r: &Request| r.key)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(window_ms)))
        .aggregate_with(
            Count,
            window_function(|key: &u64, window: &TimeWindow, counts: &mut dyn Iterator<Item = u64>, out| {
                for count in counts {
                    out.collect((*key, window.start, count));
                }
            }),
        )
        .name("count per key and window")
        .uid("window-count");
    counts.add_sink(ChecksumSink::new(checksum_term)).name("checksum").uid("checksum");
    if let Some(dir) = &args.checkpoints.output {
        counts
            .map(|(key, start, count)| format!("{key} {start} {count}"))
            .name("format")
            .uid("format")
            .add_sink(ExactlyOnceFileSink::<String>::new_in(dir))
            .name("exactly-once file sink")
            .uid("file-sink");
    }
    let result = env.execute("W3 window")?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra: args.checkpoints.report(&result),
    })
}
