//! The values a row holds, and how Flink prints them (Java's `toString` of the external
//! type: `LocalDateTime` as `2026-01-01T00:00:00.106`, `Double` as `1.0E7`, `BigDecimal`,
//! nested rows as `+I[…]`, NULL as `null`).

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt::{self, Write};
use std::sync::Arc;

/// One field's value. Integers of every width are `Int`, FLOAT and DOUBLE are `Float`: the
/// column's type says which; decimals carry their scale.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Boolean(bool),
    Int(i64),
    Float(f64),
    /// `unscaled × 10^-scale`.
    Decimal(i128, u8),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    /// Days since 1970-01-01.
    Date(i32),
    /// Nanoseconds since midnight.
    Time(i64),
    /// Milliseconds since 1970-01-01T00:00 (in UTC for TIMESTAMP_LTZ), and the nanoseconds
    /// within the millisecond (Flink's `TimestampData`).
    Timestamp(i64, u32),
    /// A day-time interval in milliseconds.
    Interval(i64),
    /// A year-month interval in months.
    Months(i32),
    Row(Arc<[Value]>),
    Array(Arc<[Value]>),
    Map(Arc<[(Value, Value)]>),
}

impl Value {
    pub fn string(s: &str) -> Self {
        Value::String(Arc::from(s))
    }
    pub fn timestamp_millis(millis: i64) -> Self {
        Value::Timestamp(millis, 0)
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Boolean(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// Milliseconds of a TIMESTAMP (a time attribute's value).
    pub fn as_millis(&self) -> Option<i64> {
        match self {
            Value::Timestamp(ms, _) => Some(*ms),
            _ => None,
        }
    }

    /// SQL's order of two values of one type; NULL sorts first. `None` between values of
    /// different kinds (the binder casts both sides to one type first).
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        Some(match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Boolean(a), Boolean(b)) => a.cmp(b),
            (Int(a), Int(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            (Decimal(a, sa), Decimal(b, sb)) => crate::expr::decimal::compare(*a, *sa, *b, *sb),
            (String(a), String(b)) => a.cmp(b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Date(a), Date(b)) => a.cmp(b),
            (Time(a), Time(b)) => a.cmp(b),
            (Timestamp(a, an), Timestamp(b, bn)) => (a, an).cmp(&(b, bn)),
            (Interval(a), Interval(b)) => a.cmp(b),
            (Months(a), Months(b)) => a.cmp(b),
            (Row(a), Row(b)) | (Array(a), Array(b)) => {
                for (x, y) in a.iter().zip(b.iter()) {
                    match x.compare(y)? {
                        Ordering::Equal => {}
                        other => return Some(other),
                    }
                }
                a.len().cmp(&b.len())
            }
            _ => return None,
        })
    }

    /// Appends the value's bytes to a grouping or join key: equal values give equal bytes
    /// (decimals normalised to their scale by the binder), and the encoding is the same in
    /// every process, so that keys route to the same key group everywhere.
    pub fn encode_key(&self, out: &mut Vec<u8>) {
        use Value::*;
        match self {
            Null => out.push(0),
            Boolean(b) => out.extend_from_slice(&[1, *b as u8]),
            Int(i) => {
                out.push(2);
                out.extend_from_slice(&i.to_be_bytes());
            }
            Float(f) => {
                out.push(3);
                // -0.0 and 0.0 are one key, as Java's Double.equals does not say but SQL does.
                let f = if *f == 0.0 { 0.0 } else { *f };
                out.extend_from_slice(&f.to_bits().to_be_bytes());
            }
            Decimal(u, s) => {
                out.push(4);
                out.extend_from_slice(&u.to_be_bytes());
                out.push(*s);
            }
            String(s) => {
                out.push(5);
                out.extend_from_slice(&(s.len() as u32).to_be_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Bytes(b) => {
                out.push(6);
                out.extend_from_slice(&(b.len() as u32).to_be_bytes());
                out.extend_from_slice(b);
            }
            Date(d) => {
                out.push(7);
                out.extend_from_slice(&d.to_be_bytes());
            }
            Time(t) => {
                out.push(8);
                out.extend_from_slice(&t.to_be_bytes());
            }
            Timestamp(ms, ns) => {
                out.push(9);
                out.extend_from_slice(&ms.to_be_bytes());
                out.extend_from_slice(&ns.to_be_bytes());
            }
            Interval(i) => {
                out.push(10);
                out.extend_from_slice(&i.to_be_bytes());
            }
            Months(m) => {
                out.push(11);
                out.extend_from_slice(&m.to_be_bytes());
            }
            Row(vs) | Array(vs) => {
                out.push(12);
                out.extend_from_slice(&(vs.len() as u32).to_be_bytes());
                for v in vs.iter() {
                    v.encode_key(out);
                }
            }
            Map(entries) => {
                out.push(13);
                out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
                for (k, v) in entries.iter() {
                    k.encode_key(out);
                    v.encode_key(out);
                }
            }
        }
    }
}

impl fmt::Display for Value {
    /// As Flink's print connector prints a field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Value::*;
        match self {
            Null => f.write_str("null"),
            Boolean(b) => write!(f, "{b}"),
            Int(i) => write!(f, "{i}"),
            Float(x) => f.write_str(&java_double(*x)),
            Decimal(u, s) => f.write_str(&crate::expr::decimal::to_java_string(*u, *s)),
            String(s) => f.write_str(s),
            Bytes(b) => {
                // Java's Arrays.toString of a byte[]: signed bytes.
                f.write_char('[')?;
                for (i, byte) in b.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", *byte as i8)?;
                }
                f.write_char(']')
            }
            Date(d) => f.write_str(&crate::expr::datetime::format_date(*d)),
            Time(t) => f.write_str(&crate::expr::datetime::format_time(*t)),
            Timestamp(ms, ns) => f.write_str(&crate::expr::datetime::format_timestamp(*ms, *ns)),
            Interval(ms) => f.write_str(&java_duration(*ms)),
            Months(m) => write!(f, "P{}Y{}M", m / 12, m % 12),
            Row(vs) => {
                f.write_str("+I[")?;
                write_list(f, vs)?;
                f.write_char(']')
            }
            Array(vs) => {
                f.write_char('[')?;
                write_list(f, vs)?;
                f.write_char(']')
            }
            Map(entries) => {
                f.write_char('{')?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                f.write_char('}')
            }
        }
    }
}

fn write_list(f: &mut fmt::Formatter<'_>, values: &[Value]) -> fmt::Result {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{v}")?;
    }
    Ok(())
}

