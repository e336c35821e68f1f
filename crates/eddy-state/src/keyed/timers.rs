//! The timers of a keyed operator (Flink's `InternalTimerService` queues): for a key and a
//! namespace (a window, or none), the times at which the operator wants to be called back,
//! each at most once (a second registration of the same key, namespace and time is the
//! same timer).
//!
//! A [`TimerQueue`] is a declared state of the keyed backend, so that it is snapshotted by
//! key group with the rest of the keyed state, restored with it, and redistributed by key
//! group on a rescale. It lives on the heap on every backend, as Flink's heap timers do: a
//! timer is touched on every record that opens a window and popped in time order, which
//! the heap does without a read of the store below. On RocksDB, whose
//! checkpoints are its own files, the timers travel beside those files in the canonical
//! form.
//!
//! The queue keeps a bucket per time, in time order, each with its timers in the order
//! they were registered and a hash table of them (see [`TimerQueue`]).

use super::backend::{CurrentKey, DeferredKeyGroups, KeyedTable, StoredKey};
use crate::error::{StateError, StateErrorKind};
use eddy_types::stable_hash;
use hashbrown::HashTable;
use std::any::Any;
use std::collections::BTreeMap;

/// The state names of an operator's two queues.
pub const EVENT_TIME_TIMERS: &str = "_timer_service/event-time";
pub const PROCESSING_TIME_TIMERS: &str = "_timer_service/processing-time";

/// One timer: `time` for the key and namespace in `bytes` (the key's encoding, then the
/// namespace's).
#[derive(Clone)]
pub struct Timer {
    time: i64,
    key_len: u32,
    key_hash: u64,
    /// The hash of `bytes` (the key's own when there is no namespace), as the state
    /// tables have it: the timer's hash and its order among timers of the same time.
    hash: u64,
    key_group: u32,
    bytes: StoredKey,
}

impl Timer {
    pub fn time(&self) -> i64 {
        self.time
    }

    /// The encoded key the timer is for.
    pub fn key(&self) -> &[u8] {
        &self.bytes[..self.key_len as usize]
    }

    pub fn key_hash(&self) -> eddy_types::KeyHash {
        eddy_types::KeyHash(self.key_hash)
    }

    /// The encoded namespace (empty: the key's own timer).
    pub fn namespace(&self) -> &[u8] {
        &self.bytes[self.key_len as usize..]
    }

    /// Time, hash, then bytes: timers of one time (all a window's, say) are told apart by
    /// their hash without comparing bytes.
    fn identity(&self) -> (i64, u64, u32, &[u8]) {
        (self.time, self.hash, self.key_len, &self.bytes)
    }
}

impl PartialEq for Timer {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.hash == other.hash && self.key_len == other.key_len && self.bytes == other.bytes
    }
}
impl Eq for Timer {}

/// The timers of one time, in the order they were registered. A deleted or popped timer
/// leaves its slot empty; `next` is where popping goes on.
#[derive(Default)]
struct Bucket {
    order: Vec<Option<Timer>>,
    /// Indexes into `order` of the live timers, by their hash, and of popped ones: a pop
    /// leaves its index here (its slot is empty, so no lookup matches it), since finding
    /// it to remove it was a cache miss per timer fired, and the bucket goes whole once
    /// popped to the end (or is compacted, if timers keep coming while it fires).
    live: HashTable<u32>,
    /// How many timers are live (in `order`, not popped or deleted).
    live_count: usize,
    next: usize,
}

impl Timer {
    /// Whether this is the timer of the current key and namespace (at its bucket's time).
    #[inline]
    fn is_of(&self, key: &CurrentKey) -> bool {
        self.hash == key.hash && self.key_len as usize == key.key_len && self.bytes.matches(key)
    }
}

impl Bucket {
    /// Whether the current key and namespace has a live timer here (looked up without
    /// building a timer: no copy of the key).
    fn holds(&self, key: &CurrentKey) -> bool {
        self.live.find(key.hash, |&i| self.order[i as usize].as_ref().is_some_and(|t| t.is_of(key))).is_some()
    }

