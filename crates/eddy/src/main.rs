//! The `eddy` command line.
//!
//! ```text
//! eddy sql -f SCRIPT.sql [-p P] [--jobmanager HOST:PORT …]              run a Flink SQL script (feature sql)
//! eddy key-group KEY [--max-parallelism N] [--parallelism P]   where a string key's state lives
//! eddy example word-count --input PATH [--parallelism P]       run the word-count job on a file
//! eddy checkpoint inspect PATH                                 what a checkpoint or savepoint holds
//! eddy jobmanager --bind HOST:PORT --secret-file F              run a cluster's JobManager
//! eddy taskmanager --jobmanager HOST:PORT --slots N --secret-file F
//! eddy list | status JOB | savepoint JOB DIR | stop JOB --savepoint DIR | cancel JOB
//!      --jobmanager HOST:PORT --secret-file F                   control a cluster's jobs
//! ```

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use eddy::prelude::*;
use eddy::types::{
    assign_to_key_group, key_group_range_for_subtask, operator_index_for_key_group, stable_hash, Key, MaxParallelism,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// The word-count job is the example's own, so that the CLI runs exactly what the example shows.
#[allow(dead_code)]
#[path = "../examples/word_count.rs"]
mod word_count;

#[cfg(feature = "sql")]
mod sql_command;

#[derive(Debug, Parser)]
#[command(name = "eddy", version, about = "eddy: a stateful stream processor in the model of Apache Flink")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Shows the key group and subtask of a string key (as `key_by` on a String routes it).
    KeyGroup {
        key: String,
        #[arg(long, default_value_t = 128)]
        max_parallelism: u32,
        #[arg(long, default_value_t = 1)]
        parallelism: u32,
    },
    /// Runs a bundled example job.
    Example {
        #[command(subcommand)]
        example: Example,
    },
    /// Looks into checkpoints and savepoints.
    Checkpoint {
        #[command(subcommand)]
        command: CheckpointCommand,
    },
    /// `savepoint JOB DIR`: takes a savepoint of a running job on a cluster; or, as
    /// `checkpoint`, looks into savepoints (`savepoint inspect PATH`).
    Savepoint(SavepointArgs),
    /// Runs a cluster's JobManager.
    Jobmanager(eddy::cluster::JobManagerArgs),
    /// Runs a TaskManager of a cluster. A TaskManager runs jobs of its own binary only: a
    /// job's binary (`<binary> taskmanager …`) runs the TaskManagers for its jobs.
    Taskmanager(eddy::cluster::TaskManagerArgs),
    /// Runs a Flink SQL script (SET, DDL, then each INSERT as a job; a query prints its
    /// changelog as Flink's print connector does), here or on a cluster.
    #[cfg(feature = "sql")]
    Sql(sql_command::SqlArgs),
    #[command(flatten)]
    Control(ClusterControl),
}

