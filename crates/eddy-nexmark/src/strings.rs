//! String helpers and the static tables of the reference (`StringsGenerator`,
//! the URL/channel tables of `BidGenerator`), built once from fixed seeds.

use crate::rng::Rng;
use std::sync::OnceLock;

/// Smallest random string size (`MIN_STRING_LENGTH`).
const MIN_STRING_LENGTH: u64 = 3;
/// Length of the reusable padding string (`REUSABLE_EXTRA_STRING`, 1 MiB).
const REUSABLE_EXTRA_LEN: usize = 1024 * 1024;
/// Number of non-hot channels (`CHANNELS_NUMBER`).
pub(crate) const CHANNELS_NUMBER: u64 = 10_000;
/// Hot channels (`HOT_CHANNELS`).
pub(crate) const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];

const EXTRA_TABLE_SEED: u64 = 0x0E47_8A5E_ED00_0001;
const URL_TABLE_SEED: u64 = 0x0E47_8A5E_ED00_0002;

pub(crate) struct Tables {
    /// 1 MiB of padding text; `extra` fields are slices of it.
    pub(crate) extra: String,
    /// URLs of the four hot channels.
    pub(crate) hot_urls: [String; 4],
    /// `(channel name, url)` for channels `0 .. CHANNELS_NUMBER`.
    pub(crate) channels: Vec<(String, String)>,
}

static TABLES: OnceLock<Tables> = OnceLock::new();

#[inline]
pub(crate) fn tables() -> &'static Tables {
    TABLES.get_or_init(build_tables)
}

fn build_tables() -> Tables {
    // StringsGenerator.REUSABLE_EXTRA_STRING: while that field is still null
    // during class initialisation, nextExactString takes its slow path, which
    // appends `(char)('a' + rnd % 26)` for six successive base-26 digits of a
    // signed `nextInt()`. Negative ints give remainders in -25..=0, so half of
    // the text is drawn from 'H'..='a' (upper case, `[ \ ] ^ _` and '`').
    // Reproduced as is.
    let mut r = Rng::new(EXTRA_TABLE_SEED);
    let mut extra = String::with_capacity(REUSABLE_EXTRA_LEN);
    let mut rnd: i32 = 0;
    let mut left = 0;
    for _ in 0..REUSABLE_EXTRA_LEN {
        if left == 0 {
            rnd = r.next_i32();
            left = 6;
        }
        extra.push((b'a' as i32 + rnd % 26) as u8 as char);
        rnd /= 26;
        left -= 1;
    }

    // BidGenerator: four hot URLs first, then the channel cache, all from
    // one random stream, in that order.
    let mut r = Rng::new(URL_TABLE_SEED);
    let hot_urls = std::array::from_fn(|_| base_url(&mut r));
    let channels = (0..CHANNELS_NUMBER)
        .map(|i| {
            let mut url = base_url(&mut r);
            if r.below(10) > 0 {
                // Math.abs(Integer.reverse(i)); abs(MIN_VALUE) stays negative
                // in Java (channel 1 gets "-2147483648").
                let id = (i as i32).reverse_bits().wrapping_abs();
                url.push_str("&channel_id=");
                url.push_str(&id.to_string());
            }
            (format!("channel-{i}"), url)
        })
        .collect();
    Tables { extra, hot_urls, channels }
}

/// `BidGenerator.getBaseUrl`.
fn base_url(r: &mut Rng) -> String {
    let mut s = String::with_capacity(64);
    s.push_str("https://www.nexmark.com/");
    push_next_string(&mut s, r, 5, b'_');
    s.push('/');
    push_next_string(&mut s, r, 5, b'_');
    s.push('/');
    push_next_string(&mut s, r, 5, b'_');
    s.push('/');
    s.push_str("item.htm?query=1");
    s
}

/// `StringsGenerator.nextString(random, maxLength, special)` appended to
/// `out`: length `3 + nextInt(maxLength - 3)`, each character `special` with
/// probability 1/13 and otherwise a uniform lower-case letter, then
/// `String.trim()` (which only strips the `' '` special). One draw per
/// character: `x` uniform in `[0, 13 * 26)`, special iff `x < 26` (exactly
/// 1/13), else letter `x % 26` (exactly uniform) -- the same distribution as
/// the reference's two draws.
#[inline]
pub(crate) fn push_next_string(out: &mut String, r: &mut Rng, max_length: u64, special: u8) {
    debug_assert!(max_length > MIN_STRING_LENGTH && max_length <= 128);
    let len = (MIN_STRING_LENGTH + r.below(max_length - MIN_STRING_LENGTH)) as usize;
    let mut buf = [0u8; 128];
    for b in buf.iter_mut().take(len) {
        let x = r.below(13 * 26);
        *b = if x < 26 { special } else { b'a' + (x % 26) as u8 };
    }
    let s = &buf[..len];
    // Java's trim() removes chars <= ' ' at both ends.
    let start = s.iter().position(|&c| c > b' ').unwrap_or(len);
    let end = s.iter().rposition(|&c| c > b' ').map_or(start, |p| p + 1);
    out.push_str(std::str::from_utf8(&s[start..end]).expect("ascii"));
}

/// `StringsGenerator.nextString(random, maxLength)` as a new String.
#[inline]
pub(crate) fn next_string(r: &mut Rng, max_length: u64) -> String {
    let mut s = String::with_capacity(max_length as usize);
    push_next_string(&mut s, r, max_length, b' ');
    s
}

/// `StringsGenerator.nextExtra`: a string whose length brings
/// `current_size` to `desired_average_size` on average (uniform within
/// +-20% of the missing bytes), cut from the reusable padding text.
#[inline]
pub(crate) fn next_extra(r: &mut Rng, current_size: u64, desired_average_size: u64) -> String {
    if current_size > desired_average_size {
        return String::new();
    }
    let missing = desired_average_size - current_size;
    // (int) Math.round(missing * 0.2); Math.round = floor(x + 0.5).
    let delta = (missing as f64 * 0.2 + 0.5).floor() as u64;
    let min_size = missing - delta;
    let size = min_size + if delta == 0 { 0 } else { r.below(2 * delta) };
    next_exact_string(r, size as usize)
}

/// `StringsGenerator.nextExactString` (fast path): a slice of the reusable
/// padding text at a random offset.
#[inline]
pub(crate) fn next_exact_string(r: &mut Rng, length: usize) -> String {
    let t = &tables().extra;
    assert!(length < t.len() / 2, "extra too long");
    let offset = r.below((t.len() - length) as u64) as usize;
    t[offset..offset + length].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_look_like_reference() {
        let t = tables();
        assert_eq!(t.extra.len(), REUSABLE_EXTRA_LEN);
        assert!(t.extra.bytes().all(|b| (b'H'..=b'z').contains(&b)));
        assert_eq!(t.channels.len(), CHANNELS_NUMBER as usize);
        assert_eq!(t.channels[7].0, "channel-7");
        for u in t.hot_urls.iter().chain(t.channels.iter().map(|c| &c.1)) {
            assert!(u.starts_with("https://www.nexmark.com/"));
            assert!(u.contains("/item.htm?query=1"));
        }
        let with_id = t.channels.iter().filter(|c| c.1.contains("&channel_id=")).count();
        assert!((8_700..9_300).contains(&with_id), "{with_id}");
    }

    #[test]
    fn next_string_lengths_and_trim() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let s = next_string(&mut r, 20);
            assert!(s.len() <= 19);
            assert!(!s.starts_with(' ') && !s.ends_with(' '));
            assert!(s.bytes().all(|b| b == b' ' || b.is_ascii_lowercase()));
        }
    }
}
