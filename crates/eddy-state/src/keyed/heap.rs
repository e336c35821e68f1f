//! The heap keyed state backend: every declared state is a [`HeapTable`], one hash table
//! per key group, holding Rust values as they are (no serialization until a snapshot).
//!
//! Lookups reuse the key's stable hash, computed once per record for routing, so a state
//! access hashes nothing.

use super::backend::TableSpec;
use super::backend::{
    CurrentKey, DeferredKeyGroups, DeferredState, InlineKey, KeyedStateBackend, KeyedStateEntries, KeyedStateSnapshot,
    KeyedTable, StateId,
};
use super::native::Unstored;
use super::raw::{read_varint, write_varint, HeldWrite, RawLayout, RawStore, RawTable};
use crate::descriptor::StateMeta;
use crate::descriptor::{StateTtlConfig, TtlUpdateType};
use crate::error::StateError;
use crate::StateValue;
use eddy_types::{assign_to_key_group, KeyGroup, KeyGroupRange, KeyHash, MaxParallelism};
use eddy_types::{Clock, WallClock};
use hashbrown::HashTable;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);

/// An encoded key as an entry holds it: short keys (numbers, short strings: most keys)
/// inline, in the form of [`InlineKey`], so that a lookup compares two fixed-size arrays
/// and reads no other cache line than the entry's.
#[derive(Clone)]
enum StoredKey {
    Inline(InlineKey),
    Boxed(Box<[u8]>),
}

impl StoredKey {
    fn new(key: &[u8]) -> Self {
        let inline = InlineKey::of(key);
        if inline.is_some() {
            StoredKey::Inline(inline)
        } else {
            StoredKey::Boxed(key.into())
        }
    }

