//! `eddy-bench`: runs the workloads of `shared/bench/WORKLOADS.md` on eddy and prints
//! their result line last: `events=<N> seconds=<s> eps=<events/s> checksum=<u64>`.
//!
//! ```text
//! cargo run --release -p eddy-bench -- api-count --events 1000000 --keys 10000 --parallelism 2
//! cargo run --release -p eddy-bench -- api-count --events 1000000 --keys 10000 --bare
//! ```

// Only eddy-state holds `unsafe` (one audited prefetch), and this binary one call that sets
// its allocator's purge delay (`tune_allocator`); nothing else may.
#![deny(unsafe_code)]

mod api_count;
mod bare;
mod checksum;
mod enrich;
mod generator;
mod join;
mod join_replay;
mod kafka;
mod late_windows;
mod nexmark;
mod nexmark_sql;
mod options;
mod rate;
mod time_join;
mod window;
mod window_replay;

use clap::{Parser, ValueEnum};

/// Records cross threads inside eddy: one subtask allocates a record, the next frees it.
/// glibc's allocator serialises such cross-thread frees on the allocating thread's arena;
/// mimalloc hands them back without contention. A job binary picks its allocator, as here.
/// mimalloc 2 rather than 3: its cross-thread frees cost less (W1 at p=1 8.4 -> 9.2 M
/// events/s; snmalloc measured the same as mimalloc 2).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its `mi_option_purge_delay`, not exported as a constant).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long mimalloc keeps memory a thread freed before it gives it back to the system,
/// in ms (`-1`: never; mimalloc's default is 10). Given back, the pages fault in again when
/// the thread allocates soon after: a checkpoint's copies of key groups, the next batches
/// of records. See docs/benchmarks.md "The allocator's purge delay" for what it was
/// measured to cost and save. `MIMALLOC_PURGE_DELAY` in the environment wins.
const PURGE_DELAY_MS: std::ffi::c_long = -1;

/// Sets [`PURGE_DELAY_MS`] before any thread starts (`mi_option_set` is not thread-safe).
#[allow(unsafe_code)]
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: called first in main, before this process starts a thread.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Workload {
    /// W1: requests per API path (keyed ValueState).
    ApiCount,
    /// W2: two-input keyed join (connect + co-flat-map).
    Join,
    /// W3: event-time tumbling window count per key.
    Window,
    /// W4: W1 with 2,000,000 keys on the RocksDB backend.
    LargeState,
    /// W5: the Nexmark queries (--query q0 … q8).
    Nexmark,
    /// W5 in SQL: the benchmark's own SQL files (--nexmark CHECKOUT --sql-query qN) run by
    /// eddy's SQL layer, as the benchmark runs them on Flink.
    NexmarkSql,
    /// W6: an event-time interval join of streams 1 and 2 by key within --interval-ms.
    IntervalJoin,
    /// Enriches each event through an async HTTP request to a loopback service (async I/O:
    /// --capacity, --ordered, --service).
    AsyncEnrich,
    /// Starts async-enrich's HTTP service on a free loopback port, prints `service=ADDR`
    /// and runs until stopped.
    EnrichService,
    /// W7: an event-time window join of streams 1 and 2 by key in tumbling windows of
    /// --window-ms.
    WindowJoin,
    /// Starts Apache Kafka (--nodes brokers, default 1, KRaft mode, from the jars
    /// scripts/install-deps.sh copies) on free loopback ports, prints `brokers=HOST:PORT,…`
    /// and runs until stopped: the brokers the Kafka benchmarks run against.
    KafkaBroker,
    /// Writes W1's events into a Kafka topic (--brokers, --topic, --partitions, --events,
    /// --keys).
    KafkaProduce,
    /// Writes W1's events into --topic at --rate and measures when each `(path, count)`
    /// is readable in --output-topic (a job runs `api-count --kafka` between them).
    KafkaLatency,
    /// A test job: event-time windows with records late behind the watermark right before
    /// them, counted at --slow-sink-us each, exactly once into --output (the cluster
    /// tests kill it under unaligned checkpoints).
    LateWindows,
    /// Replays `key,timestamp` lines through an event-time window count, as
    /// shared/flink-oracle runs Apache Flink (--input, --window, --out-of-orderness,
    /// --allowed-lateness, --output FILE).
    WindowReplay,
    /// Replays two inputs of `key,timestamp,value` lines through a window join, coGroup or
    /// interval join, as shared/flink-sql-oracle runs Apache Flink (--input,
    /// --right-input, --join, --output FILE).
    JoinReplay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    Heap,
    Rocksdb,
}

