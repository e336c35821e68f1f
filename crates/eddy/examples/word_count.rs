//! Word count: lines of a text file (or built-in lines), split into words, keyed by word,
//! counted with a keyed reduce.
//!
//! ```text
//! cargo run --release --example word_count [FILE]
//! ```

use eddy::prelude::*;

pub fn words(stream: &DataStream<String>) -> DataStream<(String, u64)> {
    stream
        .flat_map(|line: String, out: &mut Collector<'_, (String, u64)>| {
            for word in line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
                out.collect((word.to_lowercase(), 1));
            }
        })
        .name("split")
        .key_by(|(word, _): &(String, u64)| word.clone())
        .reduce(|(word, a), (_, b)| (word, a + b))
        .name("count")
        .uid("count")
}

pub fn job(env: &Env, lines: Vec<String>, sink: CollectSink<(String, u64)>) {
    words(&env.from_collection(lines)).add_sink(sink);
}

/// `word_count [FILE]`, and the flags that submit it to a cluster.
#[derive(clap::Parser)]
struct Args {
    /// A text file whose words to count (default: two lines of Hamlet).
    file: Option<String>,
    #[command(flatten)]
    cluster: eddy::cluster::SubmitArgs,
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `<example> jobmanager …`, `taskmanager …`, `list` …: a cluster role.
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let args = <Args as clap::Parser>::parse();
    let env = Env::new();
    args.cluster.apply_to(&env)?;
    let sink = CollectSink::new();
    match args.file {
        Some(path) => {
            words(&env.read_text_file(path)).add_sink(sink.clone());
        }
        None => job(&env, vec!["to be or not to be".into(), "that is the question".into()], sink.clone()),
    }
    let result = env.execute("word count")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut totals = std::collections::BTreeMap::new();
    for (word, count) in sink.take() {
        let total = totals.entry(word).or_insert(0);
        *total = count.max(*total);
    }
    for (word, count) in totals {
        println!("{word} {count}");
    }
    Ok(())
}
