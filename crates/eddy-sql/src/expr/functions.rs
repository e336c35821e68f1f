//! Flink's built-in scalar functions that everyday jobs and the Nexmark queries use, and
//! the trait of user functions registered from Rust (`CREATE FUNCTION … AS '…'`).

use super::datetime::{self, PatternPart};
use super::{cast, decimal, to_f64, EvalError, EvalResult, Expr};
use crate::types::{DataType, TypeKind};
use crate::value::Value;
use regex::Regex;
use std::fmt;
use std::sync::Arc;

/// A scalar function written in Rust and registered with the table environment under
/// the identifier a `CREATE FUNCTION name AS 'identifier'` names (Flink's
/// `ScalarFunction`, whose `eval` is found by reflection; here the function says its
/// result type).
pub trait ScalarFunction: Send + Sync + fmt::Debug + 'static {
    /// The name plans print.
    fn name(&self) -> &str;
    /// The result type for these argument types, or why they do not fit.
    fn result_type(&self, args: &[DataType]) -> Result<DataType, String>;
    /// The result for one row's arguments.
    fn eval(&self, args: &[Value]) -> Result<Value, String>;
}

/// A part of a date or time (`EXTRACT(HOUR FROM ts)`, `HOUR(ts)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    DayOfWeek,
    DayOfYear,
    Hour,
    Minute,
    Second,
    Millisecond,
    Epoch,
}

/// A built-in function, with what it compiled from constant arguments at planning time
/// (a regular expression, a date pattern).
#[derive(Clone, Debug)]
pub enum Builtin {
    Lower,
    Upper,
    /// `SUBSTRING(s FROM start [FOR length])`, 1-based.
    Substring,
    CharLength,
    /// `TRIM([BOTH|LEADING|TRAILING] [chars FROM] s)`: (leading, trailing).
    Trim(bool, bool),
    Concat,
    ConcatWs,
    Replace,
    /// With the pattern compiled when it is a literal.
    RegexpExtract(Option<Arc<Regex>>),
    RegexpReplace(Option<Arc<Regex>>),
    Regexp(Option<Arc<Regex>>),
    /// `s LIKE pattern` with the pattern compiled.
    Like(Arc<Regex>),
    SplitIndex,
    Position,
    Initcap,
    Lpad,
    Rpad,
    Reverse,
    Repeat,
    Coalesce,
    NullIf,
    If,
    Abs,
    Floor,
    Ceil,
    Round,
    Power,
    Sqrt,
    Ln,
    Log10,
    Exp,
    Extract(TimeUnit),
    /// `FLOOR(ts TO unit)` / `CEIL(ts TO unit)`: (unit, ceil).
    FloorTime(TimeUnit, bool),
    DateFormat(Option<Arc<Vec<PatternPart>>>),
    ToTimestamp(Option<Arc<Vec<PatternPart>>>),
    ToDate,
    UnixTimestamp,
    FromUnixtime,
    /// `PROCTIME()`, `NOW()`, `CURRENT_TIMESTAMP`, `LOCALTIMESTAMP`: the wall clock.
    Now,
    /// `TIMESTAMPDIFF(unit, a, b)`.
    TimestampDiff(TimeUnit),
    /// `IS TRUE`, `IS FALSE`, `IS NOT TRUE`, `IS NOT FALSE`: (value tested, negated).
    IsBoolean(bool, bool),
    Hash,
    /// `ROW(a, b, …)`.
    Row,
    /// `ARRAY[a, b, …]`.
    Array,
}