/// The job-control commands but `savepoint` (which shares its word with inspection).
#[derive(Debug, Subcommand)]
enum ClusterControl {
    /// Lists a cluster's jobs: id, name, state, parallelism and uptime.
    List {
        #[command(flatten)]
        cluster: eddy::cluster::CliArgs,
    },
    /// Shows a running job's subtasks and checkpoints.
    Status {
        job: String,
        #[command(flatten)]
        cluster: eddy::cluster::CliArgs,
    },
    /// Takes a savepoint of a running job into DIR, then ends the job; prints
    /// `savepoint=<path>`.
    Stop {
        job: String,
        #[arg(long)]
        savepoint: PathBuf,
        #[command(flatten)]
        cluster: eddy::cluster::CliArgs,
    },
    /// Cancels a running job.
    Cancel {
        job: String,
        #[command(flatten)]
        cluster: eddy::cluster::CliArgs,
    },
    /// Takes a running job to another parallelism, from a checkpoint taken for it.
    Rescale {
        job: String,
        #[arg(long)]
        parallelism: u32,
        #[command(flatten)]
        cluster: eddy::cluster::CliArgs,
    },
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct SavepointArgs {
    #[command(subcommand)]
    command: Option<CheckpointCommand>,
    /// The running job (id or name).
    job: Option<String>,
    /// Where the savepoint goes.
    dir: Option<PathBuf>,
    /// The JobManager's HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:6123")]
    jobmanager: String,
    /// The leading JobManager that etcd names (`etcd://HOST:PORT…`), instead of
    /// --jobmanager.
    #[arg(long)]
    ha: Option<String>,
    /// The file holding the cluster's shared secret, the same as the JobManager's.
    #[arg(long)]
    secret_file: Option<PathBuf>,
    #[command(flatten)]
    tls: eddy::cluster::TlsArgs,
}

#[derive(Debug, Subcommand)]
enum CheckpointCommand {
    /// Prints the operators, states, key-group ranges, sizes and checksum status of a
    /// checkpoint or savepoint directory; exits 1 if a file is corrupt.
    Inspect { path: PathBuf },
    /// Deletes the files in DIR/shared that no complete checkpoint in the checkpoint
    /// directory DIR references (left by a process killed while writing a checkpoint).
    /// Run it only while no job writes into DIR: an unfinished checkpoint's files look
    /// unreferenced too.
    CleanShared {
        dir: PathBuf,
        /// Only list what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
enum Example {
    /// Counts the words of a text file (or of every file in a directory).
    WordCount {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        parallelism: Option<u32>,
    },
}

fn key_group(key: &str, max_parallelism: u32, parallelism: u32) -> Result<String, String> {
    let max = MaxParallelism::new(max_parallelism).map_err(|e| eddy_types::chain(&e))?;
    max.check_parallelism("--parallelism", parallelism).map_err(|e| eddy_types::chain(&e))?;
    let mut bytes = Vec::new();
    key.to_string().encode_key(&mut bytes);
    let group = assign_to_key_group(stable_hash(&bytes), max);
    let subtask = operator_index_for_key_group(max, parallelism, group);
    let range = key_group_range_for_subtask(max, parallelism, subtask);
    Ok(format!("key={key:?} key_group={} subtask={} subtask_key_groups={range}", group.0, subtask + 1))
}

fn word_count(input: PathBuf, parallelism: Option<u32>) -> Result<String, JobError> {
    let env = Env::new();
    if let Some(p) = parallelism {
        env.set_parallelism(p);
    }
    let sink = CollectSink::new();
    word_count::words(&env.read_text_file(input)).add_sink(sink.clone());
    env.execute("word count")?;
    let mut totals = std::collections::BTreeMap::new();
    for (word, count) in sink.take() {
        let total = totals.entry(word).or_insert(0);
        *total = count.max(*total);
    }
    Ok(totals.into_iter().map(|(w, c)| format!("{w} {c}\n")).collect())
}

fn inspect(path: &std::path::Path) -> Result<String, String> {
    use std::fmt::Write;
    let (metadata, tasks) =
        eddy::checkpoint::storage::inspect_checkpoint_dir(path).map_err(|e| eddy_types::chain(&e))?;
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "{:?} {} of job '{}' in {}, max parallelism {}, triggered at {}",
        metadata.kind,
        metadata.checkpoint_id,
        metadata.job_name,
        path.display(),
        metadata.max_parallelism,
        eddy_types::text::utc_time(metadata.timestamp_ms)
    );
    let (mut total_bytes, mut native_bytes, mut corrupt) = (0u64, 0u64, 0usize);
    for task in &tasks {
        let (file, bytes) = (task.entry.handle.describe(), task.entry.handle.bytes());
        total_bytes += bytes;
        let status = match &task.state {
            Ok(_) => "checksum ok".to_string(),
            Err(e) => {
                corrupt += 1;
                format!("CORRUPT: {e}", e = eddy_types::chain(&e))
            }
        };
        // A subtask that had finished its input: its final state (not run again on restore).
        let finished = if task.entry.finished { ", finished" } else { "" };
        let _ = writeln!(
            w,
            "task '{}' subtask {}: {file}, {bytes} bytes, {status}{finished}",
            task.entry.task,
            task.entry.subtask + 1
        );
        for (location, check) in &task.native_files {
            if let Err(e) = check {
                corrupt += 1;
                let _ = writeln!(w, "  native file {location}: CORRUPT: {e}", e = eddy_types::chain(&e));
            }
        }
        for operator in task.state.as_ref().map(|s| s.as_slice()).unwrap_or(&[]) {
            let _ = writeln!(
                w,
                "  operator '{}' (uid '{}') subtask {}/{}",
                operator.name,
                operator.uid,
                operator.subtask + 1,
                operator.parallelism
            );
            if let Some(keyed) = &operator.keyed {
                let range = keyed.key_group_range.map(|r| r.to_string()).unwrap_or_else(|| "?".into());
                for state in &keyed.states {
                    let size: usize = state.key_groups.iter().map(|(_, b)| b.len()).sum();
                    let _ = writeln!(
                        w,
                        "    keyed state '{}': key groups {range}, {} non-empty, {size} bytes",
                        state.name,
                        state.key_groups.len()
                    );
                }
                for native in &keyed.native {
                    native_bytes += native.total_bytes();
                    let shared = native.files.iter().filter(|f| f.shared_name.is_some()).count();
                    let states: Vec<&str> = native.tables.iter().map(|t| t.name.as_str()).collect();
                    let _ = writeln!(
                        w,
                        "    {} files (incremental) for key groups {}: {} files ({shared} shared), {} bytes; states \
                            {states:?}",
                        native.backend,
                        native.key_group_range,
                        native.files.len(),
                        native.total_bytes()
                    );
                }
            }
            for list in &operator.operator.lists {
                let size: usize = list.elements.iter().map(Vec::len).sum();
                let _ = writeln!(
                    w,
                    "    operator list state '{}' ({:?}): {} elements, {size} bytes",
                    list.name,
                    list.distribution,
                    list.elements.len()
                );
            }
            for broadcast in &operator.operator.broadcasts {
                let _ = writeln!(w, "    broadcast state '{}': {} entries", broadcast.name, broadcast.entries.len());
            }
        }
    }
    let _ = write!(w, "{} tasks, {total_bytes} bytes of state", tasks.len());
    if native_bytes > 0 {
        let _ = write!(w, " and {native_bytes} bytes of RocksDB files");
    }
    let _ = write!(w, ", ");
    if corrupt == 0 {
        let _ = write!(w, "all checksums ok");
        Ok(out)
    } else {
        print!("{out}");
        Err(format!("{corrupt} corrupt or missing state file(s) in {}", path.display()))
    }
}

fn clean_shared(dir: &std::path::Path, dry_run: bool) -> Result<String, String> {
    let unreferenced = eddy::checkpoint::storage::unreferenced_shared_files(dir).map_err(|e| eddy_types::chain(&e))?;
    let mut out = String::new();
    for location in &unreferenced {
        if !dry_run {
            std::fs::remove_file(dir.join(location))
                .map_err(|e| format!("cannot delete {location}: {e}", e = eddy_types::chain(&e)))?;
        }
        out.push_str(&format!("{} {location}\n", if dry_run { "would delete" } else { "deleted" }));
    }
    out.push_str(&format!("{} unreferenced shared file(s)", unreferenced.len()));
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    eddy::log_to_stderr();
    use eddy::cluster::{job_control, report, CliArgs, JobControl};
    let result = match cli.command {
        Command::Jobmanager(args) => return report(eddy::cluster::run_jobmanager(&args).map(|()| String::new())),
        Command::Taskmanager(args) => return report(eddy::cluster::run_taskmanager(&args).map(|()| String::new())),
        Command::Control(control) => {
            let control = match control {
                ClusterControl::List { cluster } => JobControl::List { cluster },
                ClusterControl::Status { job, cluster } => JobControl::Status { job, cluster },
                ClusterControl::Stop { job, savepoint, cluster } => JobControl::Stop { job, savepoint, cluster },
                ClusterControl::Cancel { job, cluster } => JobControl::Cancel { job, cluster },
                ClusterControl::Rescale { job, parallelism, cluster } => {
                    JobControl::Rescale { job, parallelism, cluster }
                }
            };
            return report(job_control(control));
        }
        Command::Savepoint(SavepointArgs { command: None, job, dir, jobmanager, ha, secret_file, tls }) => {
            match (job, dir, secret_file) {
                (Some(job), Some(dir), Some(secret_file)) => {
                    let cluster = CliArgs { jobmanager, ha, secret_file, tls };
                    return report(job_control(JobControl::Savepoint { job, dir, cluster }));
                }
                _ => Err("savepoint JOB DIR --jobmanager HOST:PORT --secret-file FILE takes a savepoint of a running \
                    job; savepoint inspect PATH looks into one"
                    .to_string()),
            }
        }
        #[cfg(feature = "sql")]
        Command::Sql(args) => sql_command::run(&args),
        Command::KeyGroup { key, max_parallelism, parallelism } => key_group(&key, max_parallelism, parallelism),
        Command::Example { example: Example::WordCount { input, parallelism } } => {
            word_count(input, parallelism).map_err(|e| eddy_types::chain(&e))
        }
        Command::Checkpoint { command: CheckpointCommand::Inspect { path } }
        | Command::Savepoint(SavepointArgs { command: Some(CheckpointCommand::Inspect { path }), .. }) => {
            inspect(&path)
        }
        Command::Checkpoint { command: CheckpointCommand::CleanShared { dir, dry_run } }
        | Command::Savepoint(SavepointArgs {
            command: Some(CheckpointCommand::CleanShared { dir, dry_run }), ..
        }) => clean_shared(&dir, dry_run),
    };
    match result {
        Ok(output) => {
            // A SQL script's rows went to standard output already; nothing more to print.
            if !output.is_empty() {
                print!("{output}");
                if !output.ends_with('\n') {
                    println!();
                }
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("eddy: {message}");
            ExitCode::FAILURE
        }
    }
}
