//! [`HeapTable`]: one declared state's values on the heap, one hash table per key group,
//! as Rust values (no serialization until a snapshot): all of them (heap backend), or a
//! write-back cache of the hot ones over a raw store (RocksDB).
//!
//! Lookups take the current key's stable hash, computed once per record when the key is
//! set, and remember where they found it, so that a read and the write after it for the
//! same record look the key up once.
//!
//! A checkpoint of the heap takes the key groups as they are, in O(1) each: they are
//! shared with the snapshot and copied on the first change after it (see [`Group`]), so
//! the task thread's part of a checkpoint does not grow with the state.

use super::backend::TableSpec;
use super::backend::{CurrentKey, DeferredKeyGroups, KeyedTable, NamespaceForm, StoredKey};
use super::canonical::{append_stored, canonical_key_group, serialize_group, split_stored, stored_spans};
use super::cow::{Group, Spares};
use super::heap_chain::{ChangesWriter, DeferredChanges};
use super::heap_group::{ControlHint, Entry, KeyGroupTable, Loc};
use super::raw::{HeldWrite, RawLayout, RawTable};
use crate::descriptor::{StateTtlConfig, TtlUpdateType};
use crate::error::{StateError, StateErrorKind};
use crate::StateValue;
use eddy_types::{Clock, WallClock};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

/// The values of one state, per key group and key: all of them (heap backend), or a
/// bounded write-back cache of the hot ones in front of a [`RawTable`] (RocksDB). Changed
/// values are written to the raw store in one batch when the cache is full, and handed
/// over to the store's snapshot at a barrier; checkpoints, not the raw store, make state
/// durable, so nothing is lost.
pub struct HeapTable<S> {
    name: String,
    groups: Vec<Group<KeyGroupTable<S>>>,
    /// Memory for the copies of groups that a snapshot shares.
    spares: Spares<KeyGroupTable<S>>,
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
    /// The change epoch of values changed now; entries changed in an epoch up to
    /// `written` are in the raw store or handed over to a snapshot of it.
    epoch: u64,
    written: u64,
    /// (key epoch, bucket) of the last key found: `value()` then `update()` of one record
    /// look the key up once. Cleared by everything that moves or drops entries.
    last_hit: Option<(u64, Loc)>,
    /// Per key group, where its last namespace's table was found ([`KeyGroupTable`]).
    space_memo: Vec<usize>,
    /// Per key group, where its table of keys was last seen ([`ControlHint`]; kept while
    /// the table is [`Self::hinted`]): a prefetch of the next key goes there without
    /// reading the table.
    control_hints: Vec<ControlHint>,
    /// (key group, key) of every entry removed since the last incremental snapshot, while
    /// the backend keeps a chain of them ([`super::heap_chain`]); `None`: not tracked, so
    /// the next incremental snapshot takes every entry.
    removed: Option<Vec<(u32, StoredKey)>>,
    /// The clock when the last incremental snapshot was taken: values that expired since
    /// without changing are removals in the next one.
    snapshot_ms: u64,
    /// Whether a function looked up the current key (no namespace) since the key was last
    /// set: then the next key is looked up as soon as it is set ([`KeyedTable::resolve_ahead`]).
    touched: bool,
    /// Whether values were looked up in a namespace (a window's state): only then does a
    /// prefetch of a namespaced entry ([`KeyedTable::prefetch_namespaced`]) look here.
    namespaced: bool,
}

/// Values of a table beyond which the next key is prefetched where its lookup will start
/// ([`ControlHint`]), without reading the table: twice a core's L2 cache here (2 MiB).
const HINTED_BYTES_MIN: usize = 4 << 20;

/// Asks the CPU to bring `value`'s cache lines in without waiting for them: a hint, which
/// reads nothing the program sees.
#[inline(always)]
fn prefetch_read<T>(value: &T) {
    let first = value as *const T as usize;
    prefetch_line(first);
    // The last byte too: a value may straddle two cache lines.
    prefetch_line(first.wrapping_add(std::mem::size_of::<T>().saturating_sub(1)));
}

