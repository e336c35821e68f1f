//! The keyed state backend trait, the current key, and the thread-local through which
//! state handles reach the backend of the subtask that runs them.

use super::shared_work::SharedWork;
use crate::descriptor::StateMeta;
use crate::error::{StateError, StateErrorKind};
use eddy_types::CheckpointId;
use eddy_types::{KeyGroup, KeyGroupRange, KeyHash, MaxParallelism};
use std::any::Any;
use std::cell::RefCell;

/// The id of a declared state inside one backend, plus the backend's own id so that a
/// handle from another backend is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateId {
    pub(crate) backend_id: u64,
    pub(crate) index: u32,
}

/// The key whose state is being read and written, as the backend sees it.
#[derive(Debug, Default)]
pub struct CurrentKey {
    /// The key's stable encoding ([`eddy_types::Key::encode_key`]).
    pub bytes: Vec<u8>,
    /// The hash tables look `bytes` up by: the key's hash, or with a namespace that of
    /// the key and the namespace together.
    pub hash: u64,
    /// The key's own hash, which picked its key group.
    pub key_hash: u64,
    /// How many of `bytes` are the key; the rest is the namespace (a window), if any.
    pub key_len: usize,
    pub key_group: u32,
    /// `key_group - range.start`: the index of the key group's table.
    pub local_group: usize,
    pub is_set: bool,
    /// Changes with every key set and every change of namespace (never 0 then), so that a
    /// table (or the timer queue) can remember where it
    /// found this key and serve a read and the write after it with one lookup; 0: do not
    /// remember.
    pub epoch: u64,
    /// `bytes` in the fixed-size form tables compare short keys in.
    pub inline: InlineKey,
    /// The namespace (`bytes` after `key_len`) as the heap's tables of namespaces look it
    /// up: its inline form and [`NamespaceForm::hash`]. Kept with the namespace, so that
    /// a lookup neither hashes it again nor calls `memcmp` on it.
    pub namespace: NamespaceForm,
}

/// A namespace's inline form and a quick hash of it (see [`CurrentKey::namespace`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NamespaceForm {
    pub inline: InlineKey,
    /// A hash for tables private to this process (never stored: not the stable hash).
    pub hash: u64,
}

impl NamespaceForm {
    #[inline]
    pub fn of(namespace: &[u8]) -> Self {
        let mut form = NamespaceForm::default();
        form.set(namespace);
        form
    }

    /// This `namespace`'s form, in place.
    #[inline]
    pub fn set(&mut self, namespace: &[u8]) {
        self.inline.set(namespace);
        self.hash = if namespace.len() <= InlineKey::BYTES_MAX {
            quick_hash(namespace)
        } else {
            eddy_types::stable_hash(namespace).0
        };
    }
}

/// A hash of a short byte string (up to [`InlineKey::BYTES_MAX`]) for tables private to
/// this process: three words folded by two multiplications, a few instructions where xxh3
/// is a call. It reads the words from `bytes` with overlapping loads, not from the inline
/// form just written: reading back bytes just written piecewise stalls the CPU.
#[inline]
fn quick_hash(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    debug_assert!(n <= InlineKey::BYTES_MAX);
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")));
    let (a, b, c) = if n >= 16 {
        (word(0), word(8), word(n - 8))
    } else if n >= 8 {
        (word(0), word(n - 8), 0)
    } else if n >= 4 {
        (half(0) | half(n - 4) << 32, 0, 0)
    } else {
        (bytes.iter().fold(0u64, |word, &byte| word << 8 | u64::from(byte)), 0, 0)
    };
    let fold = |x: u64, y: u64| {
        let product = u128::from(x) * u128::from(y);
        (product as u64) ^ ((product >> 64) as u64)
    };
    // The length goes in too, as a multiplier: the loads overlap, so the words alone
    // may not tell it.
    fold(a ^ 0x243f_6a88_85a3_08d3, b ^ 0x1319_8a2e_0370_7344)
        ^ fold(c ^ 0xa409_3822_299f_31d0, 0x082e_fa98_ec4e_6c89 ^ (n as u64) << 40)
}

