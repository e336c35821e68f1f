//! [`KeyGroupTable`]: one key group's entries of a [`HeapTable`](super::HeapTable), the
//! keys' own values in one hash table and each namespace's (a window's) in a small table
//! of its own.
//!
//! Why namespace first: a window operator fills one window at a time and fires windows
//! long after (the watermark comes every 200 ms, hundreds of windows behind the records).
//! In one table per key group the window being filled is spread over every window still
//! waiting, so each record's new entry lands on a cold cache line. A table per namespace
//! keeps the window being filled in a few hot lines, and a window that fires is read
//! from its own table and dropped with it (its memory goes to the next window).
//!
//! Entries are looked up by the same stable hash as before (of the key and namespace
//! bytes together), so a table grows by hashing its stored keys again. A stored key does
//! not say where the key ends and the namespace begins, so entries restored from a
//! snapshot go to the keys' table whatever their namespace; namespaced lookups look
//! there too while it holds any (restored windows fire and go, emptying it).

use super::backend::{CurrentKey, NamespaceForm, StoredKey};
use hashbrown::HashTable;

/// One value of a state and what the table knows about it.
///
/// No hash is kept: a table growing hashes the key bytes again ([`rehash`]), which is
/// rare, while eight bytes more per entry cost cache and memory on every access.
#[derive(Clone)]
pub(super) struct Entry<S> {
    pub(super) key: StoredKey,
    pub(super) value: S,
    /// The table's change epoch when the value last changed (0: as the raw store has it).
    /// It is dirty, not written to the raw store yet, while that is after the table's
    /// `written` epoch: so writing back marks every entry clean at once, without touching
    /// it (or copying a key group a snapshot shares).
    pub(super) changed: u64,
    /// Wall-clock ms after which the value is gone (`u64::MAX`: no time to live).
    pub(super) expires_ms: u64,
    /// The epoch it was inserted in, when the raw store was read and had no value for the
    /// key (0: unknown, or loaded from it). While no write-back came since, the raw store
    /// still has nothing of it, and removing it needs no delete there: a window's
    /// contents, created and gone between two checkpoints, never touch RocksDB. On the
    /// heap alone, every entry's insertion epoch: born after the last incremental
    /// snapshot, it needs no removal in the next one either.
    pub(super) absent_in_raw_since: u64,
}

/// An entry's hash when its table grows: the same hash its key was looked up by (the
/// stable hash of the key's bytes, with its namespace, as the backend computes it).
fn rehash<S>(entry: &Entry<S>) -> u64 {
    eddy_types::stable_hash(&entry.key).0
}

/// Where an entry is: its namespace's table (by bucket in the table of namespaces) or
/// the keys' own, and its bucket there. Valid until the table changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Loc {
    space: usize,
    bucket: usize,
}

/// `Loc::space` of the keys' own table.
const KEYS: usize = usize::MAX;

/// Where a key group's table of keys keeps its control bytes, and its bucket mask, as
/// last seen: enough to prefetch where a lookup of any hash will start without reading
/// the table first (a lookup's first load, of the control bytes, is the one that misses
/// the cache, and finding them through the table is that very load). An address only:
/// stale after the table moves until it is seen again, which costs a useless prefetch,
/// never a wrong read.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ControlHint {
    /// The control bytes' address (0: not seen yet).
    control: usize,
    bucket_mask: usize,
}

impl ControlHint {
    /// An address in every cache line a lookup of `hash` reads first: the group of 16
    /// control bytes at its probe start, and the values of the first two buckets there
    /// (hashbrown starts at bucket `hash & mask`, and keeps bucket `i`'s value `i + 1`
    /// values below the control bytes). `None` before the table was seen.
    #[inline]
    pub(super) fn probe_start<S>(&self, hash: u64) -> Option<[usize; 5]> {
        if self.control == 0 {
            return None;
        }
        let bucket = hash as usize & self.bucket_mask;
        let size = std::mem::size_of::<Entry<S>>();
        let group = self.control.wrapping_add(bucket);
        let values = self.control.wrapping_sub((bucket + 2) * size);
        // From the first byte to the last, points one value apart: with values of at most
        // a line (64 bytes; W4's are 56), every line of the range holds one. A larger value
        // gets a line skipped, a smaller hint.
        Some([group, group.wrapping_add(15), values, values.wrapping_add(size), values.wrapping_add(2 * size - 1)])
    }
}

