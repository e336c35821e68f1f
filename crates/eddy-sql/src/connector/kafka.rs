//! The `kafka` connector (feature `kafka`) on eddy's Kafka source and sink, with Flink's
//! option names: `topic`, `properties.bootstrap.servers`, `properties.group.id` (and any
//! other `properties.*` handed to librdkafka), `scan.startup.mode`, `scan.bounded.mode`,
//! `format` / `value.format` (csv or json), `sink.delivery-guarantee`,
//! `sink.transactional-id-prefix`. The source's offsets live in its operator state; the
//! table's `WATERMARK FOR` clause assigns watermarks after it.

use super::check_options;
use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::format::Format;
use crate::row::Row;
use eddy_api::{DataStream, DataStreamSink, Env};
use eddy_kafka::{DeliveryGuarantee, KafkaRecord, KafkaSink, KafkaSource, OffsetResetStrategy, StartingOffsets};
use eddy_runtime::Collector;

const OPTIONS: &[&str] = &[
    "topic",
    "format",
    "value.format",
    "scan.startup.mode",
    "scan.startup.timestamp-millis",
    "scan.bounded.mode",
    "scan.topic-partition-discovery.interval",
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
    "sink.parallelism",
    "properties.bootstrap.servers",
    "properties.group.id",
];

pub(super) fn required<'t>(table: &'t CatalogTable, key: &str) -> Result<&'t str, SqlError> {
    table
        .option(key)
        .ok_or_else(|| SqlError::table(&table.name, format!("the kafka connector needs the option '{key}'")))
}

fn format(table: &CatalogTable) -> Result<Format, SqlError> {
    let name = table.option("value.format").or(table.option("format")).ok_or_else(|| {
        SqlError::table(&table.name, "the kafka connector needs the option 'format' ('csv' or 'json')")
    })?;
    Format::new(name, &table.options, &table.physical).map_err(|m| SqlError::table(&table.name, m))
}

pub fn check(table: &CatalogTable, sink: bool) -> Result<(), SqlError> {
    let format_name = table.option("value.format").or(table.option("format")).unwrap_or("");
    // Every `properties.*` goes to librdkafka, as Flink hands them to Kafka's clients.
    let mut known: Vec<&str> = OPTIONS.to_vec();
    known.extend(table.options.keys().filter(|k| k.starts_with("properties.")).map(String::as_str));
    check_options(table, "kafka", &known, Some(format_name))?;
    required(table, "topic")?;
    required(table, "properties.bootstrap.servers")?;
    format(table)?;
    if sink {
        guarantee(table)?;
    } else {
        starting_offsets(table)?;
    }
    Ok(())
}

fn starting_offsets(table: &CatalogTable) -> Result<StartingOffsets, SqlError> {
    Ok(match table.option("scan.startup.mode").unwrap_or("group-offsets") {
        "earliest-offset" => StartingOffsets::Earliest,
        "latest-offset" => StartingOffsets::Latest,
        "group-offsets" => StartingOffsets::Committed(OffsetResetStrategy::Earliest),
        "timestamp" => {
            let ms = required(table, "scan.startup.timestamp-millis")?;
            StartingOffsets::Timestamp(ms.parse().map_err(|_| {
                SqlError::table(
                    &table.name,
                    format!("'scan.startup.timestamp-millis' must be epoch milliseconds, not '{ms}'"),
                )
            })?)
        }
        other => {
            return Err(SqlError::table(
                &table.name,
                format!(
                "'scan.startup.mode' must be earliest-offset, latest-offset, group-offsets or timestamp, not '{other}'"
            ),
            ))
        }
    })
}