/// Runs one benchmark workload of shared/bench/WORKLOADS.md.
#[derive(Debug, Parser)]
#[command(name = "eddy-bench", version)]
struct Cli {
    workload: Workload,
    #[command(flatten)]
    args: Args,
}

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Events per stream.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub events: u64,
    /// Distinct keys (default 10,000; 2,000,000 for large-state).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub keys: Option<u64>,
    /// Keyed state backend (default heap; rocksdb for large-state).
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Checkpoints write only what changed since the last one (RocksDB: new SST files; the
    /// heap: a delta of the changed entries), instead of full canonical snapshots.
    #[arg(long)]
    pub incremental: bool,
    /// On a cluster: use every slot, growing and shrinking with the cluster (Flink's
    /// reactive mode); --parallelism is then only where it starts locally.
    #[arg(long)]
    pub reactive: bool,
    /// The parallelism follows the load between MIN and MAX (`MIN:MAX`; the autoscaler).
    #[arg(long)]
    pub autoscale: Option<String>,
    /// The autoscaler's window: every sample over it must agree before a rescale.
    #[arg(long, default_value_t = 10_000)]
    pub autoscale_window_ms: u64,
    /// The autoscaler's cool-down after a rescale.
    #[arg(long, default_value_t = 30_000)]
    pub autoscale_cooldown_ms: u64,
    /// RocksDB memory per slot in MiB (block cache + write buffers).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(4..))]
    pub rocksdb_memory_mb: u64,
    /// RocksDB: values per state cached on the heap in front of RocksDB.
    #[arg(long, default_value_t = eddy::state::RocksDbStateBackend::DEFAULT_CACHE_ENTRIES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub rocksdb_cache_entries: u64,
    /// Parallelism of every operator.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub parallelism: u32,
    /// Cap on source events per second in total (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// api-count: a total rate in steps instead, `RATE:SECONDS,…` (the last step lasts).
    #[arg(long)]
    pub rate_steps: Option<String>,
    /// api-count: every subtask sleeps this many microseconds per event before counting
    /// it (a cost that more subtasks share; for the autoscaler).
    #[arg(long, default_value_t = 0)]
    pub cost_us: u64,
    /// The same work in one plain loop on one thread, without the engine (api-count and
    /// join): the yardstick for the engine's share of the hardware.
    #[arg(long)]
    pub bare: bool,
    /// W5: which Nexmark query.
    #[arg(long, value_enum)]
    pub query: Option<nexmark::Query>,
    /// nexmark-sql: the benchmark's query file to run (q0 … q22).
    #[arg(long)]
    pub sql_query: Option<String>,
    /// nexmark-sql: a checkout (or bare mirror) of nexmark/nexmark, whose SQL files run.
    #[arg(long)]
    pub nexmark: Option<std::path::PathBuf>,
    /// nexmark-sql: the `${TPS}` of ddl_gen.sql (the generator's events per second of
    /// event time; the benchmark's default 10,000,000).
    #[arg(long, default_value_t = 10_000_000)]
    pub tps: u64,
    /// W3 and W7: the window size in ms.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub window_ms: u64,
    /// W6: how far apart in event time two events of a key may be and still pair (ms).
    #[arg(long, default_value_t = 100)]
    pub interval_ms: u64,
    /// W3: how often the sources emit watermarks, ms of processing time (Flink's
    /// pipeline.auto-watermark-interval, 200 by default).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub watermark_interval_ms: u64,
    #[command(flatten)]
    pub checkpoints: options::CheckpointArgs,
    #[command(flatten)]
    pub kafka: kafka::KafkaArgs,
    #[command(flatten)]
    pub replay: window_replay::ReplayArgs,
    #[command(flatten)]
    pub join_replay: join_replay::JoinReplayArgs,
    #[command(flatten)]
    pub enrich: enrich::EnrichArgs,
    /// How often partial batches and network buffers go out while input keeps coming
    /// (Flink's execution.buffer-timeout); 0: every record at once.
    #[arg(long, default_value_t = eddy::runtime_defaults::BUFFER_TIMEOUT_MS)]
    pub buffer_timeout_ms: u64,
    /// Buffer debloating: the records queued between subtasks follow this target drain
    /// time in ms (Flink's buffer-debloat.target, 1000 there); 0: off (fixed batches).
    #[arg(long, default_value_t = 0)]
    pub debloat_target_ms: u64,
    /// api-count: the first subtask of the sink waits this many microseconds per record (a
    /// slow sink, to see backpressure); late-windows: every window subtask, per record.
    #[arg(long, default_value_t = 0)]
    pub slow_sink_us: u64,
    /// late-windows: drop the late records (Flink's default without a side output; they
    /// count in `eddy_task_late_records_dropped_total`) instead of writing `L` lines.
    #[arg(long)]
    pub drop_late: bool,
    /// `--jobmanager HOST:PORT --secret-file FILE`: run on a cluster.
    #[command(flatten)]
    pub cluster: eddy::cluster::SubmitArgs,
    /// Serve the job's REST API, dashboard and `/metrics` on this loopback address while
    /// it runs (`127.0.0.1:0`: any free port; the address is printed on stderr).
    #[arg(long)]
    pub rest_bind: Option<String>,
}

