//! The `upsert-kafka` sink (feature `kafka`): an updating result as a compacted topic's
//! records, keyed by the table's PRIMARY KEY. `+I` and `+U` write the row under its key
//! (`key.format` of the key columns, `value.format` of the row, or of the columns outside
//! the key with `'value.fields-include' = 'EXCEPT_KEY'`), `-D` writes the key without a
//! value (a tombstone), and `-U` writes nothing: the `+U` after it replaces the row. The
//! rows go to the sink by their key, so that each key's changes keep their order.

use super::check_options;
use super::kafka::{configured_sink, guarantee, required};
use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::format::Format;
use crate::row::{Row, RowKind};
use crate::types::Field;
use eddy_api::{DataStream, DataStreamSink};
use eddy_kafka::KafkaSerializationSchema;
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
    let format = Format::new(name, &table.options, fields).map_err(|m| SqlError::table(&table.name, m))?;
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
    if !sink {
        return Err(SqlError::unsupported(
            Some(table.location),
            format!("reading the upsert-kafka table '{}' (eddy writes upsert-kafka tables)", table.name),
        ));
    }
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
    guarantee(table)?;
    formats(table)?;
    Ok(())
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
