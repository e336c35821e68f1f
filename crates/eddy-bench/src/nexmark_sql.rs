//! W5 in SQL: the Nexmark benchmark's own Flink SQL files (nexmark/nexmark:
//! `ddl_gen.sql`, `ddl_views.sql`, `qN.sql`), read from a checkout given with `--nexmark`,
//! run by eddy's SQL layer as published — the `nexmark` connector with `events.num` =
//! `--events` and `${TPS}` = `--tps`, each query's INSERT into its blackhole table — as the
//! benchmark's harness runs them on Flink. Nothing of the benchmark's files is kept in eddy.

use crate::{Args, Report};
use std::path::Path;
use std::time::Instant;

const RESOURCES: &str = "nexmark-flink/src/main/resources/queries";

/// A file of the benchmark's queries: from a work tree, or from a bare git mirror.
fn read(checkout: &Path, name: &str) -> anyhow::Result<String> {
    let path = checkout.join(RESOURCES).join(format!("{name}.sql"));
    if path.exists() {
        return Ok(std::fs::read_to_string(path)?);
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(checkout)
        .args(["show", &format!("HEAD:{RESOURCES}/{name}.sql")])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "no {name}.sql in {} ({})",
        checkout.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8(out.stdout)?)
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let checkout = args
        .nexmark
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("nexmark-sql needs --nexmark PATH (a checkout of nexmark/nexmark)"))?;
    let query = args.sql_query.as_deref().ok_or_else(|| anyhow::anyhow!("nexmark-sql needs --sql-query (q0 … q22)"))?;
    let output = std::env::temp_dir().join(format!("eddy-bench-nexmark-sql-{}", std::process::id()));
    let substitute = |text: String| {
        text.replace("${TPS}", &args.tps.to_string())
            .replace("${EVENTS_NUM}", &args.events.to_string())
            .replace("${PERSON_PROPORTION}", "1")
            .replace("${AUCTION_PROPORTION}", "3")
            .replace("${BID_PROPORTION}", "46")
            .replace("${NEXMARK_TABLE}", "datagen")
            .replace("${NEXMARK_DIR}", &output.display().to_string())
            .replace("${SUBMIT_TIME}", "run")
            .replace("${FLINK_HOME}", &output.display().to_string())
    };
    // q13's side input, as the benchmark's side_input_gen.sh writes it: "i,i" for i < 10000.
    std::fs::create_dir_all(output.join("data"))?;
    let side: String = (0..10_000).map(|i| format!("{i},{i}\n")).collect();
    std::fs::write(output.join("data/side_input.txt"), side)?;
    let script = [read(checkout, "ddl_gen")?, read(checkout, "ddl_views")?, read(checkout, query)?]
        .into_iter()
        .map(substitute)
        .collect::<Vec<_>>()
        .join("\n");
    let configure = args.clone();
    let mut tables = eddy::sql::TableEnvironment::new(Box::new(move || {
        let env = eddy::Env::new();
        configure.configure(&env).map_err(|e| e.to_string())?;
        Ok(env)
    }));
    tables.register_function(eddy::sql::udf::COUNT_CHAR_CLASS, eddy::sql::udf::CountChar);
    let started = Instant::now();
    tables.execute_script(&script, |_, _| {}).map_err(|e| anyhow::anyhow!("{query}: {}", eddy::types::chain(&e)))?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&output);
    Ok(Report {
        events: args.events,
        seconds,
        checksum: 0,
        extra: vec![("query".into(), format!("{query} (SQL, tps {})", args.tps))],
        elsewhere: false,
    })
}
