//! The timers of a keyed operator (Flink's `InternalTimerService` queues): for a key and a
//! namespace (a window, or none), the times at which the operator wants to be called back,
//! each at most once (a second registration of the same key, namespace and time is the
//! same timer).
//!
//! A [`TimerQueue`] is a declared state of the keyed backend, so that it is snapshotted by
//! key group with the rest of the keyed state, restored with it, and redistributed by key
//! group on a rescale. It lives on the heap on every backend, as Flink's heap timers do: a
//! timer is touched on every record that opens a window and popped in time order, which a
//! priority queue does in O(log n) without a read of the store below. On RocksDB, whose
//! checkpoints are its own files, the timers travel beside those files in the canonical
//! form.
//!
//! The queue is a binary heap in time order beside a hash set of the live timers: a
//! deleted timer leaves the set at once and is skipped when it comes to the top.

use super::backend::{CurrentKey, DeferredKeyGroups, KeyedTable, StoredKey};
use crate::error::StateError;
use eddy_types::stable_hash;
use std::any::Any;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The state names of an operator's two queues.
pub const EVENT_TIME_TIMERS: &str = "_timer_service/event-time";
pub const PROCESSING_TIME_TIMERS: &str = "_timer_service/processing-time";

/// One timer: `time` for the key and namespace in `bytes` (the key's encoding, then the
/// namespace's).
#[derive(Clone)]
pub struct Timer {
    time: i64,
    key_len: u16,
    key_hash: u64,
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

    fn identity(&self) -> (i64, u16, &[u8]) {
        (self.time, self.key_len, &self.bytes)
    }
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}
impl Eq for Timer {}

/// One 64-bit hash of the timer's bytes and time, which [`TimerHasher`] passes through.
impl std::hash::Hash for Timer {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let bytes = if self.namespace().is_empty() { self.key_hash } else { stable_hash(&self.bytes).0 };
        state.write_u64(bytes ^ (self.time as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(self.key_len));
    }
}

/// Takes the one `u64` a [`Timer`] hashes to as is: it is xxh3 already.
#[derive(Default)]
struct TimerHasher(u64);

impl std::hash::Hasher for TimerHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = stable_hash(bytes).0;
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type TimerSet = std::collections::HashSet<Timer, std::hash::BuildHasherDefault<TimerHasher>>;

/// Time first, then key and namespace: the same order on every run and after a restore.
impl Ord for Timer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.identity().cmp(&other.identity())
    }
}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One time domain's timers of one operator instance.
pub struct TimerQueue {
    name: String,
    first_key_group: u32,
    group_count: usize,
    /// Every registered timer not popped yet, deleted ones included until they surface.
    heap: BinaryHeap<Reverse<Timer>>,
    live: TimerSet,
}

impl TimerQueue {
    pub fn new(name: &str, first_key_group: u32, group_count: usize) -> Self {
        Self {
            name: name.to_string(),
            first_key_group,
            group_count,
            heap: BinaryHeap::new(),
            live: TimerSet::default(),
        }
    }

    fn timer(key: &CurrentKey, time: i64) -> Timer {
        Timer {
            time,
            key_len: key.key_len as u16,
            key_hash: key.key_hash,
            key_group: key.key_group,
            bytes: StoredKey::new(&key.bytes),
        }
    }

    /// A timer at `time` for the current key in its current namespace; false if it was
    /// there already.
    pub fn register(&mut self, key: &CurrentKey, time: i64) -> bool {
        let timer = Self::timer(key, time);
        if self.live.contains(&timer) {
            return false;
        }
        self.live.insert(timer.clone());
        self.heap.push(Reverse(timer));
        true
    }

    /// Deletes the current key's timer at `time` in its current namespace, if there is one.
    pub fn delete(&mut self, key: &CurrentKey, time: i64) -> bool {
        self.live.remove(&Self::timer(key, time))
    }

    /// The earliest live timer's time.
    pub fn next_time(&mut self) -> Option<i64> {
        self.drop_deleted_top();
        self.heap.peek().map(|Reverse(t)| t.time)
    }

    /// Takes the earliest live timer if its time is `limit` or earlier.
    pub fn pop_due(&mut self, limit: i64) -> Option<Timer> {
        self.drop_deleted_top();
        if self.heap.peek()?.0.time > limit {
            return None;
        }
        let Reverse(timer) = self.heap.pop()?;
        self.live.remove(&timer);
        Some(timer)
    }

    /// Live timers.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    fn drop_deleted_top(&mut self) {
        while let Some(Reverse(top)) = self.heap.peek() {
            if self.live.contains(top) {
                return;
            }
            self.heap.pop();
        }
    }
}

