//! Row formats of the `format` option: `json` and `csv`, read and written as Flink's
//! formats do (field names as declared, timestamps as `yyyy-MM-dd HH:mm:ss.SSS`), and the
//! changelog formats `debezium-json` and `canal-json`, whose messages carry row kinds.

mod changelog_json;
mod csv;
mod json;

use changelog_json::Cdc;

use crate::row::Row;
use crate::types::Field;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The options each format knows.
pub fn options(format: &str) -> &'static [&'static str] {
    match format {
        "json" => &[
            "json.fail-on-missing-field",
            "json.ignore-parse-errors",
            "json.timestamp-format.standard",
            "json.map-null-key.mode",
            "json.map-null-key.literal",
            "json.encode.decimal-as-plain-number",
            "json.encode.ignore-null-fields",
        ],
        "csv" => &[
            "csv.field-delimiter",
            "csv.disable-quote-character",
            "csv.quote-character",
            "csv.allow-comments",
            "csv.ignore-parse-errors",
            "csv.array-element-delimiter",
            "csv.escape-character",
            "csv.null-literal",
            "csv.write-bigdecimal-in-scientific-notation",
        ],
        "debezium-json" => &[
            "debezium-json.ignore-parse-errors",
            "debezium-json.schema-include",
            "debezium-json.timestamp-format.standard",
            "debezium-json.map-null-key.mode",
            "debezium-json.map-null-key.literal",
            "debezium-json.encode.decimal-as-plain-number",
        ],
        "canal-json" => &[
            "canal-json.ignore-parse-errors",
            "canal-json.timestamp-format.standard",
            "canal-json.map-null-key.mode",
            "canal-json.map-null-key.literal",
            "canal-json.encode.decimal-as-plain-number",
        ],
        _ => &[],
    }
}

pub fn knows(format: &str, key: &str) -> bool {
    options(format).contains(&key)
}

/// A format with its options, over a table's physical columns.
#[derive(Clone, Debug)]
pub struct Format {
    kind: Kind,
    fields: Arc<Vec<Field>>,
    ignore_parse_errors: bool,
}

#[derive(Clone, Debug)]
enum Kind {
    Json { fail_on_missing_field: bool, iso_timestamps: bool, ignore_null_fields: bool },
    Csv(csv::CsvOptions),
    Cdc(Cdc),
}

impl Format {
    pub fn new(name: &str, options: &BTreeMap<String, String>, fields: &[Field]) -> Result<Self, String> {
        let flag = |key: &str| -> Result<bool, String> {
            match options.get(key).map(|v| v.to_ascii_lowercase()) {
                None => Ok(false),
                Some(v) if v == "true" => Ok(true),
                Some(v) if v == "false" => Ok(false),
                Some(v) => Err(format!("'{key}' must be 'true' or 'false', not '{v}'")),
            }
        };
        let kind = match name {
            "json" => {
                let iso = match options.get("json.timestamp-format.standard").map(String::as_str) {
                    None | Some("SQL") => false,
                    Some("ISO-8601") => true,
                    Some(other) => {
                        return Err(format!(
                            "'json.timestamp-format.standard' must be 'SQL' or 'ISO-8601', not '{other}'"
                        ))
                    }
                };
                Kind::Json {
                    fail_on_missing_field: flag("json.fail-on-missing-field")?,
                    iso_timestamps: iso,
                    ignore_null_fields: flag("json.encode.ignore-null-fields")?,
                }
            }
            "csv" => Kind::Csv(csv::CsvOptions::new(options)?),
            "debezium-json" => Kind::Cdc(Cdc::Debezium),
            "canal-json" => Kind::Cdc(Cdc::Canal),
            other => {
                return Err(format!(
                    "Could not find any format factory for identifier '{other}' in the classpath. Available: canal-json, csv, debezium-json, json"
                ))
            }
        };
        let ignore = flag(&format!("{name}.ignore-parse-errors"))?;
        Ok(Self { kind, fields: Arc::new(fields.to_vec()), ignore_parse_errors: ignore })
    }

    /// Whether the format's rows carry their kind (a CDC format): a table read in it
    /// updates, and a sink writing it takes updates.
    pub fn is_changelog(&self) -> bool {
        matches!(self.kind, Kind::Cdc(_))
    }

    /// The rows of a line (none for a blank line, or a bad one with
    /// `*.ignore-parse-errors`; two for a CDC update), appended to `out`.
    pub fn decode(&self, line: &str, out: &mut Vec<Row>) -> Result<(), String> {
        if line.trim().is_empty() {
            return Ok(());
        }
        let decoded = match &self.kind {
            Kind::Json { fail_on_missing_field, iso_timestamps, .. } => {
                json::decode(line, &self.fields, *fail_on_missing_field, *iso_timestamps).map(Row::insert)
            }
            Kind::Csv(options) if options.is_comment(line) => return Ok(()),
            Kind::Csv(options) => csv::decode(line, &self.fields, options).map(Row::insert),
            Kind::Cdc(cdc) => {
                let before = out.len();
                return match changelog_json::decode(*cdc, line, &self.fields, out) {
                    Err(_) if self.ignore_parse_errors => {
                        out.truncate(before);
                        Ok(())
                    }
                    other => other,
                };
            }
        };
        match decoded {
            Ok(row) => out.push(row),
            Err(_) if self.ignore_parse_errors => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// A row as a line (without its newline).
    pub fn encode(&self, row: &Row) -> String {
        match &self.kind {
            Kind::Json { iso_timestamps, ignore_null_fields, .. } => {
                json::encode(&row.fields, &self.fields, *iso_timestamps, *ignore_null_fields)
            }
            Kind::Csv(options) => csv::encode(&row.fields, &self.fields, options),
            Kind::Cdc(cdc) => changelog_json::encode(*cdc, row, &self.fields, false),
        }
    }
}
