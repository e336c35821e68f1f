//! Flink's `csv` format: fields split at the delimiter, `"` quotes fields that hold it,
//! an empty field is NULL for every type but strings.

use crate::expr::cast;
use crate::types::{DataType, Field, TypeKind};
use crate::value::Value;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct CsvOptions {
    delimiter: char,
    quote: Option<char>,
    null_literal: Option<String>,
    allow_comments: bool,
}

impl CsvOptions {
    pub fn new(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let one_char = |key: &str, default: char| -> Result<char, String> {
            match options.get(key) {
                None => Ok(default),
                Some(v) if v == "\\t" => Ok('\t'),
                Some(v) if v.chars().count() == 1 => Ok(v.chars().next().expect("one char")),
                Some(v) => Err(format!("Option '{key}' must be a string with single character, but was: {v}")),
            }
        };
        let disable_quote = options.get("csv.disable-quote-character").is_some_and(|v| v == "true");
        Ok(Self {
            delimiter: one_char("csv.field-delimiter", ',')?,
            quote: if disable_quote { None } else { Some(one_char("csv.quote-character", '"')?) },
            null_literal: options.get("csv.null-literal").cloned(),
            allow_comments: options.get("csv.allow-comments").is_some_and(|v| v == "true"),
        })
    }
}

impl CsvOptions {
    /// A `#` line with `csv.allow-comments`: skipped.
    pub fn is_comment(&self, line: &str) -> bool {
        self.allow_comments && line.starts_with('#')
    }
}

fn split(line: &str, options: &CsvOptions) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if Some(c) == options.quote {
            if quoted && chars.peek() == options.quote.as_ref() {
                current.push(c);
                chars.next();
            } else {
                quoted = !quoted;
            }
        } else if c == options.delimiter && !quoted {
            out.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    out.push(current);
    out
}

pub fn decode(line: &str, fields: &[Field], options: &CsvOptions) -> Result<Vec<Value>, String> {
    let parts = split(line, options);
    if parts.len() < fields.len() {
        return Err(format!(
            "Failed to deserialize CSV row '{line}': {} fields, the table has {}",
            parts.len(),
            fields.len()
        ));
    }
    let mut out = Vec::with_capacity(fields.len());
    for (text, f) in parts.iter().zip(fields) {
        let is_null = options.null_literal.as_deref() == Some(text.as_str()) || (text.is_empty() && !f.ty.is_string());
        if is_null {
            out.push(Value::Null);
            continue;
        }
        let value = cast::cast(Value::string(text), &DataType::string(), &f.ty)
            .map_err(|e| format!("Failed to deserialize CSV row '{line}': field '{}': {}", f.name, e.0))?;
        out.push(value);
    }
    Ok(out)
}

pub fn encode(values: &[Value], fields: &[Field], options: &CsvOptions) -> String {
    let mut out = String::with_capacity(16 * fields.len());
    for (i, (v, f)) in values.iter().zip(fields).enumerate() {
        if i > 0 {
            out.push(options.delimiter);
        }
        let text = match (v, &f.ty.kind) {
            (Value::Null, _) => options.null_literal.clone().unwrap_or_default(),
            (Value::Timestamp(ms, ns), TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. }) => {
                super::json::timestamp_text(*ms, *ns, false)
            }
            (v, _) => cast::to_string(v, &f.ty),
        };
        let needs_quote = options.quote.is_some()
            && (text.contains(options.delimiter)
                || text.contains('\n')
                || text.contains('\r')
                || options.quote.is_some_and(|q| text.contains(q)));
        if needs_quote {
            let q = options.quote.expect("checked");
            out.push(q);
            for c in text.chars() {
                if c == q {
                    out.push(q);
                }
                out.push(c);
            }
            out.push(q);
        } else {
            out.push_str(&text);
        }
    }
    out
}
