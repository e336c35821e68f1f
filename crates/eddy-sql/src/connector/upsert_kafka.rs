//! The `upsert-kafka` connector (feature `kafka`): a compacted topic's records as a table
//! keyed by its PRIMARY KEY, and an updating result written as such records.
//!
//! The source reads the topic from its earliest offset (as Flink's does; bounded by
//! `'scan.bounded.mode' = 'latest-offset'`): a record is the latest row of its key, a
//! record without a value (a tombstone) deletes the key. The plan's ChangelogNormalize
//! after the scan (`exec/changelog_normalize.rs`) makes a changelog of them. The key and
//! value formats take their options with the prefix (`'value.json.ignore-parse-errors'`).
//!
//! The sink writes `+I` and `+U` write the row under its key
//! (`key.format` of the key columns, `value.format` of the row, or of the columns outside
//! the key with `'value.fields-include' = 'EXCEPT_KEY'`), `-D` writes the key without a
//! value (a tombstone), and `-U` writes nothing: the `+U` after it replaces the row. The
//! rows go to the sink by their key, so that each key's changes keep their order.

use super::check_options;
use super::kafka::{configured_sink, configured_source, guarantee, required};
use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::format::Format;
use crate::row::{Row, RowKind};
use crate::types::Field;
use crate::value::Value;
use eddy_api::{DataStream, DataStreamSink, Env};
use eddy_kafka::{KafkaRecord, KafkaSerializationSchema, StartingOffsets};
use eddy_runtime::Collector;

const OPTIONS: &[&str] = &[
    "topic",
    "key.format",
    "value.format",
    "key.fields-prefix",
    "value.fields-include",
    "sink.parallelism",
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
    "sink.buffer-flush.max-rows",
    "sink.buffer-flush.interval",
    "properties.bootstrap.servers",
    "properties.group.id",
    "scan.bounded.mode",
];

/// The key columns (by the PRIMARY KEY) and the value columns.
fn columns(table: &CatalogTable) -> Result<(Vec<usize>, Vec<usize>), SqlError> {
    if table.primary_key.is_empty() {
        return Err(SqlError::table(
            &table.name,
            "'upsert-kafka' tables require to define a PRIMARY KEY constraint. The PRIMARY KEY specifies which columns should be read from or write to the Kafka message key. The PRIMARY KEY also defines records in the 'upsert-kafka' table should update or delete on which keys.",
        ));
    }
    let key: Vec<usize> = table
        .primary_key
        .iter()
        .map(|k| table.physical.iter().position(|f| &f.name == k).expect("checked: a physical column"))
        .collect();
    let value = match table.option("value.fields-include").unwrap_or("ALL") {
        "ALL" if table.option("key.fields-prefix").is_some_and(|p| !p.is_empty()) => {
            return Err(SqlError::table(
                &table.name,
                "The option 'key.fields-prefix' can only be declared if the 'value.fields-include' option is set to 'EXCEPT_KEY'.",
            ))
        }
        "ALL" => (0..table.physical.len()).collect(),
        "EXCEPT_KEY" => (0..table.physical.len()).filter(|i| !key.contains(i)).collect(),
        other => {
            return Err(SqlError::table(
                &table.name,
                format!("'value.fields-include' must be ALL or EXCEPT_KEY, not '{other}'"),
            ))
        }
    };
    Ok((key, value))
}

fn format(table: &CatalogTable, option: &str, fields: &[Field]) -> Result<Format, SqlError> {
    let name = table.option(option).ok_or_else(|| {
        SqlError::table(&table.name, format!("the upsert-kafka connector needs the option '{option}'"))
    })?;
    // `key.json.…` / `value.csv.…` as the format reads its options (`json.…`, `csv.…`).
    let prefix = option.trim_end_matches("format");
    let options: std::collections::BTreeMap<String, String> = table
        .options
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix).map(|rest| (rest.to_string(), v.clone())))
        .collect();
    let format = Format::new(name, &options, fields).map_err(|m| SqlError::table(&table.name, m))?;
    if format.is_changelog() {
        return Err(SqlError::table(
            &table.name,
            format!("'{option}' must be a format of rows (json, csv), not '{name}'"),
        ));
    }
    Ok(format)
}

fn formats(table: &CatalogTable) -> Result<(Vec<usize>, Vec<usize>, Format, Format), SqlError> {
    let (key, value) = columns(table)?;
    let prefix = table.option("key.fields-prefix").unwrap_or("");
    let key_fields: Vec<Field> = key
        .iter()
        .map(|i| {
            let f = &table.physical[*i];
            Field::new(f.name.strip_prefix(prefix).unwrap_or(&f.name), f.ty.clone())
        })
        .collect();
    let value_fields: Vec<Field> = value.iter().map(|i| table.physical[*i].clone()).collect();
    let key_format = format(table, "key.format", &key_fields)?;
    let value_format = format(table, "value.format", &value_fields)?;
    Ok((key, value, key_format, value_format))
}

