//! Incremental checkpoints of the heap backend: a *chain* of segment files, a base with
//! every entry and, after it, one delta per checkpoint with what changed since the one
//! before (Flink's changelog idea at checkpoint granularity: what a checkpoint writes
//! follows the changes, not the size of the state).
//!
//! - A table tracks its changes for free: every entry carries the epoch of its last change
//!   (the same epochs the RocksDB write-back cache uses), and removals are listed while a
//!   chain is kept ([`HeapTable::deferred_changes`](super::HeapTable)).
//! - At a barrier, the task thread only shares the key groups (O(1) each, copy on write)
//!   and bumps the epoch. Off the task thread, the segment is written into the chain's local
//!   directory, and the checkpoint gets hard links to every file of the chain: a native
//!   snapshot whose files are *shared*, so the checkpoint storage uploads each segment
//!   once and later checkpoints reference it, with the reference counts that RocksDB's
//!   incremental files use.
//! - Every segment of a chain is in every checkpoint after it: a delta is relative to the
//!   previous *taken* snapshot, completed or not, so a checkpoint that failed leaves no
//!   hole. Segments are written in order (each waits for the one before).
//! - A new base is written when the deltas since the last one outgrow it (so a restore
//!   reads at most about twice the state), after a write failed, and when a table lost
//!   track of its changes (`clear_all`).
//! - A restore reads the chain back into the canonical form (key groups of the restoring
//!   range only), so it restores at any parallelism and on either backend.
//!
//! A segment, all integers varints: `EDDYHSEG`, base (0/1), the number of states, and per
//! state its name, ttl (0/1), full (0/1: replaces what earlier segments hold), the number of
//! key groups, and per key group its number, its upserts as (key, stored value) and its
//! removals as keys, each byte string length first. Removals apply before upserts.

use super::backend::{KeyedStateEntries, KeyedStateSnapshot};
use super::native::{remove_orphans, LocalFiles, NativeFile, NativeFiles, NativeSnapshot, Unstored};
use super::raw::{read_varint, write_varint};
use super::shared_work::{SharedWork, Work};
use crate::error::{StateError, StateErrorKind};
use eddy_types::{KeyGroup, KeyGroupRange};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The backend name native heap snapshots carry.
pub const HEAP_BACKEND: &str = "heap";
const MAGIC: &[u8; 8] = b"EDDYHSEG";
/// How the local directories of chains (and of their checkpoints' links) begin.
const CHAIN_DIR_PREFIX: &str = "eddy-heap-chain-";

/// Frames one state's changes for a segment, key group by key group, into buffers that
/// the chain keeps from one segment to the next (a segment is tens of MB: fresh buffers
/// each time cost page faults).
#[derive(Default)]
pub struct ChangesWriter {
    /// The state's key groups, framed.
    body: Vec<u8>,
    key_groups: u64,
    /// The current key group's upserts and removals.
    upserts: Vec<u8>,
    upsert_count: u64,
    removals: Vec<u8>,
    removal_count: u64,
}

impl ChangesWriter {
    /// Empty, for the next state: also what a failed state left half-framed.
    fn reset(&mut self) {
        self.body.clear();
        self.key_groups = 0;
        self.upserts.clear();
        self.removals.clear();
        (self.upsert_count, self.removal_count) = (0, 0);
    }

    /// A key's value as it is now: `stored` is the value as the canonical form stores it
    /// (with its expiry first for a state with a time to live).
    pub fn upsert(&mut self, key: &[u8], stored: &[u8]) {
        self.upsert_count += 1;
        write_bytes(key, &mut self.upserts);
        write_bytes(stored, &mut self.upserts);
    }

    /// A key whose value is gone.
    pub fn remove(&mut self, key: &[u8]) {
        self.removal_count += 1;
        write_bytes(key, &mut self.removals);
    }

    /// Ends key group `key_group`: the upserts and removals since the last call are its
    /// changes (nothing is written when there were none).
    pub fn end_key_group(&mut self, key_group: u32) {
        if self.upsert_count > 0 || self.removal_count > 0 {
            self.key_groups += 1;
            write_varint(key_group as u64, &mut self.body);
            write_varint(self.upsert_count, &mut self.body);
            self.body.extend_from_slice(&self.upserts);
            write_varint(self.removal_count, &mut self.body);
            self.body.extend_from_slice(&self.removals);
        }
        self.upserts.clear();
        self.removals.clear();
        (self.upsert_count, self.removal_count) = (0, 0);
    }
}

/// Frames a state's changes (its key groups shared at the barrier) off the task thread.
pub type WriteChanges = Box<dyn FnOnce(&mut ChangesWriter) -> Result<(), StateError> + Send>;

