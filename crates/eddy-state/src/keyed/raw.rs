//! The byte-level store a keyed backend may keep its state in, below the typed tables:
//! embedded RocksDB implements it (in its own crate), the pure heap backend has none.
//!
//! Keys are the encoded key bytes of one key group; the store lays them out so that a key
//! group is a contiguous range (RocksDB: key-group prefix + key), so that a snapshot or a
//! rescale reads a range of key groups with a scan.

use super::native::NativeSnapshot;
use crate::error::StateError;
use eddy_types::CheckpointId;

/// How a state's data is laid out in a raw table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RawLayout {
    /// One value per key.
    Values,
    /// One value per key, starting with its 8-byte big-endian expiry (wall-clock ms), so
    /// that the store may drop expired values on its own (RocksDB: in compactions).
    ValuesWithTtl,
    /// MapState: one entry per user key, under `varint(key length) + key + user key`, so
    /// that reading one user key reads nothing else (Flink's RocksDB layout).
    MapEntries,
}

impl RawLayout {
    /// The layout of a declared state: map entries for maps without a time to live (a
    /// time to live covers a key's whole map, so such maps stay one value).
    pub fn of(meta: &crate::descriptor::StateMeta) -> Self {
        match (meta.kind, meta.ttl.is_some()) {
            (_, true) => RawLayout::ValuesWithTtl,
            (crate::descriptor::StateKind::Map, false) => RawLayout::MapEntries,
            (_, false) => RawLayout::Values,
        }
    }

    pub fn has_ttl(self) -> bool {
        self == RawLayout::ValuesWithTtl
    }
}

/// Creates the table of each declared state.
pub trait RawStore: Send {
    /// The table of state `name`: the one restored or created before under that name, or
    /// a new one; a restored table with another layout is an error.
    fn table(&mut self, name: &str, layout: RawLayout) -> Result<Box<dyn RawTable>, StateError>;
    /// Every table the store holds: declared ones and restored ones that are not declared
    /// yet (their data must survive into the next snapshots).
    fn tables(&self) -> Vec<(String, RawLayout)> {
        Vec::new()
    }
    /// The store's own files for checkpoint `checkpoint_id` (everything written or handed
    /// over so far must be in them), or `None` when it has none. `canonical`: the snapshot must end up in
    /// the canonical form, so the files must come with a deferred reader.
    fn native_snapshot(
        &mut self,
        checkpoint_id: CheckpointId,
        canonical: bool,
    ) -> Result<Option<NativeSnapshot>, StateError> {
        let _ = (checkpoint_id, canonical);
        Ok(None)
    }
    /// Called at a barrier before the tables write back what they cache, and followed by
    /// [`RawStore::native_snapshot`] (or, when that write-back failed,
    /// [`RawStore::abort_snapshot`]): a store that makes its snapshot off the task thread
    /// has the writes handed over ([`RawTable::hold`]) and applies them there, first.
    fn prepare_snapshot(&mut self) {}
    /// Ends a [`RawStore::prepare_snapshot`] without a snapshot: what was handed over is
    /// written now.
    fn abort_snapshot(&mut self) -> Result<(), StateError> {
        Ok(())
    }
    /// How long writes waited for a snapshot being made since the last call, µs: time
    /// the task stood still outside the synchronous part of a checkpoint.
    fn take_write_wait_micros(&mut self) -> u64 {
        0
    }
}

/// One state's serialized values, by key group and key.
pub trait RawTable: Send {
    fn get(&self, key_group: u32, key: &[u8]) -> Result<Option<Vec<u8>>, StateError>;
    fn put(&mut self, key_group: u32, key: &[u8], value: &[u8]) -> Result<(), StateError>;
    fn delete(&mut self, key_group: u32, key: &[u8]) -> Result<(), StateError>;
    /// Writes many values at once (one RocksDB write batch): (key group, key, value).
    fn put_batch(&mut self, entries: &mut dyn Iterator<Item = (u32, &[u8], &[u8])>) -> Result<(), StateError>;
    /// Calls `visit` with every (key, value) of one key group, in key order.
    fn scan(&self, key_group: u32, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), StateError>;
    /// Calls `visit` with every (key, value) of one key group whose key starts with
    /// `prefix`, in key order.
    fn scan_prefix(
        &self,
        key_group: u32,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), StateError> {
        self.scan(key_group, &mut |key, value| {
            if key.starts_with(prefix) {
                visit(key, value)
            }
        })
    }
    /// Appends `elements` (postcard of a `Vec`) to the list stored under the key without
    /// reading it (RocksDB: a merge operand, combined by [`concat_encoded_lists`]).
    /// Returns false when the store cannot, and the caller reads, appends and writes.
    fn append_list(&mut self, key_group: u32, key: &[u8], elements: &[u8]) -> Result<bool, StateError> {
        let _ = (key_group, key, elements);
        Ok(false)
    }
    /// Whether a write now would wait (a snapshot of the store is being made, with the
    /// writes held back for it not applied yet): a cache in front keeps its changes, and
    /// its values, until it would not.
    fn writes_wait(&self) -> bool {
        false
    }
    /// Waits until writes no longer wait (see [`RawTable::writes_wait`]).
    fn wait_for_writes(&self) {}
    /// Whether writes are held for a snapshot being prepared (between
    /// [`RawStore::prepare_snapshot`] and [`RawStore::native_snapshot`]): a cache hands its
    /// changes over with [`RawTable::hold`] instead of writing them.
    fn holds_writes(&self) -> bool {
        false
    }
    /// Hands over a write that the snapshot's own thread runs before it makes the
    /// snapshot (while [`RawTable::holds_writes`]; else the write runs now).
    fn hold(&mut self, write: HeldWrite) -> Result<(), StateError> {
        let mut entries = Vec::new();
        write(&mut |key_group, key, value| entries.push((key_group, key.to_vec(), value.to_vec())))?;
        self.put_batch(&mut entries.iter().map(|(key_group, key, value)| (*key_group, &key[..], &value[..])))
    }
}

/// A write the store runs later: it calls `put(key group, key, stored value)` for each
/// value, in the store's key order.
pub type HeldWrite = Box<dyn FnOnce(&mut dyn FnMut(u32, &[u8], &[u8])) -> Result<(), StateError> + Send>;

/// postcard's length prefix (unsigned LEB128).
pub(crate) fn write_varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(crate) fn read_varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut n = 0u64;
    for (i, b) in bytes.iter().enumerate().take(10) {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((n, &bytes[i + 1..]));
        }
    }
    None
}

/// One list from several postcard-encoded `Vec`s, in order, without decoding an element:
/// the counts add up and the element bytes follow one another. `None` if a part is not a
/// list.
pub fn concat_encoded_lists<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Option<Vec<u8>> {
    let mut count = 0u64;
    let mut body = Vec::new();
    for part in parts {
        let (n, elements) = read_varint(part)?;
        // Counts from restored files: a sum that overflows is not a list.
        count = count.checked_add(n)?;
        body.extend_from_slice(elements);
    }
    let mut out = Vec::with_capacity(body.len() + 10);
    write_varint(count, &mut out);
    out.extend_from_slice(&body);
    Some(out)
}