pub fn check(table: &CatalogTable, sink: bool) -> Result<(), SqlError> {
    let mut known: Vec<&str> = OPTIONS.to_vec();
    known.extend(table.options.keys().filter(|k| k.starts_with("properties.")).map(String::as_str));
    for prefix in ["key", "value"] {
        let name = table.option(&format!("{prefix}.format")).unwrap_or("");
        let own = format!("{prefix}.{name}.");
        known.extend(
            table
                .options
                .keys()
                .filter(|k| k.starts_with(&own) && crate::format::knows(name, &k[prefix.len() + 1..]))
                .map(String::as_str),
        );
    }
    check_options(table, "upsert-kafka", &known, None)?;
    required(table, "topic")?;
    required(table, "properties.bootstrap.servers")?;
    if sink {
        guarantee(table)?;
    }
    formats(table)?;
    Ok(())
}

/// The topic's records as upserts: `+U` of a key's latest row, `-D` with the key's columns
/// for a tombstone (the plan's ChangelogNormalize after the scan makes a changelog of them).
pub fn source(table: &CatalogTable, env: &Env) -> Result<DataStream<Row>, SqlError> {
    check(table, false)?;
    let (key, value, key_format, value_format) = formats(table)?;
    let topics: Vec<&str> = required(table, "topic")?.split(';').map(str::trim).collect();
    let (name, width) = (table.name.clone(), table.physical.len());
    let (key_columns, value_columns) = (key.clone(), value);
    let schema = move |record: &KafkaRecord<'_>| -> Result<Option<Vec<Row>>, String> {
        let at = || format!("table '{name}', partition {} offset {}", record.partition(), record.offset());
        // No row: a line the format skips (`ignore-parse-errors`); the record is skipped.
        let decode = |bytes: &[u8], format: &Format, what: &str| -> Result<Option<Row>, String> {
            let text =
                std::str::from_utf8(bytes).map_err(|e| format!("{}: the record's {what} is not UTF-8: {e}", at()))?;
            let mut rows = Vec::with_capacity(1);
            format.decode(text, &mut rows).map_err(|e| format!("{}: the record's {what}: {e}", at()))?;
            Ok(rows.pop())
        };
        let key_bytes = record.key().ok_or_else(|| format!("{}: a record without a key", at()))?;
        let Some(key_row) = decode(key_bytes, &key_format, "key")? else { return Ok(None) };
        let mut fields = vec![Value::Null; width];
        let kind = match record.value() {
            Some(bytes) => {
                let Some(value_row) = decode(bytes, &value_format, "value")? else { return Ok(None) };
                for (column, field) in value_columns.iter().zip(value_row.fields) {
                    fields[*column] = field;
                }
                RowKind::UpdateAfter
            }
            None => RowKind::Delete,
        };
        // The key's columns from the key where the value does not hold them.
        for (column, field) in key_columns.iter().zip(key_row.fields) {
            if record.value().is_none() || !value_columns.contains(column) {
                fields[*column] = field;
            }
        }
        Ok(Some(vec![Row { kind, fields }]))
    };
    configured_source(table, env, &topics, schema, StartingOffsets::Earliest)
}

/// A row's key and value as a Kafka record's.
struct UpsertRecords {
    key: Vec<usize>,
    value: Vec<usize>,
    key_format: Format,
    value_format: Format,
}

impl KafkaSerializationSchema<Row> for UpsertRecords {
    fn serialize(&self, row: &Row, key: &mut Vec<u8>, payload: &mut Vec<u8>) -> bool {
        let pick = |columns: &[usize]| Row::insert(columns.iter().map(|i| row.fields[*i].clone()).collect());
        key.extend_from_slice(self.key_format.encode(&pick(&self.key)).as_bytes());
        if row.kind.is_accumulate() {
            payload.extend_from_slice(self.value_format.encode(&pick(&self.value)).as_bytes());
        }
        true
    }

    fn tombstone(&self, row: &Row) -> bool {
        !row.kind.is_accumulate()
    }
}

pub fn sink(table: &CatalogTable, rows: DataStream<Row>) -> Result<DataStreamSink, SqlError> {
    check(table, true)?;
    let (key, value, key_format, value_format) = formats(table)?;
    let routing = key.clone();
    // Each key's changes through one sink subtask, in order; the row before an update is
    // not written (the update after it replaces it).
    let rows = rows.key_by(move |row: &Row| crate::exec::key_bytes(row, &routing)).flat_map(
        |row: Row, out: &mut Collector<'_, Row>| {
            if row.kind != RowKind::UpdateBefore {
                out.collect(row)
            }
        },
    );
    Ok(rows.add_sink(configured_sink(table, UpsertRecords { key, value, key_format, value_format })?))
}
