//! Row formats of the `format` option: `json` and `csv`, read and written as Flink's
//! formats do (field names as declared, timestamps as `yyyy-MM-dd HH:mm:ss.SSS`).

mod csv;
mod json;

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
            other => {
                return Err(format!(
                    "Could not find any format factory for identifier '{other}' in the classpath. Available: csv, json"
                ))
            }
        };
        let ignore = match name {
            "json" => flag("json.ignore-parse-errors")?,
            _ => flag("csv.ignore-parse-errors")?,
        };
        Ok(Self { kind, fields: Arc::new(fields.to_vec()), ignore_parse_errors: ignore })
    }

    /// A line as a row; `Ok(None)` for a line to skip (blank, or bad with
    /// `*.ignore-parse-errors`).
    pub fn decode(&self, line: &str) -> Result<Option<Row>, String> {
        if line.trim().is_empty() {
            return Ok(None);
        }
        let decoded = match &self.kind {
            Kind::Json { fail_on_missing_field, iso_timestamps, .. } => {
                json::decode(line, &self.fields, *fail_on_missing_field, *iso_timestamps)
            }
            Kind::Csv(options) if options.is_comment(line) => return Ok(None),
            Kind::Csv(options) => csv::decode(line, &self.fields, options),
        };
        match decoded {
            Ok(fields) => Ok(Some(Row::insert(fields))),
            Err(_) if self.ignore_parse_errors => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A row as a line (without its newline).
    pub fn encode(&self, row: &Row) -> String {
        match &self.kind {
            Kind::Json { iso_timestamps, ignore_null_fields, .. } => {
                json::encode(&row.fields, &self.fields, *iso_timestamps, *ignore_null_fields)
            }
            Kind::Csv(options) => csv::encode(&row.fields, &self.fields, options),
        }
    }
}