    /// Whether this is the current key.
    #[inline]
    fn matches(&self, key: &CurrentKey) -> bool {
        match self {
            StoredKey::Inline(inline) => *inline == key.inline,
            StoredKey::Boxed(bytes) => **bytes == *key.bytes,
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

struct Entry<S> {
    key: StoredKey,
    hash: u64,
    value: S,
    /// Changed since it was last written (or handed over for a snapshot) to the raw store.
    dirty: bool,
    /// Wall-clock ms after which the value is gone (`u64::MAX`: no time to live).
    expires_ms: u64,
}

/// The values of one state, per key group and key: all of them (heap backend), or a
/// bounded write-back cache of the hot ones in front of a [`RawTable`] (RocksDB). Changed
/// values are written to the raw store in one batch when the cache is full, and handed
/// over to the store's snapshot at a barrier; checkpoints, not the raw store, make state
/// durable, so nothing is lost.
pub struct HeapTable<S> {
    name: String,
    groups: Vec<HashTable<Entry<S>>>,
    /// First key group of the range (turns a local group index into a key group).
    first_key_group: u32,
    raw: Option<Box<dyn RawTable>>,
    cached: usize,
    cache_entries_max: usize,
    scratch: Vec<u8>,
    ttl: Option<StateTtlConfig>,
    clock: Arc<dyn Clock>,
    /// Where the next eviction starts dropping key groups.
    evict_from: usize,
    /// (key epoch, bucket) of the last key found: `value()` then `update()` of one record
    /// look the key up once. Cleared by everything that moves or drops entries.
    last_hit: Option<(u64, usize)>,
}

fn encode<S: StateValue>(name: &str, value: &S, out: &mut Vec<u8>) -> Result<(), StateError> {
    out.clear();
    let bytes = postcard::to_extend(value, std::mem::take(out))
        .map_err(|e| StateError::Serialize { state: name.to_string(), message: e.to_string() })?;
    *out = bytes;
    Ok(())
}

fn decode<S: StateValue>(name: &str, bytes: &[u8]) -> Result<S, StateError> {
    postcard::from_bytes(bytes).map_err(|e| StateError::Deserialize { state: name.to_string(), message: e.to_string() })
}

/// Appends a stored value to `out`: for a state with a time to live, its expiry first (8
/// bytes, big-endian, so a compaction filter can read it without the type).
fn append_stored<S: StateValue>(
    name: &str,
    value: &S,
    expires_ms: Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), StateError> {
    if let Some(expires_ms) = expires_ms {
        out.extend_from_slice(&expires_ms.to_be_bytes());
    }
    let bytes = postcard::to_extend(value, std::mem::take(out))
        .map_err(|e| StateError::Serialize { state: name.to_string(), message: e.to_string() })?;
    *out = bytes;
    Ok(())
}

/// Splits a stored value into its expiry (if the state has a time to live) and value bytes.
fn split_stored(bytes: &[u8], ttl: bool) -> (u64, &[u8]) {
    if ttl && bytes.len() >= 8 {
        (u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes")), &bytes[8..])
    } else {
        (u64::MAX, bytes)
    }
}

impl<S: StateValue> HeapTable<S> {
    /// A table holding everything on the heap, without time to live.
    pub fn new(name: &str, group_count: usize) -> Self {
        let spec = TableSpec {
            first_key_group: 0,
            group_count,
            raw: None,
            layout: RawLayout::Values,
            cache_entries_max: 0,
            clock: Arc::new(WallClock),
        };
        Self::from_spec(name, spec, None)
    }

    /// A table as the backend specifies it (over its raw store, if any).
    pub fn from_spec(name: &str, spec: TableSpec, ttl: Option<StateTtlConfig>) -> Self {
        Self {
            name: name.to_string(),
            groups: (0..spec.group_count).map(|_| HashTable::new()).collect(),
            first_key_group: spec.first_key_group,
            raw: spec.raw,
            cached: 0,
            cache_entries_max: spec.cache_entries_max.max(1),
            scratch: Vec::new(),
            ttl,
            clock: spec.clock,
            evict_from: 0,
            last_hit: None,
        }
    }

    /// When a value written now expires.
    fn expiry(&self) -> u64 {
        match self.ttl {
            Some(ttl) => self.clock.now_ms().saturating_add(ttl.ttl_ms),
            None => u64::MAX,
        }
    }

    /// For a state with a time to live: drops the current key's value if it expired, and
    /// renews it on read when the update type says so.
    fn expire_or_renew(&mut self, key: &CurrentKey, reading: bool) -> Result<(), StateError> {
        let Some(ttl) = self.ttl else { return Ok(()) };
        let now = self.clock.now_ms();
        let expired = match self.find_mut(key) {
            None => return Ok(()),
            Some(entry) if entry.expires_ms <= now => true,
            Some(entry) => {
                if reading && ttl.update_type == TtlUpdateType::OnReadAndWrite {
                    entry.expires_ms = now.saturating_add(ttl.ttl_ms);
                    entry.dirty = true;
                }
                false
            }
        };
        if expired {
            self.remove(key)?;
        }
        Ok(())
    }

    /// The bucket of the current key's entry in its key group's table, if cached.
    #[inline]
    fn locate(&mut self, key: &CurrentKey) -> Option<usize> {
        if let Some((epoch, bucket)) = self.last_hit {
            // Checked all the same (a few instructions: the entry was just read), so that a
            // memo gone stale can never serve another key's value.
            if epoch == key.epoch
                && key.epoch != 0
                && self.groups[key.local_group].get_bucket(bucket).is_some_and(|e| e.key.matches(key))
            {
                return Some(bucket);
            }
        }
        let bucket = self.groups[key.local_group].find_bucket_index(key.hash, |e| e.key.matches(key))?;
        self.last_hit = Some((key.epoch, bucket));
        Some(bucket)
    }

    #[inline]
    fn find(&mut self, key: &CurrentKey) -> Option<&Entry<S>> {
        let bucket = self.locate(key)?;
        self.groups[key.local_group].get_bucket(bucket)
    }

    #[inline]
    fn find_mut(&mut self, key: &CurrentKey) -> Option<&mut Entry<S>> {
        let bucket = self.locate(key)?;
        self.groups[key.local_group].get_bucket_mut(bucket)
    }

    /// Writes every changed value to the raw store in one batch.
    fn write_back(&mut self) -> Result<(), StateError> {
        let Some(raw) = self.raw.as_mut() else { return Ok(()) };
        if raw.holds_writes() {
            // At a barrier, before a snapshot made off the task thread: only copies of the
            // changed values now; sorted, serialized and written there.
            let write = self.copy_changes();
            return self.raw.as_mut().expect("checked above").hold(write);
        }
        // All values in one buffer; (key group, key, value span) in the store's key order,
        // because RocksDB inserts keys that arrive in order much faster (its memtable
        // continues each search where the last one ended).
        let mut values = Vec::new();
        let mut spans: Vec<(u32, &[u8], usize, usize)> = Vec::new();
        let ttl = self.ttl.is_some();
        for (local, group) in self.groups.iter().enumerate() {
            let first = spans.len();
            for entry in group.iter().filter(|e| e.dirty) {
                let start = values.len();
                append_stored(&self.name, &entry.value, ttl.then_some(entry.expires_ms), &mut values)?;
                spans.push((self.first_key_group + local as u32, &entry.key, start, values.len()));
            }
            spans[first..].sort_unstable_by(|a, b| a.1.cmp(b.1));
        }
        raw.put_batch(&mut spans.iter().map(|&(kg, key, start, end)| (kg, key, &values[start..end])))?;
        for group in &mut self.groups {
            group.iter_mut().for_each(|e| e.dirty = false);
        }
        Ok(())
    }

    /// Copies the changed entries (keys into one buffer) and marks them written: the
    /// returned write puts them into the store, in its key order.
    fn copy_changes(&mut self) -> HeldWrite {
        let mut keys = Vec::new();
        let mut changed = Vec::new();
        for (local, group) in self.groups.iter_mut().enumerate() {
            for entry in group.iter_mut().filter(|e| e.dirty) {
                entry.dirty = false;
                let start = keys.len();
                keys.extend_from_slice(&entry.key);
                let key_group = self.first_key_group + local as u32;
                changed.push((key_group, start, keys.len(), entry.expires_ms, entry.value.clone()));
            }
        }
        let (name, ttl) = (self.name.clone(), self.ttl.is_some());
        Box::new(move |put| {
            changed.sort_unstable_by(|a, b| (a.0, &keys[a.1..a.2]).cmp(&(b.0, &keys[b.1..b.2])));
            let mut value = Vec::new();
            for (key_group, start, end, expires_ms, stored) in &changed {
                value.clear();
                append_stored(&name, stored, ttl.then_some(*expires_ms), &mut value)?;
                put(*key_group, &keys[*start..*end], &value);
            }
            Ok(())
        })
    }

    /// Makes room in the cache: writes back what changed, then drops whole key groups
    /// until half the cache is free (cheap, and the other half stays warm). While a
    /// snapshot of the store is being made, the cache grows instead, up to twice its size:
    /// values written back for the snapshot may not be applied yet, so none is dropped.
    fn make_room(&mut self) -> Result<(), StateError> {
        let Some(raw) = &self.raw else { return Ok(()) };
        if self.cached >= self.cache_entries_max {
            if raw.writes_wait() {
                if self.cached < self.cache_entries_max.saturating_mul(2) {
                    return Ok(());
                }
                raw.wait_for_writes();
            }
            self.write_back()?;
            let target = self.cache_entries_max / 2;
            // Start where the last eviction stopped, so no key group is always dropped.
            let count = self.groups.len();
            let mut step = 0;
            self.last_hit = None;
            while self.cached > target && step < count {
                let index = (self.evict_from + step) % count;
                self.cached -= self.groups[index].len();
                self.groups[index].clear();
                step += 1;
            }
            self.evict_from = (self.evict_from + step) % count;
        }
        Ok(())
    }

    fn insert_cached(
        &mut self,
        key: &CurrentKey,
        value: S,
        dirty: bool,
        expires_ms: u64,
    ) -> Result<&mut S, StateError> {
        self.make_room()?;
        self.cached += 1;
        let entry = Entry { key: StoredKey::new(&key.bytes), hash: key.hash, value, dirty, expires_ms };
        let inserted = self.groups[key.local_group].insert_unique(key.hash, entry, |e| e.hash);
        // The insert may have grown the table, moving every entry.
        self.last_hit = (key.epoch != 0).then_some((key.epoch, inserted.bucket_index()));
        Ok(&mut inserted.into_mut().value)
    }

    /// Brings the current key's value into the cache from the raw store, if it is there.
    fn load(&mut self, key: &CurrentKey) -> Result<(), StateError> {
        if self.find(key).is_some() {
            return Ok(());
        }
        let Some(raw) = &self.raw else { return Ok(()) };
        if let Some(bytes) = raw.get(key.key_group, &key.bytes)? {
            let (expires_ms, value_bytes) = split_stored(&bytes, self.ttl.is_some());
            let value = decode(&self.name, value_bytes)?;
            self.insert_cached(key, value, false, expires_ms)?;
        }
        Ok(())
    }

    /// The current key's value.
    pub fn get(&mut self, key: &CurrentKey) -> Result<Option<&S>, StateError> {
        if self.raw.is_some() {
            self.load(key)?;
        }
        self.expire_or_renew(key, true)?;
        Ok(self.find(key).map(|e| &e.value))
    }

    /// Sets the current key's value.
    pub fn put(&mut self, key: &CurrentKey, value: S) -> Result<(), StateError> {
        let expires_ms = self.expiry();
        match self.find_mut(key) {
            Some(entry) => {
                entry.value = value;
                entry.dirty = true;
                entry.expires_ms = expires_ms;
            }
            None => {
                self.insert_cached(key, value, true, expires_ms)?;
            }
        }
        Ok(())
    }

    /// The time to-live time is read from, wall-clock ms.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Changes the current key's value in place if it has one.
    pub fn modify_existing<R>(
        &mut self,
        key: &CurrentKey,
        change: impl FnOnce(&mut S) -> R,
    ) -> Result<Option<R>, StateError>
    where
        S: Default,
    {
        if self.get(key)?.is_none() {
            return Ok(None);
        }
        self.modify(key, S::default, change).map(Some)
    }

    /// Changes the current key's value in place (inserting `init()` first when absent).
    pub fn modify<R>(
        &mut self,
        key: &CurrentKey,
        init: impl FnOnce() -> S,
        change: impl FnOnce(&mut S) -> R,
    ) -> Result<R, StateError> {
        if self.raw.is_some() {
            self.load(key)?;
        }
        self.expire_or_renew(key, false)?;
        let expires_ms = self.expiry();
        let result = match self.find_mut(key) {
            Some(entry) => {
                entry.dirty = true;
                entry.expires_ms = expires_ms;
                change(&mut entry.value)
            }
            None => change(self.insert_cached(key, init(), true, expires_ms)?),
        };
        Ok(result)
    }

    /// Removes the current key's value and returns it.
    pub fn remove(&mut self, key: &CurrentKey) -> Result<Option<S>, StateError> {
        self.last_hit = None;
        let cached = match self.groups[key.local_group].find_entry(key.hash, |e| e.key.matches(key)) {
            Ok(entry) => {
                self.cached = self.cached.saturating_sub(1);
                Some(entry.remove().0.value)
            }
            Err(_) => None,
        };
        let Some(raw) = self.raw.as_mut() else { return Ok(cached) };
        let ttl = self.ttl.is_some();
        let stored = match cached {
            Some(value) => Some(value),
            None => raw
                .get(key.key_group, &key.bytes)?
                .map(|bytes| decode(&self.name, split_stored(&bytes, ttl).1))
                .transpose()?,
        };
        raw.delete(key.key_group, &key.bytes)?;
        Ok(stored)
    }

    /// Appends to the current key's list. A list that is not cached is not read: the
    /// elements go to the raw store as an append (RocksDB's merge), when it can and the
    /// state has no time to live (an append cannot tell whether the stored list expired).
    /// On the heap this is one lookup and no allocation.
    pub fn append<E: StateValue>(
        &mut self,
        key: &CurrentKey,
        elements: impl IntoIterator<Item = E>,
    ) -> Result<(), StateError>
    where
        S: Extend<E> + Default,
    {
        let store_appends = self.raw.as_ref().is_some_and(|raw| !raw.writes_wait());
        if store_appends && self.ttl.is_none() && self.find(key).is_none() {
            // Entering the store: the elements are serialized as a list anyway.
            let elements: Vec<E> = elements.into_iter().collect();
            encode(&self.name, &elements, &mut self.scratch)?;
            let raw = self.raw.as_mut().expect("checked above");
            if raw.append_list(key.key_group, &key.bytes, &self.scratch)? {
                return Ok(());
            }
            return self.modify(key, S::default, |list| list.extend(elements));
        }
        self.modify(key, S::default, |list| list.extend(elements))
    }

    /// Every cached (encoded key, value) of one key group, for tests and tools.
    pub fn entries_of_group(&self, local_group: usize) -> impl Iterator<Item = (&[u8], &S)> {
        self.groups[local_group].iter().map(|e| (&*e.key, &e.value))
    }
}

impl<S: StateValue> KeyedTable for HeapTable<S> {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn key_count(&self) -> usize {
        self.groups.iter().map(HashTable::len).sum()
    }

    fn flush(&mut self) -> Result<(), StateError> {
        self.write_back()
    }

    fn snapshot_key_group(&self, local_group: usize) -> Result<Option<Vec<u8>>, StateError> {
        match &self.raw {
            None => {
                // Expired values are left out (cleanup in full snapshots).
                let now = self.clock.now_ms();
                let mut entries: Vec<(&[u8], u64, &S)> = self.groups[local_group]
                    .iter()
                    .filter(|e| e.expires_ms > now)
                    .map(|e| (&*e.key, e.expires_ms, &e.value))
                    .collect();
                serialize_group(&self.name, &mut entries, self.ttl.is_some())
            }
            Some(raw) => {
                let key_group = self.first_key_group + local_group as u32;
                let layout = if self.ttl.is_some() { RawLayout::ValuesWithTtl } else { RawLayout::Values };
                canonical_key_group(raw.as_ref(), key_group, layout, self.clock.now_ms())
            }
        }
    }

    fn deferred_snapshot(&self) -> Option<DeferredKeyGroups> {
        if self.raw.is_some() {
            return None;
        }
        // A copy of the live entries now (keys of a key group in one buffer), sorted and
        // serialized later, off the task thread.
        let now = self.clock.now_ms();
        let mut groups = Vec::with_capacity(self.groups.len());
        for (local, group) in self.groups.iter().enumerate() {
            let mut keys = Vec::new();
            let mut entries = Vec::with_capacity(group.len());
            for entry in group.iter().filter(|e| e.expires_ms > now) {
                let start = keys.len();
                keys.extend_from_slice(&entry.key);
                entries.push((start, keys.len(), entry.expires_ms, entry.value.clone()));
            }
            if !entries.is_empty() {
                groups.push((self.first_key_group + local as u32, keys, entries));
            }
        }
        let (name, ttl) = (self.name.clone(), self.ttl.is_some());
        Some(Box::new(move || {
            let mut key_groups = Vec::with_capacity(groups.len());
            for (key_group, keys, entries) in &groups {
                let mut refs: Vec<(&[u8], u64, &S)> =
                    entries.iter().map(|(start, end, expiry, value)| (&keys[*start..*end], *expiry, value)).collect();
                if let Some(bytes) = serialize_group(&name, &mut refs, ttl)? {
                    key_groups.push((*key_group, bytes));
                }
            }
            Ok(key_groups)
        }))
    }

    fn restore_key_group(&mut self, local_group: usize, bytes: &[u8]) -> Result<(), StateError> {
        let key_group = self.first_key_group + local_group as u32;
        if let Some(raw) = self.raw.as_mut() {
            // The canonical entries hold the stored bytes already: find where each value
            // ends and write them all in one batch, without encoding anything again.
            let spans = stored_spans::<S>(&self.name, bytes, self.ttl.is_some())?;
            return raw.put_batch(&mut spans.into_iter().map(|(key, value)| (key_group, key, value)));
        }
        let corrupt = |e: postcard::Error| StateError::Deserialize { state: self.name.clone(), message: e.to_string() };
        let entries: Vec<(Vec<u8>, u64, S)> = match self.ttl {
            None => postcard::from_bytes::<Vec<(Vec<u8>, S)>>(bytes)
                .map_err(corrupt)?
                .into_iter()
                .map(|(k, v)| (k, u64::MAX, v))
                .collect(),
            Some(_) => postcard::from_bytes::<Vec<(Vec<u8>, ([u8; 8], S))>>(bytes)
                .map_err(corrupt)?
                .into_iter()
                .map(|(k, (expiry, v))| (k, u64::from_be_bytes(expiry), v))
                .collect(),
        };
        for (key, expires_ms, value) in entries {
            let hash = eddy_types::stable_hash(&key).0;
            let entry = Entry { key: StoredKey::new(&key), hash, value, dirty: false, expires_ms };
            self.groups[local_group].insert_unique(hash, entry, |e| e.hash);
        }
        self.last_hit = None;
        Ok(())
    }

    fn clear_all(&mut self) -> Result<(), StateError> {
        self.last_hit = None;
        self.groups.iter_mut().for_each(HashTable::clear);
        self.cached = 0;
        if let Some(raw) = self.raw.as_mut() {
            // A snapshot being made may still write values handed over to it.
            raw.wait_for_writes();
            for local in 0..self.groups.len() {
                let key_group = self.first_key_group + local as u32;
                let mut keys = Vec::new();
                raw.scan(key_group, &mut |key, _| keys.push(key.to_vec()))?;
                for key in keys {
                    raw.delete(key_group, &key)?;
                }
            }
        }
        Ok(())
    }
}

/// One key group's entries (key, expiry, value) in the canonical form: sorted by key, like
/// a RocksDB scan, so that snapshots are canonical byte for byte; `None` when empty.
fn serialize_group<S: StateValue>(
    name: &str,
    entries: &mut [(&[u8], u64, &S)],
    ttl: bool,
) -> Result<Option<Vec<u8>>, StateError> {
    if entries.is_empty() {
        return Ok(None);
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let serialized = if ttl {
        postcard::to_allocvec(
            &entries.iter().map(|(k, expiry, v)| (*k, (expiry.to_be_bytes(), *v))).collect::<Vec<_>>(),
        )
    } else {
        postcard::to_allocvec(&entries.iter().map(|(k, _, v)| (*k, *v)).collect::<Vec<_>>())
    };
    serialized.map(Some).map_err(|e| StateError::Serialize { state: name.to_string(), message: e.to_string() })
}

/// (key, stored value) byte spans.
type EntrySpans<'a> = Vec<(&'a [u8], &'a [u8])>;

/// The (key, stored value) byte spans of one key group's canonical entries (postcard of
/// `Vec<(key, value)>`, a value with its expiry first when `ttl`): each value is decoded
/// only to find where it ends.
fn stored_spans<'a, S: StateValue>(name: &str, bytes: &'a [u8], ttl: bool) -> Result<EntrySpans<'a>, StateError> {
    let corrupt = |message: String| StateError::Deserialize { state: name.to_string(), message };
    let truncated = || corrupt("truncated entries".into());
    let (count, mut rest) = read_varint(bytes).ok_or_else(truncated)?;
    let mut spans = Vec::with_capacity(count.min(1 << 20) as usize);
    for _ in 0..count {
        let (key_len, after_len) = read_varint(rest).ok_or_else(truncated)?;
        let key_len = usize::try_from(key_len).map_err(|_| truncated())?;
        if after_len.len() < key_len + if ttl { 8 } else { 0 } {
            return Err(truncated());
        }
        let (key, stored) = after_len.split_at(key_len);
        let value = if ttl { &stored[8..] } else { stored };
        let (_, after): (S, &[u8]) = postcard::take_from_bytes(value).map_err(|e| corrupt(e.to_string()))?;
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
                return Err(StateError::Backend(format!("a map entry key in key group {key_group} is malformed")));
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

struct Declared {
    meta: StateMeta,
    table: Box<dyn KeyedTable>,
}

/// Keyed state on the heap, for the key groups of one subtask.
pub struct HeapKeyedStateBackend {
    id: u64,
    range: KeyGroupRange,
    max_parallelism: MaxParallelism,
    current: CurrentKey,
    states: Vec<Declared>,
    /// Restored key groups of states not declared yet; applied when they are declared
    /// (the value types are only known then), carried into snapshots until then.
    restored: Vec<KeyedStateEntries>,
    /// Where values live when they do not all fit on the heap (RocksDB).
    raw_store: Option<Box<dyn RawStore>>,
    cache_entries_max: usize,
    clock: Arc<dyn Clock>,
}

impl HeapKeyedStateBackend {
    pub fn new(range: KeyGroupRange, max_parallelism: MaxParallelism) -> Self {
        Self {
            id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
            range,
            max_parallelism,
            current: CurrentKey::default(),
            states: Vec::new(),
            restored: Vec::new(),
            raw_store: None,
            cache_entries_max: 0,
            clock: Arc::new(WallClock),
        }
    }

    /// Reads time-to-live time from `clock` (tests pass a manual clock).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Keeps every value in `store` and at most `cache_entries_max` per state on the heap
    /// (a write-back cache of the hot keys).
    pub fn with_raw_store(mut self, store: Box<dyn RawStore>, cache_entries_max: usize) -> Self {
        self.raw_store = Some(store);
        self.cache_entries_max = cache_entries_max;
        self
    }

    /// Starts from `snapshot`: key groups outside this backend's range are skipped, so a
    /// snapshot of a larger or overlapping range can be given.
    pub fn with_restored(mut self, snapshot: KeyedStateSnapshot) -> Self {
        self.set_restored(snapshot);
        self
    }

    /// A heap backend for `range` that starts from `snapshot`.
    pub fn restored(range: KeyGroupRange, max_parallelism: MaxParallelism, snapshot: KeyedStateSnapshot) -> Self {
        Self::new(range, max_parallelism).with_restored(snapshot)
    }
}

impl HeapKeyedStateBackend {
    /// Writes what only the heap holds to the raw store.
    fn flush_all(&mut self) -> Result<(), StateError> {
        self.states.iter_mut().try_for_each(|d| d.table.flush())
    }

    /// Tables of the raw store that no state declared (restored from native files).
    fn undeclared_raw_tables(&self) -> Vec<(String, RawLayout)> {
        let Some(store) = &self.raw_store else { return Vec::new() };
        store.tables().into_iter().filter(|(name, _)| !self.states.iter().any(|d| d.meta.name == *name)).collect()
    }
}

impl KeyedStateBackend for HeapKeyedStateBackend {
    fn key_group_range(&self) -> KeyGroupRange {
        self.range
    }

    fn max_parallelism(&self) -> MaxParallelism {
        self.max_parallelism
    }

    fn set_current_key(&mut self, encoded_key: &[u8], hash: KeyHash) -> Result<KeyGroup, StateError> {
        let key_group = assign_to_key_group(hash, self.max_parallelism);
        if !self.range.contains(key_group) {
            return Err(StateError::KeyGroupOutOfRange { key_group: key_group.0, range: self.range.to_string() });
        }
        let current = &mut self.current;
        current.bytes.clear();
        current.bytes.extend_from_slice(encoded_key);
        current.inline = InlineKey::of(encoded_key);
        current.hash = hash.0;
        current.key_group = key_group.0;
        current.local_group = (key_group.0 - self.range.start) as usize;
        current.is_set = true;
        current.epoch = current.epoch.wrapping_add(1).max(1);
        Ok(key_group)
    }

    fn clear_current_key(&mut self) {
        self.current.is_set = false;
    }

    fn register(
        &mut self,
        meta: StateMeta,
        create: &mut dyn FnMut(TableSpec) -> Box<dyn KeyedTable>,
    ) -> Result<StateId, StateError> {
        if let Some(index) = self.states.iter().position(|d| d.meta.name == meta.name) {
            let first = &self.states[index].meta;
            if first.kind != meta.kind || first.stored_type_id != meta.stored_type_id || first.ttl != meta.ttl {
                return Err(StateError::IncompatibleDeclaration {
                    name: meta.name.clone(),
                    first: first.describe(),
                    second: meta.describe(),
                });
            }
            return Ok(StateId { backend_id: self.id, index: index as u32 });
        }
        // Checked before the store creates a table under the name.
        if let Some(restored) = self.restored.iter().find(|r| r.name == meta.name) {
            if restored.ttl != meta.ttl.is_some() {
                let with = |ttl: bool| if ttl { "with a time to live" } else { "without a time to live" };
                return Err(StateError::IncompatibleDeclaration {
                    name: meta.name.clone(),
                    first: format!("restored state {}", with(restored.ttl)),
                    second: meta.describe(),
                });
            }
        }
        let layout = RawLayout::of(&meta);
        let raw = match self.raw_store.as_mut() {
            Some(store) => Some(store.table(&meta.name, layout)?),
            None => None,
        };
        let spec = TableSpec {
            layout,
            first_key_group: self.range.start,
            group_count: self.range.len() as usize,
            raw,
            cache_entries_max: self.cache_entries_max,
            clock: self.clock.clone(),
        };
        let mut table = create(spec);
        if let Some(pos) = self.restored.iter().position(|r| r.name == meta.name) {
            for (key_group, bytes) in self.restored.swap_remove(pos).key_groups {
                table.restore_key_group((key_group - self.range.start) as usize, &bytes)?;
            }
        }
        self.states.push(Declared { meta, table });
        Ok(StateId { backend_id: self.id, index: (self.states.len() - 1) as u32 })
    }

    fn current_key_and_table(
        &mut self,
        id: StateId,
        name: &str,
    ) -> Result<(&CurrentKey, &mut dyn KeyedTable), StateError> {
        if id.backend_id != self.id {
            return Err(StateError::ForeignHandle { state: name.to_string() });
        }
        if !self.current.is_set {
            return Err(StateError::NoCurrentKey { state: name.to_string() });
        }
        let declared = self
            .states
            .get_mut(id.index as usize)
            .ok_or_else(|| StateError::ForeignHandle { state: name.to_string() })?;
        Ok((&self.current, declared.table.as_mut()))
    }

    fn state_names(&self) -> Vec<String> {
        self.states.iter().map(|d| d.meta.name.clone()).collect()
    }

    fn table_by_name(&self, name: &str) -> Option<&dyn KeyedTable> {
        self.states.iter().find(|d| d.meta.name == name).map(|d| d.table.as_ref())
    }

    fn set_restored(&mut self, snapshot: KeyedStateSnapshot) {
        let range = self.range;
        self.restored = snapshot
            .states
            .into_iter()
            .map(|mut s| {
                s.key_groups.retain(|(kg, _)| range.contains(KeyGroup(*kg)));
                s
            })
            .collect();
    }

    fn snapshot(&mut self) -> Result<KeyedStateSnapshot, StateError> {
        self.flush_all()?;
        let mut states = self.restored.clone();
        for declared in &self.states {
            let mut key_groups = Vec::new();
            for local in 0..self.range.len() as usize {
                if let Some(bytes) = declared.table.snapshot_key_group(local)? {
                    key_groups.push((self.range.start + local as u32, bytes));
                }
            }
            states.push(KeyedStateEntries {
                name: declared.meta.name.clone(),
                ttl: declared.meta.ttl.is_some(),
                key_groups,
            });
        }
        // Tables restored from native files and not declared since: read from the store.
        let now = self.clock.now_ms();
        for (name, layout) in self.undeclared_raw_tables() {
            let store = self.raw_store.as_mut().expect("undeclared raw tables come from a raw store");
            let table = store.table(&name, layout)?;
            let mut key_groups = Vec::new();
            for key_group in self.range.iter() {
                if let Some(bytes) = canonical_key_group(table.as_ref(), key_group.0, layout, now)? {
                    key_groups.push((key_group.0, bytes));
                }
            }
            states.push(KeyedStateEntries { name, ttl: layout.has_ttl(), key_groups });
        }
        Ok(KeyedStateSnapshot { key_group_range: Some(self.range), states, ..KeyedStateSnapshot::default() })
    }

    fn snapshot_for_checkpoint(
        &mut self,
        checkpoint_id: u64,
        canonical: bool,
    ) -> Result<KeyedStateSnapshot, StateError> {
        if let Some(store) = self.raw_store.as_mut() {
            store.prepare_snapshot();
        }
        if let Err(e) = self.flush_all() {
            if let Some(store) = self.raw_store.as_mut() {
                store.abort_snapshot()?;
            }
            return Err(e);
        }
        let native = match self.raw_store.as_mut() {
            Some(store) => store.native_snapshot(checkpoint_id, canonical)?,
            None => None,
        };
        if let Some(native) = native {
            // Restored canonical states not declared yet cannot go into the store (their
            // types are unknown), so they travel beside its files.
            return Ok(KeyedStateSnapshot {
                key_group_range: Some(self.range),
                states: self.restored.clone(),
                native: vec![native],
                deferred: Unstored::default(),
            });
        }
        if self.raw_store.is_some() {
            return self.snapshot();
        }
        // On the heap: copies of the values now, serialized in the asynchronous part.
        let mut deferred = Vec::with_capacity(self.states.len());
        for declared in &self.states {
            match declared.table.deferred_snapshot() {
                Some(build) => {
                    deferred.push(DeferredState::new(&declared.meta.name, declared.meta.ttl.is_some(), build))
                }
                None => return self.snapshot(),
            }
        }
        Ok(KeyedStateSnapshot {
            key_group_range: Some(self.range),
            states: self.restored.clone(),
            native: Vec::new(),
            deferred: Unstored(deferred),
        })
    }

    fn table_by_name_mut(&mut self, name: &str) -> Option<&mut dyn KeyedTable> {
        match self.states.iter_mut().find(|d| d.meta.name == name) {
            Some(d) => Some(d.table.as_mut()),
            None => None,
        }
    }
}
