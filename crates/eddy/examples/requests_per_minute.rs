//! Requests per API path per minute, seed 004's windowed count: access-log lines with
//! event timestamps (`<epoch ms> <method> <path>`, a little out of order), counted per
//! path in tumbling one-minute event-time windows. The window's pending counts are keyed
//! state; a line more than the out-of-orderness late for its minute is dropped, as in
//! Flink (here it goes to a side output instead, and is counted).
//!
//! ```text
//! cargo run --release --example requests_per_minute
//! ```

use eddy::prelude::*;
use eddy::time::{WatermarkGenerator, WatermarkOutput, WatermarkStrategy};
use eddy::window::{window_function, TimeWindow, TumblingEventTimeWindows};
use std::time::Duration;

/// How far behind the newest line a line may come and still count.
pub const OUT_OF_ORDERNESS_MS: u64 = 5_000;
pub const MINUTE_MS: i64 = 60_000;

/// One access-log line: `"<epoch ms> <method> <path>"`.
pub fn parse(line: &str) -> Option<(i64, String)> {
    let mut fields = line.split_whitespace();
    let timestamp = fields.next()?.parse().ok()?;
    let _method = fields.next()?;
    Some((timestamp, fields.next()?.to_string()))
}

/// Counts a window's requests.
#[derive(Debug, Clone, Copy)]
pub struct CountRequests;

impl AggregateFunction for CountRequests {
    type In = (i64, String);
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: (i64, String), count: u64) -> u64 {
        count + 1
    }
    fn get_result(&self, count: &u64) -> u64 {
        *count
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

pub fn late_tag() -> OutputTag<(i64, String)> {
    OutputTag::new("late-requests")
}

/// A parsed line: its timestamp and path.
pub type Request = (i64, String);
/// A path's requests in a minute: path, the minute's start, requests.
pub type MinuteCount = (String, i64, u64);

/// Log lines in (one source subtask, in arrival order), watermarks by `watermarks`; out:
/// `(path, minute start, requests)` per path and minute, and the lines too late for their
/// minute. Parsing and timestamps run beside the source, at its parallelism, so that
/// watermarks follow the log's order.
pub fn job(
    lines: &DataStream<String>,
    watermarks: WatermarkStrategy<(i64, String)>,
) -> (DataStream<MinuteCount>, DataStream<Request>) {
    let per_minute = lines
        .flat_map(|line: String, out: &mut Collector<'_, (i64, String)>| {
            if let Some(request) = parse(&line) {
                out.collect(request);
            }
        })
        .name("parse")
        .uid("parse")
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(
            watermarks.with_timestamp_assigner(|(timestamp, _): &(i64, String)| *timestamp),
        )
        .uid("timestamps")
        .set_parallelism(1)
        .key_by(|(_, path): &(i64, String)| path.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(MINUTE_MS as u64)))
        .side_output_late_data(&late_tag())
        .aggregate_with(
            CountRequests,
            window_function(|path: &String, minute: &TimeWindow, counts: &mut dyn Iterator<Item = u64>, out| {
                for count in counts {
                    out.collect((path.clone(), minute.start, count));
                }
            }),
        )
        .name("requests per path per minute")
        .uid("requests-per-minute");
    let late = per_minute.side_output(&late_tag());
    (per_minute, late)
}

/// Flink's bounded out-of-orderness watermarks, emitted every 200 ms of processing time.
pub fn periodic_watermarks() -> WatermarkStrategy<(i64, String)> {
    WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(OUT_OF_ORDERNESS_MS))
}

/// The same watermark, the largest timestamp − out-of-orderness − 1, after every line:
/// which lines are late then depends on the log alone, not on when watermarks went out.
pub fn watermark_after_every_line() -> WatermarkStrategy<(i64, String)> {
    WatermarkStrategy::for_generator(|| AfterEveryLine(i64::MIN))
}

pub struct AfterEveryLine(i64);

impl WatermarkGenerator<(i64, String)> for AfterEveryLine {
    fn on_event(&mut self, _: &(i64, String), timestamp: i64, output: &mut WatermarkOutput) {
        self.0 = self.0.max(timestamp);
        output.emit_watermark(self.0 - OUT_OF_ORDERNESS_MS as i64 - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut WatermarkOutput) {}
}

/// A deterministic access log of `n` lines over a few paths, ten lines a second from
/// `start_ms`, each up to 3 s out of order; every 500th line is 20 s late.
pub fn access_log(n: u64, start_ms: i64) -> Vec<String> {
    let methods = ["GET", "POST", "PUT", "DELETE"];
    (0..n)
        .map(|i| {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let jitter = (h % 3_000) as i64;
            let late = if i % 500 == 499 { 20_000 } else { 0 };
            let timestamp = start_ms + i as i64 * 100 - jitter - late;
            let path = ["a", "b", "c", "d", "e"][(h % 5) as usize];
            format!("{timestamp} {} /api/{path}", methods[(h % 4) as usize])
        })
        .collect()
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `<example> jobmanager …`, `taskmanager …`, `list` …: a cluster role.
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    // `--jobmanager HOST:PORT --secret-file FILE`: submit the job to a cluster.
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    let (counts, late) = (CollectSink::new(), CollectSink::new());
    let log = env.from_collection(access_log(10_000, 1_700_000_000_000)).uid("access-log");
    let (per_minute, too_late) = job(&log, periodic_watermarks());
    per_minute.add_sink(counts.clone());
    too_late.add_sink(late.clone());
    let result = env.execute("requests per minute")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut counts = counts.take();
    counts.sort();
    for (path, minute, count) in counts {
        println!("{path} {minute} {count}");
    }
    println!("{} requests came too late for their minute", late.take().len());
    Ok(())
}