/// A short encoded key (up to [`InlineKey::BYTES_MAX`]) as a fixed-size array: its length,
/// its bytes, zeros. Two keys are equal exactly when these arrays are, so that comparing
/// them takes a few instructions and no call. A longer key has no inline form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineKey([u8; InlineKey::BYTES_MAX + 1]);

impl InlineKey {
    /// Fills an enum of this and a boxed slice to the boxed slice's size plus a tag.
    pub const BYTES_MAX: usize = 22;
    /// The length byte of a key too long to be inline: equal to no inline key.
    const TOO_LONG: u8 = u8::MAX;

    pub fn of(key: &[u8]) -> Self {
        let mut inline = InlineKey([0; Self::BYTES_MAX + 1]);
        inline.set(key);
        inline
    }

    /// Makes this `key`'s inline form, in place: once per record for the current key, so
    /// it copies with a few fixed-size moves rather than a call to `memcpy`, and writes
    /// where the lookups read it rather than building it elsewhere and moving it (reading
    /// back bytes just written piecewise stalls the CPU).
    #[inline]
    pub fn set(&mut self, key: &[u8]) {
        let inline = &mut self.0;
        *inline = [0; Self::BYTES_MAX + 1];
        if key.len() <= Self::BYTES_MAX {
            inline[0] = key.len() as u8;
            copy_short(&mut inline[1..=key.len()], key);
        } else {
            inline[0] = Self::TOO_LONG;
        }
    }

    /// Whether the key was short enough.
    pub fn is_some(&self) -> bool {
        self.0[0] != Self::TOO_LONG
    }

    /// The key's bytes (empty for a key too long).
    pub fn bytes(&self) -> &[u8] {
        if self.is_some() {
            &self.0[1..=self.0[0] as usize]
        } else {
            &[]
        }
    }
}

/// Copies `source` (at most 32 bytes) into `target` of the same length with two
/// overlapping fixed-size moves of the largest size that fits (a byte loop below 4).
#[inline(always)]
fn copy_short(target: &mut [u8], source: &[u8]) {
    let n = source.len();
    debug_assert!(n == target.len() && n <= 32);
    if n >= 16 {
        target[..16].copy_from_slice(&source[..16]);
        target[n - 16..].copy_from_slice(&source[n - 16..]);
    } else if n >= 8 {
        target[..8].copy_from_slice(&source[..8]);
        target[n - 8..].copy_from_slice(&source[n - 8..]);
    } else if n >= 4 {
        target[..4].copy_from_slice(&source[..4]);
        target[n - 4..].copy_from_slice(&source[n - 4..]);
    } else {
        for (t, s) in target.iter_mut().zip(source) {
            *t = *s;
        }
    }
}

impl Default for InlineKey {
    fn default() -> Self {
        Self::of(&[])
    }
}

/// An encoded key as an entry holds it: short keys (numbers, short strings: most keys)
/// inline, in the form of [`InlineKey`], so that a lookup compares two fixed-size arrays
/// and reads no other cache line than the entry's.
#[derive(Clone)]
pub(crate) enum StoredKey {
    Inline(InlineKey),
    Boxed(Box<[u8]>),
}

impl StoredKey {
    pub(crate) fn new(key: &[u8]) -> Self {
        let inline = InlineKey::of(key);
        if inline.is_some() {
            StoredKey::Inline(inline)
        } else {
            StoredKey::Boxed(key.into())
        }
    }

    /// The current key (and namespace) as stored: its inline form copied as it is, not made
    /// again from the bytes (which writes it on the stack piecewise and reads it back whole
    /// at once, a store-forwarding stall on every new entry and timer).
    #[inline]
    pub(crate) fn of_current(key: &CurrentKey) -> Self {
        if key.inline.is_some() {
            StoredKey::Inline(key.inline)
        } else {
            StoredKey::Boxed(key.bytes.as_slice().into())
        }
    }