    fn remove(&mut self, key: &CurrentKey) -> bool {
        let order = &self.order;
        match self.live.find_entry(key.hash, |&i| order[i as usize].as_ref().is_some_and(|t| t.is_of(key))) {
            Ok(entry) => {
                let (index, _) = entry.remove();
                self.order[index as usize] = None;
                self.live_count -= 1;
                true
            }
            Err(_) => false,
        }
    }

    fn timers(&self) -> impl Iterator<Item = &Timer> {
        self.order[self.next..].iter().flatten()
    }

    /// Drops the empty slots, and the indexes popped timers left in `live`, once either
    /// is more than twice the live timers (and 16): a key whose timer is deleted and set
    /// again at the same time, over and over, would grow `order`, and timers set at a time
    /// that is firing (due at once), over and over, would grow `live`.
    fn compact_if_sparse(&mut self) {
        let slots = self.order.len() - self.next;
        let popped = self.live.len() - self.live_count;
        let most = 2 * self.live_count + 16;
        if slots <= most && popped <= most {
            return;
        }
        let live: Vec<Timer> = self.order.drain(self.next..).flatten().collect();
        self.order.clear();
        self.next = 0;
        self.live.clear();
        self.live_count = 0;
        for timer in live {
            TimerQueue::push(self, timer);
        }
    }
}

/// One time domain's timers of one operator instance: buckets by time, each with its
/// timers in registration order. Timers come in large groups of one time (every window
/// of a size ends together), so a registration finds its bucket among few and checks a
/// small hash table, and firing walks a bucket in order.
pub struct TimerQueue {
    name: String,
    first_key_group: u32,
    group_count: usize,
    buckets: BTreeMap<i64, Bucket>,
    len: usize,
    /// The current key's epoch and the time of the last registration: a second one for
    /// the same key, namespace and time (a window's trigger and cleanup timers, when there
    /// is no allowed lateness) is known to be there without a lookup.
    last: (u64, i64),
    /// The key epoch and time of the timer popped last, while nothing was registered
    /// since: deleting it (a window's trigger clearing the timer that fired it) is known
    /// to find nothing.
    popped: (u64, i64),
}

impl TimerQueue {
    pub fn new(name: &str, first_key_group: u32, group_count: usize) -> Self {
        Self {
            name: name.to_string(),
            first_key_group,
            group_count,
            buckets: BTreeMap::new(),
            len: 0,
            last: (0, 0),
            popped: (0, 0),
        }
    }

    fn timer(key: &CurrentKey, time: i64) -> Timer {
        Timer {
            time,
            key_len: key.key_len as u32,
            key_hash: key.key_hash,
            hash: key.hash,
            key_group: key.key_group,
            bytes: StoredKey::of_current(key),
        }
    }

    fn insert(&mut self, timer: Timer) -> bool {
        let bucket = self.buckets.entry(timer.time).or_default();
        if bucket.live.find(timer.hash, |&i| bucket.order[i as usize].as_ref() == Some(&timer)).is_some() {
            return false;
        }
        Self::push(bucket, timer);
        self.len += 1;
        true
    }

    /// Appends `timer` (not in `bucket` yet) to its bucket.
    fn push(bucket: &mut Bucket, timer: Timer) {
        let index = bucket.order.len() as u32;
        let order = &bucket.order;
        bucket.live.insert_unique(timer.hash, index, |&i| order[i as usize].as_ref().map_or(0, |t| t.hash));
        bucket.order.push(Some(timer));
        bucket.live_count += 1;
    }

    /// A timer at `time` for the current key in its current namespace; false if it was
    /// there already.
    pub fn register(&mut self, key: &CurrentKey, time: i64) -> bool {
        if key.epoch != 0 && self.last == (key.epoch, time) {
            return false;
        }
        self.last = (key.epoch, time);
        self.popped = (0, 0);
        let bucket = self.buckets.entry(time).or_default();
        if bucket.holds(key) {
            return false;
        }
        Self::push(bucket, Self::timer(key, time));
        if bucket.next > 0 {
            // Its time is firing: popped timers left their indexes (see `Bucket::live`).
            bucket.compact_if_sparse();
        }
        self.len += 1;
        true
    }