/// Asks the CPU to bring in the cache line of `address`: a hint, also for an address that
/// may be stale (a [`ControlHint`]'s).
///
/// The workspace's one `unsafe` block: the prefetch intrinsic is `unsafe` only because it
/// takes a raw pointer, and a prefetch never dereferences it nor faults, whatever the
/// address. A plain load would not do: the CPU stalls on it when its reorder window fills.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch_line(address: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch neither reads memory the program observes nor faults, for any
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

fn encode<S: StateValue>(name: &str, value: &S, out: &mut Vec<u8>) -> Result<(), StateError> {
    out.clear();
    let bytes = postcard::to_extend(value, std::mem::take(out)).map_err(|e| {
        StateError::from(StateErrorKind::Serialize { state: name.to_string(), message: eddy_types::chain(&e) })
    })?;
    *out = bytes;
    Ok(())
}

fn decode<S: StateValue>(name: &str, bytes: &[u8]) -> Result<S, StateError> {
    postcard::from_bytes(bytes).map_err(|e| {
        StateError::from(StateErrorKind::Deserialize { state: name.to_string(), message: eddy_types::chain(&e) })
    })
}

/// (key group, key, start, end) of one changed value in the buffer of stored values.
type ChangeSpan<'a> = (u32, &'a [u8], usize, usize);

