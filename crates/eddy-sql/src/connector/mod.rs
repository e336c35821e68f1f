//! Table connectors by their Flink option names: `filesystem` (csv and json; source, and
//! an exactly-once sink), `datagen`, `nexmark`, `print` and `blackhole`. Each connector
//! names the options it knows; an option it does not know is an error that lists them,
//! as Flink's factories do.

mod blackhole;
mod datagen;
mod filesystem;
#[cfg(feature = "kafka")]
mod kafka;
mod nexmark;
mod partitioned;
mod print;
#[cfg(feature = "kafka")]
mod upsert_kafka;

use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::format::Format;
use crate::plan::reads::ReadColumns;
use crate::row::Row;
use eddy_api::{DataStream, DataStreamSink, Env};

pub use nexmark::{fields as nexmark_fields, row_of as nexmark_row};
pub use print::PrintRowSink;

/// Checks the table's options against what its connector (and format) know.
fn check_options(
    table: &CatalogTable,
    connector: &str,
    known: &[&str],
    format_prefix: Option<&str>,
) -> Result<(), SqlError> {
    let mut unknown = Vec::new();
    for key in table.options.keys() {
        let known_key = key == "connector"
            || known.contains(&key.as_str())
            || format_prefix.is_some_and(|p| key.starts_with(&format!("{p}.")) && crate::format::knows(p, key));
        if !known_key {
            unknown.push(key.clone());
        }
    }
    if unknown.is_empty() {
        return Ok(());
    }
    let mut supported: Vec<String> =
        std::iter::once("connector").chain(known.iter().copied()).map(String::from).collect();
    if let Some(p) = format_prefix {
        supported.extend(crate::format::options(p).iter().map(|s| s.to_string()));
    }
    supported.sort();
    Err(SqlError::table(
        &table.name,
        format!(
            "Unsupported options found for '{connector}'.\n\nUnsupported options:\n\n{}\n\nSupported options:\n\n{}",
            unknown.join("\n"),
            supported.join("\n")
        ),
    ))
}

fn connector_of(table: &CatalogTable) -> Result<&str, SqlError> {
    table.option("connector").ok_or_else(|| {
        SqlError::table(
            &table.name,
            "Table options do not contain an option key 'connector' for discovering a connector.",
        )
    })
}

fn unknown_connector(table: &CatalogTable, connector: &str, role: &str) -> SqlError {
    SqlError::table(
        &table.name,
        format!(
            "Could not find any factory for identifier '{connector}' that implements a dynamic table {role}. Available factory identifiers are:\n\nblackhole\ndatagen\nfilesystem\nkafka\nnexmark\nprint\nupsert-kafka"
        ),
    )
}

/// The upsert-kafka connector's checks, or why this build has none.
fn upsert_kafka_check(table: &CatalogTable, sink: bool) -> Result<(), SqlError> {
    #[cfg(feature = "kafka")]
    return upsert_kafka::check(table, sink);
    #[cfg(not(feature = "kafka"))]
    {
        let _ = sink;
        Err(SqlError::table(
            &table.name,
            "the 'upsert-kafka' connector is in eddy's `kafka` feature, which this build does not have",
        ))
    }
}

/// The kafka connector's checks, or why this build has none.
fn kafka_check(table: &CatalogTable, sink: bool) -> Result<(), SqlError> {
    #[cfg(feature = "kafka")]
    return kafka::check(table, sink);
    #[cfg(not(feature = "kafka"))]
    {
        let _ = sink;
        Err(SqlError::table(
            &table.name,
            "the 'kafka' connector is in eddy's `kafka` feature, which this build does not have",
        ))
    }
}

/// The table's format (`format` option), for the connectors that have one.
fn format_of(table: &CatalogTable) -> Result<Format, SqlError> {
    let name = table
        .option("format")
        .or(table.option("value.format"))
        .ok_or_else(|| SqlError::table(&table.name, "the connector needs the option 'format' ('csv' or 'json')"))?;
    Format::new(name, &table.options, &table.physical).map_err(|m| SqlError::table(&table.name, m))
}

/// Checks what using the table as a source needs, before any job is built.
pub fn check_source(table: &CatalogTable) -> Result<(), SqlError> {
    match connector_of(table)? {
        "filesystem" => filesystem::check(table, false),
        "datagen" => datagen::check(table),
        "nexmark" => nexmark::check(table),
        "kafka" => kafka_check(table, false),
        "upsert-kafka" => upsert_kafka_check(table, false),
        other @ ("print" | "blackhole") => Err(SqlError::table(
            &table.name,
            format!("Connector '{other}' can only be used as a sink. It cannot be used as a source."),
        )),
        other => Err(unknown_connector(table, other, "source")),
    }
}

