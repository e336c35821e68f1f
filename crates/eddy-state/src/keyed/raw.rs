//! The byte-level store a keyed backend may keep its state in, below the typed tables:
//! embedded RocksDB implements it (in its own crate), the pure heap backend has none.
//!
//! Keys are the encoded key bytes of one key group; the store lays them out so that a key
//! group is a contiguous range (RocksDB: key-group prefix + key), so that a snapshot or a
//! rescale reads a range of key groups with a scan.

use super::native::NativeSnapshot;
use crate::error::StateError;

/// Creates the table of each declared state.
pub trait RawStore: Send {
    /// The table of state `name`: the one restored or created before under that name, or
    /// a new one. `ttl`: the state's values start with their 8-byte big-endian expiry
    /// (wall-clock ms), so the store may drop expired values on its own (RocksDB: in
    /// compactions); a restored table with the other setting is an error.
    fn table(&mut self, name: &str, ttl: bool) -> Result<Box<dyn RawTable>, StateError>;
    /// Every table the store holds, (name, ttl): declared ones and restored ones that are
    /// not declared yet (their data must survive into the next snapshots).
    fn tables(&self) -> Vec<(String, bool)> {
        Vec::new()
    }
    /// The store's own files for checkpoint `checkpoint_id` (everything written so far must
    /// be in them), or `None` when it takes canonical snapshots only.
    fn native_snapshot(&mut self, checkpoint_id: u64) -> Result<Option<NativeSnapshot>, StateError> {
        let _ = checkpoint_id;
        Ok(None)
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
}