impl Builtin {
    pub fn name(&self) -> String {
        use Builtin::*;
        match self {
            Lower => "LOWER".into(),
            Upper => "UPPER".into(),
            Substring => "SUBSTRING".into(),
            CharLength => "CHAR_LENGTH".into(),
            Trim(..) => "TRIM".into(),
            Concat => "CONCAT".into(),
            ConcatWs => "CONCAT_WS".into(),
            Replace => "REPLACE".into(),
            RegexpExtract(_) => "REGEXP_EXTRACT".into(),
            RegexpReplace(_) => "REGEXP_REPLACE".into(),
            Regexp(_) => "REGEXP".into(),
            Like(_) => "LIKE".into(),
            SplitIndex => "SPLIT_INDEX".into(),
            Position => "POSITION".into(),
            Initcap => "INITCAP".into(),
            Lpad => "LPAD".into(),
            Rpad => "RPAD".into(),
            Reverse => "REVERSE".into(),
            Repeat => "REPEAT".into(),
            Coalesce => "COALESCE".into(),
            NullIf => "NULLIF".into(),
            If => "IF".into(),
            Abs => "ABS".into(),
            Floor => "FLOOR".into(),
            Ceil => "CEIL".into(),
            Round => "ROUND".into(),
            Power => "POWER".into(),
            Sqrt => "SQRT".into(),
            Ln => "LN".into(),
            Log10 => "LOG10".into(),
            Exp => "EXP".into(),
            Extract(unit) => format!("EXTRACT({unit:?})").to_uppercase(),
            FloorTime(unit, false) => format!("FLOOR_TO_{unit:?}").to_uppercase(),
            FloorTime(unit, true) => format!("CEIL_TO_{unit:?}").to_uppercase(),
            DateFormat(_) => "DATE_FORMAT".into(),
            ToTimestamp(_) => "TO_TIMESTAMP".into(),
            ToDate => "TO_DATE".into(),
            UnixTimestamp => "UNIX_TIMESTAMP".into(),
            FromUnixtime => "FROM_UNIXTIME".into(),
            Now => "PROCTIME".into(),
            TimestampDiff(unit) => format!("TIMESTAMPDIFF({unit:?})").to_uppercase(),
            IsBoolean(true, false) => "IS TRUE".into(),
            IsBoolean(false, false) => "IS FALSE".into(),
            IsBoolean(true, true) => "IS NOT TRUE".into(),
            IsBoolean(false, true) => "IS NOT FALSE".into(),
            Hash => "HASH_CODE".into(),
            Row => "ROW".into(),
            Array => "ARRAY".into(),
        }
    }

    pub fn is_deterministic(&self) -> bool {
        !matches!(self, Builtin::Now)
    }

    /// Whether a NULL argument makes the result NULL without calling the function.
    fn strict(&self) -> bool {
        !matches!(
            self,
            Builtin::Coalesce
                | Builtin::NullIf
                | Builtin::If
                | Builtin::Concat
                | Builtin::ConcatWs
                | Builtin::IsBoolean(..)
                | Builtin::Now
                | Builtin::Row
                | Builtin::Array
        )
    }

