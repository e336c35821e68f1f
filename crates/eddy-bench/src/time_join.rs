//! W6 `interval-join` and W7 `window-join`: streams 1 and 2 of the generator with event
//! time `timestamp_ms` and watermarks that follow it, keyed by `key` and joined over time:
//!
//! - W6: `left.interval_join(&right).between(-J, J)` (J = `--interval-ms`, 100 by
//!   default) emits `(key, a_i, b_i)` for every pair of a key within J ms of each other;
//! - W7: `left.join(&right)` in tumbling event-time windows of `--window-ms` emits
//!   `(key, a_i, b_i)` for every pair of a key in one window.
//!
//! `checksum = Σ over every emitted pair of splitmix64((a_i << 32) ^ b_i)`, independent of
//! parallelism and order; `emitted=<n>` counts the pairs; events per second count both
//! streams. Flink's DataStream interval join and window join do the same work (the
//! figures in the issue notes come from a Flink 2.3 program of these two workloads).

use crate::checksum::{checksum_of_job, ChecksumSink};
use crate::generator::{splitmix64, Event};
use crate::rate::RateLimiter;
use crate::{Args, Report};
use eddy::join::join_function;
use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use eddy::time::WatermarkStrategy;
use eddy::window::TumblingEventTimeWindows;
use std::time::Duration;

/// The counter of emitted pairs.
const EMITTED: &str = "emitted";

/// What a join keeps of an event: its key and index (its timestamp is the index).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Keyed {
    pub key: u64,
    pub i: u64,
}

/// A pair's checksum term.
pub fn pair_term(&(_, a, b): &(u64, u64, u64)) -> Result<u64, String> {
    Ok(splitmix64((a << 32) ^ b))
}

fn stream(env: &Env, args: &Args, side: u64) -> DataStream<Keyed> {
    let keys = args.keys();
    let mut limiter = RateLimiter::new(args.rate / u64::from(args.parallelism) / 2);
    let name = if side == 1 { "left" } else { "right" };
    env.from_sequence(0, args.events - 1)
        .name(&format!("{name} events"))
        .uid(&format!("{name}-events"))
        .map(move |i| {
            limiter.admit();
            let event = Event::generate(side, i, keys);
            Keyed { key: event.key, i: event.i }
        })
        .name(&format!("generate {name}"))
        .uid(&format!("generate-{name}"))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|k: &Keyed| k.i as i64)
                .with_auto_watermark_interval(Duration::from_millis(args.watermark_interval_ms)),
        )
        .name(&format!("{name} timestamps"))
        .uid(&format!("{name}-timestamps"))
}

/// Runs W6 (`interval`) or W7.
pub fn run(args: &Args, interval: bool) -> anyhow::Result<Report> {
    let env = Env::new();
    args.configure(&env)?;
    let (left, right) = (stream(&env, args, 1), stream(&env, args, 2));
    let pairs = if interval {
        let bound = args.interval_ms as i64;
        left.key_by(|k: &Keyed| k.key)
            .interval_join(&right.key_by(|k: &Keyed| k.key))
            .between(-bound, bound)
            .process(join_function(|a: &Keyed, b: &Keyed, _: &mut _, out: &mut Collector<'_, (u64, u64, u64)>| {
                out.collect((a.key, a.i, b.i))
            }))
            .uid("interval-join")
    } else {
        left.join(&right)
            .where_(|k: &Keyed| k.key)
            .equal_to(|k: &Keyed| k.key)
            .window(TumblingEventTimeWindows::of(Duration::from_millis(args.window_ms)))
            .apply(|a: &Keyed, b: &Keyed| (a.key, a.i, b.i))
            .uid("window-join")
    };
    pairs.add_sink(ChecksumSink::new(pair_term)).name("checksum").uid("checksum");
    pairs.add_sink(ChecksumSink::named(EMITTED, |_: &(u64, u64, u64)| Ok(1))).name("emitted").uid("emitted");
    if let Some(dir) = &args.checkpoints.output {
        pairs
            .map(|(key, a, b)| format!("{key} {a} {b}"))
            .name("format")
            .uid("format")
            .add_sink(ExactlyOnceFileSink::<String>::new_in(dir))
            .name("exactly-once file sink")
            .uid("file-sink");
    }
    let result = env.execute(if interval { "W6 interval-join" } else { "W7 window-join" })?;
    let mut extra = args.checkpoints.report(&result);
    extra.push((EMITTED.to_string(), result.accumulators.get(EMITTED).copied().unwrap_or(0).to_string()));
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: 2 * args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra,
    })
}
