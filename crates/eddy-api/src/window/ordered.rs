//! [`OrderedWindows`]: the open windows of a window operator whose trigger is the time
//! trigger of its assigner's domain (fire when the watermark, or processing time, passes
//! the window's end, then clean up, with no allowed lateness),
//! kept in the order they fire, each with its keys' contents: no timer per key and
//! window, and a window fires by walking its own table.
//!
//! Why: with a timer per (key, window), every record that opens a window writes a timer
//! beside the contents, and firing reads both back long after, when neither is in the
//! cache. Here a record finds its window
//! (almost always the one used last) and its key in that window's small table, which
//! stays in a few hot cache lines while the window fills; a window that fires is read in
//! one pass and its table goes to the next window (W3 at p=1: 1.4 to 7.4-8.7 M events/s).
//!
//! What the operator keeps here is not in the keyed backend: before a snapshot it writes
//! it there, as keyed state and timers exactly as the timer path would have (so that
//! checkpoints, savepoints, restore and rescale see the same state as ever), and takes it
//! out again after (see `WindowLogic`). On the heap backend only: with RocksDB, state may be
//! larger than memory, and the contents stay in the backend.

use hashbrown::HashTable;
use std::collections::VecDeque;

/// A key's encoded bytes, inline when short (every primitive key and short strings), so
/// that a new key in a window allocates nothing.
#[derive(Clone)]
pub(crate) enum KeyBytes {
    Inline { len: u8, bytes: [u8; KeyBytes::INLINE] },
    Spilled(Box<[u8]>),
}

impl KeyBytes {
    const INLINE: usize = 22;

    fn of(encoded: &[u8]) -> Self {
        if encoded.len() <= Self::INLINE {
            let mut bytes = [0u8; Self::INLINE];
            bytes[..encoded.len()].copy_from_slice(encoded);
            KeyBytes::Inline { len: encoded.len() as u8, bytes }
        } else {
            KeyBytes::Spilled(encoded.into())
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { len, bytes } => &bytes[..*len as usize],
            KeyBytes::Spilled(bytes) => bytes,
        }
    }
}

/// One key's contents in one window: its encoded bytes and what the window's contents keep
/// for it.
pub(crate) struct Slot<H> {
    pub(crate) key: KeyBytes,
    pub(crate) held: H,
}

/// The keys of one window: their slots in the order they came, and a hash index of them
/// by the key's stable hash. Slots in a vector and 4-byte indexes in the hash table, rather
/// than slots in the table: a window of W3 holds about 950 keys, which a hash table keeps
/// in 2048 buckets (its load stays under 7/8), so a slot in each bucket took twice its
/// size; each window open between two watermarks holds its keys, hundreds of windows at a
/// time when records come fast.
pub(crate) struct WindowKeys<H> {
    pub(crate) slots: Vec<Slot<H>>,
    index: HashTable<u32>,
}

impl<H> Default for WindowKeys<H> {
    fn default() -> Self {
        Self { slots: Vec::new(), index: HashTable::new() }
    }
}

/// The stable hash of an encoded key, as the keyed backend has it.
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    eddy_types::stable_hash(key).0
}

/// An open window, the time it fires at, and its keys.
struct OpenWindow<W, H> {
    fires_at: i64,
    window: W,
    keys: WindowKeys<H>,
}

/// The open windows in the order they fire (by the time they fire at; windows of one time
/// side by side).
pub(crate) struct OrderedWindows<W, H> {
    open: VecDeque<OpenWindow<W, H>>,
    /// The index in `open` of the window used last: the next record's, nearly always.
    last: usize,
    /// Keys of windows that fired, emptied, for the next windows: a window's vector and
    /// index grow to its keys once, not again for every window.
    spare: Vec<WindowKeys<H>>,
}

/// How many emptied windows' keys are kept for new windows.
const SPARE_WINDOWS: usize = 16;

impl<W: PartialEq + Clone, H> OrderedWindows<W, H> {
    pub(crate) fn new() -> Self {
        Self { open: VecDeque::new(), last: 0, spare: Vec::new() }
    }

    /// Whether no window is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Updates the contents of the key `key` (encoded, with its stable `hash`) in `window`,
    /// which fires at `fires_at`: `update` gets what is held for it so far, to change in
    /// place, or `None` for a key new in the window, and then returns what to hold. True if
    /// the window was not open before.
    #[inline]
    pub(crate) fn update(
        &mut self,
        window: &W,
        fires_at: i64,
        key: &[u8],
        hash: u64,
        update: impl FnOnce(Option<&mut H>) -> Option<H>,
    ) -> bool {
        let (index, opened) = self.window_index(window, fires_at);
        let WindowKeys { slots, index: by_hash } = &mut self.open[index].keys;
        match by_hash.find(hash, |&i| slots[i as usize].key.as_slice() == key) {
            Some(&i) => {
                update(Some(&mut slots[i as usize].held));
            }
            None => {
                if let Some(held) = update(None) {
                    let next = slots.len() as u32;
                    let ordered = &*slots;
                    by_hash.insert_unique(hash, next, |&i| key_hash(ordered[i as usize].key.as_slice()));
                    slots.push(Slot { key: KeyBytes::of(key), held });
                }
            }
        }
        opened
    }