    /// The function's value for evaluated arguments; `ty` is the result type and `exprs`
    /// the argument expressions (for their types).
    pub fn call(&self, args: &[Value], ty: &DataType, exprs: &[Expr]) -> EvalResult {
        use Builtin::*;
        if self.strict() && args.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        let s = |i: usize| args[i].as_str().unwrap_or("");
        let int = |i: usize| args[i].as_i64().unwrap_or(0);
        let text = |t: String| Value::String(Arc::from(t));
        Ok(match self {
            Lower => text(s(0).to_lowercase()),
            Upper => text(s(0).to_uppercase()),
            Substring => {
                let chars: Vec<char> = s(0).chars().collect();
                let len = chars.len() as i64;
                let start = int(1);
                // Flink: a start of 0 is 1; a negative start counts from the end, and one
                // beyond the start of the string gives ''; a negative length gives NULL.
                if start < 0 && -start > len {
                    return Ok(text(String::new()));
                }
                let from = if start > 0 {
                    start - 1
                } else if start == 0 {
                    0
                } else {
                    len + start
                };
                let count = if args.len() > 2 { int(2) } else { len };
                if count < 0 {
                    return Ok(Value::Null);
                }
                let from = from.min(len) as usize;
                let to = (from as i64 + count).min(len).max(from as i64) as usize;
                text(chars[from..to].iter().collect())
            }
            CharLength => Value::Int(s(0).chars().count() as i64),
            Trim(leading, trailing) => {
                let set: Vec<char> = if args.len() > 1 { s(1).chars().collect() } else { vec![' '] };
                let mut t = s(0);
                if *leading {
                    t = t.trim_start_matches(|c| set.contains(&c));
                }
                if *trailing {
                    t = t.trim_end_matches(|c| set.contains(&c));
                }
                text(t.to_string())
            }
            Concat => {
                if args.iter().any(Value::is_null) {
                    return Ok(Value::Null);
                }
                let mut out = String::new();
                for (a, e) in args.iter().zip(exprs) {
                    out.push_str(&cast::to_string(a, &e.ty));
                }
                text(out)
            }
            ConcatWs => {
                if args[0].is_null() {
                    return Ok(Value::Null);
                }
                let parts: Vec<String> = args[1..]
                    .iter()
                    .zip(&exprs[1..])
                    .filter(|(a, _)| !a.is_null())
                    .map(|(a, e)| cast::to_string(a, &e.ty))
                    .collect();
                text(parts.join(s(0)))
            }
            Replace => text(s(0).replace(s(1), s(2))),
            RegexpExtract(compiled) => {
                let regex = regex_of(compiled, s(1))?;
                let group = if args.len() > 2 { int(2) } else { 1 };
                match regex.captures(s(0)) {
                    Some(c) if group >= 0 && (group as usize) < c.len() => match c.get(group as usize) {
                        Some(m) => text(m.as_str().to_string()),
                        None => Value::Null,
                    },
                    Some(_) => return Err(EvalError(format!("REGEXP_EXTRACT: no group {group} in '{}'", s(1)))),
                    None => Value::Null,
                }
            }
            RegexpReplace(compiled) => {
                let regex = regex_of(compiled, s(1))?;
                text(regex.replace_all(s(0), java_replacement(s(2)).as_str()).into_owned())
            }
            Regexp(compiled) => Value::Boolean(regex_of(compiled, s(1))?.is_match(s(0))),
            Like(regex) => Value::Boolean(regex.is_match(s(0))),
            SplitIndex => {
                let index = int(2);
                let separator = s(1);
                if index < 0 || separator.is_empty() {
                    Value::Null
                } else {
                    match s(0).split(separator).nth(index as usize) {
                        Some(part) => text(part.to_string()),
                        None => Value::Null,
                    }
                }
            }
            Position => {
                let (needle, hay) = (s(0), s(1));
                Value::Int(match hay.find(needle) {
                    Some(at) => hay[..at].chars().count() as i64 + 1,
                    None => 0,
                })
            }
            Initcap => {
                let mut out = String::new();
                let mut start = true;
                for c in s(0).chars() {
                    if c.is_alphanumeric() {
                        if start {
                            out.extend(c.to_uppercase());
                        } else {
                            out.extend(c.to_lowercase());
                        }
                        start = false;
                    } else {
                        out.push(c);
                        start = true;
                    }
                }
                text(out)
            }
            Lpad | Rpad => {
                let (v, len, pad) = (s(0), int(1), s(2));
                if len < 0 {
                    return Ok(Value::Null);
                }
                let chars: Vec<char> = v.chars().collect();
                let len = len as usize;
                if len <= chars.len() {
                    return Ok(text(chars[..len].iter().collect()));
                }
                if pad.is_empty() {
                    return Ok(Value::Null);
                }
                let fill: String = pad.chars().cycle().take(len - chars.len()).collect();
                if matches!(self, Lpad) {
                    text(format!("{fill}{v}"))
                } else {
                    text(format!("{v}{fill}"))
                }
            }
            Reverse => text(s(0).chars().rev().collect()),
            Repeat => text(s(0).repeat(int(1).max(0) as usize)),
            Coalesce => args.iter().find(|a| !a.is_null()).cloned().unwrap_or(Value::Null),
            NullIf => {
                if !args[0].is_null() && !args[1].is_null() && super::compare_values(&args[0], &args[1]).is_eq() {
                    Value::Null
                } else {
                    args[0].clone()
                }
            }
            If => {
                if args[0] == Value::Boolean(true) {
                    args[1].clone()
                } else {
                    args[2].clone()
                }
            }
            Abs => match &args[0] {
                Value::Int(i) => {
                    Value::Int(i.checked_abs().ok_or_else(|| EvalError(format!("ABS({i}) overflows BIGINT")))?)
                }
                Value::Float(f) => Value::Float(f.abs()),
                Value::Decimal(u, sc) => Value::Decimal(u.abs(), *sc),
                other => other.clone(),
            },
            Floor | Ceil => match &args[0] {
                Value::Float(f) => Value::Float(if matches!(self, Floor) { f.floor() } else { f.ceil() }),
                Value::Decimal(u, sc) => {
                    let unit = decimal::pow10(*sc);
                    let q = u.div_euclid(unit);
                    let q = if matches!(self, Ceil) && u.rem_euclid(unit) != 0 { q + 1 } else { q };
                    match ty.kind {
                        TypeKind::Decimal { scale, .. } => Value::Decimal(q * decimal::pow10(scale), scale),
                        _ => Value::Int(q as i64),
                    }
                }
                other => other.clone(),
            },
            Round => {
                let places = if args.len() > 1 { int(1) } else { 0 };
                match (&args[0], &ty.kind) {
                    (Value::Decimal(u, sc), TypeKind::Decimal { scale, .. }) => {
                        let rounded = decimal::rescale(*u, *sc, places.clamp(0, 38) as u8).unwrap_or(0);
                        Value::Decimal(
                            decimal::rescale(rounded, places.clamp(0, 38) as u8, *scale).unwrap_or(0),
                            *scale,
                        )
                    }
                    (Value::Float(f), _) => {
                        let m = 10f64.powi(places as i32);
                        Value::Float((f * m).round() / m)
                    }
                    (Value::Int(_), _) if places < -18 => Value::Int(0),
                    (Value::Int(i), _) if places < 0 => {
                        let m = 10i64.pow((-places) as u32);
                        Value::Int(((*i as f64 / m as f64).round() as i64) * m)
                    }
                    (other, _) => other.clone(),
                }
            }
            Power => Value::Float(to_f64(&args[0]).powf(to_f64(&args[1]))),
            Sqrt => Value::Float(to_f64(&args[0]).sqrt()),
            Ln => Value::Float(to_f64(&args[0]).ln()),
            Log10 => Value::Float(to_f64(&args[0]).log10()),
            Exp => Value::Float(to_f64(&args[0]).exp()),
            Extract(unit) => Value::Int(extract(*unit, &args[0])),
            FloorTime(unit, ceil) => match &args[0] {
                Value::Timestamp(ms, ns) => Value::Timestamp(floor_time(*unit, *ms, *ns, *ceil), 0),
                other => other.clone(),
            },
            DateFormat(compiled) => {
                let (ms, ns) = match &args[0] {
                    Value::Timestamp(ms, ns) => (*ms, *ns),
                    Value::String(t) => match datetime::parse_timestamp(t) {
                        Some(t) => t,
                        None => return Ok(Value::Null),
                    },
                    _ => return Ok(Value::Null),
                };
                let pattern = pattern_of(compiled, s(1))?;
                text(datetime::format_with(&pattern, ms, ns))
            }
            ToTimestamp(compiled) => {
                let parsed = if args.len() > 1 || compiled.is_some() {
                    let pattern = pattern_of(compiled, if args.len() > 1 { s(1) } else { "yyyy-MM-dd HH:mm:ss" })?;
                    datetime::parse_with(&pattern, s(0))
                } else {
                    datetime::parse_timestamp(s(0))
                };
                match parsed {
                    Some((ms, ns)) => cast::truncate_timestamp(ms, ns, 3),
                    None => Value::Null,
                }
            }
            ToDate => match datetime::parse_date(s(0)) {
                Some(d) => Value::Date(d),
                None => Value::Null,
            },
            UnixTimestamp => match args.first() {
                None => Value::Int(wall_clock_millis() / 1000),
                Some(Value::String(t)) => match datetime::parse_timestamp(t) {
                    Some((ms, _)) => Value::Int(ms.div_euclid(1000)),
                    None => Value::Int(i64::MIN),
                },
                Some(_) => Value::Null,
            },
            FromUnixtime => {
                let p = datetime::compile_pattern("yyyy-MM-dd HH:mm:ss").expect("a valid pattern");
                let ms = int(0)
                    .checked_mul(1000)
                    .ok_or_else(|| EvalError(format!("FROM_UNIXTIME({}) is out of range", int(0))))?;
                text(datetime::format_with(&p, ms, 0))
            }
            Now => Value::Timestamp(wall_clock_millis(), 0),
            TimestampDiff(unit) => match (&args[0], &args[1]) {
                (Value::Timestamp(a, _), Value::Timestamp(b, _)) => Value::Int(timestamp_diff(*unit, *a, *b)),
                _ => Value::Null,
            },
            IsBoolean(value, negated) => Value::Boolean((args[0] == Value::Boolean(*value)) != *negated),
            Row => Value::Row(Arc::from(args.to_vec())),
            Array => Value::Array(Arc::from(args.to_vec())),
            Hash => {
                let mut bytes = Vec::new();
                args[0].encode_key(&mut bytes);
                Value::Int(eddy_types::stable_hash(&bytes).0 as i32 as i64)
            }
        })
    }
}

