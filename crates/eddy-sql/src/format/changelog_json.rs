//! The changelog formats of CDC tools, as Flink reads and writes them: `debezium-json`
//! (`{"before": …, "after": …, "op": "c" | "r" | "u" | "d"}`, optionally inside the
//! `payload` of a message with its schema) and `canal-json` (`{"data": [...], "old":
//! [...], "type": "INSERT" | "UPDATE" | "DELETE"}`). A message becomes the rows it changes:
//! an insert `+I`, an update `-U` of the row before and `+U` of the row after, a delete
//! `-D`. Written, every row is one message: `+I`/`+U` as a create (an insert), `-U`/`-D` as
//! a delete, as Flink's serializers write them.

use super::json;
use crate::row::{Row, RowKind};
use crate::types::Field;
use serde_json::{Map, Value as Json};

/// Which CDC format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cdc {
    Debezium,
    Canal,
}

fn object<'a>(v: &'a Json, what: &str) -> Result<&'a Map<String, Json>, String> {
    match v {
        Json::Object(o) => Ok(o),
        _ => Err(format!("'{what}' is not an object")),
    }
}

/// The rows one message changes, appended to `out`.
pub fn decode(cdc: Cdc, line: &str, fields: &[Field], out: &mut Vec<Row>) -> Result<(), String> {
    let fail = |e: String| format!("Corrupt {} message '{line}': {e}", name(cdc));
    let json: Json = serde_json::from_str(line).map_err(|e| fail(e.to_string()))?;
    let message = object(&json, "the message").map_err(fail)?;
    match cdc {
        Cdc::Debezium => debezium(message, fields, out).map_err(fail),
        Cdc::Canal => canal(message, fields, out).map_err(fail),
    }
}

fn name(cdc: Cdc) -> &'static str {
    match cdc {
        Cdc::Debezium => "debezium-json",
        Cdc::Canal => "canal-json",
    }
}

fn row(v: Option<&Json>, what: &str, fields: &[Field], kind: RowKind) -> Result<Row, String> {
    let v = v.filter(|v| !v.is_null()).ok_or_else(|| format!("'{what}' is missing"))?;
    Ok(Row { kind, fields: json::decode_object(object(v, what)?, fields, false)? })
}

fn debezium(message: &Map<String, Json>, fields: &[Field], out: &mut Vec<Row>) -> Result<(), String> {
    // With 'debezium-json.schema-include', the change is the message's payload.
    let change = match (message.get("op"), message.get("payload")) {
        (None, Some(payload)) => object(payload, "payload")?,
        _ => message,
    };
    match change.get("op").and_then(Json::as_str) {
        Some("c" | "r") => out.push(row(change.get("after"), "after", fields, RowKind::Insert)?),
        Some("u") => {
            out.push(row(change.get("before"), "before", fields, RowKind::UpdateBefore)?);
            out.push(row(change.get("after"), "after", fields, RowKind::UpdateAfter)?);
        }
        Some("d") => out.push(row(change.get("before"), "before", fields, RowKind::Delete)?),
        Some(other) => return Err(format!("Unknown \"op\" value \"{other}\"")),
        None => return Err("no \"op\"".into()),
    }
    Ok(())
}

fn canal(message: &Map<String, Json>, fields: &[Field], out: &mut Vec<Row>) -> Result<(), String> {
    let kind = message.get("type").and_then(Json::as_str).ok_or("no \"type\"")?;
    let data = match message.get("data") {
        Some(Json::Array(items)) => items.as_slice(),
        // A DDL message (CREATE, ALTER …) changes no rows.
        _ if !matches!(kind, "INSERT" | "UPDATE" | "DELETE") => return Ok(()),
        _ => return Err("'data' is not an array".into()),
    };
    match kind {
        "INSERT" => {
            for d in data {
                out.push(row(Some(d), "data", fields, RowKind::Insert)?);
            }
        }
        "DELETE" => {
            for d in data {
                out.push(row(Some(d), "data", fields, RowKind::Delete)?);
            }
        }
        "UPDATE" => {
            let old = match message.get("old") {
                Some(Json::Array(items)) => items.as_slice(),
                _ => return Err("an UPDATE without 'old'".into()),
            };
            for (i, d) in data.iter().enumerate() {
                // 'old' holds the changed fields only: the row before is 'data' with them.
                let mut before = object(d, "data")?.clone();
                if let Some(changed) = old.get(i) {
                    for (k, v) in object(changed, "old")? {
                        before.insert(k.clone(), v.clone());
                    }
                }
                out.push(Row { kind: RowKind::UpdateBefore, fields: json::decode_object(&before, fields, false)? });
                out.push(row(Some(d), "data", fields, RowKind::UpdateAfter)?);
            }
        }
        _ => {}
    }
    Ok(())
}

/// One row as one message.
pub fn encode(cdc: Cdc, row: &Row, fields: &[Field], iso: bool) -> String {
    let data = json::encode(&row.fields, fields, iso, false);
    let adds = row.kind.is_accumulate();
    match (cdc, adds) {
        (Cdc::Debezium, true) => format!("{{\"before\":null,\"after\":{data},\"op\":\"c\"}}"),
        (Cdc::Debezium, false) => format!("{{\"before\":{data},\"after\":null,\"op\":\"d\"}}"),
        (Cdc::Canal, true) => format!("{{\"data\":[{data}],\"type\":\"INSERT\"}}"),
        (Cdc::Canal, false) => format!("{{\"data\":[{data}],\"type\":\"DELETE\"}}"),
    }
}
