//! How the command line shows things to people: tables whose columns align whatever their
//! contents, wall-clock times as dates (UTC), and durations in the largest units that fit.

/// A column's alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// `rows` under `header`, each column as wide as its widest cell, two spaces apart; the
/// last column is not padded. `align` gives each column's alignment (left if missing).
pub fn table(header: &[&str], align: &[Align], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let width = |c: usize| {
        rows.iter()
            .filter_map(|row| row.get(c))
            .map(|cell| cell.chars().count())
            .max()
            .unwrap_or(0)
            .max(header[c].chars().count())
    };
    let widths: Vec<usize> = (0..columns).map(width).collect();
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (c, width) in widths.iter().enumerate() {
            let cell = row.get(c).map_or("", String::as_str);
            let pad = width.saturating_sub(cell.chars().count());
            let last = c + 1 == columns;
            if c > 0 {
                line.push_str("  ");
            }
            match align.get(c).copied().unwrap_or(Align::Left) {
                Align::Right => {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
                Align::Left => {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Milliseconds since the Unix epoch as a UTC date and time to the millisecond:
/// `2026-12-06 18:57:52.123 UTC`.
pub fn utc_time(epoch_ms: u64) -> String {
    let (days, ms_of_day) = (epoch_ms / 86_400_000, epoch_ms % 86_400_000);
    let (year, month, day) = civil_from_days(days as i64);
    let (h, m, s, ms) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{ms:03} UTC")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A duration in the two largest units that fit: `850 ms`, `12.3 s`, `4 m 05 s`,
/// `2 h 07 m`, `3 d 04 h`.
pub fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} m {:02} s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{} h {:02} m", s / 3600, s / 60 % 60),
        _ => format!("{} d {:02} h", s / 86_400, s / 3600 % 24),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00.000 UTC");
        // 2000-02-29 (a leap day), 12:34:56.789.
        assert_eq!(utc_time(951_827_696_789), "2000-02-29 12:34:56.789 UTC");
        // The "triggered at 1796522993936 ms since the epoch".
        assert_eq!(utc_time(1_796_522_993_936), "2026-12-06 02:09:53.936 UTC");
        assert_eq!(utc_time(4_107_542_400_000), "2100-03-01 00:00:00.000 UTC");
    }

    #[test]
    fn durations_take_the_two_largest_units() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_340), "12.3 s");
        assert_eq!(duration(245_000), "4 m 05 s");
        assert_eq!(duration(7_620_000), "2 h 07 m");
        assert_eq!(duration(273_600_000), "3 d 04 h");
    }

    #[test]
    fn columns_align_whatever_their_contents() {
        let rows = vec![
            vec!["1".to_string(), "a job with a rather long name".to_string(), "RUNNING".to_string()],
            vec!["12".to_string(), "short".to_string(), "FINISHED".to_string()],
        ];
        let text = table(&["ID", "NAME", "STATE"], &[Align::Right, Align::Left, Align::Left], &rows);
        assert_eq!(
            text,
            "ID  NAME                           STATE\n 1  a job with a rather long name  RUNNING\n12  short                          FINISHED\n"
        );
    }
}
