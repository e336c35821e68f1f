//! The two-topic join of seed 000: two streams keyed by the same key, connected into one
//! co-flat-map whose two `ValueState`s hold the latest value of each side. Every key's
//! events of both streams meet in the same subtask, so no state is shared between tasks.
//!
//! ```text
//! cargo run --release --example two_topic_join
//! ```

use eddy::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub key: String,
    pub value: i64,
}

/// Emits `(key, a, b)` whenever one side arrives and the other side has a value.
#[derive(Clone, Default)]
pub struct StatefulJoin {
    a: Option<ValueState<i64>>,
    b: Option<ValueState<i64>>,
}

impl RichFunction for StatefulJoin {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.a = Some(ctx.get_state(&ValueStateDescriptor::new("a"))?);
        self.b = Some(ctx.get_state(&ValueStateDescriptor::new("b"))?);
        Ok(())
    }
}

impl CoFlatMapFunction<Record, Record, (String, i64, i64)> for StatefulJoin {
    fn flat_map1(&mut self, r: Record, out: &mut Collector<'_, (String, i64, i64)>) -> FunctionResult {
        let (a, b) = (self.a.declared("a")?, self.b.declared("b")?);
        a.update(r.value)?;
        if let Some(other) = b.value()? {
            out.collect((r.key, r.value, other));
        }
        Ok(())
    }

    fn flat_map2(&mut self, r: Record, out: &mut Collector<'_, (String, i64, i64)>) -> FunctionResult {
        let (a, b) = (self.a.declared("a")?, self.b.declared("b")?);
        b.update(r.value)?;
        if let Some(other) = a.value()? {
            out.collect((r.key, other, r.value));
        }
        Ok(())
    }
}

pub fn job(env: &Env, topic_a: Vec<Record>, topic_b: Vec<Record>, sink: CollectSink<(String, i64, i64)>) {
    let a = env.from_collection(topic_a).name("topic A").key_by(|r: &Record| r.key.clone());
    let b = env.from_collection(topic_b).name("topic B").key_by(|r: &Record| r.key.clone());
    a.connect(&b).co_flat_map(StatefulJoin::default()).name("join").uid("join").add_sink(sink);
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `<example> jobmanager …`, `taskmanager …`, `list` …: a cluster role.
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    // `--jobmanager HOST:PORT --secret-file FILE`: submit the job to a cluster.
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    env.set_parallelism(2);
    let sink = CollectSink::new();
    let rec = |key: &str, value| Record { key: key.into(), value };
    job(&env, vec![rec("1", 10), rec("2", 20)], vec![rec("1", 100), rec("3", 300)], sink.clone());
    let result = env.execute("two topic join")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    for joined in sink.take() {
        println!("{joined:?}");
    }
    Ok(())
}
