//! `window-replay`: replays `key,timestamp` lines, in arrival order, through an event-time
//! window count at parallelism 1, as `shared/flink-oracle` runs Apache Flink on the same
//! arguments, so that the two outputs can be compared line for line (sorted). The
//! watermark after every record is the largest timestamp so far − out-of-orderness − 1;
//! the end of input is a final watermark. Output: `W <key> <start> <end> <count>` per
//! firing, `L <key> <timestamp>` per late record dropped.

use anyhow::{anyhow, bail, Context};
use eddy::prelude::*;
use eddy::time::{WatermarkGenerator, WatermarkOutput, WatermarkStrategy};
use eddy::window::{
    window_function, EventTimeSessionWindows, SlidingEventTimeWindows, TimeWindow, Trigger, TumblingEventTimeWindows,
    WindowAssigner,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The window of a replay: `tumbling:SIZE`, `sliding:SIZE:SLIDE` or `session:GAP`, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Tumbling(u64),
    Sliding(u64, u64),
    Session(u64),
}

impl std::str::FromStr for WindowKind {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let ms = |s: &str| -> Result<u64, String> {
            match s.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!("'{s}' in --window {text} is not a positive number of milliseconds")),
                Ok(n) => Ok(n),
            }
        };
        match parts[..] {
            ["tumbling", size] => Ok(WindowKind::Tumbling(ms(size)?)),
            ["sliding", size, slide] => Ok(WindowKind::Sliding(ms(size)?, ms(slide)?)),
            ["session", gap] => Ok(WindowKind::Session(ms(gap)?)),
            _ => Err(format!("--window {text}: expected tumbling:SIZE, sliding:SIZE:SLIDE or session:GAP (ms)")),
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// window-replay: the `key,timestamp` lines to replay (join-replay: the first input).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// window-replay: tumbling:SIZE | sliding:SIZE:SLIDE | session:GAP (ms).
    #[arg(long)]
    pub window: Option<WindowKind>,
    /// window-replay: how far behind the largest timestamp the watermark trails (ms).
    #[arg(long, default_value_t = 0)]
    pub out_of_orderness: u64,
    /// window-replay: how long windows take late records after their end (ms).
    #[arg(long, default_value_t = 0)]
    pub allowed_lateness: u64,
    /// window-replay: count with a window function over all elements (every window keeps
    /// its records) instead of an incremental count (sliding windows share panes).
    #[arg(long)]
    pub all_elements: bool,
}

/// One replayed record.
type Record = (String, i64);

/// The watermark after every record: the largest timestamp − out-of-orderness − 1 (also
/// join-replay's, for records of any type).
pub struct PerRecord {
    pub out_of_orderness: i64,
    pub max: i64,
}

impl<T> WatermarkGenerator<T> for PerRecord {
    fn on_event(&mut self, _: &T, timestamp: i64, output: &mut WatermarkOutput) {
        self.max = self.max.max(timestamp);
        output.emit_watermark(self.max - self.out_of_orderness - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut WatermarkOutput) {}
}

/// Reads `key,timestamp` lines; blank lines are skipped.
pub fn read_input(path: &Path) -> anyhow::Result<Vec<Record>> {
    Ok(read_timed_lines(path)?.into_iter().map(|(key, timestamp, _)| (key, timestamp)).collect())
}

/// Reads `key,timestamp[,rest]` lines (the rest as it is); blank lines are skipped.
pub fn read_timed_lines(path: &Path) -> anyhow::Result<Vec<(String, i64, Option<String>)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut records = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(3, ',');
        let (Some(key), Some(timestamp)) = (fields.next(), fields.next()) else {
            bail!("{}:{}: expected `key,timestamp`, found '{line}'", path.display(), number + 1);
        };
        let timestamp = timestamp.trim().parse::<i64>().map_err(|_| {
            anyhow!(
                "{}:{}: the timestamp '{}' is not a whole number of ms",
                path.display(),
                number + 1,
                timestamp.trim()
            )
        })?;
        records.push((key.to_string(), timestamp, fields.next().map(|rest| rest.trim().to_string())));
    }
    Ok(records)
}