    /// Whether this is the current key's namespace (stored as a key is).
    #[inline]
    pub(crate) fn matches_namespace(&self, namespace: &NamespaceForm, bytes: &[u8]) -> bool {
        match self {
            StoredKey::Inline(inline) => *inline == namespace.inline,
            StoredKey::Boxed(stored) => **stored == *bytes,
        }
    }

    /// Whether this is the current key.
    #[inline]
    pub(crate) fn matches(&self, key: &CurrentKey) -> bool {
        match self {
            StoredKey::Inline(inline) => *inline == key.inline,
            StoredKey::Boxed(bytes) => **bytes == *key.bytes,
        }
    }
}

impl PartialEq for StoredKey {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StoredKey::Inline(a), StoredKey::Inline(b)) => a == b,
            (StoredKey::Boxed(a), StoredKey::Boxed(b)) => a == b,
            // A key is inline exactly when it is short enough: never both ways.
            _ => false,
        }
    }
}

impl std::ops::Deref for StoredKey {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            StoredKey::Inline(inline) => inline.bytes(),
            StoredKey::Boxed(bytes) => bytes,
        }
    }
}

/// One declared state's data in a backend, with the types erased so that the backend can
/// hold states of any type and snapshot them by key group.
pub trait KeyedTable: Send {
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn as_any(&self) -> &dyn Any;
    /// Number of keys with a value on the heap.
    fn key_count(&self) -> usize;
    /// The current key was just set: a table the last record used looks it up now, so
    /// that the lookups of all the tables a record uses run side by side rather than one
    /// after another, each waiting for its own cache miss. The access that follows finds
    /// the entry remembered.
    fn resolve_ahead(&mut self, key: &CurrentKey) {
        let _ = key;
    }
    /// See [`KeyedStateBackend::prefetch_key`]: `hash` of a key without namespace, in
    /// key group `local_group` of the range. Returns the bytes of entries the prefetch
    /// was for: 0 when the table was not used by the last record.
    fn prefetch(&self, local_group: usize, hash: u64) -> usize {
        let _ = (local_group, hash);
        0
    }
    /// See [`KeyedStateBackend::prefetch_entry`]: the entry of `hash` (a key and a
    /// namespace), in tables that hold namespaced values. `form` is the namespace's,
    /// made once for every table.
    fn prefetch_namespaced(&self, local_group: usize, hash: u64, namespace: &[u8], form: &NamespaceForm) {
        let _ = (local_group, hash, namespace, form);
    }
    /// Writes what only the heap holds to the store below (before a snapshot).
    fn flush(&mut self) -> Result<(), StateError>;
    /// The entries of one key group (`local_group` = key group − range start), serialized
    /// in the canonical, backend-independent form; `None` when the key group is empty.
    fn snapshot_key_group(&self, local_group: usize) -> Result<Option<Vec<u8>>, StateError>;
    /// Every non-empty key group's entries, as [`KeyedTable::snapshot_key_group`] gives
    /// them one by one; a table that can do it in one pass says so here.
    fn snapshot_all_key_groups(
        &self,
        first_key_group: u32,
        group_count: usize,
    ) -> Result<Vec<(u32, Vec<u8>)>, StateError> {
        let mut key_groups = Vec::new();
        for local in 0..group_count {
            if let Some(bytes) = self.snapshot_key_group(local)? {
                key_groups.push((first_key_group + local as u32, bytes));
            }
        }
        Ok(key_groups)
    }
    /// Adds the entries of one key group written by [`KeyedTable::snapshot_key_group`].
    fn restore_key_group(&mut self, local_group: usize, bytes: &[u8]) -> Result<(), StateError>;
    /// Drops every value.
    fn clear_all(&mut self) -> Result<(), StateError>;
    /// For a snapshot taken in two parts: copies what the snapshot needs now and returns
    /// the work that turns it into [`KeyedTable::snapshot_key_group`]'s bytes later, off
    /// the task thread; `None` when the table has no such split.
    fn deferred_snapshot(&mut self) -> Option<DeferredKeyGroups> {
        None
    }
    /// For incremental heap checkpoints ([`super::heap_chain`]): what changed since the
    /// last call (every entry when `full`, or when the table did not track its changes
    /// since), shared now and framed later, off the task thread; `None` when the table
    /// cannot tell (over a raw store), and a chain cannot be kept.
    fn deferred_changes(&mut self, full: bool) -> Option<super::heap_chain::DeferredChanges> {
        let _ = full;
        None
    }
}