/// The entries of one namespace.
#[derive(Clone)]
struct Space<S> {
    /// Inline when short (a time window's 16 bytes are): comparing it on every lookup
    /// then reads no other line than the table of namespaces'.
    namespace: StoredKey,
    /// [`NamespaceForm::hash`], kept for when the table of namespaces grows.
    hash: u64,
    entries: HashTable<Entry<S>>,
    /// The most entries it has held (see [`KeyGroupTable::space_capacity`]).
    peak: usize,
}

/// One key group's entries (see the module's overview).
pub(super) struct KeyGroupTable<S> {
    keys: HashTable<Entry<S>>,
    spaces: HashTable<Space<S>>,
    /// Whether `keys` may hold namespaced entries (restored ones).
    restored: bool,
    len: usize,
    /// How large a new namespace's table starts: as many entries as this key group's last
    /// namespace that went held at most. A window operator opens a table per key group
    /// per window; grown from empty, each would rehash four or five times on the way to
    /// its size.
    ///
    /// Only this key group's last namespace counts: not the largest ever seen (tables kept
    /// for reuse, or a high-water mark, only grow, and a job's memory crept up with its run
    /// time: W3 129 -> 160 MB from 10 M to 60 M events), nor another key group's (with
    /// skewed keys a hot group's size would be reserved in every group for every window).
    space_capacity: usize,
}

impl<S: Clone> Clone for KeyGroupTable<S> {
    fn clone(&self) -> Self {
        let mut copy = Self::default();
        copy.clone_from(self);
        copy
    }

    /// Into this table's own memory where the sizes allow: a spare table a snapshot let go
    /// takes the next copy without the page faults of fresh memory. Entries keep their
    /// buckets (what [`Loc`]s are).
    fn clone_from(&mut self, source: &Self) {
        self.keys.clone_from(&source.keys);
        self.spaces.clone_from(&source.spaces);
        (self.restored, self.len, self.space_capacity) = (source.restored, source.len, source.space_capacity);
    }
}

impl<S> Default for KeyGroupTable<S> {
    fn default() -> Self {
        Self { keys: HashTable::new(), spaces: HashTable::new(), restored: false, len: 0, space_capacity: 0 }
    }
}

/// The namespace of the current key (empty: none).
#[inline]
fn namespace_of(key: &CurrentKey) -> &[u8] {
    &key.bytes[key.key_len..]
}

impl<S> KeyGroupTable<S> {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every entry, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Entry<S>> {
        self.keys.iter().chain(self.spaces.iter().flat_map(|space| space.entries.iter()))
    }

    /// The bucket of `namespace`'s table, trying `memo` (where the last one of this key
    /// group was) first; updates `memo`.
    #[inline]
    fn space_of(&self, form: &NamespaceForm, namespace: &[u8], memo: &mut usize) -> Option<usize> {
        let same = |space: &Space<S>| space.namespace.matches_namespace(form, namespace);
        if self.spaces.get_bucket(*memo).is_some_and(same) {
            return Some(*memo);
        }
        let bucket = self.spaces.find_bucket_index(form.hash, same)?;
        *memo = bucket;
        Some(bucket)
    }

    /// Where the current key's entry is, if here. `memo` is this key group's memo of the
    /// last namespace (see [`Self::space_of`]).
    #[inline]
    pub(super) fn locate(&self, key: &CurrentKey, memo: &mut usize) -> Option<Loc> {
        let namespace = namespace_of(key);
        if !namespace.is_empty() {
            if let Some(space) = self.space_of(&key.namespace, namespace, memo) {
                let entries = &self.spaces.get_bucket(space).expect("located above").entries;
                if let Some(bucket) = entries.find_bucket_index(key.hash, |e| e.key.matches(key)) {
                    return Some(Loc { space, bucket });
                }
            }
            if !self.restored {
                return None;
            }
        }
        let bucket = self.keys.find_bucket_index(key.hash, |e| e.key.matches(key))?;
        Some(Loc { space: KEYS, bucket })
    }

