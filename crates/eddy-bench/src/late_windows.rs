//! `late-windows`: a job for event time under failures, across processes too. One source
//! subtask feeds per-key 100 ms tumbling event-time windows at `--parallelism`, each
//! record counted at `--slow-sink-us`, so that queues fill and unaligned checkpoints'
//! barriers overtake records and watermarks. The watermark follows every record, and
//! some records are late only behind the watermark right before them: what a restore
//! must bring back of the watermarks in flight decides which records are late. Each
//! window subtask reads one channel, from the one source subtask, so which records are
//! late does not depend on how channels interleave: the committed output (`--output`,
//! exactly once; `W key start count` per window, `L key time` per late record) is the
//! same whatever fails.

use crate::{Args, Report};
use anyhow::anyhow;
use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use eddy::time::{WatermarkGenerator, WatermarkOutput, WatermarkStrategy};
use eddy::window::{window_function, TimeWindow, TumblingEventTimeWindows};
use std::time::Duration;

/// The windows' size.
const WINDOW_MS: i64 = 100;

/// How many keys the events go round.
const KEYS: u64 = 7;

/// Event `i`: keyed `i % 7`, at `10 i` ms, except that from 300 on the two after each
/// window's first are 25 ms behind, in the window before, which the watermark right
/// before them closed.
pub fn timed_event(i: u64) -> (u64, i64) {
    let time = i as i64 * 10;
    (i % KEYS, if i >= 300 && matches!(i % 10, 1 | 2) { time - 25 } else { time })
}

/// Watermark = the largest timestamp − 1, after every record.
struct EveryRecord(i64);

impl WatermarkGenerator<(u64, i64)> for EveryRecord {
    fn on_event(&mut self, _: &(u64, i64), timestamp: i64, output: &mut WatermarkOutput) {
        self.0 = self.0.max(timestamp);
        output.emit_watermark(self.0 - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut WatermarkOutput) {}
}

/// Counts records, taking `micros` for each.
#[derive(Debug, Clone, Copy)]
struct SlowCount {
    micros: u64,
}

impl AggregateFunction for SlowCount {
    type In = (u64, i64);
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: (u64, i64), count: u64) -> u64 {
        std::thread::sleep(Duration::from_micros(self.micros));
        count + 1
    }
    fn get_result(&self, count: &u64) -> u64 {
        *count
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let out = args.checkpoints.output.as_deref().ok_or_else(|| anyhow!("late-windows needs --output DIR"))?;
    let env = Env::new();
    args.configure(&env)?;
    let late = OutputTag::<(u64, i64)>::new("late");
    let count = SlowCount { micros: args.slow_sink_us };
    let windows = env
        .from_sequence(0, args.events - 1)
        .set_parallelism(1)
        .name("numbers")
        .uid("numbers")
        .map(timed_event)
        .set_parallelism(1)
        .name("events")
        .uid("events")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_generator(|| EveryRecord(i64::MIN)).with_timestamp_assigner(|e: &(u64, i64)| e.1),
        )
        .set_parallelism(1)
        .name("timestamps")
        .uid("timestamps")
        .key_by(|e: &(u64, i64)| e.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(WINDOW_MS as u64)));
    let windows = if args.drop_late { windows } else { windows.side_output_late_data(&late) };
    let windows = windows
        .aggregate_with(
            count,
            window_function(|key: &u64, w: &TimeWindow, counts: &mut dyn Iterator<Item = u64>, out| {
                for count in counts {
                    out.collect(format!("W {key} {} {count}", w.start));
                }
            }),
        )
        .name("windows")
        .uid("windows");
    let sink = ExactlyOnceFileSink::<String>::new_in(out);
    if args.drop_late {
        windows.add_sink(sink).name("file sink").uid("sink");
    } else {
        let dropped = windows.side_output(&late).map(|(key, time)| format!("L {key} {time}")).name("late").uid("late");
        windows.union(&[dropped]).add_sink(sink).name("file sink").uid("sink");
    }
    let result = env.execute("late windows")?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: 0,
        extra: args.checkpoints.report(&result),
    })
}
