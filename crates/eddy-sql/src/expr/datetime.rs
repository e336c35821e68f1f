//! Dates and times: the proleptic Gregorian calendar on day numbers, Java's
//! `LocalDateTime.toString` for printing, timestamp strings as Flink reads them, and
//! `DATE_FORMAT` / `TO_TIMESTAMP` with Java's `DateTimeFormatter` pattern letters.
//! TIMESTAMP_LTZ values are instants shown in the session time zone, which is UTC here.

use std::fmt::Write;

pub const MILLIS_PER_DAY: i64 = 86_400_000;
pub const NANOS_PER_MILLI: i64 = 1_000_000;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day number.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (month <= 2) as i64, month, day)
}

/// The parts of a timestamp: date, and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nano: u32,
}

pub fn parts(millis: i64, nanos_of_milli: u32) -> Parts {
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let ms_of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    Parts {
        year,
        month,
        day,
        hour: (ms_of_day / 3_600_000) as u32,
        minute: (ms_of_day / 60_000 % 60) as u32,
        second: (ms_of_day / 1000 % 60) as u32,
        nano: (ms_of_day % 1000) as u32 * 1_000_000 + nanos_of_milli,
    }
}

/// The day of the week, 1 = Monday … 7 = Sunday (ISO).
pub fn iso_day_of_week(days: i64) -> u32 {
    // 1970-01-01 was a Thursday.
    ((days + 3).rem_euclid(7) + 1) as u32
}

fn write_time(out: &mut String, hour: u32, minute: u32, second: u32, nano: u32) {
    write!(out, "{hour:02}:{minute:02}").expect("writing to a String");
    if second > 0 || nano > 0 {
        write!(out, ":{second:02}").expect("writing to a String");
        if nano > 0 {
            if nano.is_multiple_of(1_000_000) {
                write!(out, ".{:03}", nano / 1_000_000).expect("writing to a String");
            } else if nano.is_multiple_of(1000) {
                write!(out, ".{:06}", nano / 1000).expect("writing to a String");
            } else {
                write!(out, ".{nano:09}").expect("writing to a String");
            }
        }
    }
}

fn write_date(out: &mut String, year: i64, month: u32, day: u32) {
    if (0..=9999).contains(&year) {
        write!(out, "{year:04}-{month:02}-{day:02}").expect("writing to a String");
    } else {
        write!(out, "{year:+05}-{month:02}-{day:02}").expect("writing to a String");
    }
}

/// Java's `LocalDateTime.toString`: `2026-01-01T00:00`, `…T00:00:00.106`.
pub fn format_timestamp(millis: i64, nanos_of_milli: u32) -> String {
    let p = parts(millis, nanos_of_milli);
    let mut out = String::with_capacity(23);
    write_date(&mut out, p.year, p.month, p.day);
    out.push('T');
    write_time(&mut out, p.hour, p.minute, p.second, p.nano);
    out
}

/// Java's `LocalDate.toString`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(days as i64);
    let mut out = String::with_capacity(10);
    write_date(&mut out, y, m, d);
    out
}

/// Java's `LocalTime.toString` of nanoseconds since midnight.
pub fn format_time(nanos: i64) -> String {
    let secs = nanos / 1_000_000_000;
    let mut out = String::with_capacity(12);
    write_time(
        &mut out,
        (secs / 3600) as u32,
        (secs / 60 % 60) as u32,
        (secs % 60) as u32,
        (nanos % 1_000_000_000) as u32,
    );
    out
}

/// A timestamp string as Flink casts one: `yyyy-MM-dd[ HH:mm[:ss[.fffffffff]]]`, also with
/// `T` between date and time. `(millis, nanos within the milli)`.
pub fn parse_timestamp(text: &str) -> Option<(i64, u32)> {
    let text = text.trim();
    let (date, time) = match text.find([' ', 'T']) {
        Some(at) => (&text[..at], Some(text[at + 1..].trim())),
        None => (text, None),
    };
    let days = parse_date(date)? as i64;
    let nanos = match time {
        Some(t) if !t.is_empty() => parse_time(t)?,
        _ => 0,
    };
    let millis = days * MILLIS_PER_DAY + nanos / NANOS_PER_MILLI;
    Some((millis, (nanos % NANOS_PER_MILLI) as u32))
}

/// `yyyy-M-d` as days since the epoch.
pub fn parse_date(text: &str) -> Option<i32> {
    let mut it = text.trim().splitn(3, '-');
    let year: i64 = it.next()?.parse().ok()?;
    let month: u32 = it.next()?.parse().ok()?;
    let day: u32 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    i32::try_from(days_from_civil(year, month, day)).ok()
}

