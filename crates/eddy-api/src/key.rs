//! Key selectors: from a record to its key's stable encoding, for routing (the hash of the
//! bytes picks the key group) and for state access (the bytes are the current key).
//!
//! A selector either returns the key by value (`key_by`) or a reference into the record
//! (`key_by_ref`); the second never clones the key, which for string keys saves an
//! allocation per record in the writer and another in the keyed operator.

use eddy_runtime::writer::KeySelector;
use eddy_state::keyed::with_backend;
use eddy_state::{StateError, StateErrorKind};
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

/// Makes a record's key the current key of this subtask's keyed backend.
///
/// A batch is taken in passes ([`KeyScope::each_keyed`]), [`KEYS_PER_PASS`] records at a
/// time: first their keys are encoded and hashed, and the state of each is prefetched, so
/// that the memory reads overlap one another; then each record's key is made current in
/// turn (with the hash already computed) and its function runs.
pub(crate) struct KeyScope<T, K> {
    key_fn: KeyFn<T, K>,
    scratch: Vec<u8>,
    /// The encoded keys of the batch taken now, one after another; `ends[i]` is where
    /// record `i`'s ends, `hashes[i]` its hash.
    keys: Vec<u8>,
    ends: Vec<usize>,
    hashes: Vec<KeyHash>,
    /// Records to let pass before prefetching again, after the backend said it does not
    /// pay (the state fits in the cache).
    prefetch_pause: usize,
}

/// The records whose keys are encoded, hashed and prefetched in one pass: enough for the
/// memory reads to overlap, few enough that the CPU does not drop prefetches for want of
/// room for misses in flight and that what is fetched is still cached when its record
/// comes. W4 (2 M keys on the heap, every entry a miss to memory): 3.6 M events/s with
/// passes of 64, 4.1-4.2 M with 8 or 16; W1 and W2 did not tell 16 from 64.
const KEYS_PER_PASS: usize = 16;

