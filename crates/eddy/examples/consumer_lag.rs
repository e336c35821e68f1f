//! Consumer lag (seed 004's stateless example): each input says where the producer and
//! each consumer stand at a moment; a map turns it into how far each consumer is behind.
//!
//! ```text
//! cargo run --release --example consumer_lag
//! ```

use eddy::prelude::*;
use serde::{Deserialize, Serialize};

/// At `timestamp`, the producer wrote up to `producer_offset`; consumer `n` read up to
/// `consumer_offsets[n]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub timestamp: u64,
    pub producer_offset: u64,
    pub consumer_offsets: Vec<u64>,
}

/// `(timestamp, consumer, lag)` for every consumer.
pub fn job(env: &Env, input: Vec<Progress>, sink: CollectSink<(u64, usize, u64)>) {
    env.from_collection(input)
        .flat_map(|p: Progress, out: &mut Collector<'_, (u64, usize, u64)>| {
            for (consumer, offset) in p.consumer_offsets.iter().enumerate() {
                out.collect((p.timestamp, consumer, p.producer_offset.saturating_sub(*offset)));
            }
        })
        .name("lag")
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
    // The seed's picture: the producer is at 15, the consumers at 10, 7 and 12.
    job(&env, vec![Progress { timestamp: 1, producer_offset: 15, consumer_offsets: vec![10, 7, 12] }], sink.clone());
    let result = env.execute("consumer lag")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut lags = sink.take();
    lags.sort();
    for (timestamp, consumer, lag) in lags {
        println!("t={timestamp} consumer {consumer} is {lag} behind");
    }
    Ok(())
}
