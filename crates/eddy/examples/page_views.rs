//! Page views per page and minute from a CSV click log, exactly once into files: the job
//! of the README's tutorial, which shows this file as a job crate's `src/main.rs`.
//!
//! ```text
//! cargo run --release --example page_views -- --input clicks.csv --output out --checkpoints chk
//! ```

use clap::Parser;
use eddy::prelude::*;
use eddy::source::DataGeneratorSource;
use eddy::window::window_function;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Page views per page and minute, from a CSV click log, exactly once into files.
#[derive(Parser)]
struct Args {
    /// The click log: CSV lines `<epoch ms>,<user>,<page>`.
    #[arg(long)]
    input: PathBuf,
    /// Where the counts go: `<minute>,<page>,<views>` lines in part files, each visible
    /// once the checkpoint after it completed.
    #[arg(long)]
    output: PathBuf,
    /// Where checkpoints go.
    #[arg(long)]
    checkpoints: PathBuf,
    /// Lines read per second over all subtasks (0: as fast as it can), so that there is
    /// time to watch and operate the job.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Subtasks per operator.
    #[arg(short = 'p', long, default_value_t = 2)]
    parallelism: u32,
    /// Where and how it runs: here, or on a cluster (`--jobmanager`), from a savepoint
    /// (`-s`), detached (`-d`)…
    #[command(flatten)]
    run: eddy::cluster::SubmitArgs,
}

/// One line of the log. Records are serde types: they cross processes on a cluster.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Click {
    time: i64,
    user: String,
    page: String,
}

/// `<epoch ms>,<user>,<page>`; `None` for a line that is not one.
fn parse(line: &str) -> Option<Click> {
    let mut fields = line.split(',').map(str::trim);
    let time = fields.next()?.parse().ok()?;
    let (user, page) = (fields.next()?.to_string(), fields.next()?.to_string());
    Some(Click { time, user, page })
}

/// A page's views in one minute: a line of the output (the file sink writes `Display`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct PageViews {
    minute: i64,
    page: String,
    views: u64,
}

impl std::fmt::Display for PageViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{},{}", self.minute, self.page, self.views)
    }
}

/// Counts a window's clicks as they come (the window keeps a count, not the clicks).
#[derive(Debug, Clone, Copy)]
struct CountViews;

impl AggregateFunction for CountViews {
    type In = Click;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: Click, views: u64) -> u64 {
        views + 1
    }
    fn get_result(&self, views: &u64) -> u64 {
        *views
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `page-views jobmanager …`, `taskmanager …`, `list`, `stop` …: this binary is also
    // the cluster's processes and their command line (Flink's application mode).
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let args = Args::parse();
    let env = Env::new();
    env.set_parallelism(args.parallelism);
    env.enable_checkpointing(1_000);
    env.set_checkpoint_dir(&args.checkpoints);
    args.run.apply_to(&env)?;

    // The log's lines by their index, at most `rate` a second (Flink's
    // DataGeneratorSource): the indexes still to read are in the checkpoints, so a restore
    // at any parallelism reads every line once. One subtask reads them, in the log's
    // order, so that the watermarks follow the clicks' times: several would read parts of
    // the log in whatever order they get them, and the clicks of a part read after a later
    // one would come late and be dropped.
    let lines: Arc<Vec<String>> = Arc::new(std::fs::read_to_string(&args.input)?.lines().map(String::from).collect());
    let count = lines.len() as u64;
    env.add_parallel_source(DataGeneratorSource::new(count, args.rate, move |i| lines[i as usize].clone()))
        .set_parallelism(1)
        .name("click log")
        .uid("click-log")
        .flat_map(|line: String, out: &mut Collector<'_, Click>| {
            if let Some(click) = parse(&line) {
                out.collect(click);
            }
        })
        .uid("parse")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_secs(5))
                .with_timestamp_assigner(|click: &Click| click.time),
        )
        .uid("timestamps")
        .key_by(|click: &Click| click.page.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
        .aggregate_with(
            CountViews,
            window_function(
                |page: &String,
                 minute: &TimeWindow,
                 views: &mut dyn Iterator<Item = u64>,
                 out: &mut Collector<'_, PageViews>| {
                    for views in views {
                        out.collect(PageViews { minute: minute.start, page: page.clone(), views });
                    }
                },
            ),
        )
        .name("views per minute")
        .uid("views-per-minute")
        .add_sink(ExactlyOnceFileSink::new_in(&args.output))
        .uid("files");

    let result = env.execute("page views per minute")?;
    if !result.elsewhere() {
        println!(
            "done: {} checkpoints, {} restarts; the counts are in {}",
            result.checkpoints_completed,
            result.restarts,
            args.output.display()
        );
    }
    Ok(())
}