/// How many records go by without prefetching after the backend said it does not pay.
const PREFETCH_PAUSE: usize = 4096;

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
            keys: Vec::new(),
            ends: Vec::new(),
            hashes: Vec::new(),
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
        let (bytes, hash) = (&self.scratch, stable_hash(&self.scratch));
        with_backend("<current key>", |backend| backend.set_current_key(bytes, hash).map(|_| ()))
    }

    /// Runs `each` on the records of a batch in order, each with its key current, until
    /// the batch is empty or `stop(records run so far)` says to stop (the rest stays in
    /// `records`), or `each` fails. The keys are encoded, hashed and prefetched a pass of
    /// records ahead of their functions. `hashes` are the hashes of all the keys in
    /// `records`, in order, if the writer of the edge sent them (they are not computed
    /// again), else empty (as are hashes that do not cover the whole batch).
    #[inline]
    pub(crate) fn each_keyed<E: From<StateError>>(
        &mut self,
        records: &mut std::vec::Drain<'_, T>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
        mut each: impl FnMut(&Self, T) -> Result<(), E>,
    ) -> Result<(), E> {
        // The writer's hashes are those of all records, or of none (then computed here).
        let mut hashes = Some(hashes).filter(|h| h.len() == records.len()).unwrap_or(&[]);
        let mut done = 0;
        while !records.as_slice().is_empty() {
            let keys = records.len().min(KEYS_PER_PASS);
            let known;
            (known, hashes) = hashes.split_at(hashes.len().min(keys));
            self.encode_batch(&records.as_slice()[..keys], known)?;
            self.prefetch_batch();
            for index in 0..keys {
                let Some(record) = records.next() else { break };
                self.enter_encoded_at(index)?;
                each(self, record)?;
                done += 1;
                if stop(done) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The first pass over `records`: every record's key encoded, and hashed unless the
    /// writer's hashes are `known` (those of all of them, or empty).
    fn encode_batch(&mut self, records: &[T], known: &[KeyHash]) -> Result<(), StateError> {
        self.keys.clear();
        self.ends.clear();
        self.hashes.clear();
        let hashed = !known.is_empty();
        debug_assert!(!hashed || known.len() == records.len(), "a hash for each record of the pass");
        for record in records {
            let start = self.keys.len();
            self.key_fn.encode(record, &mut self.keys);
            if !hashed {
                self.hashes.push(stable_hash(&self.keys[start..]));
            }
            self.ends.push(self.keys.len());
        }
        if hashed {
            self.hashes.extend_from_slice(known);
            // The writer hashed what the same key function returned for these records. One
            // that returns another key for the same record would put state under a hash
            // that is not its key's, where it is lost: the first record of every pass is
            // checked (every record in debug builds), so that such a function fails the
            // job instead (before the hashes were carried, it did so only when the key
            // fell in another subtask's key groups).
            let checked = if cfg!(debug_assertions) { records.len() } else { records.len().min(1) };
            for (i, &routed) in known.iter().enumerate().take(checked) {
                let read = stable_hash(key_at(&self.keys, &self.ends, i));
                if read != routed {
                    return Err(StateError::from(StateErrorKind::KeyChanged { routed: routed.0, read: read.0 }));
                }
            }
        }
        Ok(())
    }

    /// The second pass: the state of every key encoded starts coming into the cache,
    /// all in one access to the backend, so that the reads overlap rather than each
    /// waiting for the one before. A hint: without a backend there is nothing to warm.
    fn prefetch_batch(&mut self) {
        let Some((&first, rest)) = self.hashes.split_first() else { return };
        if self.prefetch_pause > 0 {
            self.prefetch_pause = self.prefetch_pause.saturating_sub(self.hashes.len());
            return;
        }
        let pays = with_backend("<next keys>", |backend| {
            // When the state fits in the cache the first says so: the rest would not pay.
            let pays = backend.prefetch_key(first);
            if pays {
                rest.iter().for_each(|&hash| {
                    backend.prefetch_key(hash);
                });
            }
            Ok(pays)
        });
        if !pays.unwrap_or(false) {
            self.prefetch_pause = PREFETCH_PAUSE;
        }
    }

    /// Makes the key of the batch's record `index` current (after [`KeyScope::encode_batch`]).
    #[inline]
    fn enter_encoded_at(&mut self, index: usize) -> Result<(), StateError> {
        self.scratch.clear();
        self.scratch.extend_from_slice(key_at(&self.keys, &self.ends, index));
        self.enter_encoded(self.hashes[index])
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

/// The encoded key of record `index` of a pass: `keys` holds them one after another,
/// `ends[i]` is where record `i`'s ends.
#[inline]
fn key_at<'a>(keys: &'a [u8], ends: &[usize], index: usize) -> &'a [u8] {
    let start = index.checked_sub(1).map_or(0, |before| ends[before]);
    &keys[start..ends[index]]
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
    use super::{KeyFn, KeyScope, OwnedKey, KEYS_PER_PASS};
    use eddy_state::keyed::{install_backend, take_backend, TableKeyedStateBackend};
    use eddy_state::{StateError, ValueState, ValueStateDescriptor};
    use eddy_types::{KeyGroupRange, MaxParallelism};
    use std::marker::PhantomData;
    use std::sync::Arc;

    /// Installs a heap backend of all key groups on this thread (the tests take it back).
    fn install_heap_backend() {
        let max = MaxParallelism::default();
        install_backend(Box::new(TableKeyedStateBackend::new(KeyGroupRange::all(max), max))).unwrap();
    }

    /// A batch taken in passes, stopped in the middle of a pass and taken up again, runs
    /// every record once, in order, with its own key current: each key's count is exact.
    #[test]
    fn a_batch_stopped_within_a_pass_goes_on_with_each_record_under_its_own_key() {
        install_heap_backend();
        let count = ValueState::<u64>::declare(&ValueStateDescriptor::new("count")).unwrap();
        let key_fn: KeyFn<(u64, u64), u64> = Arc::new(OwnedKey(|r: &(u64, u64)| r.0, PhantomData));
        let mut scope = KeyScope::new(key_fn);
        // Record i has key i % 7 and is the (i / 7 + 1)-th of its key.
        let mut batch: Vec<(u64, u64)> = (0..1000u64).map(|i| (i % 7, i / 7 + 1)).collect();
        let stop_at = KEYS_PER_PASS + 6;
        let mut seen = Vec::new();
        let mut records = batch.drain(..);
        while records.len() > 0 {
            let mut stop = |done: usize| done == stop_at;
            scope
                .each_keyed(&mut records, &[], &mut stop, |key, record| {
                    assert_eq!(*key.current().get(), record.0, "the record's own key is current");
                    let n = count.update_with(
                        || 0,
                        |n| {
                            *n += 1;
                            *n
                        },
                    )?;
                    assert_eq!(n, record.1, "key {}", record.0);
                    seen.push(record);
                    Ok::<(), StateError>(())
                })
                .unwrap();
        }
        drop(records);
        let expected: Vec<(u64, u64)> = (0..1000u64).map(|i| (i % 7, i / 7 + 1)).collect();
        assert_eq!(seen, expected, "every record once, in order");
        take_backend();
    }

    /// With the writer's hashes, a batch runs as without them: every record once, in order,
    /// under its own key (the hashes are taken as the keys', not computed again).
    #[test]
    fn a_batch_with_the_writers_hashes_runs_each_record_under_its_own_key() {
        install_heap_backend();
        let count = ValueState::<u64>::declare(&ValueStateDescriptor::new("count")).unwrap();
        let key_fn: KeyFn<(u64, u64), u64> = Arc::new(OwnedKey(|r: &(u64, u64)| r.0, PhantomData));
        let mut scope = KeyScope::new(key_fn);
        let mut batch: Vec<(u64, u64)> = (0..300u64).map(|i| (i % 11, i / 11 + 1)).collect();
        let hashes: Vec<_> = batch.iter().map(|r| scope.encode(r)).collect();
        let mut seen = Vec::new();
        let mut records = batch.drain(..);
        let mut never = |_: usize| false;
        scope
            .each_keyed(&mut records, &hashes, &mut never, |key, record| {
                assert_eq!(*key.current().get(), record.0, "the record's own key is current");
                assert_eq!(
                    count.update_with(
                        || 0,
                        |n| {
                            *n += 1;
                            *n
                        }
                    )?,
                    record.1,
                    "key {}",
                    record.0
                );
                seen.push(record);
                Ok::<(), StateError>(())
            })
            .unwrap();
        drop(records);
        assert_eq!(seen, (0..300u64).map(|i| (i % 11, i / 11 + 1)).collect::<Vec<_>>());
        take_backend();
    }

    /// A key selector that returns another key for the same record (here a counter) fails
    /// the batch with an error naming it, rather than putting state under the hash of a key
    /// it no longer returns.
    #[test]
    fn a_key_that_changed_since_the_writer_hashed_it_fails_the_batch() {
        use std::sync::atomic::{AtomicU64, Ordering};
        install_heap_backend();
        let calls = AtomicU64::new(0);
        let key_fn: KeyFn<u64, u64> =
            Arc::new(OwnedKey(move |r: &u64| *r + calls.fetch_add(1, Ordering::Relaxed), PhantomData));
        let mut scope = KeyScope::new(key_fn);
        let mut batch: Vec<u64> = (0..40).collect();
        let hashes: Vec<_> = batch.iter().map(|r| scope.encode(r)).collect();
        let mut records = batch.drain(..);
        let mut never = |_: usize| false;
        let failed = scope.each_keyed(&mut records, &hashes, &mut never, |_, _| Ok::<(), StateError>(()));
        let message = failed.unwrap_err().to_string();
        assert!(message.contains("a record's key changed between the key_by"), "{message}");
        assert_eq!(records.len(), 40, "no record ran");
        drop(records);
        take_backend();
    }

    /// A function failing within a pass ends the batch there: the failed record is taken,
    /// the records after it stay, in order (the driver puts them back; the task fails).
    #[test]
    fn a_failure_within_a_pass_leaves_the_records_after_it_in_order() {
        install_heap_backend();
        let key_fn: KeyFn<u64, u64> = Arc::new(OwnedKey(|r: &u64| *r, PhantomData));
        let mut scope = KeyScope::new(key_fn);
        let mut batch: Vec<u64> = (0..200).collect();
        let mut records = batch.drain(..);
        let mut never = |_: usize| false;
        let failed = scope.each_keyed(&mut records, &[], &mut never, |_, record| {
            if record == 70 {
                return Err(StateError::from(eddy_state::StateErrorKind::NotKeyed { state: "test".into() }));
            }
            Ok(())
        });
        assert!(failed.is_err());
        assert_eq!(records.collect::<Vec<_>>(), (71..200).collect::<Vec<u64>>());
        take_backend();
    }
}