/// The entries of `groups` changed after epoch `since`, as stored values in one buffer and
/// their spans in the store's key order (key group, then key), because RocksDB inserts
/// keys that arrive in order much faster (its memtable continues each search where the
/// last one ended).
fn changes<'a, S: StateValue>(
    name: &str,
    ttl: bool,
    since: u64,
    groups: impl Iterator<Item = (u32, &'a KeyGroupTable<S>)>,
) -> Result<(Vec<u8>, Vec<ChangeSpan<'a>>), StateError> {
    let mut values = Vec::new();
    let mut spans: Vec<ChangeSpan<'a>> = Vec::new();
    for (key_group, group) in groups {
        let first = spans.len();
        for entry in group.iter().filter(|e| e.changed > since) {
            let start = values.len();
            append_stored(name, &entry.value, ttl.then_some(entry.expires_ms), &mut values)?;
            spans.push((key_group, &entry.key, start, values.len()));
        }
        spans[first..].sort_unstable_by(|a, b| a.1.cmp(b.1));
    }
    Ok((values, spans))
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
            groups: (0..spec.group_count).map(|_| Group::Owned(KeyGroupTable::default())).collect(),
            spares: Spares::new(spec.group_count),
            first_key_group: spec.first_key_group,
            raw: spec.raw,
            cached: 0,
            cache_entries_max: spec.cache_entries_max.max(1),
            scratch: Vec::new(),
            ttl,
            clock: spec.clock,
            evict_from: 0,
            epoch: 1,
            written: 0,
            last_hit: None,
            space_memo: vec![0; spec.group_count],
            control_hints: vec![ControlHint::default(); spec.group_count],
            removed: None,
            snapshot_ms: 0,
            touched: false,
            namespaced: false,
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
        let (now, epoch) = (self.clock.now_ms(), self.epoch);
        // Looked at first, changed only when it must be: a change copies a key group a
        // snapshot shares.
        let expired = match self.find(key) {
            None => return Ok(()),
            Some(entry) => entry.expires_ms <= now,
        };
        if expired {
            self.remove(key)?;
        } else if reading && ttl.update_type == TtlUpdateType::OnReadAndWrite {
            if let Some(entry) = self.find_mut(key) {
                entry.expires_ms = now.saturating_add(ttl.ttl_ms);
                entry.changed = epoch;
            }
        }
        Ok(())
    }

    /// Whether the next key is prefetched through [`ControlHint`]s: when the values are
    /// far larger than a core's cache ([`HINTED_BYTES_MIN`]). Reading the control bytes
    /// first then waits for memory (W4 on the heap, 2 M keys: `prefetch` was 30 % of the
    /// task thread's samples; with hints W4 runs 35 % faster). In a table the cache holds,
    /// that read is a hit, and the entry it names is the one line to fetch, not five.
    #[inline]
    fn hinted(&self) -> bool {
        self.cached * std::mem::size_of::<Entry<S>>() >= HINTED_BYTES_MIN
    }

    /// The bucket of the current key's entry in its key group's table, if cached.
    #[inline]
    fn locate(&mut self, key: &CurrentKey) -> Option<Loc> {
        self.touched = key.bytes.len() == key.key_len;
        self.namespaced |= !self.touched;
        self.locate_untouched(key)
    }

    #[inline]
    fn locate_untouched(&mut self, key: &CurrentKey) -> Option<Loc> {
        if let Some((epoch, at)) = self.last_hit {
            // Checked all the same (a few instructions: the entry was just read), so that a
            // memo gone stale can never serve another key's value.
            if epoch == key.epoch
                && key.epoch != 0
                && self.groups[key.local_group].get().get(at).is_some_and(|e| e.key.matches(key))
            {
                return Some(at);
            }
        }
        let memo = &mut self.space_memo[key.local_group];
        let group = self.groups[key.local_group].get();
        let at = group.locate(key, memo)?;
        if self.hinted() {
            if let Some(hint) = group.control_hint(at) {
                self.control_hints[key.local_group] = hint;
            }
        }
        self.last_hit = Some((key.epoch, at));
        Some(at)
    }

    #[inline]
    fn find(&mut self, key: &CurrentKey) -> Option<&Entry<S>> {
        let at = self.locate(key)?;
        self.groups[key.local_group].get().get(at)
    }

    #[inline]
    fn find_mut(&mut self, key: &CurrentKey) -> Option<&mut Entry<S>> {
        let at = self.locate(key)?;
        self.groups[key.local_group].get_mut(&self.spares).get_mut(at)
    }

    /// Writes every changed value to the raw store in one batch.
    fn write_back(&mut self) -> Result<(), StateError> {
        let Some(raw) = self.raw.as_mut() else { return Ok(()) };
        let (name, ttl, since) = (self.name.clone(), self.ttl.is_some(), self.written);
        if raw.holds_writes() {
            // Handed over: from now on the write is the store's (a failure of it fails the
            // store for every later access), so these changes count as written.
            (self.written, self.epoch) = (self.epoch, self.epoch + 1);
            // At a barrier, before a snapshot made off the task thread: the key groups
            // are shared with the write (O(1) each, copied on the next change); the
            // changed values are serialized and written there.
            let groups = self.share_groups();
            let write: HeldWrite = Box::new(move |put| {
                let (values, spans) = changes(&name, ttl, since, groups.iter().map(|(kg, g)| (*kg, &**g)))?;
                spans.iter().for_each(|&(kg, key, start, end)| put(kg, key, &values[start..end]));
                Ok(())
            });
            return self.raw.as_mut().expect("checked above").hold(write);
        }
        let first_key_group = self.first_key_group;
        let groups = self.groups.iter().enumerate().map(|(local, g)| (first_key_group + local as u32, g.get()));
        let (values, spans) = changes(&name, ttl, since, groups)?;
        raw.put_batch(&mut spans.iter().map(|&(kg, key, start, end)| (kg, key, &values[start..end])))?;
        // Only once they are in the store: a failed write leaves them dirty, to be
        // written again rather than dropped with an evicted key group.
        (self.written, self.epoch) = (self.epoch, self.epoch + 1);
        Ok(())
    }

    /// (key group, table) of every non-empty key group, shared from now on with whoever
    /// reads them off the task thread (a snapshot, a write handed over): O(1) each, and a
    /// change copies a group first.
    fn share_groups(&mut self) -> Vec<(u32, Arc<KeyGroupTable<S>>)> {
        let first_key_group = self.first_key_group;
        self.groups
            .iter_mut()
            .enumerate()
            .filter(|(_, group)| !group.get().is_empty())
            .map(|(local, group)| (first_key_group + local as u32, group.share()))
            .collect()
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
                self.cached -= self.groups[index].get().len();
                self.groups[index] = Group::Owned(KeyGroupTable::default());
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
        absent_in_raw: bool,
    ) -> Result<&mut S, StateError> {
        self.make_room()?;
        self.cached += 1;
        let changed = if dirty { self.epoch } else { 0 };
        // On the heap alone, every new entry is absent from what the last snapshot holds.
        let absent_in_raw_since = if absent_in_raw || self.raw.is_none() { self.epoch } else { 0 };
        let entry = Entry { key: StoredKey::of_current(key), value, changed, expires_ms, absent_in_raw_since };
        let memo = &mut self.space_memo[key.local_group];
        let (at, inserted) = self.groups[key.local_group].get_mut(&self.spares).insert(key, entry, memo);
        // The insert may have grown the table, moving every entry (and the control bytes
        // its hint names, until the next key found there).
        self.last_hit = (key.epoch != 0).then_some((key.epoch, at));
        Ok(&mut inserted.value)
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
            self.insert_cached(key, value, false, expires_ms, false)?;
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
        let (expires_ms, epoch) = (self.expiry(), self.epoch);
        match self.find_mut(key) {
            Some(entry) => {
                entry.value = value;
                entry.changed = epoch;
                entry.expires_ms = expires_ms;
            }
            None => {
                self.insert_cached(key, value, true, expires_ms, false)?;
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
        // Loaded: after this, a key the table has not cached is not in the raw store.
        let loaded = self.raw.is_some();
        if loaded {
            self.load(key)?;
        }
        self.expire_or_renew(key, false)?;
        let (expires_ms, epoch) = (self.expiry(), self.epoch);
        let result = match self.find_mut(key) {
            Some(entry) => {
                entry.changed = epoch;
                entry.expires_ms = expires_ms;
                change(&mut entry.value)
            }
            None => change(self.insert_cached(key, init(), true, expires_ms, loaded)?),
        };
        Ok(result)
    }

    /// Sets the current key's value to `f` of its unexpired value (`None` when it has none):
    /// a reducing or aggregating state's `add`. Over a raw store (RocksDB) it changes the
    /// value in place, in one lookup (the old value is cloned for `f`), rather than remove
    /// it, which deletes it from the store, and put it back; on the heap a remove and a put
    /// move the value without a clone.
    pub fn replace_with(&mut self, key: &CurrentKey, f: impl FnOnce(Option<S>) -> S) -> Result<(), StateError> {
        if self.raw.is_none() {
            let old = self.remove(key)?;
            return self.put(key, f(old));
        }
        let f = std::cell::Cell::new(Some(f));
        let inserted = std::cell::Cell::new(false);
        let init = || {
            inserted.set(true);
            f.take().expect("called once")(None)
        };
        self.modify(key, init, |value| {
            if !inserted.get() {
                *value = f.take().expect("called once")(Some(value.clone()));
            }
        })
    }

    /// Removes the current key's value and returns it, unless it had expired (then it is
    /// removed all the same: a reducing or aggregating state's `add` must not fold an
    /// expired value in, as Flink's TTL states do not).
    pub fn remove(&mut self, key: &CurrentKey) -> Result<Option<S>, StateError> {
        let now = self.ttl.map(|_| self.clock.now_ms());
        let live = |expires_ms: u64| now.is_none_or(|now| expires_ms > now);
        // A key that is not there leaves a shared key group unshared (no copy).
        let mut never_written = false;
        let cached = match self.locate(key) {
            Some(at) => {
                self.last_hit = None;
                // Removed where it was found: one probe of the table, not two.
                match self.groups[key.local_group].get_mut(&self.spares).remove(at) {
                    Some(entry) => {
                        self.cached = self.cached.saturating_sub(1);
                        never_written = entry.absent_in_raw_since > self.written;
                        // An entry born since the last snapshot needs no removal in the next.
                        if let Some(removed) = self.removed.as_mut().filter(|_| !never_written) {
                            removed.push((key.key_group, entry.key));
                        }
                        Some((entry.expires_ms, entry.value))
                    }
                    None => None,
                }
            }
            None => None,
        };
        let unexpired = |(expires_ms, value): (u64, S)| live(expires_ms).then_some(value);
        let Some(raw) = self.raw.as_mut() else { return Ok(cached.and_then(unexpired)) };
        if never_written {
            return Ok(cached.and_then(unexpired));
        }
        let ttl = self.ttl.is_some();
        let stored = match cached {
            Some(found) => unexpired(found),
            None => match raw.get(key.key_group, &key.bytes)? {
                Some(bytes) => match split_stored(&bytes, ttl) {
                    (expires_ms, value) if live(expires_ms) => Some(decode(&self.name, value)?),
                    _ => None,
                },
                None => None,
            },
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

    /// Brings in the entry of `hash` (in `namespace`, its form and bytes) in key group
    /// `local_group`, if there is one: the first entry whose tag matches, almost always
    /// the key's (telling needs the very load this prefetch is for).
    #[inline]
    fn prefetch_entry(&self, local_group: usize, hash: u64, namespace: Option<(&NamespaceForm, &[u8])>) {
        let memo = self.space_memo.get(local_group).copied().unwrap_or(0);
        if let Some(entry) = self.groups.get(local_group).and_then(|g| g.get().probable(hash, namespace, memo)) {
            prefetch_read(entry);
        }
    }

    /// Every cached (encoded key, value) of one key group, for tests and tools.
    pub fn entries_of_group(&self, local_group: usize) -> impl Iterator<Item = (&[u8], &S)> {
        self.groups[local_group].get().iter().map(|e| (&*e.key, &e.value))
    }
}

/// A key group's entries still alive at `now`, as a full snapshot writes them (key,
/// expiry, value): expired values are left out, which is their cleanup in full snapshots.
fn unexpired<S>(group: &KeyGroupTable<S>, now: u64) -> impl Iterator<Item = (&[u8], u64, &S)> {
    group.iter().filter(move |e| e.expires_ms > now).map(|e| (&*e.key, e.expires_ms, &e.value))
}

impl<S: StateValue> KeyedTable for HeapTable<S> {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    #[inline]
    fn prefetch(&self, local_group: usize, hash: u64) -> usize {
        if !self.touched {
            return 0;
        }
        let hint = self.control_hints.get(local_group).filter(|_| self.hinted());
        match hint.and_then(|hint| hint.probe_start::<S>(hash)) {
            Some(lines) => lines.into_iter().for_each(prefetch_line),
            None => self.prefetch_entry(local_group, hash, None),
        }
        self.cached * std::mem::size_of::<Entry<S>>()
    }

    #[inline]
    fn prefetch_namespaced(&self, local_group: usize, hash: u64, namespace: &[u8], form: &NamespaceForm) {
        if self.namespaced {
            self.prefetch_entry(local_group, hash, Some((form, namespace)));
        }
    }

    #[inline]
    fn resolve_ahead(&mut self, key: &CurrentKey) {
        if std::mem::take(&mut self.touched) {
            self.locate_untouched(key);
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn key_count(&self) -> usize {
        self.groups.iter().map(|g| g.get().len()).sum()
    }

    fn flush(&mut self) -> Result<(), StateError> {
        self.write_back()
    }

    fn snapshot_key_group(&self, local_group: usize) -> Result<Option<Vec<u8>>, StateError> {
        match &self.raw {
            None => {
                let now = self.clock.now_ms();
                let entries = unexpired(self.groups[local_group].get(), now);
                serialize_group(&self.name, entries, self.ttl.is_some(), &mut Vec::new())
            }
            Some(raw) => {
                let key_group = self.first_key_group + local_group as u32;
                let layout = if self.ttl.is_some() { RawLayout::ValuesWithTtl } else { RawLayout::Values };
                canonical_key_group(raw.as_ref(), key_group, layout, self.clock.now_ms())
            }
        }
    }

    fn deferred_changes(&mut self, full: bool) -> Option<DeferredChanges> {
        if self.raw.is_some() {
            return None;
        }
        // Everything when asked, or when removals were not tracked since the last one.
        let full = full || self.removed.is_none();
        let removed = self.removed.replace(Vec::new()).unwrap_or_default();
        // Values changed from now on belong to the next snapshot.
        let since = if full { 0 } else { self.written };
        (self.written, self.epoch) = (self.epoch, self.epoch + 1);
        let now = self.clock.now_ms();
        let expired_after = if full { now } else { std::mem::replace(&mut self.snapshot_ms, now) };
        self.snapshot_ms = now;
        let groups = self.share_groups();
        let (name, ttl, spares) = (self.name.clone(), self.ttl.is_some(), self.spares.clone());
        let write = Box::new(move |out: &mut ChangesWriter| {
            let mut removed_by_group: HashMap<u32, Vec<StoredKey>> = HashMap::new();
            for (key_group, key) in removed {
                removed_by_group.entry(key_group).or_default().push(key);
            }
            let mut stored = Vec::new();
            // Each group let go once framed: a change to it after that copies nothing.
            for (key_group, group) in groups {
                for key in removed_by_group.remove(&key_group).unwrap_or_default() {
                    out.remove(&key);
                }
                // Changed since, or expired since without a change (a full snapshot leaves
                // expired values out).
                let expired_now = |e: &Entry<S>| e.expires_ms <= now && e.expires_ms > expired_after;
                for entry in group.iter().filter(|e| full || e.changed > since || expired_now(e)) {
                    if entry.expires_ms <= now {
                        out.remove(&entry.key);
                        continue;
                    }
                    stored.clear();
                    append_stored(&name, &entry.value, ttl.then_some(entry.expires_ms), &mut stored)?;
                    out.upsert(&entry.key, &stored);
                }
                out.end_key_group(key_group);
                spares.give_back(group);
            }
            // Key groups emptied since: only removals.
            for (key_group, keys) in removed_by_group {
                keys.iter().for_each(|key| out.remove(key));
                out.end_key_group(key_group);
            }
            Ok(())
        });
        Some(DeferredChanges { full, write })
    }

    fn deferred_snapshot(&mut self) -> Option<DeferredKeyGroups> {
        if self.raw.is_some() {
            return None;
        }
        // The key groups as they are now, shared (O(1) each); filtered, sorted and
        // serialized later, off the task thread, while changes copy a group first.
        let now = self.clock.now_ms();
        let groups = self.share_groups();
        let (name, ttl, spares) = (self.name.clone(), self.ttl.is_some(), self.spares.clone());
        Some(Box::new(move || {
            let mut key_groups = Vec::with_capacity(groups.len());
            let mut order = Vec::new();
            // Each group is let go once serialized, as the incremental writer does: a
            // change to it after that takes it back without copying it. Held to the end,
            // every group the task touched meanwhile was copied, doubling a large state.
            for (key_group, group) in groups {
                let entries = unexpired(&group, now);
                if let Some(bytes) = serialize_group(&name, entries, ttl, &mut order)? {
                    key_groups.push((key_group, bytes));
                }
                spares.give_back(group);
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
        let corrupt = |e: postcard::Error| {
            StateError::from(StateErrorKind::Deserialize { state: self.name.clone(), message: eddy_types::chain(&e) })
        };
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
        // Counted as `insert_cached` counts: the size the prefetch decision reads.
        self.cached += entries.len();
        for (key, expires_ms, value) in entries {
            let hash = eddy_types::stable_hash(&key).0;
            let entry = Entry { key: StoredKey::new(&key), value, changed: 0, expires_ms, absent_in_raw_since: 0 };
            self.groups[local_group].get_mut(&self.spares).insert_restored(hash, entry);
        }
        self.last_hit = None;
        Ok(())
    }

    fn clear_all(&mut self) -> Result<(), StateError> {
        self.last_hit = None;
        self.removed = None;
        self.groups.iter_mut().for_each(|g| *g = Group::Owned(KeyGroupTable::default()));
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

#[cfg(test)]
mod tests {
    use super::super::heap_group::tests::current;
    use super::*;

    /// Every key's value as a snapshot of `table` taken now holds it, once written.
    fn snapshot_of(table: &mut HeapTable<u64>) -> impl FnOnce() -> HashMap<Vec<u8>, u64> {
        let build = table.deferred_snapshot().expect("a heap table defers its snapshot");
        move || {
            let mut values = HashMap::new();
            for (_, bytes) in build().expect("snapshot") {
                for (key, value) in postcard::from_bytes::<Vec<(Vec<u8>, u64)>>(&bytes).expect("canonical") {
                    assert!(values.insert(key, value).is_none(), "a key twice in a snapshot");
                }
            }
            values
        }
    }

    #[test]
    fn key_groups_copied_after_a_snapshot_go_into_the_memory_it_gave_back_holding_exactly_their_entries() {
        const GROUPS: usize = 4;
        let mut table: HeapTable<u64> = HeapTable::new("counts", GROUPS);
        // Keys without a namespace, in one of three windows, and restored ones in a window
        // (kept in the keys' table, see `heap_group`).
        let namespace = |k: u32| -> Vec<u8> {
            match k % 4 {
                0 => Vec::new(),
                w if k < 1000 => (w as u64).to_be_bytes().to_vec(),
                _ => 9u64.to_be_bytes().to_vec(),
            }
        };
        let stored = |k: u32| [k.to_be_bytes().as_slice(), &namespace(k)].concat();
        let mut epoch = 1;
        // Each access a new epoch, as setting the key makes one (a lookup memo is per epoch).
        let mut key = |k: u32| {
            let mut key = current(&k.to_be_bytes(), &namespace(k));
            (key.local_group, key.epoch) = (k as usize % GROUPS, epoch);
            epoch += 1;
            key
        };
        let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
        let restored: Vec<u32> = (1001..1040).step_by(4).collect();
        for group in 0..GROUPS {
            let entries: Vec<(Vec<u8>, u64)> =
                restored.iter().filter(|&&k| k as usize % GROUPS == group).map(|&k| (stored(k), k as u64)).collect();
            table.restore_key_group(group, &postcard::to_allocvec(&entries).unwrap()).unwrap();
            expected.extend(entries);
        }
        let keys: Vec<u32> = (0..400u32).chain(restored.iter().copied()).collect();
        for &k in keys.iter().filter(|&&k| k < 1000) {
            table.put(&key(k), k as u64).unwrap();
            expected.insert(stored(k), k as u64);
        }
        for round in 1..=3u64 {
            let taken = expected.clone();
            let snapshot = snapshot_of(&mut table);
            // Every group changes while the snapshot holds it: each is copied, from round 2
            // on into its spare. Round 2 removes keys (a third of every kind).
            for &k in &keys {
                if round == 2 && k % 3 == 0 {
                    assert_eq!(table.remove(&key(k)).unwrap(), expected.remove(&stored(k)), "key {k}");
                } else if expected.contains_key(&stored(k)) {
                    table.put(&key(k), k as u64 + round * 1000).unwrap();
                    expected.insert(stored(k), k as u64 + round * 1000);
                }
            }
            let held = |spares: &Spares<KeyGroupTable<u64>>| {
                let tables = spares.held();
                (tables.len(), tables.iter().map(|table| table.iter().count()).sum::<usize>())
            };
            let held_while_shared = held(&table.spares);
            let entries_taken = taken.len();
            assert_eq!(snapshot(), taken, "round {round}: the snapshot holds the values at the barrier");
            assert_eq!(held_while_shared, (0, 0), "round {round}: the copies took every spare there was");
            // The groups as the barrier left them, one per group, to be copied over next.
            assert_eq!(held(&table.spares), (GROUPS, entries_taken), "round {round}: one spare per copied group");
            for &k in &keys {
                let want = expected.get(&stored(k)).copied();
                assert_eq!(table.get(&key(k)).unwrap().copied(), want, "round {round}, key {k}");
            }
            assert_eq!(table.key_count(), expected.len(), "round {round}");
        }
    }
}