/// Builds the (key group, canonical bytes) of one state, in the asynchronous part.
pub type DeferredKeyGroups = super::shared_work::Work<Vec<(u32, Vec<u8>)>>;

/// A state whose canonical key groups are still to be built (see
/// [`KeyedStateSnapshot::complete_deferred`]). Clones share the building (see
/// [`SharedWork`]).
#[derive(Clone)]
pub struct DeferredState {
    name: String,
    ttl: bool,
    build: SharedWork<Vec<(u32, Vec<u8>)>>,
}

impl DeferredState {
    pub fn new(name: &str, ttl: bool, build: DeferredKeyGroups) -> Self {
        Self { name: name.to_string(), ttl, build: SharedWork::new(build) }
    }

    /// The state's entries, built on the first call and the same on every later one.
    fn build(&self) -> Result<KeyedStateEntries, StateError> {
        let key_groups = self.build.result(&format!("snapshot of keyed state '{}'", self.name))?;
        Ok(KeyedStateEntries { name: self.name.clone(), ttl: self.ttl, key_groups: key_groups.clone() })
    }
}

/// What a backend gives the typed code that creates a declared state's table.
pub struct TableSpec {
    pub first_key_group: u32,
    pub group_count: usize,
    /// The byte store below the table, if the backend has one.
    pub raw: Option<Box<dyn super::raw::RawTable>>,
    /// How the data is laid out in `raw`.
    pub layout: super::raw::RawLayout,
    pub cache_entries_max: usize,
    /// Time for time-to-live, in wall-clock ms (a manual clock in tests).
    pub clock: std::sync::Arc<dyn eddy_types::Clock>,
}