    /// The [`ControlHint`] of the keys' table, seen through the entry at `at` if it is
    /// there (the entry was just read: no other line is touched).
    #[inline]
    pub(super) fn control_hint(&self, at: Loc) -> Option<ControlHint> {
        if at.space != KEYS {
            return None;
        }
        let entry = self.keys.get_bucket(at.bucket)?;
        let control =
            (entry as *const Entry<S> as usize).wrapping_add((at.bucket + 1) * std::mem::size_of::<Entry<S>>());
        Some(ControlHint { control, bucket_mask: self.keys.num_buckets() - 1 })
    }

    #[inline]
    pub(super) fn get(&self, at: Loc) -> Option<&Entry<S>> {
        if at.space == KEYS {
            self.keys.get_bucket(at.bucket)
        } else {
            self.spaces.get_bucket(at.space)?.entries.get_bucket(at.bucket)
        }
    }

    #[inline]
    pub(super) fn get_mut(&mut self, at: Loc) -> Option<&mut Entry<S>> {
        if at.space == KEYS {
            self.keys.get_bucket_mut(at.bucket)
        } else {
            self.spaces.get_bucket_mut(at.space)?.entries.get_bucket_mut(at.bucket)
        }
    }

    /// Removes the entry at `at`; a namespace left without entries goes, its peak noted in
    /// `space_capacity`.
    pub(super) fn remove(&mut self, at: Loc) -> Option<Entry<S>> {
        let entry = if at.space == KEYS {
            let entry = self.keys.get_bucket_entry(at.bucket).ok()?.remove().0;
            if self.keys.is_empty() {
                self.restored = false;
            }
            entry
        } else {
            let space = self.spaces.get_bucket_mut(at.space)?;
            let entry = space.entries.get_bucket_entry(at.bucket).ok()?.remove().0;
            if space.entries.is_empty() {
                self.space_capacity = space.peak;
                if let Ok(gone) = self.spaces.get_bucket_entry(at.space) {
                    gone.remove();
                }
            }
            entry
        };
        self.len -= 1;
        Some(entry)
    }

    /// Inserts the current key's entry, which is not here; returns where it went.
    pub(super) fn insert(&mut self, key: &CurrentKey, entry: Entry<S>, memo: &mut usize) -> (Loc, &mut Entry<S>) {
        self.len += 1;
        let namespace = namespace_of(key);
        if namespace.is_empty() {
            let inserted = self.keys.insert_unique(key.hash, entry, rehash);
            return (Loc { space: KEYS, bucket: inserted.bucket_index() }, inserted.into_mut());
        }
        let space = match self.space_of(&key.namespace, namespace, memo) {
            Some(space) => space,
            None => {
                let hash = key.namespace.hash;
                let entries = HashTable::with_capacity(self.space_capacity);
                let space = Space { namespace: StoredKey::new(namespace), hash, entries, peak: 0 };
                let bucket = self.spaces.insert_unique(hash, space, |space| space.hash).bucket_index();
                *memo = bucket;
                bucket
            }
        };
        let Space { entries, peak, .. } = self.spaces.get_bucket_mut(space).expect("found or inserted above");
        *peak = (*peak).max(entries.len() + 1);
        let inserted = entries.insert_unique(key.hash, entry, rehash);
        (Loc { space, bucket: inserted.bucket_index() }, inserted.into_mut())
    }

    /// Inserts an entry restored from a snapshot, whose key is not here; `hash` is the
    /// stable hash of its stored key.
    pub(super) fn insert_restored(&mut self, hash: u64, entry: Entry<S>) {
        self.len += 1;
        self.restored = true;
        self.keys.insert_unique(hash, entry, rehash);
    }