fn regex_of(compiled: &Option<Arc<Regex>>, pattern: &str) -> Result<Arc<Regex>, EvalError> {
    match compiled {
        Some(r) => Ok(r.clone()),
        None => Regex::new(pattern)
            .map(Arc::new)
            .map_err(|e| EvalError(format!("invalid regular expression '{pattern}': {e}"))),
    }
}

fn pattern_of(compiled: &Option<Arc<Vec<PatternPart>>>, pattern: &str) -> Result<Arc<Vec<PatternPart>>, EvalError> {
    match compiled {
        Some(p) => Ok(p.clone()),
        None => datetime::compile_pattern(pattern).map(Arc::new).map_err(EvalError),
    }
}

/// Java's `$1` group references in a replacement, as Rust's regex writes them (`${1}`).
fn java_replacement(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len());
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    if next == '$' {
                        out.push_str("$$");
                    } else {
                        out.push(next);
                    }
                }
            }
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push_str(&format!("${{{digits}}}"));
            }
            other => out.push(other),
        }
    }
    out
}

/// A LIKE pattern (`%` any run, `_` one character, `\` escapes by default) as a regex.
pub fn like_regex(pattern: &str, escape: Option<char>) -> Result<Regex, String> {
    let mut out = String::from("(?s)^");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(n) => out.push_str(&regex::escape(&n.to_string())),
                None => return Err(format!("the LIKE pattern '{pattern}' ends in its escape character")),
            }
        } else if c == '%' {
            out.push_str(".*");
        } else if c == '_' {
            out.push('.');
        } else {
            out.push_str(&regex::escape(&c.to_string()));
        }
    }
    out.push('$');
    Regex::new(&out).map_err(|e| e.to_string())
}