    /// The index of `window` in `open`, added if it is not open yet (then true).
    #[inline]
    fn window_index(&mut self, window: &W, fires_at: i64) -> (usize, bool) {
        if let Some(open) = self.open.get(self.last) {
            if open.fires_at == fires_at && open.window == *window {
                return (self.last, false);
            }
        }
        let mut index = self.open.partition_point(|open| open.fires_at < fires_at);
        while let Some(open) = self.open.get(index) {
            if open.fires_at != fires_at {
                break;
            }
            if open.window == *window {
                self.last = index;
                return (index, false);
            }
            index += 1;
        }
        let keys = self.spare.pop().unwrap_or_default();
        self.open.insert(index, OpenWindow { fires_at, window: window.clone(), keys });
        self.last = index;
        (index, true)
    }

    /// The time the earliest open window fires at.
    pub(crate) fn next_firing(&self) -> Option<i64> {
        self.open.front().map(|open| open.fires_at)
    }

    /// Takes the earliest open window if it fires at `limit` or earlier: the window, and
    /// its keys' contents (give them back with [`OrderedWindows::recycle`]).
    pub(crate) fn pop_due(&mut self, limit: i64) -> Option<(W, WindowKeys<H>)> {
        if self.open.front()?.fires_at > limit {
            return None;
        }
        let open = self.open.pop_front()?;
        self.last = 0;
        Some((open.window, open.keys))
    }

    /// A fired window's keys, emptied, for a window to come.
    pub(crate) fn recycle(&mut self, mut keys: WindowKeys<H>) {
        keys.slots.clear();
        keys.index.clear();
        if self.spare.len() < SPARE_WINDOWS {
            self.spare.push(keys);
        }
    }

    /// Every open window, its firing time and its keys (for a snapshot).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&W, i64, &[Slot<H>])> {
        self.open.iter().map(|open| (&open.window, open.fires_at, open.keys.slots.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::{key_hash, OrderedWindows};

    fn add(windows: &mut OrderedWindows<(i64, i64), u64>, window: (i64, i64), key: &[u8]) -> bool {
        windows.update(&window, window.1 - 1, key, key_hash(key), |held| match held {
            Some(count) => {
                *count += 1;
                None
            }
            None => Some(1),
        })
    }

    /// A fired window and its keys' counts, sorted.
    type Fired = ((i64, i64), Vec<(Vec<u8>, u64)>);

    /// Fires every window due at `limit`.
    fn fire(windows: &mut OrderedWindows<(i64, i64), u64>, limit: i64) -> Vec<Fired> {
        let mut fired = Vec::new();
        while let Some((window, mut keys)) = windows.pop_due(limit) {
            let mut counts: Vec<(Vec<u8>, u64)> =
                keys.slots.drain(..).map(|slot| (slot.key.as_slice().to_vec(), slot.held)).collect();
            counts.sort();
            fired.push((window, counts));
            windows.recycle(keys);
        }
        fired
    }

    #[test]
    fn windows_fire_in_the_order_of_their_ends_with_each_keys_contents() {
        let mut windows = OrderedWindows::new();
        let long_key = vec![7u8; 40];
        assert!(add(&mut windows, (10, 20), b"a"));
        assert!(!add(&mut windows, (10, 20), b"a"));
        assert!(add(&mut windows, (0, 10), b"b"), "an earlier window opened after a later one");
        assert!(!add(&mut windows, (10, 20), &long_key));
        assert!(add(&mut windows, (20, 30), b"a"));
        assert_eq!(windows.next_firing(), Some(9));
        assert!(fire(&mut windows, 8).is_empty());
        assert_eq!(
            fire(&mut windows, 19),
            [((0, 10), vec![(b"b".to_vec(), 1)]), ((10, 20), vec![(long_key.clone(), 1), (b"a".to_vec(), 2)]),]
        );
        // A window opened after others fired takes a recycled table, empty.
        assert!(add(&mut windows, (30, 40), b"b"));
        assert_eq!(
            fire(&mut windows, i64::MAX),
            [((20, 30), vec![(b"a".to_vec(), 1)]), ((30, 40), vec![(b"b".to_vec(), 1)]),]
        );
        assert!(windows.is_empty());
    }

    #[test]
    fn many_keys_in_one_window_are_each_counted_once() {
        let mut windows = OrderedWindows::new();
        for round in 0..3u64 {
            for key in 0..5000u64 {
                add(&mut windows, (0, 10), &key.to_be_bytes());
            }
            assert_eq!(windows.iter().map(|(_, _, slots)| slots.len()).sum::<usize>(), 5000, "round {round}");
        }
        let fired = fire(&mut windows, 9);
        assert_eq!(fired.len(), 1);
        assert!(fired[0].1.iter().all(|(_, count)| *count == 3));
    }
}
