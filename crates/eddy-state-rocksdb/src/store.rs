//! One subtask's RocksDB instance and the table of each declared state in it.
//!
//! Every key starts with the state's table id and the key group, both big-endian, so one
//! state's key group is one contiguous range: a snapshot or a rescale reads it with a
//! prefix scan. The write-ahead log is off: checkpoints, not the WAL, make state durable,
//! as in Flink.

use crate::write_gate::{Held, OpenOnDrop, WriteGate};
use eddy_state::keyed::{HeldWrite, LocalFiles, NativeSnapshot, NativeTable, RawLayout, RawStore, RawTable, Unstored};
use eddy_state::{StateError, StateErrorKind};
use eddy_types::CheckpointId;
use eddy_types::KeyGroupRange;
use rocksdb::{
    BlockBasedOptions, Cache, DBWithThreadMode, Direction, IteratorMode, MultiThreaded, Options, WriteOptions,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) type Db = DBWithThreadMode<MultiThreaded>;

pub(crate) fn error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> StateError {
    StateError::from(StateErrorKind::BackendFailed {
        what: format!("RocksDB {what}"),
        source: eddy_types::Cause::new(e),
    })
}

/// One subtask's RocksDB instance.
pub struct RocksDbRawStore {
    db: Option<Arc<Db>>,
    pub(crate) dir: PathBuf,
    owns_dir: bool,
    /// Every table in the instance: declared, or restored and not declared yet.
    pub(crate) tables: Vec<NativeTable>,
    /// The key groups the instance holds, when it takes native snapshots (incremental, or
    /// full ones read out of its files off the task thread).
    pub(crate) range: Option<KeyGroupRange>,
    /// Checkpoints keep the files (incremental) rather than the canonical form.
    pub(crate) incremental: bool,
    /// Names this instance's SST files get in the checkpoints' shared area: unique per
    /// instance, because every instance numbers its files from 1.
    pub(crate) uid: String,
    /// Restored SST files the job owns, by file name: their names in the shared area, so
    /// that checkpoints reference them instead of uploading copies.
    pub(crate) restored_shared: HashMap<String, String>,
    /// Closed while a checkpoint is made; every table's writes wait on it.
    pub(crate) gate: WriteGate,
    /// The gate closed by [`RawStore::prepare_snapshot`], until the snapshot's thread
    /// takes it over.
    pub(crate) preparing: Option<OpenOnDrop>,
    /// Marks the working directory as this process's while the instance lives (see
    /// [`LocalFiles::mark_owned`]); dropped after the directory is removed.
    owner: Option<LocalFiles>,
}

/// The memory budget of one slot, shared by the RocksDB instances of the operators that
/// run in it: one block cache of half the budget; write buffers of a quarter each, two at
/// most, per instance. (RocksDB 7.8's C API has no write buffer manager, so memtables
/// cannot be charged to the shared cache; a slot with k keyed operators may use up to
/// (1 + k) / 2 of the budget.)
#[derive(Clone)]
pub struct SlotMemory {
    cache: Cache,
    write_buffer_bytes: usize,
}

impl SlotMemory {
    pub fn new(memory_bytes: usize) -> Result<Self, StateError> {
        let cache = Cache::new_lru_cache((memory_bytes / 2).max(1 << 20)).map_err(|e| error("block cache", e))?;
        Ok(Self { cache, write_buffer_bytes: (memory_bytes / 4).max(1 << 20) })
    }
}

impl std::fmt::Debug for SlotMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotMemory {{ write_buffer_bytes: {} }}", self.write_buffer_bytes)
    }
}

/// RocksDB's options within a slot's memory.
fn options(memory: &SlotMemory) -> Options {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.set_write_buffer_size(memory.write_buffer_bytes);
    options.set_max_write_buffer_number(2);
    options.set_compaction_filter("eddy-ttl", drop_expired);
    // ListState appends are merge operands, combined when read or compacted.
    options.set_merge_operator_associative("eddy-list-append", append_lists);
    // Most reads of a large state miss the memtable: a bloom filter over whole keys skips
    // the skip-list search for them.
    options.set_memtable_whole_key_filtering(true);
    options.set_memtable_prefix_bloom_ratio(0.1);
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&memory.cache);
    // A key read for the first time is usually absent: bloom filters answer that without
    // reading data blocks.
    table.set_bloom_filter(10.0, false);
    options.set_block_based_table_factory(&table);
    options
}

