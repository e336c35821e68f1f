//! `join-replay`: replays two inputs of `key,timestamp,value` lines (`--input` the first,
//! `--right-input` the second) through a window join, a coGroup or an interval join, as
//! `shared/flink-sql-oracle` runs Apache Flink's on the same inputs, so that the outputs
//! can be compared line for line (sorted). `--join` takes the words of a fixture's `.args`:
//!
//! - `window tumble SIZE D inner|full` / `window hop SIZE SLIDE D inner|full`: a coGroup,
//!   printing `key,left,right,window_start,window_end` per pair (`null` for the missing
//!   side of an outer row); with `--pairs-only`, inner cases run as a join (`apply`) and
//!   print `key,left,right`.
//! - `interval LOWER UPPER D incl|excl incl|excl`: an interval join printing
//!   `key,left,right,left_ts,right_ts`.
//!
//! Each input is one source whose watermark follows its largest timestamp − D − 1 after
//! every record; the end of the inputs is a final watermark. Any parallelism and backend.

use crate::window_replay::{read_timed_lines, report_lines, PerRecord};
use anyhow::{anyhow, bail};
use eddy::join::join_function;
use eddy::prelude::*;
use eddy::time::WatermarkStrategy;
use eddy::window::{SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows, WindowAssigner};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct JoinReplayArgs {
    /// join-replay: the second input's `key,timestamp,value` lines (the first is --input).
    #[arg(long)]
    pub right_input: Option<PathBuf>,
    /// join-replay: what to replay, as a fixture's `.args` line (see `join_replay.rs`).
    #[arg(long)]
    pub join: Option<String>,
    /// join-replay: run an inner window join as a join (pairs, without their windows).
    #[arg(long)]
    pub pairs_only: bool,
}

/// What `--join` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    Window { size: u64, slide: Option<u64>, out_of_orderness: i64, full: bool },
    Interval { lower: i64, upper: i64, out_of_orderness: i64, lower_exclusive: bool, upper_exclusive: bool },
}

fn parse_spec(text: &str) -> anyhow::Result<Spec> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let number = |s: &str| s.parse::<i64>().map_err(|_| anyhow!("--join '{text}': '{s}' is not a whole number of ms"));
    let positive = |s: &str| match number(s)? {
        n if n > 0 => Ok(n as u64),
        _ => Err(anyhow!("--join '{text}': '{s}' must be positive")),
    };
    let outer = |s: &str| match s {
        "inner" => Ok(false),
        "full" => Ok(true),
        _ => Err(anyhow!("--join '{text}': '{s}' is neither inner nor full")),
    };
    let exclusive = |s: &str| match s {
        "incl" => Ok(false),
        "excl" => Ok(true),
        _ => Err(anyhow!("--join '{text}': '{s}' is neither incl nor excl")),
    };
    Ok(match words[..] {
        ["window", "tumble", size, d, kind] => {
            Spec::Window { size: positive(size)?, slide: None, out_of_orderness: number(d)?, full: outer(kind)? }
        }
        ["window", "hop", size, slide, d, kind] => Spec::Window {
            size: positive(size)?,
            slide: Some(positive(slide)?),
            out_of_orderness: number(d)?,
            full: outer(kind)?,
        },
        ["interval", lower, upper, d, lower_bound, upper_bound] => Spec::Interval {
            lower: number(lower)?,
            upper: number(upper)?,
            out_of_orderness: number(d)?,
            lower_exclusive: exclusive(lower_bound)?,
            upper_exclusive: exclusive(upper_bound)?,
        },
        _ => bail!(
            "--join '{text}': expected `window tumble SIZE D inner|full`, `window hop SIZE SLIDE D inner|full` or \
                `interval LOWER UPPER D incl|excl incl|excl`"
        ),
    })
}

/// One replayed record: key, timestamp, value.
type Record = (String, i64, String);

fn read_side(path: &Path) -> anyhow::Result<Vec<Record>> {
    read_timed_lines(path)?
        .into_iter()
        .map(|(key, timestamp, rest)| {
            let value =
                rest.ok_or_else(|| anyhow!("{}: a line without its value (`key,timestamp,value`)", path.display()))?;
            Ok((key, timestamp, value))
        })
        .collect()
}

