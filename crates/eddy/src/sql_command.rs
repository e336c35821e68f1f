//! `eddy sql -f script.sql`: Flink's SQL client `-f` on eddy. SET and DDL change the
//! session; each INSERT runs as a job (here, or submitted to a cluster with the flags of
//! any job); a query prints its changelog on standard output as Flink's print connector
//! does; EXPLAIN prints the plan. What happens goes to the log on standard error.

use eddy::sql::{TableEnvironment, TableResult};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    /// The script to run.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Subtasks per operator (as `SET 'parallelism.default'`; a SET in the script wins).
    #[arg(short = 'p', long)]
    pub parallelism: Option<u32>,
    /// Where checkpoints go (as `SET 'execution.checkpointing.dir'`).
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Where and how the jobs run: here, or on a cluster (`--jobmanager`), from a
    /// savepoint (`-s`)…
    #[command(flatten)]
    pub run: eddy::cluster::SubmitArgs,
}

pub fn run(args: &SqlArgs) -> Result<String, String> {
    let script = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read the script '{}': {}", args.file.display(), eddy_types::chain(&e)))?;
    let run = args.run.clone();
    let mut tables = TableEnvironment::new(Box::new(move || {
        let env = eddy::Env::new();
        run.apply_to(&env).map_err(|e| eddy_types::chain(&e).to_string())?;
        Ok(env)
    }));
    // The Nexmark benchmark's q14 names its function by a Java class.
    tables.register_function(eddy::sql::udf::COUNT_CHAR_CLASS, eddy::sql::udf::CountChar);
    if let Some(p) = args.parallelism {
        tables.set_option("parallelism.default", &p.to_string());
    }
    if let Some(dir) = &args.checkpoint_dir {
        tables.set_option("execution.checkpointing.dir", &dir.display().to_string());
    }
    tables
        .execute_script(&script, |statement, result| match result {
            TableResult::Ok => {}
            TableResult::Text(text) => {
                println!("{text}");
            }
            TableResult::Job(job) => {
                tracing::info!(
                    job = %job.job_name,
                    checkpoints = job.checkpoints_completed,
                    restarts = job.restarts,
                    "the job of the statement at line {} finished",
                    statement.location.line
                );
            }
        })
        .map_err(|e| format!("{}: {}", args.file.display(), eddy_types::chain(&e)))?;
    Ok(String::new())
}
