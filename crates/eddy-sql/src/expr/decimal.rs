//! DECIMAL arithmetic on `i128` unscaled values (38 digits fit), rounding half up as
//! Flink's `DecimalData` does, and Java's `BigDecimal.toString` for printing.

use std::cmp::Ordering;

const POW10: [i128; 39] = {
    let mut table = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

pub fn pow10(n: u8) -> i128 {
    POW10[n as usize]
}

/// `unscaled` (at `from` digits of scale) at `to` digits of scale, rounded half up;
/// `None` on overflow.
pub fn rescale(unscaled: i128, from: u8, to: u8) -> Option<i128> {
    match to.cmp(&from) {
        Ordering::Equal => Some(unscaled),
        Ordering::Greater => unscaled.checked_mul(pow10(to - from)),
        Ordering::Less => Some(divide_half_up(unscaled, pow10(from - to))),
    }
}

/// `a / b` rounded half up (away from zero at .5).
fn divide_half_up(a: i128, b: i128) -> i128 {
    let (q, r) = (a / b, a % b);
    if r.unsigned_abs() * 2 >= b.unsigned_abs() {
        if (a < 0) != (b < 0) {
            q - 1
        } else {
            q + 1
        }
    } else {
        q
    }
}

/// Whether `unscaled` fits `precision` digits.
pub fn fits(unscaled: i128, precision: u8) -> bool {
    precision >= 39 || unscaled.unsigned_abs() < pow10(precision) as u128
}

pub fn compare(a: i128, sa: u8, b: i128, sb: u8) -> Ordering {
    let scale = sa.max(sb);
    match (rescale(a, sa, scale), rescale(b, sb, scale)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => to_f64(a, sa).total_cmp(&to_f64(b, sb)),
    }
}

pub fn add(a: i128, sa: u8, b: i128, sb: u8, scale: u8) -> Option<i128> {
    rescale(a, sa, scale)?.checked_add(rescale(b, sb, scale)?)
}

pub fn subtract(a: i128, sa: u8, b: i128, sb: u8, scale: u8) -> Option<i128> {
    rescale(a, sa, scale)?.checked_sub(rescale(b, sb, scale)?)
}

/// The product at `scale` (the exact product has `sa + sb` digits of scale).
pub fn multiply(a: i128, sa: u8, b: i128, sb: u8, scale: u8) -> Option<i128> {
    rescale(a.checked_mul(b)?, sa + sb, scale)
}

/// The quotient at `scale`, rounded half up; `None` when dividing by zero or overflowing.
pub fn divide(a: i128, sa: u8, b: i128, sb: u8, scale: u8) -> Option<i128> {
    if b == 0 {
        return None;
    }
    // a/10^sa ÷ b/10^sb = (a × 10^(scale + sb - sa)) / b at `scale`.
    let shift = scale as i32 + sb as i32 - sa as i32;
    if shift >= 0 {
        Some(divide_half_up(a.checked_mul(*POW10.get(shift as usize)?)?, b))
    } else {
        Some(divide_half_up(a, b.checked_mul(*POW10.get((-shift) as usize)?)?))
    }
}

/// The remainder with the sign of the dividend, at `scale`.
pub fn modulo(a: i128, sa: u8, b: i128, sb: u8, scale: u8) -> Option<i128> {
    let (a, b) = (rescale(a, sa, scale)?, rescale(b, sb, scale)?);
    (b != 0).then(|| a % b)
}

pub fn to_f64(unscaled: i128, scale: u8) -> f64 {
    // Through the decimal text, so that 0.1 becomes the double nearest 0.1.
    plain_string(unscaled, scale).parse().unwrap_or(f64::NAN)
}

/// A double as a decimal at `scale`, rounded half up; `None` if it does not fit.
pub fn from_f64(x: f64, scale: u8) -> Option<i128> {
    if !x.is_finite() {
        return None;
    }
    let text = format!("{x:.*}", scale as usize + 1);
    let (unscaled, s) = parse(&text)?;
    rescale(unscaled, s, scale)
}

/// A decimal literal or string (`-12.340`, `1e3`) as `(unscaled, scale)`.
pub fn parse(text: &str) -> Option<(i128, u8)> {
    let text = text.trim();
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (negative, digits) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.bytes().chain(frac_part.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut unscaled: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        unscaled = unscaled.checked_mul(10)?.checked_add((b - b'0') as i128)?;
    }
    let mut scale = frac_part.len() as i32 - exponent;
    if scale < 0 {
        unscaled = unscaled.checked_mul(*POW10.get((-scale) as usize)?)?;
        scale = 0;
    }
    let scale = u8::try_from(scale).ok().filter(|s| *s <= 38)?;
    Some((if negative { -unscaled } else { unscaled }, scale))
}

/// The digits with a decimal point, never an exponent.
pub fn plain_string(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int_part, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int_part}.{frac}")
}

/// Java's `BigDecimal.toString`: plain unless the adjusted exponent is below -6.
pub fn to_java_string(unscaled: i128, scale: u8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let adjusted = digits.len() as i64 - 1 - scale as i64;
    if adjusted >= -6 {
        return plain_string(unscaled, scale);
    }
    let sign = if unscaled < 0 { "-" } else { "" };
    let mantissa = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
    format!("{sign}{mantissa}E{adjusted}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_rounds_half_up() {
        // 0.908 × 1234 = 1120.472
        assert_eq!(multiply(908, 3, 1234, 0, 3), Some(1_120_472));
        // 10.0 / 4 at scale 12
        assert_eq!(divide(100, 1, 4, 0, 12), Some(2_500_000_000_000));
        // 1.00 / 3 at scale 13 = 0.3333333333333
        assert_eq!(divide(100, 2, 3, 0, 13), Some(3_333_333_333_333));
        assert_eq!(rescale(125, 2, 1), Some(13));
        assert_eq!(rescale(-125, 2, 1), Some(-13));
        assert_eq!(divide(2, 0, 3, 0, 0), Some(1));
    }

    #[test]
    fn prints_as_big_decimal() {
        assert_eq!(to_java_string(1_120_472, 3), "1120.472");
        assert_eq!(to_java_string(0, 3), "0.000");
        assert_eq!(to_java_string(-5, 2), "-0.05");
        assert_eq!(to_java_string(1, 10), "1E-10");
        assert_eq!(parse("0.908"), Some((908, 3)));
        assert_eq!(parse("1e3"), Some((1000, 0)));
        assert_eq!(parse("-.5"), Some((-5, 1)));
    }
}