/// Counts records per window (of replayed records).
#[derive(Debug, Clone, Copy)]
struct CountRecords;

impl AggregateFunction for CountRecords {
    type In = Record;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: Record, accumulator: u64) -> u64 {
        accumulator + 1
    }
    fn get_result(&self, accumulator: &u64) -> u64 {
        *accumulator
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

fn count_lines<A: WindowAssigner<W = TimeWindow>>(
    env: &Env,
    records: Vec<Record>,
    assigner: A,
    args: &ReplayArgs,
) -> CollectSink<String>
where
    A::DefaultTrigger: Trigger<Record, TimeWindow>,
{
    let out_of_orderness = args.out_of_orderness as i64;
    let strategy = WatermarkStrategy::for_generator(move || PerRecord { out_of_orderness, max: i64::MIN })
        .with_timestamp_assigner(|r: &Record| r.1);
    let late = OutputTag::<Record>::new("late");
    let windows = env
        .from_collection(records)
        .assign_timestamps_and_watermarks(strategy)
        .key_by(|r: &Record| r.0.clone())
        .window(assigner)
        .allowed_lateness(Duration::from_millis(args.allowed_lateness))
        .side_output_late_data(&late);
    let fired = if args.all_elements {
        windows.process(window_function(
            |key: &String, w: &TimeWindow, records: &mut dyn Iterator<Item = Record>, out| {
                out.collect(format!("W {key} {} {} {}", w.start, w.end, records.count()));
            },
        ))
    } else {
        windows.aggregate_with(
            CountRecords,
            window_function(|key: &String, w: &TimeWindow, counts: &mut dyn Iterator<Item = u64>, out| {
                for count in counts {
                    out.collect(format!("W {key} {} {} {count}", w.start, w.end));
                }
            }),
        )
    };
    let dropped = fired.side_output(&late).map(|(key, timestamp)| format!("L {key} {timestamp}"));
    let lines = CollectSink::new();
    fired.union(&[dropped]).add_sink(lines.clone());
    lines
}

/// Replays at parallelism 1 on the backend (and with the checkpoint flags) of `common`.
pub fn run(common: &crate::Args) -> anyhow::Result<crate::Report> {
    let args = &common.replay;
    let input = args.input.as_deref().ok_or_else(|| anyhow!("window-replay needs --input FILE"))?;
    let window = args.window.ok_or_else(|| anyhow!("window-replay needs --window"))?;
    let output = common.checkpoints.output.as_deref().ok_or_else(|| anyhow!("window-replay needs --output FILE"))?;
    if common.parallelism != 1 {
        bail!("window-replay runs at parallelism 1, as the oracle does");
    }
    let records = read_input(input)?;
    let events = records.len() as u64;
    let env = Env::new();
    common.configure(&env)?;
    let lines = match window {
        WindowKind::Tumbling(size) => {
            count_lines(&env, records, TumblingEventTimeWindows::of(Duration::from_millis(size)), args)
        }
        WindowKind::Sliding(size, slide) => count_lines(
            &env,
            records,
            SlidingEventTimeWindows::of(Duration::from_millis(size), Duration::from_millis(slide)),
            args,
        ),
        WindowKind::Session(gap) => {
            count_lines(&env, records, EventTimeSessionWindows::with_gap(Duration::from_millis(gap)), args)
        }
    };
    let result = env.execute("window replay")?;
    report_lines(events, &result, lines, output)
}

/// A replay's end, shared with join-replay: writes the collected lines to `output` (a task
/// executor of a cluster job leaves that to its JobMaster) and reports their count.
pub fn report_lines(
    events: u64,
    result: &JobResult,
    lines: CollectSink<String>,
    output: &Path,
) -> anyhow::Result<crate::Report> {
    if result.elsewhere() {
        return Ok(crate::Report { events, seconds: 0.0, checksum: 0, extra: Vec::new(), elsewhere: true });
    }
    let lines = lines.take();
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    std::fs::write(output, text).with_context(|| format!("writing --output {}", output.display()))?;
    Ok(crate::Report {
        events,
        seconds: result.duration.as_secs_f64(),
        checksum: 0,
        extra: vec![("lines".into(), lines.len().to_string())],
        elsewhere: false,
    })
}
