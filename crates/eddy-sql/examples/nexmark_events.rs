//! Writes Nexmark events as JSON lines in the shape of the benchmark's `datagen` table
//! (`event_type`, and the nested `person`, `auction` and `bid` rows), from eddy's
//! deterministic generator: the input both eddy and Apache Flink read through the
//! `filesystem` connector when their results are compared.
//!
//! ```text
//! cargo run -p eddy-sql --example nexmark_events -- EVENTS [RATE] > events.json
//! ```

use eddy_sql::connector::nexmark_row;
use eddy_sql::format::Format;
use eddy_sql::types::Field;
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let events: u64 = args.next().ok_or("usage: nexmark_events EVENTS [RATE]")?.parse()?;
    let rate: u64 = args.next().map(|r| r.parse()).transpose()?.unwrap_or(10_000);
    let cfg = eddy_nexmark::GeneratorConfig::new(events, 0, rate, eddy_nexmark::DEFAULT_BASE_TIME_MS);
    let fields: Vec<Field> = eddy_sql::connector::nexmark_fields();
    let format = Format::new("json", &Default::default(), &fields)?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    for i in 0..events {
        writeln!(out, "{}", format.encode(&nexmark_row(&eddy_nexmark::event(&cfg, i))))?;
    }
    Ok(())
}
