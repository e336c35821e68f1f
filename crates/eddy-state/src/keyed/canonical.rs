//! How values are laid out as bytes: a stored value (with its expiry for a state with a
//! time to live), one key group's entries in the canonical, backend-independent form
//! (sorted by key, postcard; written by the heap and read out of raw stores), and map
//! entries' keys in a raw store.

use super::raw::{read_varint, write_varint, RawLayout, RawTable};
use crate::error::{StateError, StateErrorKind};
use crate::StateValue;

/// Appends a stored value to `out`: for a state with a time to live, its expiry first (8
/// bytes, big-endian, so a compaction filter can read it without the type).
pub(crate) fn append_stored<S: StateValue>(
    name: &str,
    value: &S,
    expires_ms: Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), StateError> {
    if let Some(expires_ms) = expires_ms {
        out.extend_from_slice(&expires_ms.to_be_bytes());
    }
    let bytes = postcard::to_extend(value, std::mem::take(out)).map_err(|e| {
        StateError::from(StateErrorKind::Serialize { state: name.to_string(), message: eddy_types::chain(&e) })
    })?;
    *out = bytes;
    Ok(())
}

/// Splits a stored value into its expiry (if the state has a time to live) and value bytes.
pub(crate) fn split_stored(bytes: &[u8], ttl: bool) -> (u64, &[u8]) {
    if ttl && bytes.len() >= 8 {
        (u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes")), &bytes[8..])
    } else {
        (u64::MAX, bytes)
    }
}

/// One key group's entries (key, expiry, value) in the canonical form: sorted by key, like
/// a RocksDB scan, so that snapshots are canonical byte for byte; `None` when empty.
///
/// The bytes are postcard's of `Vec<(key, value)>` (`Vec<(key, (expiry, value))>` with
/// `ttl`), framed here without collecting the entries twice. The sort is most of a full
/// heap snapshot's work, so it sorts plain integers (`order`, kept by the caller from one
/// key group to the next): twelve bytes of each key and the entry's index.
pub(crate) fn serialize_group<'a, S: StateValue>(
    name: &str,
    entries: impl Iterator<Item = (&'a [u8], u64, &'a S)>,
    ttl: bool,
    order: &mut Vec<u128>,
) -> Result<Option<Vec<u8>>, StateError> {
    let entries: Vec<(&[u8], u64, &S)> = entries.collect();
    if entries.is_empty() {
        return Ok(None);
    }
    if u32::try_from(entries.len()).is_err() {
        return Err(StateError::from(StateErrorKind::Serialize {
            state: name.to_string(),
            message: format!("{} entries in one key group, more than a snapshot can order", entries.len()),
        }));
    }
    // The bytes every key starts with (a length's zeros, "/api/"…) order nothing: the
    // integers hold the twelve bytes after them.
    let first = entries[0].0;
    let shared = entries
        .iter()
        .fold(first.len(), |shared, entry| first[..shared].iter().zip(entry.0).take_while(|(a, b)| a == b).count());
    order.clear();
    order.extend(entries.iter().enumerate().map(|(at, entry)| order_prefix(&entry.0[shared..]) | at as u128));
    order.sort_unstable();
    // Keys that share their first twelve bytes are in index order so far: order them by
    // the whole key.
    let index = |slot: &u128| *slot as u32 as usize;
    for run in order.chunk_by_mut(|a, b| a >> 32 == b >> 32).filter(|run| run.len() > 1) {
        run.sort_unstable_by(|a, b| entries[index(a)].0.cmp(entries[index(b)].0));
    }
    let key_bytes: usize = entries.iter().map(|e| e.0.len() + 1).sum();
    let mut out = Vec::with_capacity(10 + key_bytes);
    write_varint(entries.len() as u64, &mut out);
    for (nth, slot) in order.iter().enumerate() {
        let (key, expiry, value) = entries[index(slot)];
        write_varint(key.len() as u64, &mut out);
        out.extend_from_slice(key);
        let before = out.len();
        append_stored(name, value, ttl.then_some(expiry), &mut out)?;
        if nth == 0 {
            // The first value's size stands for the rest: one allocation, not a doubling
            // series of copies. Only a guess, so bounded: one huge first value must not
            // ask for its size times the group.
            let guess = (out.len() - before).saturating_mul(entries.len() - 1);
            out.reserve(guess.min(RESERVE_GUESS_MAX));
        }
    }
    Ok(Some(out))
}