/// Where the keyed state of one subtask lives. Object-safe: the runtime holds a
/// `Box<dyn KeyedStateBackend>` and never sees which backend it is.
pub trait KeyedStateBackend: Send {
    fn key_group_range(&self) -> KeyGroupRange;
    fn max_parallelism(&self) -> MaxParallelism;
    /// Makes the key with these encoded bytes and hash the current key; returns its key
    /// group. Fails if the key group is not this backend's (a routing bug).
    fn set_current_key(&mut self, encoded_key: &[u8], hash: KeyHash) -> Result<KeyGroup, StateError>;
    /// Scopes the current key's state to `namespace` (Flink's namespaces: a window's
    /// contents are the key's state in the window's namespace): state is read and written
    /// under the key's bytes followed by `namespace`, in the key's key group. An empty
    /// namespace is the key's own state. Setting a key clears the namespace.
    fn set_current_namespace(&mut self, namespace: &[u8]);
    /// [`KeyedStateBackend::set_current_namespace`] with the hash of the key's and the
    /// namespace's bytes known already (a timer's).
    fn set_current_namespace_hashed(&mut self, namespace: &[u8], hash: u64);
    /// After this, state access fails until a key is set again.
    fn clear_current_key(&mut self);
    /// A key used soon (one of the batch taken now), by the hash
    /// [`KeyedStateBackend::set_current_key`] will get: the tables the last record used
    /// start fetching its entries into the cache, so that the fetches of a batch's keys
    /// overlap. A hint only. Returns whether it is worth it: false while what records use
    /// fits in the CPU's cache anyway, and the caller may then stop asking for a while.
    fn prefetch_key(&self, hash: KeyHash) -> bool {
        let _ = hash;
        false
    }
    /// Asks for the entry of a key and namespace (a window) that is used soon, in key
    /// group `key_group`, `hash` as the tables have it (a timer's: firing timers walks
    /// them in order, so the next one's window is known a timer ahead). A hint only.
    fn prefetch_entry(&self, key_group: KeyGroup, hash: u64, namespace: &[u8]) {
        let _ = (key_group, hash, namespace);
    }
    /// Declares a state, or returns the id of the one declared under the same name.
    fn register(
        &mut self,
        meta: StateMeta,
        create: &mut dyn FnMut(TableSpec) -> Box<dyn KeyedTable>,
    ) -> Result<StateId, StateError>;
    /// The current key and the table of state `id`; fails if no key is set.
    fn current_key_and_table(
        &mut self,
        id: StateId,
        name: &str,
    ) -> Result<(&CurrentKey, &mut dyn KeyedTable), StateError>;
    /// The table of state `id`, whatever the current key (timers: the earliest of all keys).
    fn table_by_id_mut(&mut self, id: StateId, name: &str) -> Result<&mut dyn KeyedTable, StateError>;
    /// Names of the declared states, in declaration order.
    fn state_names(&self) -> Vec<String>;
    /// The table of a declared state, by name.
    fn table_by_name(&self, name: &str) -> Option<&dyn KeyedTable>;
    fn table_by_name_mut(&mut self, name: &str) -> Option<&mut dyn KeyedTable>;
    /// Every state of every key group, serialized in the canonical form (the synchronous
    /// part of a savepoint or full checkpoint).
    fn snapshot(&mut self) -> Result<KeyedStateSnapshot, StateError>;
    /// The synchronous part of the snapshot for checkpoint (or savepoint) `checkpoint_id`.
    /// A backend with files of its own may return them instead of the canonical form:
    /// for good when it is configured for incremental checkpoints and `canonical` is false
    /// (RocksDB's files), or with [`NativeSnapshot::deferred_canonical`] set, so that the
    /// canonical form is read out of the files in the asynchronous part, off the task
    /// thread. The files themselves may be made off the task thread too
    /// ([`NativeSnapshot::pending`]). The default is the canonical form, taken now.
    ///
    /// [`NativeSnapshot::deferred_canonical`]: super::NativeSnapshot::deferred_canonical
    /// [`NativeSnapshot::pending`]: super::NativeSnapshot::pending
    fn snapshot_for_checkpoint(
        &mut self,
        checkpoint_id: CheckpointId,
        canonical: bool,
    ) -> Result<KeyedStateSnapshot, StateError> {
        let _ = (checkpoint_id, canonical);
        self.snapshot()
    }
    /// Starts from `snapshot` (before any state is declared): each state's key groups in
    /// this backend's range are loaded when the state is declared.
    fn set_restored(&mut self, snapshot: KeyedStateSnapshot);
    /// How long the task waited for the backend's snapshots since the last call, µs,
    /// outside their synchronous parts (a write that had to wait for one being made).
    fn take_snapshot_wait_micros(&mut self) -> u64 {
        0
    }
}

/// The keyed state of one subtask at a checkpoint: per state, the serialized entries of
/// each non-empty key group (canonical, backend-independent, so a restore can take any key
/// groups), and the backend's own files when it took a native snapshot. After a rescale a
/// subtask may restore from several native snapshots, each with its own key-group range.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyedStateSnapshot {
    pub key_group_range: Option<KeyGroupRange>,
    pub states: Vec<KeyedStateEntries>,
    pub native: Vec<super::native::NativeSnapshot>,
    /// Every state of the operator as it was declared (`ValueState<u64>`…), by name, so
    /// that a restore refuses a state declared again as another type at once, naming
    /// both (Flink checks serializer compatibility at registration).
    pub state_types: Vec<StateType>,
    /// States whose key groups the asynchronous part builds (heap values copied in the
    /// synchronous part). Not part of the stored form.
    #[serde(skip)]
    pub deferred: super::native::Unstored<Vec<DeferredState>>,
}

