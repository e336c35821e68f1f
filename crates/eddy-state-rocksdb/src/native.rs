//! RocksDB's own files as checkpoints (Flink's incremental checkpoints), and restores
//! from them.
//!
//! A snapshot is a RocksDB checkpoint: the memtables flushed, then every live file
//! hard-linked into a new directory (no data copied), made off the task thread while
//! writes wait ([`crate::write_gate`]). SST files never
//! change once written, so they are *shared*: each gets a name unique to this instance,
//! and the checkpoint storage uploads only those no earlier checkpoint holds. MANIFEST,
//! CURRENT and OPTIONS belong to one checkpoint.
//!
//! A restore with the same key groups opens the files as they are (SSTs hard-linked from
//! the fetched copy); after a rescale the new range may span several old instances, so
//! their files are opened read-only and the key groups of the new range read out of them.

use crate::store::{create_working_dir, error, write_changes, Db, RocksDbRawStore, SlotMemory};
use crate::write_gate::Held;
use eddy_state::keyed::{
    canonical_key_group, KeyedStateEntries, KeyedStateSnapshot, LocalFiles, NativeFile, NativeFiles, NativeSnapshot,
    SharedWork, Unstored, OWNER_FILE,
};
use eddy_state::{StateError, StateErrorKind};
use eddy_types::CheckpointId;
use eddy_types::KeyGroupRange;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What native snapshots of this backend are called.
pub(crate) const BACKEND: &str = "rocksdb";

/// Takes checkpoint `checkpoint_id` of `store`: its files, hard-linked into a directory
/// beside the instance's working directory. Only the write gate closes on the task
/// thread; a thread of its own makes the checkpoint and opens the gate, and the
/// asynchronous part of the snapshot waits for the files ([`NativeSnapshot::pending`]).
pub(crate) fn take_snapshot(
    store: &mut RocksDbRawStore,
    range: KeyGroupRange,
    checkpoint_id: CheckpointId,
) -> Result<NativeSnapshot, StateError> {
    let target = PathBuf::from(format!("{}.chk-{checkpoint_id}", store.dir.display()));
    let db = store.db()?.clone();
    let (uid, restored_shared) = (store.uid.clone(), store.restored_shared.clone());
    let open_when_done = match store.preparing.take() {
        Some(closed) => closed,
        None => store.gate.close(),
    };
    let held = store.gate.take_held();
    let gate = store.gate.clone();
    let making = std::thread::Builder::new().name(format!("rocksdb checkpoint {checkpoint_id}")).spawn(move || {
        let applied = apply_held(&db, held);
        if let Err(e) = &applied {
            gate.fail(eddy_types::chain(&e));
        }
        let made = applied.and_then(|()| make_checkpoint(&db, &target, &uid, &restored_shared));
        // The database before the gate: a store closing waits for the gate, and must
        // be the last to hold the database.
        drop(db);
        drop(open_when_done);
        made
    });
    let making = making.map_err(|e| {
        // The held writes went with the thread that did not start.
        let failed = error("cannot start the thread that makes a checkpoint", e);
        store.gate.fail(eddy_types::chain(&failed));
        failed
    })?;
    let pending = SharedWork::new(Box::new(move || {
        making.join().map_err(|_| {
            StateError::from(StateErrorKind::Backend("the thread making a RocksDB checkpoint panicked".into()))
        })?
    }));
    Ok(NativeSnapshot {
        backend: BACKEND.into(),
        key_group_range: range,
        tables: store.tables.clone(),
        files: Vec::new(),
        local: Unstored(None),
        owned: false,
        deferred_canonical: Unstored(None),
        pending: Unstored(Some(pending)),
    })
}

/// Writes what the caches handed over at the barrier (it belongs in the checkpoint).
pub(crate) fn apply_held(db: &Db, held: Vec<Held>) -> Result<(), StateError> {
    held.into_iter().try_for_each(|Held { table_id, write }| write_changes(db, table_id, write))
}