/// One key group's timers in the canonical form: (time, key length, key and namespace
/// bytes), sorted, postcard.
fn serialize_timers(name: &str, timers: &mut [&Timer]) -> Result<Option<Vec<u8>>, StateError> {
    if timers.is_empty() {
        return Ok(None);
    }
    timers.sort_unstable();
    let entries: Vec<(i64, u16, &[u8])> = timers.iter().map(|t| (t.time, t.key_len, &*t.bytes)).collect();
    postcard::to_allocvec(&entries)
        .map(Some)
        .map_err(|e| StateError::Serialize { state: name.to_string(), message: e.to_string() })
}

impl KeyedTable for TimerQueue {
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn key_count(&self) -> usize {
        self.live.len()
    }

    fn flush(&mut self) -> Result<(), StateError> {
        Ok(())
    }

    fn snapshot_key_group(&self, local_group: usize) -> Result<Option<Vec<u8>>, StateError> {
        let key_group = self.first_key_group + local_group as u32;
        let mut timers: Vec<&Timer> = self.live.iter().filter(|t| t.key_group == key_group).collect();
        serialize_timers(&self.name, &mut timers)
    }

    fn restore_key_group(&mut self, local_group: usize, bytes: &[u8]) -> Result<(), StateError> {
        let entries: Vec<(i64, u16, Vec<u8>)> = postcard::from_bytes(bytes).map_err(|e| StateError::Deserialize {
            state: self.name.clone(),
            message: format!("timers of key group {}: {e}", self.first_key_group + local_group as u32),
        })?;
        for (time, key_len, bytes) in entries {
            if key_len as usize > bytes.len() {
                return Err(StateError::Deserialize {
                    state: self.name.clone(),
                    message: format!("a timer's key is {key_len} bytes long but it has {} bytes", bytes.len()),
                });
            }
            let timer = Timer {
                time,
                key_len,
                key_hash: stable_hash(&bytes[..key_len as usize]).0,
                key_group: self.first_key_group + local_group as u32,
                bytes: StoredKey::new(&bytes),
            };
            if self.live.insert(timer.clone()) {
                self.heap.push(Reverse(timer));
            }
        }
        Ok(())
    }

    fn clear_all(&mut self) -> Result<(), StateError> {
        self.heap.clear();
        self.live.clear();
        Ok(())
    }

    /// Copies the live timers now (the heap moves on), serializes them by key group later.
    fn deferred_snapshot(&mut self) -> Option<DeferredKeyGroups> {
        let timers: Vec<Timer> = self.live.iter().cloned().collect();
        let (name, first, count) = (self.name.clone(), self.first_key_group, self.group_count);
        Some(Box::new(move || {
            let mut by_group: Vec<Vec<&Timer>> = vec![Vec::new(); count];
            for timer in &timers {
                by_group[(timer.key_group - first) as usize].push(timer);
            }
            let mut key_groups = Vec::new();
            for (local, mut group) in by_group.into_iter().enumerate() {
                if let Some(bytes) = serialize_timers(&name, &mut group)? {
                    key_groups.push((first + local as u32, bytes));
                }
            }
            Ok(key_groups)
        }))
    }
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
            .ok_or_else(|| StateError::ForeignHandle { state: name.to_string() })?;
        Ok(f(key, queue))
    })
}

/// Takes the earliest timer of queue `id` due at `limit`, and makes its key and namespace
/// the backend's current ones, so that the callback reads the timer's state.
pub fn pop_due_timer(id: super::StateId, name: &str, limit: i64) -> Result<Option<Timer>, StateError> {
    super::with_backend(name, |backend| {
        let queue = table_of(backend, id, name)?;
        let Some(timer) = queue.pop_due(limit) else { return Ok(None) };
        backend.set_current_key(timer.key(), timer.key_hash())?;
        backend.set_current_namespace(timer.namespace());
        Ok(Some(timer))
    })
}

/// The earliest time in queue `id`, whatever the current key.
pub fn next_timer_time(id: super::StateId, name: &str) -> Result<Option<i64>, StateError> {
    super::with_backend(name, |backend| Ok(table_of(backend, id, name)?.next_time()))
}

fn table_of<'a>(
    backend: &'a mut dyn super::KeyedStateBackend,
    id: super::StateId,
    name: &str,
) -> Result<&'a mut TimerQueue, StateError> {
    let table = backend.table_by_id_mut(id, name)?;
    table.as_any_mut().downcast_mut::<TimerQueue>().ok_or_else(|| StateError::ForeignHandle { state: name.to_string() })
}