impl KeyedStateSnapshot {
    /// The asynchronous part of a snapshot: builds the canonical form of deferred states
    /// and reads it out of native files whose backend deferred it (see
    /// [`KeyedStateBackend::snapshot_for_checkpoint`]).
    pub fn complete_deferred(&mut self) -> Result<(), StateError> {
        for deferred in std::mem::take(&mut self.deferred.0) {
            self.states.push(deferred.build()?);
        }
        let natives = std::mem::take(&mut self.native);
        for mut native in natives {
            if let Some(pending) = native.pending.0.take() {
                let made = pending.result(&format!("{} snapshot", native.backend))?;
                native.files = made.files.clone();
                native.local = super::native::Unstored(Some(made.local.clone()));
            }
            match native.deferred_canonical.0 {
                Some(read) => read(&native, native.key_group_range, self)?,
                None => self.native.push(native),
            }
        }
        Ok(())
    }

    /// Adds the key groups of `state` inside `range` to this snapshot's state of the same
    /// name (rescaling: a new subtask gathers its key groups from several old ones).
    pub fn add_key_groups(&mut self, state: &KeyedStateEntries, range: KeyGroupRange) {
        let taken = state.key_groups.iter().filter(|(kg, _)| range.contains(eddy_types::KeyGroup(*kg))).cloned();
        match self.states.iter_mut().find(|s| s.name == state.name) {
            Some(merged) => {
                merged.key_groups.extend(taken);
                merged.key_groups.sort_by_key(|(kg, _)| *kg);
            }
            None => self.states.push(KeyedStateEntries {
                name: state.name.clone(),
                ttl: state.ttl,
                key_groups: taken.collect(),
            }),
        }
    }
}

/// A state's declared kind and type, as its snapshot records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StateType {
    pub name: String,
    /// `ValueState<u64>`, `MapState<alloc::string::String>`… (the type as Rust names it,
    /// as stored: a time to live wraps values with their expiry).
    pub declared_as: String,
    /// Declared with a time to live.
    pub ttl: bool,
}

impl KeyedStateSnapshot {
    /// Adds `types` to the recorded ones, each name once (the first one kept).
    pub fn add_state_types<'a>(&mut self, types: impl IntoIterator<Item = &'a StateType>) {
        for state_type in types {
            if !self.state_types.iter().any(|known| known.name == state_type.name) {
                self.state_types.push(state_type.clone());
            }
        }
    }
}

/// One declared state's key groups.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyedStateEntries {
    pub name: String,
    /// Whether values carry an expiry (the state was declared with a time to live).
    #[serde(default)]
    pub ttl: bool,
    /// (key group, serialized entries of that key group).
    #[serde(serialize_with = "serialize_key_groups")]
    pub key_groups: Vec<(u32, Vec<u8>)>,
}

/// Writes each key group's bytes as one byte string, not byte by byte: the same bytes in
/// postcard (a length, then the bytes) and in self-describing formats, at a fraction of a
/// snapshot's cost. Read back as any `Vec<u8>`.
fn serialize_key_groups<S: serde::Serializer>(groups: &[(u32, Vec<u8>)], serializer: S) -> Result<S::Ok, S::Error> {
    struct Bytes<'a>(&'a [u8]);
    impl serde::Serialize for Bytes<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(self.0)
        }
    }
    serializer.collect_seq(groups.iter().map(|(group, bytes)| (group, Bytes(bytes))))
}

thread_local! {
    static INSTALLED: RefCell<Option<Box<dyn KeyedStateBackend>>> = const { RefCell::new(None) };
}

/// Installs the keyed backend of the subtask running on this thread.
pub fn install_backend(backend: Box<dyn KeyedStateBackend>) -> Result<(), StateError> {
    INSTALLED.with(|slot| {
        let mut slot = slot.try_borrow_mut().map_err(|_| StateError::from(StateErrorKind::BackendAlreadyInstalled))?;
        if slot.is_some() {
            return Err(StateError::from(StateErrorKind::BackendAlreadyInstalled));
        }
        *slot = Some(backend);
        Ok(())
    })
}