    /// Deletes the current key's timer at `time` in its current namespace, if there is one.
    pub fn delete(&mut self, key: &CurrentKey, time: i64) -> bool {
        self.last = (0, 0);
        if key.epoch != 0 && self.popped == (key.epoch, time) {
            return false;
        }
        let Some(bucket) = self.buckets.get_mut(&time) else { return false };
        let removed = bucket.remove(key);
        if removed {
            self.len -= 1;
            if bucket.live_count == 0 {
                self.buckets.remove(&time);
            } else {
                bucket.compact_if_sparse();
            }
        }
        removed
    }

    /// The earliest live timer's time.
    pub fn next_time(&mut self) -> Option<i64> {
        self.buckets.first_key_value().map(|(time, _)| *time)
    }

    /// The latest live timer's time.
    pub fn last_time(&self) -> Option<i64> {
        self.buckets.last_key_value().map(|(time, _)| *time)
    }

    /// Takes the earliest live timer if its time is `limit` or earlier.
    pub fn pop_due(&mut self, limit: i64) -> Option<Timer> {
        self.last = (0, 0);
        self.popped = (0, 0);
        loop {
            let mut entry = self.buckets.first_entry()?;
            if *entry.key() > limit {
                return None;
            }
            let bucket = entry.get_mut();
            while bucket.next < bucket.order.len() {
                let index = bucket.next;
                bucket.next += 1;
                if let Some(timer) = bucket.order[index].take() {
                    bucket.live_count -= 1;
                    if bucket.live_count == 0 {
                        entry.remove();
                    }
                    self.len -= 1;
                    return Some(timer);
                }
            }
            // Only deleted timers were left.
            entry.remove();
        }
    }

    /// (key group, hash) of the live timer `ahead` places behind the next one due, among
    /// those of the earliest time: whose entries firing will want next.
    fn upcoming(&self, ahead: usize) -> Option<(u32, u64, &[u8])> {
        let bucket = self.buckets.first_key_value()?.1;
        let timer = bucket.order[bucket.next..].iter().flatten().nth(ahead)?;
        Some((timer.key_group, timer.hash, timer.namespace()))
    }

    /// Live timers.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn all(&self) -> impl Iterator<Item = &Timer> {
        self.buckets.values().flat_map(Bucket::timers)
    }
}

/// One key group's timers in the canonical form: (time, key length, key and namespace
/// bytes), sorted, postcard.
fn serialize_timers(name: &str, timers: &mut [&Timer]) -> Result<Option<Vec<u8>>, StateError> {
    if timers.is_empty() {
        return Ok(None);
    }
    timers.sort_unstable_by(|a, b| a.identity().cmp(&b.identity()));
    let entries: Vec<(i64, u32, &[u8])> = timers.iter().map(|t| (t.time, t.key_len, &*t.bytes)).collect();
    postcard::to_allocvec(&entries).map(Some).map_err(|e| {
        StateError::from(StateErrorKind::Serialize { state: name.to_string(), message: eddy_types::chain(&e) })
    })
}

impl KeyedTable for TimerQueue {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn key_count(&self) -> usize {
        self.len
    }

    fn flush(&mut self) -> Result<(), StateError> {
        Ok(())
    }

    fn snapshot_key_group(&self, local_group: usize) -> Result<Option<Vec<u8>>, StateError> {
        let key_group = self.first_key_group + local_group as u32;
        let mut timers: Vec<&Timer> = self.all().filter(|t| t.key_group == key_group).collect();
        serialize_timers(&self.name, &mut timers)
    }

    fn snapshot_all_key_groups(&self, _first: u32, _count: usize) -> Result<Vec<(u32, Vec<u8>)>, StateError> {
        by_key_group(&self.name, self.first_key_group, self.group_count, self.all())
    }

