//! What a job whose records cannot cross processes does on a cluster: a record type whose
//! `Serialize` fails (here on purpose; in real code a map of unknown length, a
//! `#[serde(flatten)]`, a custom error) runs locally, where records are passed as values,
//! but on a cluster it fails at once, naming the type, instead of restarting forever.
//!
//! `cargo run --example unserializable_record` runs it locally; with
//! `--jobmanager HOST:PORT --secret-file FILE` it runs on a cluster (two slots on two
//! TaskManagers put the rebalance between processes).

use eddy::prelude::*;
use serde::de::Deserializer;
use serde::ser::{Error as _, Serializer};

/// A record whose serialization always fails.
#[derive(Clone, Debug)]
struct Unsendable(u64);

impl serde::Serialize for Unsendable {
    fn serialize<S: Serializer>(&self, _serializer: S) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom("this type refuses to be serialized"))
    }
}

impl<'de> serde::Deserialize<'de> for Unsendable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        u64::deserialize(deserializer).map(Unsendable)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    // `--jobmanager HOST:PORT --secret-file FILE`: submit the job to a cluster.
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    env.set_parallelism(2);
    // With checkpoints, the default restart strategy would restart a failed job.
    env.enable_checkpointing(200);
    let sink = CollectSink::new();
    env.from_sequence(0, 9_999)
        .uid("numbers")
        .map(Unsendable)
        .uid("wrap")
        .rebalance()
        .map(|u: Unsendable| u.0)
        .uid("unwrap")
        .add_sink(sink.clone())
        .uid("sink");
    let result = env.execute("unserializable record")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    println!("{} records", sink.take().len());
    Ok(())
}
