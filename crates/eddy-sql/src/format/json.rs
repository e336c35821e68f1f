//! Flink's `json` format: an object a line, fields by their declared names, nested ROWs as
//! objects, timestamps as `yyyy-MM-dd HH:mm:ss[.fff]` (or ISO-8601 with `T`).

use crate::expr::{datetime, decimal};
use crate::types::{DataType, Field, TypeKind};
use crate::value::{java_double, Value};
use serde_json::Value as Json;
use std::fmt::Write;
use std::sync::Arc;

pub fn decode(line: &str, fields: &[Field], fail_on_missing: bool, iso: bool) -> Result<Vec<Value>, String> {
    let json: Json = serde_json::from_str(line).map_err(|e| format!("Failed to deserialize JSON '{line}': {e}"))?;
    let Json::Object(object) = &json else {
        return Err(format!("Failed to deserialize JSON '{line}': not an object"));
    };
    let _ = iso;
    decode_object(object, fields, fail_on_missing).map_err(|e| format!("Failed to deserialize JSON '{line}': {e}"))
}

/// A row from a JSON object, its fields by their declared names.
pub fn decode_object(
    object: &serde_json::Map<String, Json>,
    fields: &[Field],
    fail_on_missing: bool,
) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        match object.get(&f.name) {
            Some(v) => out.push(value_of(v, &f.ty).map_err(|e| format!("field '{}': {e}", f.name))?),
            None if fail_on_missing => return Err(format!("could not find field '{}'", f.name)),
            None => out.push(Value::Null),
        }
    }
    Ok(out)
}

fn value_of(v: &Json, ty: &DataType) -> Result<Value, String> {
    use TypeKind as K;
    if v.is_null() {
        return Ok(Value::Null);
    }
    let text = || match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok(match &ty.kind {
        K::Boolean => match v {
            Json::Bool(b) => Value::Boolean(*b),
            _ => Value::Boolean(text().eq_ignore_ascii_case("true")),
        },
        k if k.is_integer() => match v.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Int(text().trim().parse().map_err(|_| format!("'{}' is not an integer", text()))?),
        },
        K::Float | K::Double => match v.as_f64() {
            Some(f) => Value::Float(f),
            None => Value::Float(text().trim().parse().map_err(|_| format!("'{}' is not a number", text()))?),
        },
        K::Decimal { precision, scale } => {
            let (u, s) = decimal::parse(&text()).ok_or_else(|| format!("'{}' is not a decimal", text()))?;
            match decimal::rescale(u, s, *scale) {
                Some(u) if decimal::fits(u, *precision) => Value::Decimal(u, *scale),
                _ => Value::Null,
            }
        }
        K::Char(_) | K::Varchar(_) => Value::String(Arc::from(text())),
        K::Binary(_) | K::Varbinary(_) => Value::Bytes(Arc::from(text().into_bytes())),
        K::Date => Value::Date(datetime::parse_date(&text()).ok_or_else(|| format!("'{}' is not a date", text()))?),
        K::Time(_) => Value::Time(datetime::parse_time(&text()).ok_or_else(|| format!("'{}' is not a time", text()))?),
        K::Timestamp { precision, .. } | K::TimestampLtz { precision, .. } => {
            let t = text();
            let (ms, ns) = datetime::parse_timestamp(t.trim_end_matches('Z'))
                .ok_or_else(|| format!("'{t}' is not a timestamp"))?;
            crate::expr::cast::truncate_timestamp(ms, ns, *precision)
        }
        K::Row(fields) => {
            let Json::Object(object) = v else { return Err(format!("'{v}' is not an object")) };
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                out.push(match object.get(&f.name) {
                    Some(x) => value_of(x, &f.ty)?,
                    None => Value::Null,
                });
            }
            Value::Row(Arc::from(out))
        }
        K::Array(element) => {
            let Json::Array(items) = v else { return Err(format!("'{v}' is not an array")) };
            Value::Array(items.iter().map(|i| value_of(i, element)).collect::<Result<Vec<_>, _>>()?.into())
        }
        K::Map(key, value) => {
            let Json::Object(object) = v else { return Err(format!("'{v}' is not an object")) };
            let mut entries = Vec::with_capacity(object.len());
            for (k, x) in object {
                entries.push((value_of(&Json::String(k.clone()), key)?, value_of(x, value)?));
            }
            Value::Map(entries.into())
        }
        other => return Err(format!("the type {other:?} cannot be read from JSON")),
    })
}

pub fn encode(values: &[Value], fields: &[Field], iso: bool, ignore_nulls: bool) -> String {
    let mut out = String::with_capacity(64 + 16 * fields.len());
    write_object(&mut out, values, fields, iso, ignore_nulls);
    out
}

fn write_object(out: &mut String, values: &[Value], fields: &[Field], iso: bool, ignore_nulls: bool) {
    out.push('{');
    let mut first = true;
    for (v, f) in values.iter().zip(fields) {
        if ignore_nulls && v.is_null() {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&serde_json::to_string(&f.name).expect("a string serializes"));
        out.push(':');
        write_value(out, v, &f.ty, iso, ignore_nulls);
    }
    out.push('}');
}

/// `yyyy-MM-dd HH:mm:ss` and as many fraction digits as needed (Flink's SQL timestamp
/// format writes no trailing zeros).
pub fn timestamp_text(ms: i64, ns: u32, iso: bool) -> String {
    let p = datetime::parts(ms, ns);
    let sep = if iso { 'T' } else { ' ' };
    let mut s = format!("{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}", p.year, p.month, p.day, p.hour, p.minute, p.second);
    if p.nano > 0 {
        let digits = format!("{:09}", p.nano);
        s.push('.');
        s.push_str(digits.trim_end_matches('0'));
    }
    s
}

fn write_value(out: &mut String, v: &Value, ty: &DataType, iso: bool, ignore_nulls: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => write!(out, "{b}").expect("writing to a String"),
        Value::Int(i) => write!(out, "{i}").expect("writing to a String"),
        Value::Float(f) if f.is_finite() => out.push_str(&java_double(*f)),
        Value::Float(f) => write!(out, "\"{}\"", java_double(*f)).expect("writing to a String"),
        Value::Decimal(u, s) => out.push_str(&decimal::plain_string(*u, *s)),
        Value::String(s) => out.push_str(&serde_json::to_string(&**s).expect("a string serializes")),
        Value::Timestamp(ms, ns) => write!(out, "\"{}\"", timestamp_text(*ms, *ns, iso)).expect("writing to a String"),
        Value::Row(values) => {
            if let TypeKind::Row(fields) = &ty.kind {
                write_object(out, values, fields, iso, ignore_nulls);
            } else {
                out.push_str("null");
            }
        }
        Value::Array(items) => {
            out.push('[');
            let element = match &ty.kind {
                TypeKind::Array(e) => (**e).clone(),
                _ => DataType::string(),
            };
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, &element, iso, ignore_nulls);
            }
            out.push(']');
        }
        other => {
            out.push_str(&serde_json::to_string(&crate::expr::cast::to_string(other, ty)).expect("a string serializes"))
        }
    }
}