/// The most [`serialize_group`] reserves on a guess of the values' size (64 MiB).
const RESERVE_GUESS_MAX: usize = 64 << 20;

/// A key's first twelve bytes (after those all keys share), zero-padded, as the top 96
/// bits of an integer (the low 32 are left for the entry's index). Ordering by them and
/// then by the whole key is the bytes' lexicographic order: a shorter key's padding sorts
/// before any byte, or ties and the whole keys decide.
fn order_prefix(key: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    let n = key.len().min(12);
    head[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(head)
}

/// (key, stored value) byte spans.
type EntrySpans<'a> = Vec<(&'a [u8], &'a [u8])>;

/// The (key, stored value) byte spans of one key group's canonical entries (postcard of
/// `Vec<(key, value)>`, a value with its expiry first when `ttl`): each value is decoded
/// only to find where it ends.
pub(crate) fn stored_spans<'a, S: StateValue>(
    name: &str,
    bytes: &'a [u8],
    ttl: bool,
) -> Result<EntrySpans<'a>, StateError> {
    let corrupt = |message: String| StateError::from(StateErrorKind::Deserialize { state: name.to_string(), message });
    let truncated = || corrupt("truncated entries".into());
    let (count, mut rest) = read_varint(bytes).ok_or_else(truncated)?;
    // Each entry takes at least a byte: the count cannot reserve more than the input holds.
    let mut spans = Vec::with_capacity(count.min(bytes.len() as u64) as usize);
    for _ in 0..count {
        let (key_len, after_len) = read_varint(rest).ok_or_else(truncated)?;
        let key_len = usize::try_from(key_len).map_err(|_| truncated())?;
        if key_len.checked_add(if ttl { 8 } else { 0 }).is_none_or(|needed| after_len.len() < needed) {
            return Err(truncated());
        }
        let (key, stored) = after_len.split_at(key_len);
        let value = if ttl { &stored[8..] } else { stored };
        let (_, after): (S, &[u8]) = postcard::take_from_bytes(value).map_err(|e| corrupt(eddy_types::chain(&e)))?;
        spans.push((key, &stored[..stored.len() - after.len()]));
        rest = after;
    }
    Ok(spans)
}