/// Makes a RocksDB checkpoint of `db` in `target` and lists its files, with the names SST
/// files get in the shared area.
fn make_checkpoint(
    db: &Db,
    target: &Path,
    uid: &str,
    restored_shared: &HashMap<String, String>,
) -> Result<NativeFiles, StateError> {
    let _ = std::fs::remove_dir_all(target);
    let checkpoint = rocksdb::checkpoint::Checkpoint::new(db).map_err(|e| error("checkpoint", e))?;
    checkpoint
        .create_checkpoint(target)
        .map_err(|e| error(&format!("cannot create checkpoint '{}'", target.display()), e))?;
    let local = LocalFiles::new(target.to_path_buf());
    // Its hard links would keep every file of the state on disk if the process were
    // killed before the upload: a later instance's sweep removes it then.
    local
        .mark_owned()
        .map_err(|e| error(&format!("cannot mark checkpoint '{}' as this process's", target.display()), e))?;
    let listing = |e: std::io::Error| error(&format!("cannot list checkpoint '{}'", target.display()), e);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(target).map_err(listing)? {
        let entry = entry.map_err(listing)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == OWNER_FILE {
            continue;
        }
        let bytes = entry.metadata().map_err(listing)?.len();
        let shared_name = name.ends_with(".sst").then(|| match restored_shared.get(&name) {
            Some(restored) => restored.clone(),
            None => format!("{uid}-{name}"),
        });
        files.push(NativeFile { name, shared_name, location: String::new(), bytes, crc32: 0 });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(NativeFiles { files, local })
}

/// Puts a snapshot's fetched files into `dir` and opens them: SST files hard-linked (they
/// never change; a copy where links are impossible), the others copied, since RocksDB
/// appends to its MANIFEST.
pub(crate) fn restore_store(
    dir: &Path,
    memory: &SlotMemory,
    native: &NativeSnapshot,
) -> Result<RocksDbRawStore, StateError> {
    let from = native.local_dir()?;
    create_working_dir(dir)?;
    for file in &native.files {
        let name = file.checked_name()?;
        let (source, target) = (from.join(name), dir.join(name));
        let linked = file.shared_name.is_some() && std::fs::hard_link(&source, &target).is_ok();
        if !linked {
            std::fs::copy(&source, &target)
                .map_err(|e| error(&format!("cannot copy '{}' to '{}'", source.display(), target.display()), e))?;
        }
    }
    let mut store = RocksDbRawStore::open_existing(dir, memory, native.tables.clone())?;
    if native.owned {
        store.restored_shared = native
            .files
            .iter()
            .filter_map(|f| f.shared_name.as_ref().map(|shared| (f.name.clone(), shared.clone())))
            .collect();
    }
    Ok(store)
}

/// A snapshot's files opened as they are (see [`restore_store`]) and clipped to `range`:
/// every key group outside it deleted by range deletions, which cost the same whatever
/// the state's size (compactions drop the deleted data later). A key starts with its
/// table id and key group (both big-endian), so each table's key groups before and after
/// `range` are two contiguous key ranges.
pub(crate) fn clipped_store(
    dir: &Path,
    memory: &SlotMemory,
    native: &NativeSnapshot,
    range: KeyGroupRange,
) -> Result<RocksDbRawStore, StateError> {
    let store = restore_store(dir, memory, native)?;
    let db = store.db()?;
    let mut batch = rocksdb::WriteBatch::default();
    for table in &native.tables {
        let key = |key_group: u32| crate::store::prefix(table.id, key_group);
        if range.start > 0 {
            batch.delete_range(key(0), key(range.start));
        }
        // Key groups stay below 2^15 (the largest max parallelism): past them, nothing.
        batch.delete_range(key(range.end + 1), key(KEY_GROUPS_END));
    }
    db.write_opt(batch, &crate::store::write_options()).map_err(|e| error("clipping the restored key groups", e))?;
    Ok(store)
}

/// Past every key group a key can hold (max parallelism is at most 2^15).
const KEY_GROUPS_END: u32 = 1 << 15;

/// Reads the key groups of `range` out of a snapshot's files into `into`, in the
/// canonical form (rescaling: the snapshot covers other key groups too).
pub(crate) fn read_key_groups(
    native: &NativeSnapshot,
    range: KeyGroupRange,
    into: &mut KeyedStateSnapshot,
) -> Result<(), StateError> {
    let wanted = native.key_group_range.intersection(&range);
    if wanted.is_empty() {
        return Ok(());
    }
    let store = RocksDbRawStore::open_read_only(native.local_dir()?, native.tables.clone())?;
    let now = eddy_types::Clock::now_ms(&eddy_types::WallClock);
    for table in &native.tables {
        let raw = store.table_by_id(table.id)?;
        let mut key_groups = Vec::new();
        for key_group in wanted.iter() {
            if let Some(bytes) = canonical_key_group(&raw, key_group.0, table.layout, now)? {
                key_groups.push((key_group.0, bytes));
            }
        }
        let state = KeyedStateEntries { name: table.name.clone(), ttl: table.layout.has_ttl(), key_groups };
        into.add_key_groups(&state, range);
    }
    Ok(())
}