/// `H:mm[:ss[.fffffffff]]` as nanoseconds since midnight.
pub fn parse_time(text: &str) -> Option<i64> {
    let mut it = text.splitn(3, ':');
    let hour: i64 = it.next()?.trim().parse().ok()?;
    let minute: i64 = it.next()?.parse().ok()?;
    let (second, nanos) = match it.next() {
        None => (0, 0),
        Some(s) => match s.split_once('.') {
            None => (s.parse().ok()?, 0),
            Some((whole, frac)) => {
                if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                (whole.parse().ok()?, format!("{frac:0<9}").parse::<i64>().ok()?)
            }
        },
    };
    if !(0..24).contains(&hour) || !(0..60).contains(&minute) || !(0..60).contains(&second) {
        return None;
    }
    Some(((hour * 60 + minute) * 60 + second) * 1_000_000_000 + nanos)
}

pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// One piece of a Java date-time pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternPart {
    Literal(String),
    /// A pattern letter repeated `count` times.
    Field(char, usize),
}

/// Splits a Java `DateTimeFormatter` / `SimpleDateFormat` pattern (`yyyy-MM-dd HH:mm`,
/// `'T'` quoted text, `''` a quote); `Err` names a letter eddy does not know.
pub fn compile_pattern(pattern: &str) -> Result<Vec<PatternPart>, String> {
    let mut parts = Vec::new();
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut literal = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\'') {
                literal.push('\'');
                i += 2;
                continue;
            }
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                literal.push(chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() {
            if !"yYMLdDHhkKmsSEaeuZXxz".contains(c) {
                return Err(format!("the pattern letter '{c}' of '{pattern}' is not supported"));
            }
            let mut count = 1;
            while chars.get(i + count) == Some(&c) {
                count += 1;
            }
            if !literal.is_empty() {
                parts.push(PatternPart::Literal(std::mem::take(&mut literal)));
            }
            parts.push(PatternPart::Field(c, count));
            i += count;
            continue;
        }
        literal.push(c);
        i += 1;
    }
    if !literal.is_empty() {
        parts.push(PatternPart::Literal(literal));
    }
    Ok(parts)
}

/// Formats a timestamp with a compiled pattern (in UTC).
pub fn format_with(parts_of: &[PatternPart], millis: i64, nanos_of_milli: u32) -> String {
    let p = parts(millis, nanos_of_milli);
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let mut out = String::with_capacity(24);
    for part in parts_of {
        match part {
            PatternPart::Literal(s) => out.push_str(s),
            PatternPart::Field(c, n) => {
                let n = *n;
                let number = |out: &mut String, v: i64| {
                    write!(out, "{v:0n$}").expect("writing to a String");
                };
                match c {
                    'y' | 'Y' | 'u' if n == 2 => number(&mut out, p.year.rem_euclid(100)),
                    'y' | 'Y' | 'u' => number(&mut out, p.year),
                    'M' | 'L' if n >= 4 => out.push_str(MONTHS[p.month as usize - 1]),
                    'M' | 'L' if n == 3 => out.push_str(&MONTHS[p.month as usize - 1][..3]),
                    'M' | 'L' => number(&mut out, p.month as i64),
                    'd' => number(&mut out, p.day as i64),
                    'D' => number(&mut out, days - days_from_civil(p.year, 1, 1) + 1),
                    'H' => number(&mut out, p.hour as i64),
                    'k' => number(&mut out, if p.hour == 0 { 24 } else { p.hour as i64 }),
                    'K' => number(&mut out, (p.hour % 12) as i64),
                    'h' => number(&mut out, if p.hour.is_multiple_of(12) { 12 } else { (p.hour % 12) as i64 }),
                    'm' => number(&mut out, p.minute as i64),
                    's' => number(&mut out, p.second as i64),
                    'S' => {
                        let digits = format!("{:09}", p.nano);
                        if n <= 9 {
                            out.push_str(&digits[..n]);
                        } else {
                            out.push_str(&digits);
                        }
                    }
                    'E' | 'e' if n >= 4 => out.push_str(DAYS[iso_day_of_week(days) as usize - 1]),
                    'E' | 'e' => out.push_str(&DAYS[iso_day_of_week(days) as usize - 1][..3]),
                    'a' => out.push_str(if p.hour < 12 { "AM" } else { "PM" }),
                    'Z' => out.push_str("+0000"),
                    'X' => out.push('Z'),
                    'x' => out.push_str("+00"),
                    _ => out.push_str("UTC"),
                }
            }
        }
    }
    out
}

