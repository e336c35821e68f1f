//! Key selectors: from a record to its key's stable encoding, for routing (the hash of the
//! bytes picks the key group) and for state access (the bytes are the current key).
//!
//! A selector either returns the key by value (`key_by`) or a reference into the record
//! (`key_by_ref`); the second never clones the key, which for string keys saves an
//! allocation per record in the writer and another in the keyed operator.

use eddy_runtime::writer::KeySelector;
use eddy_state::keyed::with_backend;
use eddy_state::StateError;
use eddy_types::{decode_whole_key, stable_hash, Key, KeyHash};
use std::cell::OnceCell;
use std::marker::PhantomData;
use std::sync::Arc;

/// Writes the key of a record as bytes.
pub(crate) trait KeyAccess<T, K>: Send + Sync {
    fn encode(&self, record: &T, out: &mut Vec<u8>);
}

/// `key_by`: the selector returns the key.
pub(crate) struct OwnedKey<F, K>(pub(crate) F, pub(crate) PhantomData<fn() -> K>);

impl<T, K: Key, F: Fn(&T) -> K + Send + Sync> KeyAccess<T, K> for OwnedKey<F, K> {
    #[inline]
    fn encode(&self, record: &T, out: &mut Vec<u8>) {
        (self.0)(record).encode_key(out)
    }
}

/// `key_by_ref`: the selector returns a reference to the key inside the record.
pub(crate) struct BorrowedKey<F, K>(pub(crate) F, pub(crate) PhantomData<fn() -> K>);

impl<T, K: Key, F: for<'a> Fn(&'a T) -> &'a K + Send + Sync> KeyAccess<T, K> for BorrowedKey<F, K> {
    #[inline]
    fn encode(&self, record: &T, out: &mut Vec<u8>) {
        (self.0)(record).encode_key(out)
    }
}

/// The user's key selector, shared by the writers and operators of a keyed stream.
pub(crate) type KeyFn<T, K> = Arc<dyn KeyAccess<T, K>>;

/// Hashes a record's key with a reused buffer: used by the writer of a `key_by` edge.
pub(crate) struct HashingSelector<T, K> {
    key_fn: KeyFn<T, K>,
    scratch: Vec<u8>,
}

impl<T, K> HashingSelector<T, K> {
    pub(crate) fn new(key_fn: KeyFn<T, K>) -> Self {
        Self { key_fn, scratch: Vec::with_capacity(64) }
    }
}

impl<T, K: Key> KeySelector<T> for HashingSelector<T, K> {
    #[inline]
    fn key_hash(&mut self, record: &T) -> eddy_types::KeyHash {
        self.scratch.clear();
        self.key_fn.encode(record, &mut self.scratch);
        stable_hash(&self.scratch)
    }
}

/// Whether two encoded keys are equal, eight bytes at a time and inline: keys are short,
/// and a call to `memcmp` for each record costs more than the comparison.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a_words, mut b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    let words_equal = a_words.by_ref().zip(b_words.by_ref()).all(|(x, y)| {
        u64::from_ne_bytes(x.try_into().expect("8 bytes")) == u64::from_ne_bytes(y.try_into().expect("8 bytes"))
    });
    words_equal && a_words.remainder().iter().zip(b_words.remainder()).all(|(x, y)| x == y)
}

/// Makes a record's key the current key of this subtask's keyed backend.
pub(crate) struct KeyScope<T, K> {
    key_fn: KeyFn<T, K>,
    scratch: Vec<u8>,
    /// The keys of the last two records [`KeyScope::prefetch`] was given, with their
    /// hashes (each always the hash of its bytes): `pending` is the record processed
    /// now, since the driver hands over the next record before collecting the current
    /// one; `ahead` is the one after it. A key comes with its hash, not hashed twice.
    pending: Vec<u8>,
    pending_hash: KeyHash,
    ahead: Vec<u8>,
    ahead_hash: KeyHash,
    /// Records to let pass before prefetching again, after the backend said it does not
    /// pay (the state fits in the cache).
    prefetch_pause: u32,
}

/// How many records go by without prefetching after the backend said it does not pay.
const PREFETCH_PAUSE: u32 = 4096;

impl<T, K> Clone for KeyScope<T, K> {
    fn clone(&self) -> Self {
        Self::new(self.key_fn.clone())
    }
}