/// Creates an instance's working directory, if missing.
pub(crate) fn create_working_dir(dir: &Path) -> Result<(), StateError> {
    std::fs::create_dir_all(dir).map_err(|e| error(&format!("cannot create working directory '{}'", dir.display()), e))
}

impl RocksDbRawStore {
    /// Opens a fresh instance in `dir` (created; removed again on drop) within a memory
    /// budget of its own, `memory_bytes` (half block cache, half write buffers).
    pub fn open(dir: &Path, memory_bytes: usize) -> Result<Self, StateError> {
        Self::open_in_slot(dir, &SlotMemory::new(memory_bytes)?)
    }

    /// Opens a fresh instance in `dir` within a slot's shared memory.
    pub fn open_in_slot(dir: &Path, memory: &SlotMemory) -> Result<Self, StateError> {
        create_working_dir(dir)?;
        Self::open_existing(dir, memory, Vec::new())
    }

    /// The working directory is `owner`'s, marked as this process's until the instance
    /// is dropped.
    pub(crate) fn with_owner(mut self, owner: LocalFiles) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Opens the instance whose files are in `dir`, holding `tables`.
    pub(crate) fn open_existing(dir: &Path, memory: &SlotMemory, tables: Vec<NativeTable>) -> Result<Self, StateError> {
        let db = Db::open(&options(memory), dir).map_err(|e| error(&format!("cannot open '{}'", dir.display()), e))?;
        Ok(Self::with_db(db, dir, tables, true))
    }

    /// Opens the files of a native snapshot in `dir` read-only (to read key groups out of
    /// them when rescaling).
    pub(crate) fn open_read_only(dir: &Path, tables: Vec<NativeTable>) -> Result<Self, StateError> {
        let db = Db::open_for_read_only(&options(&SlotMemory::new(8 << 20)?), dir, false)
            .map_err(|e| error(&format!("cannot open the snapshot files in '{}'", dir.display()), e))?;
        Ok(Self::with_db(db, dir, tables, false))
    }

    /// `owns_dir`: the directory is the instance's own, removed when it closes (not the
    /// files of a snapshot it reads).
    fn with_db(db: Db, dir: &Path, tables: Vec<NativeTable>, owns_dir: bool) -> Self {
        Self {
            db: Some(Arc::new(db)),
            dir: dir.to_path_buf(),
            owns_dir,
            tables,
            range: None,
            incremental: false,
            // Opened outside a job (tools, tests): a fresh random id; a job's backend
            // gives the instance's seeded one (`with_instance_id`).
            uid: eddy_types::RunSeed::draw().hex(),
            restored_shared: HashMap::new(),
            gate: WriteGate::default(),
            preparing: None,
            owner: None,
        }
    }

    /// Snapshots of the key groups of `range` start with RocksDB's own files (hard links);
    /// checkpoints keep them when `incremental`, otherwise (and for savepoints) the
    /// canonical form is read out of them in the asynchronous part.
    pub fn with_native_snapshots(mut self, range: KeyGroupRange, incremental: bool) -> Self {
        self.range = Some(range);
        self.incremental = incremental;
        self
    }

    /// The id the instance's shared files are named by (unique per run, attempt and
    /// operator instance: see [`eddy_types::RunSeed`]).
    pub fn with_instance_id(mut self, id: String) -> Self {
        self.uid = id;
        self
    }

    pub(crate) fn db(&self) -> Result<&Arc<Db>, StateError> {
        self.db.as_ref().ok_or_else(|| StateError::from(StateErrorKind::Backend("RocksDB is closed".into())))
    }

    /// The table with id `id`, for reading and writing.
    pub(crate) fn table_by_id(&self, id: u16) -> Result<RocksDbTable, StateError> {
        let db = self.db()?.clone();
        Ok(RocksDbTable { db, id, key: Vec::with_capacity(64), write: write_options(), gate: self.gate.clone() })
    }
}