/// What one state changed since its last snapshot (or all of it, when `full`), framed
/// off the task thread.
pub struct DeferredChanges {
    pub full: bool,
    pub write: WriteChanges,
}

/// A state's changes for one segment: its name, whether it has a time to live, the work.
pub struct ChangedState {
    pub name: String,
    pub ttl: bool,
    pub changes: DeferredChanges,
}

fn write_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    write_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// One file of the chain, in the chain's directory.
struct Segment {
    name: String,
    /// Set once written (0 before): what decides when a new base is due.
    bytes: Arc<AtomicU64>,
}

/// The segments a heap backend has written since its last base, in its own local
/// directory (removed with the backend).
pub struct HeapChain {
    dir: LocalFiles,
    /// Names the segments in the shared area: the backend instance's seed, unique per
    /// instance and attempt.
    instance: String,
    base: Option<Segment>,
    deltas: Vec<Segment>,
    next: u64,
    /// The last segment's writing: the next one waits for it.
    last: Option<SharedWork<NativeFiles>>,
    /// A segment failed: the next one is a base.
    broken: Arc<AtomicBool>,
    /// Kept from segment to segment (one is written at a time).
    writer: Arc<Mutex<ChangesWriter>>,
}

impl HeapChain {
    /// A chain in a new directory under `parent`. Every new chain first removes what
    /// killed processes left in `parent` (their chains' directories).
    pub fn new(parent: &Path, instance: &str) -> Result<Self, StateError> {
        // What processes killed with SIGKILL left goes first, at every new chain as with
        // RocksDB's instances: a chain is made when a task is deployed, so a process that
        // survived also clears what a killed neighbour left when its tasks come back.
        remove_orphans(parent, CHAIN_DIR_PREFIX);
        // Created by the first segment: a job without checkpoints leaves nothing behind.
        let dir = parent.join(format!("{CHAIN_DIR_PREFIX}{instance}-{}", eddy_types::RunSeed::draw().hex()));
        Ok(Self {
            dir: LocalFiles::new(dir),
            instance: instance.to_string(),
            base: None,
            deltas: Vec::new(),
            next: 0,
            last: None,
            broken: Arc::new(AtomicBool::new(false)),
            writer: Arc::default(),
        })
    }

    /// Whether the next segment must hold everything: no base yet, a write failed, or the
    /// deltas since the base outgrew it.
    pub fn base_due(&self) -> bool {
        let Some(base) = &self.base else { return true };
        if self.broken.load(Ordering::Relaxed) {
            return true;
        }
        // A base still being written (size 0 yet) is not outgrown.
        let base_bytes = base.bytes.load(Ordering::Relaxed);
        let deltas: u64 = self.deltas.iter().map(|d| d.bytes.load(Ordering::Relaxed)).sum();
        base_bytes > 0 && deltas > base_bytes
    }

    /// A snapshot failed after tables handed over their changes: the next segment is a
    /// base, so that nothing they held is missed.
    pub fn mark_broken(&self) {
        self.broken.store(true, Ordering::Relaxed);
    }

