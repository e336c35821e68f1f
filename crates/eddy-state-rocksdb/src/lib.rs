//! eddy's RocksDB state backend: keyed state in embedded RocksDB (linked to the system's
//! librocksdb), with the hot keys cached on the heap in front of it (write-through).
//!
//! Layout: one RocksDB instance per subtask in its own working directory (removed when the
//! subtask ends). Every key starts with the state's table id and the key group, both
//! big-endian, so one state's key group is one contiguous range: a snapshot or a rescale
//! reads it with a prefix scan. The write-ahead log is off: checkpoints, not the WAL,
//! make state durable, as in Flink.
//!
//! Depends on `eddy-state` (the backend traits) and the `rocksdb` crate; nothing else in
//! eddy sees RocksDB.

use eddy_state::keyed::{KeyedBackendFactory, KeyedStateBackend, RawStore, RawTable};
use eddy_state::{HeapKeyedStateBackend, StateError};
use eddy_types::{KeyGroupRange, MaxParallelism};
use rocksdb::{
    BlockBasedOptions, Cache, DBWithThreadMode, Direction, IteratorMode, MultiThreaded, Options, WriteOptions,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

type Db = DBWithThreadMode<MultiThreaded>;

/// Default memory budget of one subtask's RocksDB (block cache + write buffers).
pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Default number of values per state cached on the heap (about 100 MB for small values).
pub const DEFAULT_CACHE_ENTRIES: usize = 1_000_000;

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

fn error(what: &str, e: impl std::fmt::Display) -> StateError {
    StateError::Backend(format!("RocksDB {what}: {e}"))
}

/// One subtask's RocksDB instance.
pub struct RocksDbRawStore {
    db: Option<Arc<Db>>,
    dir: PathBuf,
    next_table: u16,
}

impl RocksDbRawStore {
    /// Opens a fresh instance in `dir` (created; removed again on drop) within
    /// `memory_bytes` (half block cache, half write buffers).
    pub fn open(dir: &Path, memory_bytes: usize) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| error(&format!("cannot create working directory '{}'", dir.display()), e))?;
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_write_buffer_size((memory_bytes / 4).max(1 << 20));
        options.set_max_write_buffer_number(2);
        options.set_compaction_filter("eddy-ttl", drop_expired);
        // Most reads of a large state miss the memtable: a bloom filter over whole keys
        // skips the skip-list search for them.
        options.set_memtable_whole_key_filtering(true);
        options.set_memtable_prefix_bloom_ratio(0.1);
        let mut table = BlockBasedOptions::default();
        let cache = Cache::new_lru_cache(memory_bytes / 2).map_err(|e| error("block cache", e))?;
        table.set_block_cache(&cache);
        // A key read for the first time is usually absent: bloom filters answer that
        // without reading data blocks.
        table.set_bloom_filter(10.0, false);
        options.set_block_based_table_factory(&table);
        let db = Db::open(&options, dir).map_err(|e| error(&format!("cannot open '{}'", dir.display()), e))?;
        Ok(Self { db: Some(Arc::new(db)), dir: dir.to_path_buf(), next_table: 0 })
    }
}

