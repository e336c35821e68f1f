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
//! one pass and its table goes to the next window (W3 at p=1: 1.4 to 5-7 M events/s).
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

/// One key's contents in one window: its stable hash (as the keyed backend has it), its
/// bytes, and what the window's contents keep for it.
pub(crate) struct Slot<H> {
    pub(crate) hash: u64,
    pub(crate) key: KeyBytes,
    pub(crate) held: H,
}

/// An open window, the time it fires at, and its keys.
struct OpenWindow<W, H> {
    fires_at: i64,
    window: W,
    keys: HashTable<Slot<H>>,
}

/// The open windows in the order they fire (by the time they fire at; windows of one time
/// side by side).
pub(crate) struct OrderedWindows<W, H> {
    open: VecDeque<OpenWindow<W, H>>,
    /// The index in `open` of the window used last: the next record's, nearly always.
    last: usize,
    /// Tables of windows that fired, emptied, for the next windows: a window's table
    /// grows to its keys once, not again for every window.
    spare: Vec<HashTable<Slot<H>>>,
}

/// How many emptied tables are kept for new windows.
const SPARE_TABLES: usize = 16;

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
        let keys = &mut self.open[index].keys;
        match keys.find_entry(hash, |slot| slot.hash == hash && slot.key.as_slice() == key) {
            Ok(mut entry) => {
                update(Some(&mut entry.get_mut().held));
            }
            Err(_) => {
                if let Some(held) = update(None) {
                    keys.insert_unique(hash, Slot { hash, key: KeyBytes::of(key), held }, |slot| slot.hash);
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
    /// its keys' contents (give the table back with [`OrderedWindows::recycle`]).
    pub(crate) fn pop_due(&mut self, limit: i64) -> Option<(W, HashTable<Slot<H>>)> {
        if self.open.front()?.fires_at > limit {
            return None;
        }
        let open = self.open.pop_front()?;
        self.last = 0;
        Some((open.window, open.keys))
    }

    /// A fired window's table, emptied, for a window to come.
    pub(crate) fn recycle(&mut self, mut keys: HashTable<Slot<H>>) {
        keys.clear();
        if self.spare.len() < SPARE_TABLES {
            self.spare.push(keys);
        }
    }

    /// Every open window, its firing time and its keys (for a snapshot).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&W, i64, &HashTable<Slot<H>>)> {
        self.open.iter().map(|open| (&open.window, open.fires_at, &open.keys))
    }
}