/// One key group of a raw table in the canonical form, the same bytes the heap writes:
/// postcard of `Vec<(key, value)>` (for map entries, `Vec<(key, map)>`), built from the
/// stored bytes (postcard values are self-delimiting, so nothing is decoded). Values
/// expired at `now_ms` are left out; `None` when nothing remains.
pub fn canonical_key_group(
    raw: &dyn RawTable,
    key_group: u32,
    layout: RawLayout,
    now_ms: u64,
) -> Result<Option<Vec<u8>>, StateError> {
    let mut count = 0u64;
    let mut body = Vec::new();
    match layout {
        RawLayout::Values | RawLayout::ValuesWithTtl => {
            let ttl = layout.has_ttl();
            raw.scan(key_group, &mut |key, value| {
                if split_stored(value, ttl).0 <= now_ms {
                    return;
                }
                count += 1;
                write_varint(key.len() as u64, &mut body);
                body.extend_from_slice(key);
                body.extend_from_slice(value);
            })?;
        }
        RawLayout::MapEntries => {
            // Entries of one key are adjacent (the key, length first, is their prefix):
            // each run becomes (key, map).
            let mut current: Option<Vec<u8>> = None;
            let (mut entries, mut map_body) = (0u64, Vec::new());
            let mut finish = |key: &[u8], entries: u64, map_body: &[u8], body: &mut Vec<u8>| {
                count += 1;
                write_varint(key.len() as u64, body);
                body.extend_from_slice(key);
                write_varint(entries, body);
                body.extend_from_slice(map_body);
            };
            let mut malformed = false;
            raw.scan(key_group, &mut |composite, value| {
                let Some((key, user_key)) = split_map_key(composite) else {
                    malformed = true;
                    return;
                };
                if current.as_deref() != Some(key) {
                    if let Some(previous) = current.take() {
                        finish(&previous, entries, &map_body, &mut body);
                    }
                    current = Some(key.to_vec());
                    (entries, map_body) = (0, Vec::new());
                }
                entries += 1;
                map_body.extend_from_slice(user_key);
                map_body.extend_from_slice(value);
            })?;
            if let Some(previous) = current {
                finish(&previous, entries, &map_body, &mut body);
            }
            if malformed {
                return Err(StateError::from(StateErrorKind::Backend(format!(
                    "a map entry key in key group {key_group} is malformed"
                ))));
            }
        }
    }
    if count == 0 {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(body.len() + 10);
    write_varint(count, &mut out);
    out.extend_from_slice(&body);
    Ok(Some(out))
}

/// A map entry's stored key: `varint(key length) + key + user key`.
pub(crate) fn map_entry_key(key: &[u8], user_key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    write_varint(key.len() as u64, out);
    out.extend_from_slice(key);
    out.extend_from_slice(user_key);
}

/// The prefix all entries of one key's map share.
pub(crate) fn map_key_prefix(key: &[u8], out: &mut Vec<u8>) {
    map_entry_key(key, &[], out);
}

/// Splits a map entry's stored key into the key and the user key.
pub(crate) fn split_map_key(composite: &[u8]) -> Option<(&[u8], &[u8])> {
    let (length, rest) = read_varint(composite)?;
    let length = usize::try_from(length).ok()?;
    (rest.len() >= length).then(|| rest.split_at(length))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

        /// The framing by hand is postcard's own, in the keys' byte order (keys sharing
        /// their first twelve bytes, or a prefix all of them have, shorter ones and
        /// trailing zeros included).
        #[test]
        fn a_serialized_group_is_postcard_of_its_entries_sorted_by_key(
            keys in proptest::collection::hash_set(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(7u8), any::<u8>()], 0..20), 0..40),
            prefix in prop_oneof![Just(Vec::new()), Just(b"\0\0\0\x0c/api/".to_vec())],
            ttl in any::<bool>(),
        ) {
            let entries: Vec<(Vec<u8>, u64, (u64, String))> = keys
                .into_iter()
                .enumerate()
                .map(|(i, key)| {
                    ([prefix.as_slice(), &key].concat(), 1_000 + i as u64, (i as u64 * 977, "v".repeat(i % 5)))
                })
                .collect();
            let entries_of = entries.iter().map(|(k, e, v)| (k.as_slice(), *e, v));
            let bytes = serialize_group("count", entries_of, ttl, &mut Vec::new())
                .unwrap();
            let mut sorted = entries.clone();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let expected = match (sorted.is_empty(), ttl) {
                (true, _) => None,
                (false, false) => Some(postcard::to_allocvec(
                    &sorted.iter().map(|(k, _, v)| (k.as_slice(), v)).collect::<Vec<_>>()).unwrap()),
                (false, true) => Some(postcard::to_allocvec(
                    &sorted.iter().map(|(k, e, v)| (k.as_slice(), (e.to_be_bytes(), v))).collect::<Vec<_>>()).unwrap()),
            };
            prop_assert_eq!(bytes, expected);
        }

        /// A restored key group's bytes, random: entries or an error naming the state.
        #[test]
        fn random_key_group_bytes_are_refused_without_a_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..128),
            ttl in any::<bool>(),
        ) {
            if let Err(e) = stored_spans::<(u64, String)>("count", &bytes, ttl) {
                prop_assert!(eddy_types::chain(&e).contains("count"));
            }
            let _ = crate::keyed::concat_encoded_lists([bytes.as_slice(), bytes.as_slice()]);
        }
    }
}