/// The table's physical rows.
/// The rows of `table`; what `read` leaves out may be NULL.
pub fn source(table: &CatalogTable, env: &Env, uid: &str, read: &ReadColumns) -> Result<DataStream<Row>, SqlError> {
    check_source(table)?;
    let name = format!("TableSourceScan(table=[[default_catalog, default_database, {}]])", table.name);
    let stream = match connector_of(table)? {
        "filesystem" => filesystem::source(table, env, uid)?,
        "datagen" => datagen::source(table, env)?,
        "nexmark" => nexmark::source(table, env, read)?,
        #[cfg(feature = "kafka")]
        "kafka" => kafka::source(table, env)?,
        #[cfg(feature = "kafka")]
        "upsert-kafka" => upsert_kafka::source(table, env)?,
        other => return Err(unknown_connector(table, other, "source")),
    };
    Ok(stream.name(&name).uid(uid))
}

/// Checks what writing into the table needs.
pub fn check_sink(table: &CatalogTable) -> Result<(), SqlError> {
    match connector_of(table)? {
        "filesystem" => filesystem::check(table, true),
        "print" => check_options(table, "print", &["print-identifier", "standard-error", "sink.parallelism"], None),
        "blackhole" => check_options(table, "blackhole", &[], None),
        "kafka" => kafka_check(table, true),
        "upsert-kafka" => upsert_kafka_check(table, true),
        other @ ("datagen" | "nexmark") => Err(SqlError::table(
            &table.name,
            format!("Connector '{other}' can only be used as a source. It cannot be used as a sink."),
        )),
        other => Err(unknown_connector(table, other, "sink")),
    }
}

/// The table can be the table of a lookup join (its rows read whole when the join
/// starts): the filesystem connector's.
pub fn check_lookup(table: &CatalogTable) -> Result<(), SqlError> {
    // The rows are read as the file has them: physical columns, insert-only.
    if table.fields.len() != table.physical.len() {
        return Err(SqlError::unsupported(
            Some(table.location),
            format!("a lookup join against '{}', a table with computed columns", table.name),
        ));
    }
    if emits_updates(table) {
        return Err(SqlError::unsupported(
            Some(table.location),
            format!(
                "a lookup join against '{}', a table of changes (an event-time temporal join takes those)",
                table.name
            ),
        ));
    }
    match connector_of(table)? {
        "filesystem" => filesystem::check(table, false),
        other => Err(SqlError::unsupported(
            Some(table.location),
            format!(
                "a lookup join against the connector '{other}' of table '{}' (eddy's lookup source: filesystem)",
                table.name
            ),
        )),
    }
}

/// Every row of a lookup join's table.
pub fn lookup_rows(table: &CatalogTable) -> Result<Vec<Row>, SqlError> {
    check_lookup(table)?;
    filesystem::read_all(table)
}

/// Whether the table's sink takes updating results (`-U`, `+U`, `-D` rows): print and
/// blackhole do, and files or Kafka topics in a CDC format; in json or csv they take
/// only inserts.
pub fn accepts_updates(table: &CatalogTable) -> Result<bool, SqlError> {
    Ok(match connector_of(table)? {
        "print" | "blackhole" | "upsert-kafka" => true,
        "filesystem" | "kafka" => format_of(table)?.is_changelog(),
        _ => false,
    })
}

/// Whether the table's source emits updates (a CDC format, or upsert-kafka normalized): its
/// scan is an updating input.
pub fn emits_updates(table: &CatalogTable) -> bool {
    match connector_of(table) {
        Ok("upsert-kafka") => true,
        Ok("filesystem" | "kafka") => format_of(table).is_ok_and(|f| f.is_changelog()),
        _ => false,
    }
}

/// Whether the table's source gives upserts (each record a key's latest row), which the
/// plan normalizes into a changelog by the primary key.
pub fn emits_upserts(table: &CatalogTable) -> bool {
    matches!(connector_of(table), Ok("upsert-kafka"))
}

/// Writes `rows` into the table.
pub fn sink(table: &CatalogTable, rows: DataStream<Row>, uid: &str) -> Result<DataStreamSink, SqlError> {
    check_sink(table)?;
    let name = format!(
        "Sink(table=[default_catalog.default_database.{}], fields=[{}])",
        table.name,
        table.physical.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let parallelism = match table.option("sink.parallelism") {
        Some(p) => Some(p.parse::<u32>().ok().filter(|p| *p > 0).ok_or_else(|| {
            SqlError::table(&table.name, format!("'sink.parallelism' must be a positive integer, not '{p}'"))
        })?),
        None => None,
    };
    let sink = match connector_of(table)? {
        "filesystem" => filesystem::sink(table, rows)?,
        "print" => {
            let identifier = table.option("print-identifier").map(String::from);
            let stderr = table.option("standard-error") == Some("true");
            rows.add_sink(PrintRowSink::new(identifier, stderr))
        }
        "blackhole" => rows.add_sink(blackhole::BlackholeSink),
        #[cfg(feature = "kafka")]
        "kafka" => kafka::sink(table, rows)?,
        #[cfg(feature = "kafka")]
        "upsert-kafka" => upsert_kafka::sink(table, rows)?,
        other => return Err(unknown_connector(table, other, "sink")),
    };
    let sink = sink.name(&name).uid(uid);
    Ok(match parallelism {
        Some(p) => sink.set_parallelism(p),
        None => sink,
    })
}