impl<T, K> KeyScope<T, K> {
    pub(crate) fn new(key_fn: KeyFn<T, K>) -> Self {
        Self {
            key_fn,
            scratch: Vec::with_capacity(64),
            pending: Vec::with_capacity(64),
            pending_hash: stable_hash(&[]),
            ahead: Vec::with_capacity(64),
            ahead_hash: stable_hash(&[]),
            prefetch_pause: 0,
        }
    }
}

impl<T, K: Key> KeyScope<T, K> {
    /// Sets the current key from `record`.
    #[inline]
    pub(crate) fn enter(&mut self, record: &T) -> Result<(), StateError> {
        self.scratch.clear();
        self.key_fn.encode(record, &mut self.scratch);
        let hash =
            if same_bytes(&self.scratch, &self.pending) { self.pending_hash } else { stable_hash(&self.scratch) };
        let bytes = &self.scratch;
        with_backend("<current key>", |backend| backend.set_current_key(bytes, hash).map(|_| ()))
    }

    /// Encodes `record`'s key and hashes it, without making it the current key (see
    /// [`KeyScope::enter_encoded`]): for state kept outside the keyed backend.
    #[inline]
    pub(crate) fn encode(&mut self, record: &T) -> KeyHash {
        self.scratch.clear();
        self.key_fn.encode(record, &mut self.scratch);
        stable_hash(&self.scratch)
    }

    /// The key [`KeyScope::encode`] encoded last, with its `hash`, made the current key.
    pub(crate) fn enter_encoded(&self, hash: KeyHash) -> Result<(), StateError> {
        let bytes = &self.scratch;
        with_backend("<current key>", |backend| backend.set_current_key(bytes, hash).map(|_| ()))
    }

    /// The encoded key, after [`KeyScope::encode`] or [`KeyScope::enter`].
    #[inline]
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.scratch
    }

    /// `next` is the record after the one processed now: its key's state starts coming
    /// into the cache while this record is processed (see [`eddy_runtime::Output::prepare`]).
    #[inline]
    pub(crate) fn prefetch(&mut self, next: &T) {
        if self.prefetch_pause > 0 {
            self.prefetch_pause -= 1;
            return;
        }
        std::mem::swap(&mut self.pending, &mut self.ahead);
        self.pending_hash = self.ahead_hash;
        self.ahead.clear();
        self.key_fn.encode(next, &mut self.ahead);
        self.ahead_hash = stable_hash(&self.ahead);
        let hash = self.ahead_hash;
        // A hint: without a backend (or inside another access) there is nothing to warm.
        let pays = with_backend("<next key>", |backend| Ok(backend.prefetch_key(hash)));
        if !pays.unwrap_or(false) {
            self.prefetch_pause = PREFETCH_PAUSE;
        }
    }

    /// Takes `encoded` as the current key's bytes (the backend's current key is set
    /// already: a timer's).
    pub(crate) fn adopt(&mut self, encoded: &[u8]) {
        self.scratch.clear();
        self.scratch.extend_from_slice(encoded);
    }

    /// The encoded current key, after [`KeyScope::enter`].
    pub(crate) fn current(&self) -> CurrentKey<'_, K> {
        CurrentKey { bytes: &self.scratch, key: OnceCell::new() }
    }
}

/// The current key as a function sees it: decoded from its bytes only when asked for.
pub(crate) struct CurrentKey<'a, K> {
    bytes: &'a [u8],
    key: OnceCell<K>,
}

impl<K: Key> CurrentKey<'_, K> {
    pub(crate) fn get(&self) -> &K {
        self.key.get_or_init(|| decode_whole_key(self.bytes).expect("the current key decodes: it was just encoded"))
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_compares_every_byte_of_keys_of_any_length() {
        for len in 0..40usize {
            let a: Vec<u8> = (0..len as u8).collect();
            assert!(same_bytes(&a, &a.clone()), "length {len}");
            for i in 0..len {
                let mut b = a.clone();
                b[i] ^= 1;
                assert!(!same_bytes(&a, &b), "length {len}, byte {i}");
            }
            assert!(!same_bytes(&a, &a[..len.saturating_sub(1)]) || len == 0);
        }
    }
}