pub(super) fn guarantee(table: &CatalogTable) -> Result<DeliveryGuarantee, SqlError> {
    Ok(match table.option("sink.delivery-guarantee").unwrap_or("at-least-once") {
        "exactly-once" => DeliveryGuarantee::ExactlyOnce,
        "at-least-once" => DeliveryGuarantee::AtLeastOnce,
        "none" => DeliveryGuarantee::None,
        other => {
            return Err(SqlError::table(
                &table.name,
                format!("'sink.delivery-guarantee' must be exactly-once, at-least-once or none, not '{other}'"),
            ))
        }
    })
}

pub fn source(table: &CatalogTable, env: &Env) -> Result<DataStream<Row>, SqlError> {
    let format = format(table)?;
    let name = table.name.clone();
    let topics: Vec<&str> = required(table, "topic")?.split(';').map(str::trim).collect();
    // A record is the rows it changes (two for a CDC update); a tombstone changes none.
    let schema = move |record: &KafkaRecord<'_>| -> Result<Option<Vec<Row>>, String> {
        let Some(value) = record.value() else { return Ok(None) };
        let line = std::str::from_utf8(value).map_err(|e| format!("table '{name}': a record is not UTF-8: {e}"))?;
        let mut rows = Vec::with_capacity(1);
        format.decode(line, &mut rows).map_err(|e| format!("table '{name}': {e}"))?;
        Ok((!rows.is_empty()).then_some(rows))
    };
    configured_source(table, env, &topics, schema, starting_offsets(table)?)
}

/// A Kafka source of `topics` with the table's `properties.*` and `scan.bounded.mode`,
/// each record the rows `schema` makes of it.
pub(super) fn configured_source(
    table: &CatalogTable,
    env: &Env,
    topics: &[&str],
    schema: impl eddy_kafka::KafkaDeserializationSchema<Vec<Row>>,
    starting: StartingOffsets,
) -> Result<DataStream<Row>, SqlError> {
    let mut source = KafkaSource::new(required(table, "properties.bootstrap.servers")?, topics, schema)
        .with_starting_offsets(starting);
    if let Some(group) = table.option("properties.group.id") {
        source = source.with_group_id(group);
    }
    for (key, value) in &table.options {
        if let Some(property) = key.strip_prefix("properties.") {
            if !matches!(property, "bootstrap.servers" | "group.id") {
                source = source.with_property(property, value);
            }
        }
    }
    match table.option("scan.bounded.mode") {
        None | Some("unbounded") => {}
        Some("latest-offset") => source = source.bounded(),
        Some(other) => {
            return Err(SqlError::table(
                &table.name,
                format!("'scan.bounded.mode' must be unbounded or latest-offset, not '{other}'"),
            ))
        }
    }
    Ok(env.add_parallel_source(source).flat_map(|rows: Vec<Row>, out: &mut Collector<'_, Row>| {
        for row in rows {
            out.collect(row);
        }
    }))
}

pub fn sink(table: &CatalogTable, rows: DataStream<Row>) -> Result<DataStreamSink, SqlError> {
    let format = format(table)?;
    let schema = move |row: &Row, _key: &mut Vec<u8>, payload: &mut Vec<u8>| {
        payload.extend_from_slice(format.encode(row).as_bytes());
        false
    };
    Ok(rows.add_sink(configured_sink(table, schema)?))
}

/// A Kafka sink of the table's topic, delivery guarantee and `properties.*`.
pub(super) fn configured_sink(
    table: &CatalogTable,
    schema: impl eddy_kafka::KafkaSerializationSchema<Row>,
) -> Result<KafkaSink<Row>, SqlError> {
    let mut sink = KafkaSink::new(required(table, "properties.bootstrap.servers")?, required(table, "topic")?, schema)
        .with_delivery_guarantee(guarantee(table)?);
    if let Some(prefix) = table.option("sink.transactional-id-prefix") {
        sink = sink.with_transactional_id_prefix(prefix);
    }
    for (key, value) in &table.options {
        if let Some(property) = key.strip_prefix("properties.") {
            if property != "bootstrap.servers" {
                sink = sink.with_property(property, value);
            }
        }
    }
    Ok(sink)
}