    fn restore_key_group(&mut self, local_group: usize, bytes: &[u8]) -> Result<(), StateError> {
        let entries: Vec<(i64, u32, Vec<u8>)> = postcard::from_bytes(bytes).map_err(|e| {
            StateError::from(StateErrorKind::Deserialize {
                state: self.name.clone(),
                message: format!(
                    "timers of key group {}: {e}",
                    self.first_key_group + local_group as u32,
                    e = eddy_types::chain(&e)
                ),
            })
        })?;
        for (time, key_len, bytes) in entries {
            if key_len as usize > bytes.len() {
                return Err(StateError::from(StateErrorKind::Deserialize {
                    state: self.name.clone(),
                    message: format!("a timer's key is {key_len} bytes long but it has {} bytes", bytes.len()),
                }));
            }
            let key_hash = stable_hash(&bytes[..key_len as usize]).0;
            let timer = Timer {
                time,
                key_len,
                key_hash,
                hash: if key_len as usize == bytes.len() { key_hash } else { stable_hash(&bytes).0 },
                key_group: self.first_key_group + local_group as u32,
                bytes: StoredKey::new(&bytes),
            };
            self.insert(timer);
        }
        Ok(())
    }

    fn clear_all(&mut self) -> Result<(), StateError> {
        self.last = (0, 0);
        self.popped = (0, 0);
        self.buckets.clear();
        self.len = 0;
        Ok(())
    }

    /// Copies the live timers now (the queue moves on), serializes them by key group later.
    fn deferred_snapshot(&mut self) -> Option<DeferredKeyGroups> {
        let timers: Vec<Timer> = self.all().cloned().collect();
        let (name, first, count) = (self.name.clone(), self.first_key_group, self.group_count);
        Some(Box::new(move || by_key_group(&name, first, count, timers.iter())))
    }
}

/// The canonical form of `timers`, by key group, in one pass.
fn by_key_group<'a>(
    name: &str,
    first: u32,
    count: usize,
    timers: impl Iterator<Item = &'a Timer>,
) -> Result<Vec<(u32, Vec<u8>)>, StateError> {
    let mut groups: Vec<Vec<&Timer>> = vec![Vec::new(); count];
    for timer in timers {
        groups[(timer.key_group - first) as usize].push(timer);
    }
    let mut key_groups = Vec::new();
    for (local, mut group) in groups.into_iter().enumerate() {
        if let Some(bytes) = serialize_timers(name, &mut group)? {
            key_groups.push((first + local as u32, bytes));
        }
    }
    Ok(key_groups)
}

/// Declares the operator's timer queue `name` on the installed backend (once; later calls
/// find it).
pub fn declare_timers(name: &str) -> Result<super::StateId, StateError> {
    let meta = crate::descriptor::StateMeta::of::<TimerQueue>(name, crate::descriptor::StateKind::Timers);
    super::with_backend(name, |backend| {
        backend.register(meta, &mut |spec| {
            Box::new(TimerQueue::new(name, spec.first_key_group, spec.group_count)) as Box<dyn KeyedTable>
        })
    })
}

/// Runs `f` on the current key and timer queue `id` of the installed backend.
pub fn with_timers<R>(
    id: super::StateId,
    name: &str,
    f: impl FnOnce(&CurrentKey, &mut TimerQueue) -> R,
) -> Result<R, StateError> {
    super::with_backend(name, |backend| {
        let (key, table) = backend.current_key_and_table(id, name)?;
        let queue = table
            .as_any_mut()
            .downcast_mut::<TimerQueue>()
            .ok_or_else(|| StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() }))?;
        Ok(f(key, queue))
    })
}

