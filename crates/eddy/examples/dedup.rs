//! Deduplication by key (seed 004's first use of state): remember which keys were seen in
//! a keyed `ValueState<bool>` and let only the first record of each key through.
//!
//! ```text
//! cargo run --release --example dedup
//! ```

use eddy::prelude::*;

#[derive(Clone, Default)]
pub struct FirstOnly {
    seen: Option<ValueState<bool>>,
}

impl RichFunction for FirstOnly {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.seen = Some(ctx.get_state(&ValueStateDescriptor::new("seen"))?);
        Ok(())
    }
}

impl RichFlatMapFunction<(u64, String), (u64, String)> for FirstOnly {
    fn flat_map(&mut self, record: (u64, String), out: &mut Collector<'_, (u64, String)>) -> FunctionResult {
        let seen = self.seen.declared("seen")?;
        if seen.value()?.is_none() {
            seen.update(true)?;
            out.collect(record);
        }
        Ok(())
    }
}

/// `(id, payload)` records in; the first record of every id out.
pub fn job(env: &Env, records: Vec<(u64, String)>, sink: CollectSink<(u64, String)>) {
    env.from_collection(records)
        .key_by(|(id, _): &(u64, String)| *id)
        .rich_flat_map(FirstOnly::default())
        .name("dedup")
        .uid("dedup")
        .add_sink(sink);
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
    let records = (0..20u64).map(|i| (i % 7, format!("delivery {i}"))).collect();
    job(&env, records, sink.clone());
    let result = env.execute("dedup")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut firsts = sink.take();
    firsts.sort();
    for (id, payload) in firsts {
        println!("{id}: {payload}");
    }
    Ok(())
}