/// The prefix of a run's RocksDB directory in the temporary directory; the process id follows.
const ROCKSDB_DIR_PREFIX: &str = "eddy-bench-rocksdb-";

/// Where this run's RocksDB instances keep their working directories.
fn rocksdb_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{ROCKSDB_DIR_PREFIX}{}", std::process::id()))
}

/// Removes the RocksDB directories of earlier runs whose process is gone: a run killed
/// (the kill tests use SIGKILL) cannot remove its own. Where `/proc` does not tell which
/// processes live, nothing is removed.
fn remove_rocksdb_dirs_of_dead_runs() {
    let proc = std::path::Path::new("/proc");
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    if !proc.join("self").exists() {
        return;
    }
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|name| name.strip_prefix(ROCKSDB_DIR_PREFIX));
        if let Some(pid) = pid.filter(|pid| pid.parse::<u32>().is_ok()) {
            if !proc.join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

impl Args {
    pub fn keys(&self) -> u64 {
        self.keys.unwrap_or(10_000)
    }

    /// Applies the parallelism, backend and checkpoint flags to a job's environment.
    pub fn configure(&self, env: &eddy::Env) -> anyhow::Result<()> {
        env.set_parallelism(self.parallelism);
        env.set_buffer_timeout(self.buffer_timeout_ms);
        if self.debloat_target_ms > 0 {
            env.enable_buffer_debloating(std::time::Duration::from_millis(self.debloat_target_ms));
        }
        if self.reactive {
            env.set_scheduler_mode(eddy::SchedulerMode::Reactive);
        }
        if let Some(bounds) = &self.autoscale {
            let (min, max) = bounds
                .split_once(':')
                .and_then(|(min, max)| Some((min.parse::<u32>().ok()?, max.parse::<u32>().ok()?)))
                .ok_or_else(|| anyhow::anyhow!("--autoscale takes MIN:MAX, not '{bounds}'"))?;
            let mut autoscaling = eddy::Autoscaling::new(min, max);
            autoscaling.window_ms = self.autoscale_window_ms;
            autoscaling.cooldown_ms = self.autoscale_cooldown_ms;
            env.set_autoscaling(autoscaling);
        }
        if self.backend == Some(Backend::Rocksdb) {
            remove_rocksdb_dirs_of_dead_runs();
            let backend = eddy::state::RocksDbStateBackend::new(rocksdb_dir())
                .with_memory_per_slot(self.rocksdb_memory_mb as usize * 1024 * 1024)
                .with_cache_entries(self.rocksdb_cache_entries as usize);
            env.set_state_backend(backend.with_incremental_checkpoints(self.incremental));
        } else if self.incremental {
            env.set_state_backend(eddy::state::HeapStateBackend::new().with_incremental_checkpoints(true));
        }
        self.cluster.apply_to(env)?;
        if let Some(bind) = &self.rest_bind {
            env.set_rest_bind(bind);
        }
        self.checkpoints.apply(env)
    }
}

/// What a run reports.
pub struct Report {
    pub events: u64,
    pub seconds: f64,
    pub checksum: u64,
    /// `name=value` lines printed before the result line.
    pub extra: Vec<(String, String)>,
    /// The job is reported elsewhere: this process ran subtasks for a cluster job's
    /// JobMaster, or submitted the job detached.
    pub elsewhere: bool,
}

impl Report {
    /// What a `--bare` run (one loop, no engine) started at `started` reports.
    pub fn bare(events: u64, started: std::time::Instant, checksum: u64) -> Self {
        Report { events, seconds: started.elapsed().as_secs_f64(), checksum, extra: Vec::new(), elsewhere: false }
    }
}

fn main() {
    tune_allocator();
    // `eddy-bench jobmanager …` / `eddy-bench taskmanager …`: a cluster role.
    eddy::cluster::serve_role();
    let mut cli = Cli::parse();
    eddy::log_to_stderr();
    let large = matches!(cli.workload, Workload::LargeState);
    cli.args.keys.get_or_insert(if large { 2_000_000 } else { 10_000 });
    cli.args.backend.get_or_insert(if large { Backend::Rocksdb } else { Backend::Heap });
    let on_kafka = cli.args.kafka.kafka.is_some();
    let report = match (cli.workload, cli.args.bare) {
        (Workload::KafkaBroker, _) => kafka::broker(&cli.args),
        (Workload::KafkaProduce, _) => kafka::produce(&cli.args),
        (Workload::KafkaLatency, _) => kafka::latency(&cli.args),
        (Workload::ApiCount, true) if on_kafka => kafka::bare(&cli.args),
        (Workload::ApiCount, false) if on_kafka => kafka::api_count(&cli.args),
        (Workload::ApiCount, true) => bare::api_count(&cli.args),
        (Workload::Join, true) => bare::join(&cli.args),
        (Workload::Window, true) => bare::window(&cli.args),
        (Workload::IntervalJoin, true) => bare::interval_join(&cli.args),
        (Workload::WindowJoin, true) => bare::window_join(&cli.args),
        (
            Workload::LargeState
            | Workload::WindowReplay
            | Workload::JoinReplay
            | Workload::AsyncEnrich
            | Workload::Nexmark
            | Workload::NexmarkSql
            | Workload::LateWindows,
            true,
        ) => Err(anyhow::anyhow!("--bare is for api-count, join, window, interval-join and window-join")),
        (Workload::ApiCount, false) => api_count::run(&cli.args, "W1 api-count"),
        (Workload::LargeState, false) => api_count::run(&cli.args, "W4 large-state"),
        (Workload::Join, false) => join::run(&cli.args),
        (Workload::Window, false) => window::run(&cli.args),
        (Workload::IntervalJoin, false) => time_join::run(&cli.args, true),
        (Workload::WindowJoin, false) => time_join::run(&cli.args, false),
        (Workload::Nexmark, false) => nexmark::run(&cli.args),
        (Workload::NexmarkSql, false) => nexmark_sql::run(&cli.args),
        (Workload::WindowReplay, false) => window_replay::run(&cli.args),
        (Workload::JoinReplay, false) => join_replay::run(&cli.args),
        (Workload::AsyncEnrich, false) => enrich::run(&cli.args),
        (Workload::EnrichService, _) => enrich::serve(&cli.args),
        (Workload::LateWindows, false) => late_windows::run(&cli.args),
    };
    let _ = std::fs::remove_dir_all(rocksdb_dir());
    match report {
        Ok(report) if report.elsewhere => {}
        Ok(report) => {
            for (name, value) in &report.extra {
                println!("{name}={value}");
            }
            println!(
                "events={} seconds={:.3} eps={:.0} checksum={}",
                report.events,
                report.seconds,
                report.events as f64 / report.seconds,
                report.checksum
            );
        }
        Err(error) => {
            eprintln!("eddy-bench: {}", eddy::types::chain(&*error));
            std::process::exit(1);
        }
    }
}