fn extract(unit: TimeUnit, v: &Value) -> i64 {
    let (ms, ns) = match v {
        Value::Timestamp(ms, ns) => (*ms, *ns),
        Value::Date(d) => (*d as i64 * datetime::MILLIS_PER_DAY, 0),
        Value::Time(t) => (t / 1_000_000, (t % 1_000_000) as u32),
        _ => return 0,
    };
    let p = datetime::parts(ms, ns);
    let days = ms.div_euclid(datetime::MILLIS_PER_DAY);
    match unit {
        TimeUnit::Year => p.year,
        TimeUnit::Quarter => (p.month as i64 - 1) / 3 + 1,
        TimeUnit::Month => p.month as i64,
        TimeUnit::Week => {
            // ISO week number.
            let wd = datetime::iso_day_of_week(days) as i64;
            let thursday = days - wd + 4;
            let (y, _, _) = datetime::civil_from_days(thursday);
            (thursday - datetime::days_from_civil(y, 1, 1)) / 7 + 1
        }
        TimeUnit::Day => p.day as i64,
        // Flink's DAYOFWEEK: 1 = Sunday … 7 = Saturday.
        TimeUnit::DayOfWeek => datetime::iso_day_of_week(days) as i64 % 7 + 1,
        TimeUnit::DayOfYear => days - datetime::days_from_civil(p.year, 1, 1) + 1,
        TimeUnit::Hour => p.hour as i64,
        TimeUnit::Minute => p.minute as i64,
        TimeUnit::Second => p.second as i64,
        TimeUnit::Millisecond => (p.second * 1000 + p.nano / 1_000_000) as i64,
        TimeUnit::Epoch => ms.div_euclid(1000),
    }
}