    /// The native snapshot of checkpoint `checkpoint` for key groups `range`: the segment
    /// of `states` (a base when `base`, as [`HeapChain::base_due`] said) is written off the
    /// task thread, after the segment before it.
    pub fn segment(
        &mut self,
        checkpoint: u64,
        range: KeyGroupRange,
        base: bool,
        states: Vec<ChangedState>,
    ) -> NativeSnapshot {
        let number = self.next;
        self.next += 1;
        let name = format!("{number:06}-{checkpoint}.{}", if base { "base" } else { "delta" });
        let segment = Segment { name, bytes: Arc::new(AtomicU64::new(0)) };
        let (bytes, name) = (segment.bytes.clone(), segment.name.clone());
        let obsolete: Vec<String> = if base {
            self.broken.store(false, Ordering::Relaxed);
            let old = self.base.replace(segment).into_iter().chain(self.deltas.drain(..));
            old.map(|s| s.name).collect()
        } else {
            self.deltas.push(segment);
            Vec::new()
        };
        let chain: Vec<String> = self.base.iter().chain(&self.deltas).map(|s| s.name.clone()).collect();
        let (dir, instance, previous, broken, writer) =
            (self.dir.clone(), self.instance.clone(), self.last.take(), self.broken.clone(), self.writer.clone());
        // Beside the chain's directory, not in it: a snapshot may outlive its backend (a
        // finished task's final snapshot stands in for it in later checkpoints).
        let link_dir = PathBuf::from(format!("{}-checkpoint-{checkpoint}-{number}", self.dir.path().display()));
        // Written and linked in one piece of work: a base removes the segments before it
        // only once the one before it has linked them for its own checkpoint.
        let pending = SharedWork::new(Box::new(move || {
            let result = write_segment(&dir, &name, base, states, previous.as_ref(), &writer, &bytes)
                .and_then(|()| link_chain(&link_dir, dir.path(), &instance, &chain));
            if result.is_err() {
                broken.store(true, Ordering::Relaxed);
            }
            for old in &obsolete {
                let _ = std::fs::remove_file(dir.path().join(old));
            }
            result
        }) as Work<NativeFiles>);
        self.last = Some(pending.clone());
        NativeSnapshot {
            backend: HEAP_BACKEND.into(),
            key_group_range: range,
            tables: Vec::new(),
            files: Vec::new(),
            local: Unstored(None),
            owned: false,
            deferred_canonical: Unstored(None),
            pending: Unstored(Some(pending)),
        }
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> StateError {
    StateError::from(StateErrorKind::BackendFailed {
        what: format!("{what} '{}'", path.display()),
        source: eddy_types::Cause::new(e),
    })
}

/// Builds and writes one segment, after the segment before it (whose failure fails it).
fn write_segment(
    dir: &LocalFiles,
    name: &str,
    base: bool,
    states: Vec<ChangedState>,
    previous: Option<&SharedWork<NativeFiles>>,
    writer: &Mutex<ChangesWriter>,
    bytes: &AtomicU64,
) -> Result<(), StateError> {
    if let Some(previous) = previous {
        // Waited for by a base too, so that files are written and removed in order; only
        // a delta needs what the one before holds.
        let before = previous.result("the heap checkpoint segment before");
        if !base {
            before?;
        }
    }
    // Only now: the segment before, waited for above, takes the writer too.
    let mut writer = writer.lock().unwrap_or_else(|p| p.into_inner());
    let path = dir.path().join(name);
    let failed = |e: std::io::Error| io_error("cannot write the heap checkpoint segment", &path, e);
    dir.create_owned().map_err(|e| io_error("cannot create the heap chain's directory", dir.path(), e))?;
    let file = std::fs::File::create(&path).map_err(failed)?;
    let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut head = MAGIC.to_vec();
    write_varint(base as u64, &mut head);
    write_varint(states.len() as u64, &mut head);
    let mut written = 0u64;
    for state in states {
        writer.reset();
        let full = base || state.changes.full;
        (state.changes.write)(&mut writer)?;
        write_bytes(state.name.as_bytes(), &mut head);
        write_varint(state.ttl as u64, &mut head);
        write_varint(full as u64, &mut head);
        write_varint(writer.key_groups, &mut head);
        file.write_all(&head).and_then(|_| file.write_all(&writer.body)).map_err(failed)?;
        written += (head.len() + writer.body.len()) as u64;
        head.clear();
    }
    file.write_all(&head).map_err(failed)?;
    written += head.len() as u64;
    file.into_inner().map_err(|e| failed(e.into_error()))?;
    bytes.store(written, Ordering::Relaxed);
    Ok(())
}

/// Hard links to the chain's segments in `link_dir`: the checkpoint's files, each shared.
fn link_chain(link_dir: &Path, dir: &Path, instance: &str, chain: &[String]) -> Result<NativeFiles, StateError> {
    let local = LocalFiles::new(link_dir.to_path_buf());
    local.create_owned().map_err(|e| io_error("cannot create", link_dir, e))?;
    let mut files = Vec::with_capacity(chain.len());
    for name in chain {
        let (source, target) = (dir.join(name), link_dir.join(name));
        if std::fs::hard_link(&source, &target).is_err() {
            std::fs::copy(&source, &target)
                .map_err(|e| io_error("cannot copy the heap checkpoint segment", &source, e))?;
        }
        let bytes = std::fs::metadata(&target).map_err(|e| io_error("cannot read", &target, e))?.len();
        let shared_name = Some(format!("{instance}-{name}"));
        files.push(NativeFile { name: name.clone(), shared_name, location: String::new(), bytes, crc32: 0 });
    }
    Ok(NativeFiles { files, local })
}

/// One state's entries while a chain is read: key group → key → stored value.
/// Keys and values borrow the segments' bytes, all read first: no allocation per entry.
type ReadState<'a> = (bool, BTreeMap<u32, HashMap<&'a [u8], &'a [u8]>>);

/// Turns the heap chains among `snapshot`'s native snapshots (fetched into local
/// directories) into canonical key groups of `range`, so that any backend restores them.
pub fn read_heap_chains(snapshot: &mut KeyedStateSnapshot, range: KeyGroupRange) -> Result<(), StateError> {
    let natives = std::mem::take(&mut snapshot.native);
    for native in natives {
        if native.backend != HEAP_BACKEND {
            snapshot.native.push(native);
            continue;
        }
        for state in read_chain(&native, range)? {
            snapshot.add_key_groups(&state, range);
        }
    }
    Ok(())
}

/// The canonical entries of every state of one chain, in key groups of `range`.
fn read_chain(native: &NativeSnapshot, range: KeyGroupRange) -> Result<Vec<KeyedStateEntries>, StateError> {
    let dir = native.local_dir()?;
    let mut segments = Vec::with_capacity(native.files.len());
    for file in &native.files {
        let path = dir.join(file.checked_name()?);
        let bytes = std::fs::read(&path).map_err(|e| io_error("cannot read the heap checkpoint segment", &path, e))?;
        segments.push((file.name.as_str(), bytes));
    }
    let mut states: BTreeMap<String, ReadState<'_>> = BTreeMap::new();
    for (index, (name, bytes)) in segments.iter().enumerate() {
        let corrupt = |message: &str| {
            StateError::from(StateErrorKind::Backend(format!(
                "the heap checkpoint segment '{name}' is corrupt: {message} (a damaged or crafted checkpoint)"
            )))
        };
        let mut reader = Reader { rest: bytes };
        if reader.take(MAGIC.len()).ok_or_else(|| corrupt("too short"))? != MAGIC {
            return Err(corrupt("it does not start with EDDYHSEG"));
        }
        let base = reader.varint().ok_or_else(|| corrupt("truncated header"))? == 1;
        if index == 0 && !base {
            return Err(corrupt("the chain does not start with a base"));
        }
        if base {
            states.clear();
        }
        apply_segment(&mut reader, &mut states, range).ok_or_else(|| corrupt("truncated or malformed"))?;
        if !reader.rest.is_empty() {
            return Err(corrupt("bytes after its end"));
        }
    }
    Ok(states.into_iter().map(|(name, (ttl, groups))| canonical_state(name, ttl, groups)).collect())
}

/// Applies one segment's states after the header; `None` on malformed bytes.
fn apply_segment<'a>(
    reader: &mut Reader<'a>,
    states: &mut BTreeMap<String, ReadState<'a>>,
    range: KeyGroupRange,
) -> Option<()> {
    for _ in 0..reader.varint()? {
        let name = String::from_utf8(reader.bytes()?.to_vec()).ok()?;
        let ttl = reader.varint()? == 1;
        let full = reader.varint()? == 1;
        let state = states.entry(name).or_insert_with(|| (ttl, BTreeMap::new()));
        if full {
            *state = (ttl, BTreeMap::new());
        }
        for _ in 0..reader.varint()? {
            let key_group = u32::try_from(reader.varint()?).ok()?;
            let keep = range.contains(KeyGroup(key_group));
            let mut upserts = Vec::new();
            for _ in 0..reader.varint()? {
                let (key, value) = (reader.bytes()?, reader.bytes()?);
                if keep {
                    upserts.push((key, value));
                }
            }
            let entries = state.1.entry(key_group).or_default();
            for _ in 0..reader.varint()? {
                let key = reader.bytes()?;
                if keep {
                    entries.remove(key);
                }
            }
            for (key, value) in upserts {
                entries.insert(key, value);
            }
            if entries.is_empty() {
                state.1.remove(&key_group);
            }
        }
    }
    Some(())
}

/// A state's entries in the canonical form: per key group, postcard of `Vec<(key,
/// value)>` sorted by key, which is a varint count and each key length first, then the
/// stored value bytes as they are.
fn canonical_state(name: String, ttl: bool, groups: BTreeMap<u32, HashMap<&[u8], &[u8]>>) -> KeyedStateEntries {
    let key_groups = groups
        .into_iter()
        .map(|(key_group, entries)| {
            let mut sorted: Vec<_> = entries.into_iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let size: usize = sorted.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
            let mut bytes = Vec::with_capacity(size + 10);
            write_varint(sorted.len() as u64, &mut bytes);
            for (key, value) in sorted {
                write_bytes(key, &mut bytes);
                bytes.extend_from_slice(value);
            }
            (key_group, bytes)
        })
        .collect();
    KeyedStateEntries { name, ttl, key_groups }
}

/// Reads a segment without trusting it: every read checks the length left.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(taken)
    }

    fn varint(&mut self) -> Option<u64> {
        let (n, rest) = read_varint(self.rest)?;
        self.rest = rest;
        Some(n)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        self.take(len)
    }
}