impl Drop for RocksDbRawStore {
    fn drop(&mut self) {
        // Close the database (the last handle), then remove its working directory.
        self.db.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Table ids with this bit hold values with an expiry prefix.
const TTL_TABLE: u16 = 0x8000;

impl RocksDbRawStore {
    /// Flushes memtables and compacts everything (expired values go; for tests and tools).
    pub fn compact(&self) -> Result<(), StateError> {
        let db = self.db.as_ref().ok_or_else(|| StateError::Backend("RocksDB is closed".into()))?;
        db.flush().map_err(|e| error("flush", e))?;
        db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }

    /// Every stored key-value pair, for tests and tools.
    pub fn count_values(&self) -> usize {
        self.db.as_ref().map_or(0, |db| db.iterator(IteratorMode::Start).count())
    }
}

/// Drops values of time-to-live tables whose expiry passed (Flink's TTL cleanup in
/// RocksDB compactions).
fn drop_expired(_level: u32, key: &[u8], value: &[u8]) -> rocksdb::compaction_filter::Decision {
    use rocksdb::compaction_filter::Decision;
    let is_ttl = key.first().is_some_and(|b| u16::from(*b) << 8 & TTL_TABLE != 0);
    if is_ttl && value.len() >= 8 {
        let expiry = u64::from_be_bytes(value[..8].try_into().expect("8 bytes"));
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        if expiry <= now {
            return Decision::Remove;
        }
    }
    Decision::Keep
}

impl RawStore for RocksDbRawStore {
    fn table(&mut self, _name: &str, ttl: bool) -> Result<Box<dyn RawTable>, StateError> {
        let db = self.db.clone().ok_or_else(|| StateError::Backend("RocksDB is closed".into()))?;
        if self.next_table >= TTL_TABLE {
            return Err(StateError::Backend("more than 32768 states in one operator".into()));
        }
        let id = if ttl { self.next_table | TTL_TABLE } else { self.next_table };
        self.next_table += 1;
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        Ok(Box::new(RocksDbTable { db, id, key: Vec::with_capacity(64), write }))
    }
}

/// One declared state inside the instance.
struct RocksDbTable {
    db: Arc<Db>,
    id: u16,
    key: Vec<u8>,
    write: WriteOptions,
}

fn prefix(id: u16, key_group: u32) -> [u8; 4] {
    let [a, b] = id.to_be_bytes();
    let [c, d] = (key_group as u16).to_be_bytes();
    [a, b, c, d]
}

impl RocksDbTable {
    /// Writes the full key into the reused buffer.
    fn fill_key(&mut self, key_group: u32, key: &[u8]) {
        self.key.clear();
        self.key.extend_from_slice(&prefix(self.id, key_group));
        self.key.extend_from_slice(key);
    }
}

impl RawTable for RocksDbTable {
    fn get(&self, key_group: u32, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        let mut full = Vec::with_capacity(4 + key.len());
        full.extend_from_slice(&prefix(self.id, key_group));
        full.extend_from_slice(key);
        self.db.get(&full).map_err(|e| error("read", e))
    }

    fn put(&mut self, key_group: u32, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.fill_key(key_group, key);
        self.db.put_opt(&self.key, value, &self.write).map_err(|e| error("write", e))
    }

    fn delete(&mut self, key_group: u32, key: &[u8]) -> Result<(), StateError> {
        self.fill_key(key_group, key);
        self.db.delete_opt(&self.key, &self.write).map_err(|e| error("delete", e))
    }

    fn put_batch(&mut self, entries: &mut dyn Iterator<Item = (u32, &[u8], &[u8])>) -> Result<(), StateError> {
        let mut batch = rocksdb::WriteBatchWithTransaction::<false>::default();
        for (key_group, key, value) in entries {
            self.fill_key(key_group, key);
            batch.put(&self.key, value);
        }
        self.db.write_opt(batch, &self.write).map_err(|e| error("batch write", e))
    }

    fn scan(&self, key_group: u32, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), StateError> {
        let start = prefix(self.id, key_group);
        for item in self.db.iterator(IteratorMode::From(&start, Direction::Forward)) {
            let (key, value) = item.map_err(|e| error("scan", e))?;
            if !key.starts_with(&start) {
                break;
            }
            visit(&key[4..], &value);
        }
        Ok(())
    }
}

/// Chooses RocksDB as the keyed state backend of a job: `env.set_state_backend(...)`.
#[derive(Debug, Clone)]
pub struct RocksDbStateBackend {
    /// Where subtasks keep their working directories.
    pub working_dir: PathBuf,
    /// Block cache + write buffers per subtask (one slot).
    pub memory_bytes: usize,
    /// Values per state cached on the heap.
    pub cache_entries: usize,
}

impl RocksDbStateBackend {
    /// Working directories under `working_dir`, default memory budget and cache.
    pub fn new(working_dir: impl Into<PathBuf>) -> Self {
        Self {
            working_dir: working_dir.into(),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            cache_entries: DEFAULT_CACHE_ENTRIES,
        }
    }

    /// A backend for one subtask's key groups, in a fresh working directory.
    pub fn create_backend(
        &self,
        name: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        let instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let dir = self.working_dir.join(format!("{safe}-{}-{instance}", std::process::id()));
        let store = RocksDbRawStore::open(&dir, self.memory_bytes)?;
        Ok(Box::new(HeapKeyedStateBackend::new(range, max).with_raw_store(Box::new(store), self.cache_entries)))
    }
}

impl KeyedBackendFactory for RocksDbStateBackend {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn create(
        &self,
        instance: &str,
        range: KeyGroupRange,
        max: MaxParallelism,
    ) -> Result<Box<dyn KeyedStateBackend>, StateError> {
        self.create_backend(instance, range, max)
    }
}