fn floor_time(unit: TimeUnit, ms: i64, ns: u32, ceil: bool) -> i64 {
    let step = match unit {
        TimeUnit::Second => 1000,
        TimeUnit::Minute => 60_000,
        TimeUnit::Hour => 3_600_000,
        TimeUnit::Day => datetime::MILLIS_PER_DAY,
        TimeUnit::Millisecond => 1,
        _ => {
            let p = datetime::parts(ms, ns);
            let floor = match unit {
                TimeUnit::Year => datetime::days_from_civil(p.year, 1, 1),
                TimeUnit::Quarter => datetime::days_from_civil(p.year, (p.month - 1) / 3 * 3 + 1, 1),
                TimeUnit::Month => datetime::days_from_civil(p.year, p.month, 1),
                _ => {
                    let days = ms.div_euclid(datetime::MILLIS_PER_DAY);
                    days - (datetime::iso_day_of_week(days) as i64 % 7)
                }
            } * datetime::MILLIS_PER_DAY;
            if ceil && (floor != ms || ns != 0) {
                return match unit {
                    TimeUnit::Year => datetime::days_from_civil(p.year + 1, 1, 1) * datetime::MILLIS_PER_DAY,
                    TimeUnit::Quarter => add_months(floor, 3),
                    TimeUnit::Month => add_months(floor, 1),
                    _ => floor + 7 * datetime::MILLIS_PER_DAY,
                };
            }
            return floor;
        }
    };
    let floor = ms - ms.rem_euclid(step);
    if ceil && (floor != ms || ns != 0) {
        floor + step
    } else {
        floor
    }
}

fn timestamp_diff(unit: TimeUnit, a: i64, b: i64) -> i64 {
    let d = b - a;
    match unit {
        TimeUnit::Second => d / 1000,
        TimeUnit::Minute => d / 60_000,
        TimeUnit::Hour => d / 3_600_000,
        TimeUnit::Day => d / datetime::MILLIS_PER_DAY,
        TimeUnit::Week => d / (7 * datetime::MILLIS_PER_DAY),
        TimeUnit::Millisecond => d,
        TimeUnit::Month | TimeUnit::Quarter | TimeUnit::Year => {
            let (pa, pb) = (datetime::parts(a, 0), datetime::parts(b, 0));
            let mut months = (pb.year - pa.year) * 12 + pb.month as i64 - pa.month as i64;
            let rest = |p: &datetime::Parts, ms: i64| (p.day, ms.rem_euclid(datetime::MILLIS_PER_DAY));
            if months > 0 && rest(&pb, b) < rest(&pa, a) {
                months -= 1;
            } else if months < 0 && rest(&pb, b) > rest(&pa, a) {
                months += 1;
            }
            match unit {
                TimeUnit::Month => months,
                TimeUnit::Quarter => months / 3,
                _ => months / 12,
            }
        }
        _ => d / 1000,
    }
}