/// Removes and returns this thread's backend (at the end of a subtask, or to snapshot it).
pub fn take_backend() -> Option<Box<dyn KeyedStateBackend>> {
    INSTALLED.with(|slot| slot.try_borrow_mut().ok().and_then(|mut slot| slot.take()))
}

/// Runs `f` on this thread's backend. `state` names the state for the error when there is
/// no backend (not a keyed context) or the backend is already in use (re-entrance).
pub fn with_backend<R>(
    state: &str,
    f: impl FnOnce(&mut dyn KeyedStateBackend) -> Result<R, StateError>,
) -> Result<R, StateError> {
    INSTALLED.with(|slot| {
        let mut slot = slot
            .try_borrow_mut()
            .map_err(|_| StateError::from(StateErrorKind::Reentrant { state: state.to_string() }))?;
        match slot.as_deref_mut() {
            Some(backend) => f(backend),
            None => Err(StateError::from(StateErrorKind::NotKeyed { state: state.to_string() })),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{InlineKey, KeyedStateEntries, NamespaceForm};

    #[test]
    fn an_inline_key_is_its_length_its_bytes_and_zeros_for_every_length() {
        let mut reused = InlineKey::of(&[0xff; 40]);
        for len in 0..=30usize {
            let key: Vec<u8> = (1..=len as u8).collect();
            reused.set(&key);
            assert_eq!(reused, InlineKey::of(&key), "set in place over a longer key, length {len}");
            if len <= InlineKey::BYTES_MAX {
                let mut expected = [0u8; InlineKey::BYTES_MAX + 1];
                expected[0] = len as u8;
                expected[1..=len].copy_from_slice(&key);
                assert_eq!(reused.0, expected, "length {len}");
                assert_eq!(reused.bytes(), &key[..]);
            } else {
                assert!(!reused.is_some(), "length {len} is too long");
                assert_ne!(reused, InlineKey::of(&key[..InlineKey::BYTES_MAX]));
            }
        }
    }

    #[test]
    fn a_namespace_form_is_the_same_in_place_and_tells_every_byte_and_length() {
        let mut reused = NamespaceForm::of(&[0xff; 40]);
        let mut hashes = std::collections::HashSet::new();
        for len in 0..=30usize {
            for at in 0..len.max(1) {
                // Each byte of each length changed once; the zero-filled ones too.
                let mut namespace = vec![0u8; len];
                if len > 0 {
                    namespace[at] = 1;
                }
                reused.set(&namespace);
                let fresh = NamespaceForm::of(&namespace);
                assert_eq!((reused.inline, reused.hash), (fresh.inline, fresh.hash), "{namespace:?}");
                assert!(hashes.insert(fresh.hash), "{namespace:?} hashes as another namespace does");
            }
            if len > 0 {
                assert!(hashes.insert(NamespaceForm::of(&vec![0u8; len]).hash), "zeros of length {len}");
            }
        }
    }

    /// The format of checkpoints written before key groups were written as byte strings.
    #[derive(serde::Serialize)]
    struct ByteByByte {
        name: String,
        ttl: bool,
        key_groups: Vec<(u32, Vec<u8>)>,
    }

    #[test]
    fn key_groups_written_as_byte_strings_are_the_bytes_written_byte_by_byte() {
        let entries =
            KeyedStateEntries { name: "count".into(), ttl: true, key_groups: vec![(3, vec![0, 200, 7]), (9, vec![])] };
        let old = ByteByByte { name: "count".into(), ttl: true, key_groups: entries.key_groups.clone() };
        let bytes = postcard::to_allocvec(&entries).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&old).unwrap());
        assert_eq!(postcard::from_bytes::<KeyedStateEntries>(&bytes).unwrap(), entries);
    }
}