    /// The entry of `hash` (in `namespace`'s table, if any: its form and bytes), or one
    /// that shares its tag: for a prefetch, which cannot tell them apart without the load
    /// it is for.
    #[inline]
    pub(super) fn probable(
        &self,
        hash: u64,
        namespace: Option<(&NamespaceForm, &[u8])>,
        memo: usize,
    ) -> Option<&Entry<S>> {
        let mut memo = memo;
        let Some((form, namespace)) = namespace.filter(|(_, bytes)| !bytes.is_empty()) else {
            return self.keys.find(hash, |_| true);
        };
        let space = self.space_of(form, namespace, &mut memo)?;
        self.spaces.get_bucket(space)?.entries.find(hash, |_| true)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::{Entry, KeyGroupTable};
    use crate::keyed::backend::{CurrentKey, InlineKey, NamespaceForm, StoredKey};

    /// The current key `key` in `namespace`, as the backend would set it (key group 0).
    pub(in crate::keyed) fn current(key: &[u8], namespace: &[u8]) -> CurrentKey {
        let mut bytes = key.to_vec();
        bytes.extend_from_slice(namespace);
        CurrentKey {
            hash: eddy_types::stable_hash(&bytes).0,
            key_hash: eddy_types::stable_hash(key).0,
            key_len: key.len(),
            key_group: 0,
            local_group: 0,
            is_set: true,
            epoch: 1,
            inline: InlineKey::of(&bytes),
            namespace: NamespaceForm::of(namespace),
            bytes,
        }
    }

    fn entry(key: &CurrentKey, value: u64) -> Entry<u64> {
        Entry { key: StoredKey::of_current(key), value, changed: 0, expires_ms: u64::MAX, absent_in_raw_since: 0 }
    }

    #[test]
    fn an_entry_of_a_u64_keeps_no_hash_and_takes_56_bytes() {
        // Key (24, short keys inline), value, change epoch, expiry, insertion epoch.
        assert_eq!(std::mem::size_of::<Entry<u64>>(), 56);
    }

    /// The hint's layout is hashbrown's: every entry of a table shows the same control
    /// bytes, and most keys' entries lie within the range their hash's probe start names.
    #[test]
    fn a_control_hint_names_the_same_control_bytes_from_every_entry_and_the_probe_start_of_a_key() {
        let (mut table, mut memo): (KeyGroupTable<u64>, usize) = Default::default();
        let keys: Vec<CurrentKey> = (0..200u32).map(|k| current(&k.to_be_bytes(), &[])).collect();
        for (k, key) in keys.iter().enumerate() {
            table.insert(key, entry(key, k as u64), &mut memo);
        }
        let mut near = 0;
        let hint = table.control_hint(table.locate(&keys[0], &mut memo).unwrap()).unwrap();
        for key in &keys {
            let at = table.locate(key, &mut memo).unwrap();
            let seen = table.control_hint(at).unwrap();
            assert_eq!((seen.control, seen.bucket_mask), (hint.control, hint.bucket_mask));
            let [_, _, first, _, last] = hint.probe_start::<u64>(key.hash).unwrap();
            let address = table.get(at).unwrap() as *const Entry<u64> as usize;
            near += usize::from((first..=last).contains(&address));
        }
        // Most keys sit in the first two buckets of their probe (load factor <= 7/8).
        assert!(near > keys.len() / 2, "{near} of {} keys where their probe starts", keys.len());
    }

    #[test]
    fn entries_of_namespaces_and_keys_are_found_where_they_went_and_emptied_namespaces_go() {
        let (mut table, mut memo): (KeyGroupTable<u64>, usize) = Default::default();
        let keys: Vec<Vec<u8>> = (0..50u32).map(|k| k.to_be_bytes().to_vec()).collect();
        let windows: Vec<Vec<u8>> = (0..7u64).map(|w| w.to_be_bytes().to_vec()).collect();
        for (k, key) in keys.iter().enumerate() {
            let own = current(key, &[]);
            table.insert(&own, entry(&own, k as u64), &mut memo);
            for (w, window) in windows.iter().enumerate() {
                let at = current(key, window);
                assert!(table.locate(&at, &mut memo).is_none());
                table.insert(&at, entry(&at, (k * 100 + w) as u64), &mut memo);
            }
        }
        assert_eq!(table.len(), 50 * 8);
        assert_eq!(table.iter().count(), 50 * 8);
        for (k, key) in keys.iter().enumerate() {
            let own = current(key, &[]);
            let at = table.locate(&own, &mut memo).expect("the key's own entry");
            assert_eq!(table.get(at).unwrap().value, k as u64);
            for (w, window) in windows.iter().enumerate() {
                let at = table.locate(&current(key, window), &mut memo).expect("a window's entry");
                assert_eq!(table.get(at).unwrap().value, (k * 100 + w) as u64);
            }
        }
        // A window fires: its entries go, then the window itself.
        for key in &keys {
            let at = table.locate(&current(key, &windows[3]), &mut memo).unwrap();
            assert!(table.remove(at).is_some());
        }
        assert_eq!((table.len(), table.spaces.len()), (50 * 7, 6));
        assert_eq!(table.space_capacity, 50, "a new namespace's table starts as large as the last one was");
        assert!(keys.iter().all(|key| table.locate(&current(key, &windows[3]), &mut memo).is_none()));
        assert!(keys.iter().all(|key| table.locate(&current(key, &windows[4]), &mut memo).is_some()));
        // The next window starts at that size here, and at its own size in another key group.
        let (mut other, mut other_memo): (KeyGroupTable<u64>, usize) = Default::default();
        let next = current(&keys[0], &9u64.to_be_bytes());
        table.insert(&next, entry(&next, 9), &mut memo);
        other.insert(&next, entry(&next, 9), &mut other_memo);
        let capacity = |t: &KeyGroupTable<u64>| t.spaces.iter().find(|s| s.peak == 1).unwrap().entries.capacity();
        assert!(capacity(&table) >= 50 && capacity(&other) < 50, "{} {}", capacity(&table), capacity(&other));
    }

    #[test]
    fn namespaces_too_long_to_be_inline_are_told_apart_by_their_bytes() {
        let (mut table, mut memo): (KeyGroupTable<u64>, usize) = Default::default();
        let long = |last: u8| [[7u8; 29].as_slice(), &[last]].concat();
        let (a, b) = (current(b"key", &long(1)), current(b"key", &long(2)));
        assert!(!a.namespace.inline.is_some(), "30 bytes are not inline");
        table.insert(&a, entry(&a, 1), &mut memo);
        assert!(table.locate(&b, &mut memo).is_none());
        table.insert(&b, entry(&b, 2), &mut memo);
        let short = current(b"key", &[7u8; 16]);
        assert!(table.locate(&short, &mut memo).is_none());
        table.insert(&short, entry(&short, 3), &mut memo);
        assert_eq!(table.spaces.len(), 3);
        for (key, value) in [(&a, 1), (&b, 2), (&short, 3)] {
            assert_eq!(table.get(table.locate(key, &mut memo).unwrap()).unwrap().value, value);
        }
    }

    #[test]
    fn restored_entries_are_found_with_or_without_a_namespace_until_they_are_gone() {
        let (mut table, mut memo): (KeyGroupTable<u64>, usize) = Default::default();
        let windowed = current(b"key", b"window");
        let own = current(b"key", &[]);
        table.insert_restored(windowed.hash, entry(&windowed, 1));
        table.insert_restored(own.hash, entry(&own, 2));
        let at = table.locate(&windowed, &mut memo).expect("a restored window's entry");
        assert_eq!(table.get(at).unwrap().value, 1);
        assert_eq!(table.get(table.locate(&own, &mut memo).unwrap()).unwrap().value, 2);
        table.remove(at);
        let at = table.locate(&own, &mut memo).unwrap();
        table.remove(at);
        assert!(table.is_empty() && !table.restored);
        // New entries of the window go to its own table.
        table.insert(&windowed, entry(&windowed, 3), &mut memo);
        assert_eq!(table.spaces.len(), 1);
        assert_eq!(table.get(table.locate(&windowed, &mut memo).unwrap()).unwrap().value, 3);
    }
}
