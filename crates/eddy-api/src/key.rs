//! Key selectors: from a record to its key's stable hash (for routing) or to the current
//! key of the keyed state backend (for state access).

use eddy_runtime::writer::KeySelector;
use eddy_state::keyed::with_backend;
use eddy_state::StateError;
use eddy_types::{stable_hash, Key};
use std::sync::Arc;

/// The user's `key_by` function.
pub(crate) type KeyFn<T, K> = Arc<dyn Fn(&T) -> K + Send + Sync>;

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
        let key = (self.key_fn)(record);
        self.scratch.clear();
        key.encode_key(&mut self.scratch);
        stable_hash(&self.scratch)
    }
}

/// Makes a record's key the current key of this subtask's keyed backend.
pub(crate) struct KeyScope<T, K> {
    key_fn: KeyFn<T, K>,
    scratch: Vec<u8>,
}

impl<T, K> KeyScope<T, K> {
    pub(crate) fn key_fn_ref(&self) -> &KeyFn<T, K> {
        &self.key_fn
    }
}

impl<T, K: Key> KeyScope<T, K> {
    pub(crate) fn new(key_fn: KeyFn<T, K>) -> Self {
        Self { key_fn, scratch: Vec::with_capacity(64) }
    }

    /// Sets the current key from `record` and returns the key.
    #[inline]
    pub(crate) fn enter(&mut self, record: &T) -> Result<K, StateError> {
        let key = (self.key_fn)(record);
        self.scratch.clear();
        key.encode_key(&mut self.scratch);
        let hash = stable_hash(&self.scratch);
        let bytes = &self.scratch;
        with_backend("<current key>", |backend| backend.set_current_key(bytes, hash).map(|_| ()))?;
        Ok(key)
    }
}