/// Takes the earliest timer of queue `id` due at `limit`, and makes its key and namespace
/// the backend's current ones, so that the callback reads the timer's state.
pub fn pop_due_timer(id: super::StateId, name: &str, limit: i64) -> Result<Option<Timer>, StateError> {
    super::with_backend(name, |backend| {
        let queue = table_of(backend, id, name)?;
        let Some(timer) = queue.pop_due(limit) else { return Ok(None) };
        // The entries of the timer after next are fetched while these two fire: a window's
        // contents were written long before it fires, and are out of the cache by now.
        // Its namespace copied out of the queue (a window's is a few bytes; a longer one
        // goes without the hint): the backend is asked while the queue is let go.
        let mut namespace = [0u8; 32];
        let upcoming = queue.upcoming(1).and_then(|(key_group, hash, bytes)| {
            let len = bytes.len();
            namespace.get_mut(..len)?.copy_from_slice(bytes);
            Some((key_group, hash, len))
        });
        if let Some((key_group, hash, len)) = upcoming {
            backend.prefetch_entry(eddy_types::KeyGroup(key_group), hash, &namespace[..len]);
        }
        backend.set_current_key(timer.key(), timer.key_hash())?;
        backend.set_current_namespace_hashed(timer.namespace(), timer.hash);
        let (key, table) = backend.current_key_and_table(id, name)?;
        if let Some(queue) = table.as_any_mut().downcast_mut::<TimerQueue>() {
            queue.popped = (key.epoch, timer.time);
        }
        Ok(Some(timer))
    })
}

/// The earliest time in queue `id`, whatever the current key.
pub fn next_timer_time(id: super::StateId, name: &str) -> Result<Option<i64>, StateError> {
    super::with_backend(name, |backend| Ok(table_of(backend, id, name)?.next_time()))
}

/// The latest time in queue `id`, whatever the current key.
pub fn last_timer_time(id: super::StateId, name: &str) -> Result<Option<i64>, StateError> {
    super::with_backend(name, |backend| Ok(table_of(backend, id, name)?.last_time()))
}

