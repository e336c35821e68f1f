//! `CAST(x AS t)`: Flink's casts between numbers, strings, booleans, dates and
//! timestamps. A string that is not a value of the target type fails the cast (Flink's
//! behaviour since 1.15; `TRY_CAST` gives NULL instead).

use super::{datetime, decimal, to_f64, EvalError, EvalResult};
use crate::types::{DataType, TypeKind, MAX_LENGTH};
use crate::value::{java_double, java_float, Value};
use std::sync::Arc;

pub fn cast(value: Value, from: &DataType, to: &DataType) -> EvalResult {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let fail = |what: &str| EvalError(format!("cannot cast {what} '{value}' ({from}) to {to}"));
    use TypeKind as K;
    Ok(match (&to.kind, &value) {
        (K::Boolean, Value::Boolean(_)) => value,
        (K::Boolean, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "1" => Value::Boolean(true),
            "false" | "f" | "no" | "n" | "0" => Value::Boolean(false),
            _ => return Err(fail("the string")),
        },
        (K::Boolean, Value::Int(i)) => Value::Boolean(*i != 0),
        (k, _) if k.is_integer() => {
            let i = match &value {
                Value::Int(i) => *i,
                Value::Float(f) => f.trunc() as i64,
                Value::Decimal(u, s) => (*u / decimal::pow10(*s)) as i64,
                Value::Boolean(b) => *b as i64,
                Value::String(s) => s.trim().parse::<i64>().map_err(|_| fail("the string"))?,
                Value::Timestamp(ms, _) => ms.div_euclid(1000),
                _ => return Err(fail("the value")),
            };
            let fits = match k {
                K::TinyInt => i8::try_from(i).is_ok(),
                K::SmallInt => i16::try_from(i).is_ok(),
                K::Int => i32::try_from(i).is_ok(),
                _ => true,
            };
            if !fits && matches!(value, Value::String(_)) {
                return Err(fail("the string"));
            }
            // Numbers out of range wrap as Java's narrowing does.
            Value::Int(match k {
                K::TinyInt => i as i8 as i64,
                K::SmallInt => i as i16 as i64,
                K::Int => i as i32 as i64,
                _ => i,
            })
        }
        (K::Float | K::Double, _) => {
            let f = match &value {
                Value::String(s) => s.trim().parse::<f64>().map_err(|_| fail("the string"))?,
                Value::Boolean(b) => *b as i64 as f64,
                other => to_f64(other),
            };
            Value::Float(if to.kind == K::Float { f as f32 as f64 } else { f })
        }
        (K::Decimal { precision, scale }, _) => {
            let unscaled = match &value {
                Value::Int(i) => decimal::rescale(*i as i128, 0, *scale),
                Value::Decimal(u, s) => decimal::rescale(*u, *s, *scale),
                Value::Float(f) => decimal::from_f64(*f, *scale),
                Value::String(s) => {
                    let (u, s) = decimal::parse(s).ok_or_else(|| fail("the string"))?;
                    decimal::rescale(u, s, *scale)
                }
                Value::Boolean(b) => decimal::rescale(*b as i128, 0, *scale),
                _ => return Err(fail("the value")),
            };
            match unscaled {
                Some(u) if decimal::fits(u, *precision) => Value::Decimal(u, *scale),
                _ => Value::Null,
            }
        }
        (K::Char(n) | K::Varchar(n), _) => {
            let text = to_string(&value, from);
            let text = if *n < MAX_LENGTH && text.chars().count() > *n as usize {
                text.chars().take(*n as usize).collect()
            } else {
                text
            };
            // CHAR(n) pads to its length, as Flink's casts do.
            let text = match to.kind {
                K::Char(n) if text.chars().count() < n as usize => format!("{text:<width$}", width = n as usize),
                _ => text,
            };
            Value::String(Arc::from(text))
        }
        (K::Date, Value::String(s)) => Value::Date(datetime::parse_date(s).ok_or_else(|| fail("the string"))?),
        (K::Date, Value::Timestamp(ms, _)) => Value::Date(ms.div_euclid(datetime::MILLIS_PER_DAY) as i32),
        (K::Date, Value::Date(_)) => value,
        (K::Time(p), Value::String(s)) => {
            Value::Time(truncate_nanos(datetime::parse_time(s).ok_or_else(|| fail("the string"))?, *p))
        }
        (K::Time(p), Value::Timestamp(ms, ns)) => {
            Value::Time(truncate_nanos(ms.rem_euclid(datetime::MILLIS_PER_DAY) * 1_000_000 + *ns as i64, *p))
        }
        (K::Time(p), Value::Time(t)) => Value::Time(truncate_nanos(*t, *p)),
        (K::Timestamp { precision, .. } | K::TimestampLtz { precision, .. }, _) => {
            let (ms, ns) = match &value {
                Value::Timestamp(ms, ns) => (*ms, *ns),
                Value::Date(d) => (*d as i64 * datetime::MILLIS_PER_DAY, 0),
                Value::String(s) => datetime::parse_timestamp(s).ok_or_else(|| fail("the string"))?,
                Value::Int(seconds) if matches!(to.kind, K::TimestampLtz { .. }) => (seconds * 1000, 0),
                _ => return Err(fail("the value")),
            };
            truncate_timestamp(ms, ns, *precision)
        }
        (K::Varbinary(_) | K::Binary(_), Value::String(s)) => Value::Bytes(Arc::from(s.as_bytes())),
        (K::Varbinary(_) | K::Binary(_), Value::Bytes(_)) => value,
        (K::IntervalDayTime, Value::Interval(_)) | (K::IntervalYearMonth, Value::Months(_)) => value,
        (K::Row(_), Value::Row(_)) | (K::Array(_), Value::Array(_)) | (K::Map(..), Value::Map(_)) => value,
        _ => return Err(fail("the value")),
    })
}