/// Parses a timestamp with a compiled pattern (numeric fields only); `None` if the text
/// does not match (Flink's `TO_TIMESTAMP` returns NULL then).
pub fn parse_with(parts_of: &[PatternPart], text: &str) -> Option<(i64, u32)> {
    let bytes = text.as_bytes();
    let mut at = 0usize;
    let (mut year, mut month, mut day, mut hour, mut minute, mut second, mut nano) =
        (1970i64, 1u32, 1u32, 0u32, 0u32, 0u32, 0u32);
    let mut pm = None;
    for (index, part) in parts_of.iter().enumerate() {
        match part {
            PatternPart::Literal(s) => {
                if !text[at..].starts_with(s.as_str()) {
                    return None;
                }
                at += s.len();
            }
            PatternPart::Field('a', _) => {
                let rest = &text[at..];
                pm = Some(if rest.starts_with("PM") {
                    true
                } else if rest.starts_with("AM") {
                    false
                } else {
                    return None;
                });
                at += 2;
            }
            PatternPart::Field(c, n) => {
                // A field followed by another field takes exactly its width; one followed
                // by a literal or the end takes all its digits.
                let fixed = matches!(parts_of.get(index + 1), Some(PatternPart::Field(..)));
                let start = at;
                while at < bytes.len() && bytes[at].is_ascii_digit() && (!fixed || at - start < *n) {
                    at += 1;
                }
                if at == start {
                    return None;
                }
                let digits = &text[start..at];
                let v: i64 = digits.parse().ok()?;
                match c {
                    'y' | 'Y' | 'u' => year = if *n == 2 { 2000 + v } else { v },
                    'M' | 'L' => month = v as u32,
                    'd' => day = v as u32,
                    'H' | 'k' => hour = v as u32 % 24,
                    'h' | 'K' => hour = v as u32 % 12,
                    'm' => minute = v as u32,
                    's' => second = v as u32,
                    'S' => nano = format!("{digits:0<9}").get(..9)?.parse().ok()?,
                    _ => return None,
                }
            }
        }
    }
    if at != text.len() || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if pm == Some(true) {
        hour += 12;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let millis = days_from_civil(year, month, day) * MILLIS_PER_DAY
        + ((hour as i64 * 60 + minute as i64) * 60 + second as i64) * 1000
        + (nano / 1_000_000) as i64;
    Some((millis, nano % 1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips() {
        for days in [-800_000i64, -1, 0, 1, 11_016, 20_454, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(iso_day_of_week(0), 4);
    }

    #[test]
    fn timestamps_print_as_local_date_time() {
        let (ms, ns) = parse_timestamp("2026-01-01 00:00:00.106").unwrap();
        assert_eq!(format_timestamp(ms, ns), "2026-01-01T00:00:00.106");
        let (ms, ns) = parse_timestamp("2026-01-01 00:01:00").unwrap();
        assert_eq!(format_timestamp(ms, ns), "2026-01-01T00:01");
        assert_eq!(format_timestamp(-1, 0), "1969-12-31T23:59:59.999");
        assert_eq!(parse_timestamp("2026-02-30 00:00:00"), None);
    }

    #[test]
    fn java_patterns_format_and_parse() {
        let (ms, _) = parse_timestamp("2015-07-15 09:05:03.250").unwrap();
        let p = compile_pattern("yyyy-MM-dd").unwrap();
        assert_eq!(format_with(&p, ms, 0), "2015-07-15");
        let p = compile_pattern("HH:mm").unwrap();
        assert_eq!(format_with(&p, ms, 0), "09:05");
        let p = compile_pattern("yyyy-MM-dd'T'HH:mm:ss.SSS EEE").unwrap();
        assert_eq!(format_with(&p, ms, 0), "2015-07-15T09:05:03.250 Wed");
        let p = compile_pattern("yyyy-MM-dd HH:mm:ss").unwrap();
        assert_eq!(parse_with(&p, "2015-07-15 09:05:03"), Some((ms - 250, 0)));
        assert_eq!(parse_with(&p, "2015-07-15 09:05"), None);
        let p = compile_pattern("yyyyMMddHHmmss").unwrap();
        assert_eq!(parse_with(&p, "20150715090503"), Some((ms - 250, 0)));
        assert!(compile_pattern("yyyy-QQ").is_err());
    }
}