/// A timestamp `months` later, the day of month clamped to the month's length.
pub fn add_months(ms: i64, months: i32) -> i64 {
    let p = datetime::parts(ms, 0);
    let total = p.year * 12 + p.month as i64 - 1 + months as i64;
    let (year, month) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let day = p.day.min(datetime::days_in_month(year, month));
    datetime::days_from_civil(year, month, day) * datetime::MILLIS_PER_DAY + ms.rem_euclid(datetime::MILLIS_PER_DAY)
}

fn wall_clock_millis() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The result type of a function over integers, floats or decimals that keeps its
/// argument's type (ABS, FLOOR of a DOUBLE…).
pub fn same_numeric(ty: &DataType) -> DataType {
    ty.clone().without_time_attribute()
}

/// Whether a type is TIMESTAMP-like, for the functions over time.
pub fn is_temporal(ty: &DataType) -> bool {
    matches!(ty.kind, TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. } | TypeKind::Date | TypeKind::Time(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: Builtin, args: &[Value]) -> Value {
        let exprs: Vec<Expr> = args.iter().map(|a| Expr::literal(a.clone(), DataType::string())).collect();
        f.call(args, &DataType::string(), &exprs).unwrap()
    }

    #[test]
    fn string_functions_behave_as_flinks() {
        let url = Value::string("https://www.nexmark.com/abc/def/item.htm?query=1&channel_id=1234");
        assert_eq!(call(Builtin::SplitIndex, &[url.clone(), Value::string("/"), Value::Int(3)]), Value::string("abc"));
        assert_eq!(call(Builtin::SplitIndex, &[url.clone(), Value::string("/"), Value::Int(9)]), Value::Null);
        assert_eq!(
            call(Builtin::RegexpExtract(None), &[url.clone(), Value::string("(&|^)channel_id=([^&]*)"), Value::Int(2)]),
            Value::string("1234")
        );
        assert_eq!(
            call(Builtin::Substring, &[Value::string("hello"), Value::Int(2), Value::Int(3)]),
            Value::string("ell")
        );
        assert_eq!(call(Builtin::Substring, &[Value::string("hello"), Value::Int(-3)]), Value::string("llo"));
        let like = like_regex("a%c_", Some('\\')).unwrap();
        assert!(like.is_match("abbbcd"));
        assert!(!like.is_match("abbbc"));
        assert_eq!(
            call(
                Builtin::RegexpReplace(None),
                &[Value::string("a1b22"), Value::string("([0-9]+)"), Value::string("<$1>")]
            ),
            Value::string("a<1>b<22>")
        );
    }

    #[test]
    fn time_functions() {
        let (ms, _) = datetime::parse_timestamp("2015-07-15 09:05:03.250").unwrap();
        let ts = Value::Timestamp(ms, 0);
        assert_eq!(extract(TimeUnit::Hour, &ts), 9);
        assert_eq!(extract(TimeUnit::DayOfWeek, &ts), 4); // a Wednesday
        assert_eq!(extract(TimeUnit::Week, &ts), 29);
        let (jan31, _) = datetime::parse_timestamp("2016-01-31 00:00:00").unwrap();
        let (feb29, _) = datetime::parse_timestamp("2016-02-29 00:00:00").unwrap();
        assert_eq!(add_months(jan31, 1), feb29);
        assert_eq!(timestamp_diff(TimeUnit::Month, jan31, feb29), 0);
        let (hour, _) = datetime::parse_timestamp("2015-07-15 09:00:00").unwrap();
        assert_eq!(floor_time(TimeUnit::Hour, ms, 0, false), hour);
        assert_eq!(floor_time(TimeUnit::Hour, ms, 0, true), hour + 3_600_000);
    }
}