fn truncate_nanos(nanos: i64, precision: u8) -> i64 {
    let unit = 10i64.pow(9 - precision.min(9) as u32);
    nanos - nanos.rem_euclid(unit)
}

/// A timestamp at `precision` fractional digits (cut, as Flink's casts cut).
pub fn truncate_timestamp(ms: i64, ns: u32, precision: u8) -> Value {
    if precision >= 9 {
        return Value::Timestamp(ms, ns);
    }
    if precision <= 3 {
        let unit = 10i64.pow(3 - precision as u32);
        return Value::Timestamp(ms - ms.rem_euclid(unit), 0);
    }
    let unit = 10u32.pow(9 - precision as u32);
    Value::Timestamp(ms, ns - ns % unit)
}

/// A value as `CAST(… AS STRING)` writes it: timestamps in SQL's form with the type's
/// fractional digits (`2026-01-01 00:00:00.106`), doubles as Java writes them.
pub fn to_string(value: &Value, ty: &DataType) -> String {
    match (value, &ty.kind) {
        (Value::String(s), _) => s.to_string(),
        (Value::Float(f), TypeKind::Float) => java_float(*f as f32),
        (Value::Float(f), _) => java_double(*f),
        (Value::Decimal(u, s), _) => decimal::plain_string(*u, *s),
        (
            Value::Timestamp(ms, ns),
            TypeKind::Timestamp { precision, .. } | TypeKind::TimestampLtz { precision, .. },
        ) => sql_timestamp(*ms, *ns, *precision),
        (Value::Time(t), TypeKind::Time(p)) => {
            let text = datetime::format_time(*t - t.rem_euclid(1_000_000_000));
            let text = if text.len() == 5 { format!("{text}:00") } else { text };
            if *p == 0 {
                text
            } else {
                format!(
                    "{text}.{:0width$}",
                    (t.rem_euclid(1_000_000_000)) / 10i64.pow(9 - *p as u32),
                    width = *p as usize
                )
            }
        }
        (other, _) => other.to_string(),
    }
}

/// `yyyy-MM-dd HH:mm:ss[.f…]` with `precision` fractional digits.
pub fn sql_timestamp(ms: i64, ns: u32, precision: u8) -> String {
    let p = datetime::parts(ms, ns);
    let mut out = format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", p.year, p.month, p.day, p.hour, p.minute, p.second);
    if precision > 0 {
        let digits = format!("{:09}", p.nano);
        out.push('.');
        out.push_str(&digits[..precision.min(9) as usize]);
    }
    out
}