impl Drop for RocksDbRawStore {
    fn drop(&mut self) {
        // Let a checkpoint being made finish with the database, close the database (the
        // last handle then), and remove its working directory.
        self.preparing.take();
        self.gate.wait_open();
        self.db.take();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Table ids with this bit hold values with an expiry prefix.
const TTL_TABLE: u16 = 0x8000;
/// Table ids with this bit hold map entries (one per user key).
const MAP_TABLE: u16 = 0x4000;
const LAYOUT_BITS: u16 = TTL_TABLE | MAP_TABLE;

impl RocksDbRawStore {
    /// Flushes memtables and compacts everything (expired values go; for tests and tools).
    pub fn compact(&self) -> Result<(), StateError> {
        let db = self.db()?;
        db.flush().map_err(|e| error("flush", e))?;
        db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }

    /// Every stored key-value pair, for tests and tools.
    pub fn count_values(&self) -> usize {
        self.db.as_ref().map_or(0, |db| db.iterator(IteratorMode::Start).count())
    }
}

/// Combines a stored list and appended elements (all postcard `Vec`s) into one list.
fn append_lists(_key: &[u8], existing: Option<&[u8]>, operands: &rocksdb::MergeOperands) -> Option<Vec<u8>> {
    eddy_state::keyed::concat_encoded_lists(existing.into_iter().chain(operands))
}

/// Drops values of time-to-live tables whose expiry passed (Flink's TTL cleanup in
/// RocksDB compactions).
fn drop_expired(_level: u32, key: &[u8], value: &[u8]) -> rocksdb::compaction_filter::Decision {
    use rocksdb::compaction_filter::Decision;
    let is_ttl = key.first().is_some_and(|b| u16::from(*b) << 8 & TTL_TABLE != 0);
    if is_ttl && value.len() >= 8 {
        let expiry = u64::from_be_bytes(value[..8].try_into().expect("8 bytes"));
        // Expiry times are wall-clock (they outlive the process), read through the clock
        // trait like every time; a compaction filter is a plain function, so the wall clock.
        let now = eddy_types::Clock::now_ms(&eddy_types::WallClock);
        if expiry <= now {
            return Decision::Remove;
        }
    }
    Decision::Keep
}

impl RawStore for RocksDbRawStore {
    fn table(&mut self, name: &str, layout: RawLayout) -> Result<Box<dyn RawTable>, StateError> {
        let id = match self.tables.iter().find(|t| t.name == name) {
            Some(known) if known.layout != layout => {
                return Err(StateError::from(StateErrorKind::IncompatibleDeclaration {
                    name: name.to_string(),
                    first: format!("restored state stored as {:?}", known.layout),
                    second: format!("a state stored as {layout:?} (a time to live was added or removed)"),
                }))
            }
            Some(known) => known.id,
            None => {
                let next = self.tables.iter().map(|t| (t.id & !LAYOUT_BITS) + 1).max().unwrap_or(0);
                if next & LAYOUT_BITS != 0 {
                    return Err(StateError::from(StateErrorKind::Backend(
                        "more than 16384 states in one operator".into(),
                    )));
                }
                let id = match layout {
                    RawLayout::Values => next,
                    RawLayout::ValuesWithTtl => next | TTL_TABLE,
                    RawLayout::MapEntries => next | MAP_TABLE,
                };
                self.tables.push(NativeTable { name: name.to_string(), id, layout });
                id
            }
        };
        Ok(Box::new(self.table_by_id(id)?))
    }

    fn tables(&self) -> Vec<(String, RawLayout)> {
        self.tables.iter().map(|t| (t.name.clone(), t.layout)).collect()
    }

    fn prepare_snapshot(&mut self) {
        if self.range.is_some() && self.preparing.is_none() {
            self.preparing = Some(self.gate.close_holding());
        }
    }

    fn take_write_wait_micros(&mut self) -> u64 {
        self.gate.take_waited_micros()
    }

    fn abort_snapshot(&mut self) -> Result<(), StateError> {
        let Some(closed) = self.preparing.take() else { return Ok(()) };
        // What was handed over counts as written: write it here, then open.
        let written = crate::native::apply_held(self.db()?, self.gate.take_held());
        if let Err(e) = &written {
            self.gate.fail(eddy_types::chain(&e));
        }
        drop(closed);
        written
    }

    fn native_snapshot(
        &mut self,
        checkpoint_id: CheckpointId,
        canonical: bool,
    ) -> Result<Option<NativeSnapshot>, StateError> {
        self.gate.check()?;
        let Some(range) = self.range else { return Ok(None) };
        let mut snapshot = crate::native::take_snapshot(self, range, checkpoint_id)?;
        if canonical || !self.incremental {
            // Hard links now, the key groups read out of them off the task thread.
            snapshot.deferred_canonical = Unstored(Some(crate::native::read_key_groups));
        }
        Ok(Some(snapshot))
    }
}

/// One declared state inside the instance.
pub(crate) struct RocksDbTable {
    db: Arc<Db>,
    id: u16,
    key: Vec<u8>,
    write: WriteOptions,
    gate: WriteGate,
}

/// Runs a cache's held write into one batch for table `table_id`, and writes it.
pub(crate) fn write_changes(db: &Db, table_id: u16, write: HeldWrite) -> Result<(), StateError> {
    let mut batch = rocksdb::WriteBatch::default();
    let mut full = Vec::with_capacity(64);
    write(&mut |key_group, key, value| {
        full.clear();
        full.extend_from_slice(&prefix(table_id, key_group));
        full.extend_from_slice(key);
        batch.put(&full, value);
    })?;
    db.write_opt(batch, &write_options()).map_err(|e| error("batch write", e))
}

/// How eddy writes to RocksDB: without its write-ahead log, since checkpoints, not the
/// log, make state durable (as in Flink).
pub(crate) fn write_options() -> WriteOptions {
    let mut options = WriteOptions::default();
    options.disable_wal(true);
    options
}

/// The first bytes of every key of table `id` in `key_group`.
pub(crate) fn prefix(id: u16, key_group: u32) -> [u8; 4] {
    let [a, b] = id.to_be_bytes();
    let [c, d] = (key_group as u16).to_be_bytes();
    [a, b, c, d]
}

impl RocksDbTable {
    /// Calls `visit` with every (key after table id and key group, value) whose stored key
    /// starts with `start`, in key order.
    fn scan_from(&self, start: &[u8], visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), StateError> {
        for item in self.db.iterator(IteratorMode::From(start, Direction::Forward)) {
            let (key, value) = item.map_err(|e| error("scan", e))?;
            if !key.starts_with(start) {
                break;
            }
            visit(&key[4..], &value);
        }
        Ok(())
    }

    /// Writes the full key into the reused buffer.
    fn fill_key(&mut self, key_group: u32, key: &[u8]) {
        self.key.clear();
        self.key.extend_from_slice(&prefix(self.id, key_group));
        self.key.extend_from_slice(key);
    }
}

impl RawTable for RocksDbTable {
    fn get(&self, key_group: u32, key: &[u8]) -> Result<Option<Vec<u8>>, StateError> {
        self.gate.check()?;
        let mut full = Vec::with_capacity(4 + key.len());
        full.extend_from_slice(&prefix(self.id, key_group));
        full.extend_from_slice(key);
        self.db.get(&full).map_err(|e| error("read", e))
    }

    fn put(&mut self, key_group: u32, key: &[u8], value: &[u8]) -> Result<(), StateError> {
        self.gate.wait_open();
        self.gate.check()?;
        self.fill_key(key_group, key);
        self.db.put_opt(&self.key, value, &self.write).map_err(|e| error("write", e))
    }

    fn delete(&mut self, key_group: u32, key: &[u8]) -> Result<(), StateError> {
        self.gate.wait_open();
        self.gate.check()?;
        self.fill_key(key_group, key);
        self.db.delete_opt(&self.key, &self.write).map_err(|e| error("delete", e))
    }

    fn put_batch(&mut self, entries: &mut dyn Iterator<Item = (u32, &[u8], &[u8])>) -> Result<(), StateError> {
        let mut batch = rocksdb::WriteBatch::default();
        for (key_group, key, value) in entries {
            self.fill_key(key_group, key);
            batch.put(&self.key, value);
        }
        self.gate.wait_open();
        self.gate.check()?;
        self.db.write_opt(batch, &self.write).map_err(|e| error("batch write", e))
    }

    fn append_list(&mut self, key_group: u32, key: &[u8], elements: &[u8]) -> Result<bool, StateError> {
        self.gate.wait_open();
        self.gate.check()?;
        self.fill_key(key_group, key);
        self.db.merge_opt(&self.key, elements, &self.write).map_err(|e| error("append", e))?;
        Ok(true)
    }

    fn scan_prefix(
        &self,
        key_group: u32,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), StateError> {
        self.gate.check()?;
        let mut start = self::prefix(self.id, key_group).to_vec();
        start.extend_from_slice(prefix);
        self.scan_from(&start, visit)
    }

    fn scan(&self, key_group: u32, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), StateError> {
        self.gate.check()?;
        self.scan_from(&prefix(self.id, key_group), visit)
    }

    fn writes_wait(&self) -> bool {
        self.gate.is_closed()
    }

    fn wait_for_writes(&self) {
        self.gate.wait_open()
    }

    fn holds_writes(&self) -> bool {
        self.gate.holds()
    }

    fn hold(&mut self, write: HeldWrite) -> Result<(), StateError> {
        match self.gate.hold(Held { table_id: self.id, write }) {
            None => Ok(()),
            // Not held: written now.
            Some(Held { table_id, write }) => {
                self.gate.wait_open();
                self.gate.check()?;
                write_changes(&self.db, table_id, write)
            }
        }
    }
}
