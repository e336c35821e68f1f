//! The access-log counter of seed 004: how often each API path was requested, kept in a
//! keyed `ValueState<u64>`; every log line emits the path's new count.
//!
//! ```text
//! cargo run --release --example api_count
//! ```

use eddy::prelude::*;

/// One access-log line: `"<method> <path>"`, e.g. `"GET /api/a"`.
pub fn parse(line: &str) -> Option<(String, String)> {
    let (method, path) = line.split_once(' ')?;
    Some((method.to_string(), path.trim().to_string()))
}

#[derive(Clone, Default)]
pub struct CountPerPath {
    count: Option<ValueState<u64>>,
}

impl RichFunction for CountPerPath {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.count = Some(ctx.get_state(&ValueStateDescriptor::new("count"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<String, (String, String), (String, u64)> for CountPerPath {
    fn process_element(
        &mut self,
        (_method, path): (String, String),
        _ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> FunctionResult {
        let count = self.count.declared("count")?;
        let next = count.value()?.unwrap_or(0) + 1;
        count.update(next)?;
        out.collect((path, next));
        Ok(())
    }
}

/// Builds the job on `env`: log lines in, `(path, count)` out into `sink`.
pub fn job(env: &Env, lines: Vec<String>, sink: CollectSink<(String, u64)>) {
    env.from_collection(lines)
        .flat_map(|line: String, out: &mut Collector<'_, (String, String)>| {
            if let Some(parsed) = parse(&line) {
                out.collect(parsed);
            }
        })
        .name("parse")
        .key_by(|(_, path): &(String, String)| path.clone())
        .process(CountPerPath::default())
        .name("count per path")
        .uid("count-per-path")
        .add_sink(sink);
}

/// A deterministic access log of `n` lines over a few paths.
pub fn access_log(n: u64) -> Vec<String> {
    let methods = ["GET", "POST", "PUT", "DELETE"];
    (0..n)
        .map(|i| {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            format!("{} /api/{}", methods[(h % 4) as usize], ["a", "b", "c", "d", "e"][(h % 5) as usize])
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
    let sink = CollectSink::new();
    job(&env, access_log(100_000), sink.clone());
    let result = env.execute("api count")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut finals = std::collections::BTreeMap::new();
    for (path, count) in sink.take() {
        let best = finals.entry(path).or_insert(0);
        *best = count.max(*best);
    }
    for (path, count) in &finals {
        println!("{path} requested {count} times");
    }
    println!(
        "processed 100000 log lines in {:.3} s at parallelism {}",
        result.duration.as_secs_f64(),
        env.parallelism()
    );
    Ok(())
}