fn table_of<'a>(
    backend: &'a mut dyn super::KeyedStateBackend,
    id: super::StateId,
    name: &str,
) -> Result<&'a mut TimerQueue, StateError> {
    let table = backend.table_by_id_mut(id, name)?;
    table
        .as_any_mut()
        .downcast_mut::<TimerQueue>()
        .ok_or_else(|| StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyed::backend::{InlineKey, NamespaceForm};

    fn key(name: &str, namespace: &[u8]) -> CurrentKey {
        let mut bytes = name.as_bytes().to_vec();
        let key_hash = stable_hash(&bytes).0;
        bytes.extend_from_slice(namespace);
        CurrentKey {
            hash: if namespace.is_empty() { key_hash } else { stable_hash(&bytes).0 },
            key_hash,
            key_len: name.len(),
            key_group: 0,
            local_group: 0,
            is_set: true,
            epoch: 0,
            inline: InlineKey::of(&bytes),
            namespace: NamespaceForm::of(namespace),
            bytes,
        }
    }

    #[test]
    fn timers_pop_in_time_order_once_each_and_deleted_ones_never() {
        let mut queue = TimerQueue::new("t", 0, 1);
        assert!(queue.register(&key("a", b""), 20));
        assert!(queue.register(&key("b", b""), 10));
        assert!(!queue.register(&key("a", b""), 20), "the same key and time is one timer");
        assert!(queue.register(&key("a", b"w1"), 20), "another namespace is another timer");
        assert!(queue.delete(&key("b", b""), 10));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.next_time(), Some(20));
        assert!(queue.pop_due(19).is_none());
        let first = queue.pop_due(20).unwrap();
        let second = queue.pop_due(20).unwrap();
        assert_eq!((first.key(), first.namespace()), (&b"a"[..], &b""[..]), "registration order within a time");
        assert_eq!(second.namespace(), b"w1");
        assert!(queue.pop_due(i64::MAX).is_none() && queue.is_empty());
    }

    #[test]
    fn a_timer_set_again_after_it_fired_is_still_deleted() {
        let mut queue = TimerQueue::new("t", 0, 1);
        let mut current = key("a", b"w");
        current.epoch = 7;
        assert!(queue.register(&current, 5));
        assert!(queue.pop_due(5).is_some());
        // As `pop_due_timer` records the popped timer's key.
        queue.popped = (7, 5);
        assert!(!queue.delete(&current, 5), "the timer that fired is gone");
        queue.popped = (7, 5);
        assert!(queue.register(&current, 5), "set again in its own callback");
        assert!(queue.delete(&current, 5), "a timer registered after the pop is deleted for real");
        assert!(queue.pop_due(i64::MAX).is_none());
    }

    #[test]
    fn timers_of_a_bucket_being_fired_are_found_popped_or_not() {
        let mut queue = TimerQueue::new("t", 0, 1);
        for name in ["a", "b", "c"] {
            assert!(queue.register(&key(name, b"w"), 5));
        }
        assert_eq!(queue.pop_due(5).unwrap().key(), b"a");
        // `a` fired: set again, it is a new timer; `b` waits: set again, it is the same.
        assert!(queue.register(&key("a", b"w"), 5), "a popped timer is not there any more");
        assert!(!queue.register(&key("b", b"w"), 5), "a timer not popped yet is still there");
        assert!(!queue.delete(&key("x", b"w"), 5));
        assert!(queue.delete(&key("c", b"w"), 5));
        assert_eq!(queue.len(), 2);
        let rest: Vec<Vec<u8>> = std::iter::from_fn(|| queue.pop_due(5)).map(|t| t.key().to_vec()).collect();
        assert_eq!(rest, [b"b".to_vec(), b"a".to_vec()]);
        assert!(queue.is_empty() && queue.buckets.is_empty());
    }

    #[test]
    fn a_timer_deleted_and_set_again_does_not_grow_its_bucket() {
        let mut queue = TimerQueue::new("t", 0, 1);
        queue.register(&key("stays", b""), 5);
        for _ in 0..10_000 {
            queue.register(&key("moves", b""), 5);
            queue.delete(&key("moves", b""), 5);
        }
        let bucket = queue.buckets.get(&5).unwrap();
        assert!(bucket.order.len() < 64, "{} slots for one live timer", bucket.order.len());
        assert_eq!(queue.pop_due(5).unwrap().key(), b"stays");
    }

    #[test]
    fn timers_set_again_and_again_at_a_time_that_is_firing_do_not_grow_its_bucket() {
        let mut queue = TimerQueue::new("t", 0, 1);
        queue.register(&key("a", b""), 5);
        queue.register(&key("b", b""), 5);
        assert_eq!(queue.pop_due(5).unwrap().key(), b"a");
        // One timer is always left while the time fires: its bucket never goes.
        let mut expected = "b".to_string();
        for i in 0..10_000 {
            let name = format!("due {i}");
            queue.register(&key(&name, b""), 5);
            assert_eq!(queue.pop_due(5).unwrap().key(), expected.as_bytes(), "in the order they were set");
            expected = name;
        }
        let bucket = queue.buckets.get(&5).unwrap();
        assert!(bucket.live.len() < 64, "{} indexes for one live timer", bucket.live.len());
        assert!(bucket.order.len() < 64, "{} slots for one live timer", bucket.order.len());
        assert_eq!(queue.pop_due(5).unwrap().key(), expected.as_bytes());
        assert!(queue.is_empty() && queue.pop_due(5).is_none());
    }

    #[test]
    fn timers_round_trip_through_their_canonical_form_by_key_group() {
        let mut queue = TimerQueue::new("t", 0, 1);
        queue.register(&key("a", b"ns"), 7);
        queue.register(&key("b", b""), 3);
        let groups = queue.snapshot_all_key_groups(0, 1).unwrap();
        let mut restored = TimerQueue::new("t", 0, 1);
        for (group, bytes) in &groups {
            restored.restore_key_group(*group as usize, bytes).unwrap();
        }
        assert_eq!(restored.pop_due(i64::MAX).unwrap().time(), 3);
        let second = restored.pop_due(i64::MAX).unwrap();
        assert_eq!((second.time(), second.key(), second.namespace()), (7, &b"a"[..], &b"ns"[..]));
        assert!(restored.restore_key_group(0, b"not postcard").is_err(), "a corrupt group is an error, not a panic");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2_000, ..Default::default() })]

        /// Restored timers, random bytes: restored or refused, and the queue still works.
        #[test]
        fn random_timer_bytes_are_refused_without_a_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128),
        ) {
            let mut queue = TimerQueue::new("t", 0, 1);
            let _ = queue.restore_key_group(0, &bytes);
            while queue.pop_due(i64::MAX).is_some() {}
        }
    }
}