/// Java's `Double.toString`: plain between 10^-3 and 10^7 (at least one decimal), else
/// `d.dddE±n`; the shortest digits that read back as the same double.
pub fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    java_float_text(&format!("{x:e}"), x.abs())
}

/// Java's `Float.toString` (the same rules over a float's shortest digits).
pub fn java_float(x: f32) -> String {
    if x.is_nan() || x.is_infinite() || x == 0.0 {
        return java_double(x as f64);
    }
    java_float_text(&format!("{x:e}"), x.abs() as f64)
}

/// Rewrites Rust's shortest scientific form (`-1.5e-5`) in Java's layout.
fn java_float_text(scientific: &str, magnitude: f64) -> String {
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (1e-3..1e7).contains(&magnitude) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            let padded = format!("{digits:0<int_len$}");
            let (int_part, frac) = padded.split_at(int_len);
            out.push_str(int_part);
            out.push('.');
            out.push_str(if frac.is_empty() { "0" } else { frac });
        } else {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        write!(out, "E{exponent}").expect("writing to a String");
    }
    out
}

/// Java's `Duration.toString` of a day-time interval: `PT4S`, `PT1M30S`, `PT0.5S`.
fn java_duration(ms: i64) -> String {
    if ms == 0 {
        return "PT0S".into();
    }
    let mut out = String::from("PT");
    let (hours, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    if hours != 0 {
        write!(out, "{hours}H").expect("writing to a String");
    }
    if minutes != 0 {
        write!(out, "{minutes}M").expect("writing to a String");
    }
    if rest != 0 {
        let (seconds, millis) = (rest / 1000, rest % 1000);
        if millis == 0 {
            write!(out, "{seconds}S").expect("writing to a String");
        } else {
            let frac = format!("{:03}", millis.abs());
            let sign = if rest < 0 && seconds == 0 { "-" } else { "" };
            write!(out, "{sign}{seconds}.{}S", frac.trim_end_matches('0')).expect("writing to a String");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(java_double(1.5), "1.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1.5000000000000002e-5), "1.5000000000000002E-5");
        assert_eq!(java_double(100.00000000000001), "100.00000000000001");
        assert_eq!(java_double(0.3333333333333333), "0.3333333333333333");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(-42.0), "-42.0");
        assert_eq!(java_double(1234567.0), "1234567.0");
        assert_eq!(java_float(1.5), "1.5");
    }

    #[test]
    fn intervals_print_as_java_durations() {
        assert_eq!(java_duration(4000), "PT4S");
        assert_eq!(java_duration(90_000), "PT1M30S");
        assert_eq!(java_duration(500), "PT0.5S");
        assert_eq!(java_duration(3_600_000), "PT1H");
    }
}