fn side(env: &Env, records: Vec<Record>, out_of_orderness: i64, name: &str) -> DataStream<Record> {
    let strategy = WatermarkStrategy::for_generator(move || PerRecord { out_of_orderness, max: i64::MIN })
        .with_timestamp_assigner(|r: &Record| r.1);
    env.from_collection(records).uid(name).assign_timestamps_and_watermarks(strategy).uid(&format!("{name}-timestamps"))
}

fn window_lines<A: WindowAssigner<W = TimeWindow>>(
    left: &DataStream<Record>,
    right: &DataStream<Record>,
    assigner: A,
    full: bool,
    pairs_only: bool,
) -> DataStream<String>
where
    A::DefaultTrigger: eddy::window::Trigger<eddy::join::TaggedUnion<Record, Record>, TimeWindow>,
{
    if pairs_only {
        return left
            .join(right)
            .where_(|l: &Record| l.0.clone())
            .equal_to(|r: &Record| r.0.clone())
            .window(assigner)
            .apply(|l: &Record, r: &Record| format!("{},{},{}", l.0, l.2, r.2));
    }
    left.co_group(right).where_(|l: &Record| l.0.clone()).equal_to(|r: &Record| r.0.clone()).window(assigner).process(
        move |key: &String,
              w: &TimeWindow,
              lefts: Vec<Record>,
              rights: Vec<Record>,
              out: &mut Collector<'_, String>| {
            let (start, end) = (w.start, w.end);
            for l in &lefts {
                for r in &rights {
                    out.collect(format!("{key},{},{},{start},{end}", l.2, r.2));
                }
            }
            if full && rights.is_empty() {
                lefts.iter().for_each(|l| out.collect(format!("{key},{},null,{start},{end}", l.2)));
            }
            if full && lefts.is_empty() {
                rights.iter().for_each(|r| out.collect(format!("{key},null,{},{start},{end}", r.2)));
            }
        },
    )
}

/// Replays on the parallelism, backend and checkpoint flags of `common`.
pub fn run(common: &crate::Args) -> anyhow::Result<crate::Report> {
    let args = &common.join_replay;
    let left_path = common.replay.input.as_deref().ok_or_else(|| anyhow!("join-replay needs --input FILE"))?;
    let right_path = args.right_input.as_deref().ok_or_else(|| anyhow!("join-replay needs --right-input FILE"))?;
    let spec = parse_spec(args.join.as_deref().ok_or_else(|| anyhow!("join-replay needs --join SPEC"))?)?;
    let output = common.checkpoints.output.as_deref().ok_or_else(|| anyhow!("join-replay needs --output FILE"))?;
    let (lefts, rights) = (read_side(left_path)?, read_side(right_path)?);
    let events = (lefts.len() + rights.len()) as u64;
    let env = Env::new();
    common.configure(&env)?;
    let out_of_orderness = match spec {
        Spec::Window { out_of_orderness, .. } | Spec::Interval { out_of_orderness, .. } => out_of_orderness,
    };
    let left = side(&env, lefts, out_of_orderness, "left");
    let right = side(&env, rights, out_of_orderness, "right");
    let joined = match spec {
        Spec::Window { size, slide: None, full, .. } => window_lines(
            &left,
            &right,
            TumblingEventTimeWindows::of(Duration::from_millis(size)),
            full,
            args.pairs_only,
        ),
        Spec::Window { size, slide: Some(slide), full, .. } => window_lines(
            &left,
            &right,
            SlidingEventTimeWindows::of(Duration::from_millis(size), Duration::from_millis(slide)),
            full,
            args.pairs_only,
        ),
        Spec::Interval { lower, upper, lower_exclusive, upper_exclusive, .. } => {
            let mut between = left
                .key_by(|l: &Record| l.0.clone())
                .interval_join(&right.key_by(|r: &Record| r.0.clone()))
                .between(lower, upper);
            if lower_exclusive {
                between = between.lower_bound_exclusive();
            }
            if upper_exclusive {
                between = between.upper_bound_exclusive();
            }
            between.process(join_function(|l: &Record, r: &Record, _ctx: &mut _, out: &mut Collector<'_, String>| {
                out.collect(format!("{},{},{},{},{}", l.0, l.2, r.2, l.1, r.1))
            }))
        }
    };
    let lines = CollectSink::new();
    joined.uid("join").add_sink(lines.clone()).uid("lines");
    let result = env.execute("join replay")?;
    report_lines(events, &result, lines, output)
}
