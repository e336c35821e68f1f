//! Checkpoint storage on a real directory and in memory.

use eddy_checkpoint::metadata::encode_task_state;
use eddy_checkpoint::storage::{load_checkpoint_dir, CheckpointStorage, DirectoryStorage, MemoryCheckpointStorage};
use eddy_checkpoint::{CheckpointId, OperatorSnapshot, SnapshotKind};

mod common;
use common::{snapshot, temp_dir, write_checkpoint};

#[test]
fn a_directory_holds_complete_checkpoints_newest_first_and_ignores_unfinished_ones() {
    let dir = temp_dir("dir");
    let storage = DirectoryStorage::local(&dir).unwrap();
    write_checkpoint(&storage, 1, 10);
    let second = write_checkpoint(&storage, 2, 20);
    // A crash while writing checkpoint 3: state files, no _metadata.
    storage
        .write_task_state(CheckpointId(3), SnapshotKind::Checkpoint, "source-0", encode_task_state(&[]).unwrap())
        .unwrap();
    let completed = storage.completed().unwrap();
    assert_eq!(completed.len(), 2);
    assert!(completed[0].ends_with("chk-2") && completed[1].ends_with("chk-1"), "{completed:?}");
    let loaded = storage.load(&second).unwrap();
    assert_eq!(loaded.metadata.checkpoint_id, CheckpointId(2));
    assert_eq!(loaded.state_for("source", 1), Some(&snapshot("source", 1, 20)));
    // Relocatable: move the directory and read it from there.
    let moved = dir.join("moved-chk-2");
    std::fs::rename(dir.join("chk-2"), &moved).unwrap();
    assert_eq!(load_checkpoint_dir(&moved).unwrap().state_for("source", 0), Some(&snapshot("source", 0, 20)));
    storage.discard(CheckpointId(1), SnapshotKind::Checkpoint).unwrap();
    assert!(!dir.join("chk-1").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_corrupt_or_truncated_state_file_is_named() {
    let dir = temp_dir("corrupt");
    let storage = DirectoryStorage::local(&dir).unwrap();
    let location = write_checkpoint(&storage, 7, 1);
    let file = dir.join("chk-7").join("source-1.state");
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let err = storage.load(&location).unwrap_err().to_string();
    assert!(err.contains("source-1.state") && err.contains("checksum mismatch"), "{err}");
    std::fs::write(&file, &bytes[..bytes.len() - 5]).unwrap();
    let err = storage.load(&location).unwrap_err().to_string();
    assert!(err.contains("source-1.state") && err.contains("truncated"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A restore path that is no checkpoint says what it is and what is there instead; the
/// `_metadata` file itself is taken for its directory, as Flink takes it.
#[test]
fn a_restore_path_that_is_no_checkpoint_names_what_is_there() {
    let dir = temp_dir("not-a-checkpoint");
    let storage = DirectoryStorage::local(&dir).unwrap();
    write_checkpoint(&storage, 7, 1);
    write_checkpoint(&storage, 8, 1);
    let err = load_checkpoint_dir(dir.join("chk-9")).unwrap_err().to_string();
    assert!(err.contains("it does not exist;") && err.contains("holds chk-8, chk-7: name one of those"), "{err}");
    let err = load_checkpoint_dir(dir.join("gone/deeper")).unwrap_err().to_string();
    assert!(err.contains("it does not exist;") && err.contains("holds chk-8, chk-7"), "{err}");
    let err = load_checkpoint_dir(&dir).unwrap_err().to_string();
    assert!(err.contains("holds no _metadata file itself, but chk-8, chk-7: name one of them"), "{err}");
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = load_checkpoint_dir(&empty).unwrap_err().to_string();
    assert!(err.contains("holds no _metadata file: not a completed checkpoint or savepoint directory"), "{err}");
    let loaded = load_checkpoint_dir(dir.join("chk-8").join("_metadata")).unwrap();
    assert_eq!(loaded.metadata.checkpoint_id.0, 8);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn memory_storage_keeps_checkpoints_and_caps_task_state() {
    let storage = MemoryCheckpointStorage::new(1024);
    let location = write_checkpoint(&storage, 3, 5);
    assert_eq!(storage.completed().unwrap(), vec![location.clone()]);
    assert_eq!(storage.load(&location).unwrap().state_for("source", 0), Some(&snapshot("source", 0, 5)));
    let big = vec![OperatorSnapshot { uid: "x".repeat(2000), ..Default::default() }];
    let err = storage
        .write_task_state(CheckpointId(4), SnapshotKind::Checkpoint, "big-0", encode_task_state(&big).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("above the JobManager memory storage cap of 1024 bytes"), "{err}");
}

#[test]
fn a_native_file_is_placed_in_a_local_directory_whole_with_its_size_and_checksum() {
    let dir = temp_dir("place");
    let storage = DirectoryStorage::local(&dir).unwrap();
    let local = temp_dir("place-local");
    std::fs::create_dir_all(&local).unwrap();
    // Longer than the buffer it is checksummed through, and not a multiple of it.
    let bytes: Vec<u8> = (0..700_001u32).map(|i| (i.wrapping_mul(31) % 251) as u8).collect();
    let source = local.join("000001-3.delta");
    std::fs::write(&source, &bytes).unwrap();
    let location = "shared/up-1-000001-3.delta";
    let (size, crc32) = storage.upload_file(location, &source).unwrap();
    assert_eq!((size, crc32), (bytes.len() as u64, crc32fast::hash(&bytes)));
    // The local copy goes after an upload, as the uploader removes it.
    std::fs::remove_dir_all(&local).unwrap();
    assert_eq!(std::fs::read(dir.join(location)).unwrap(), bytes);
    let fetched = temp_dir("place-fetched");
    storage.download_file(location, &fetched, size, crc32).unwrap();
    assert_eq!(std::fs::read(&fetched).unwrap(), bytes);
    // Placed again (a retried upload): replaced whole, and nothing staged is left beside it.
    std::fs::create_dir_all(&local).unwrap();
    std::fs::write(&source, &bytes[..1000]).unwrap();
    assert_eq!(storage.upload_file(location, &source).unwrap(), (1000, crc32fast::hash(&bytes[..1000])));
    assert_eq!(std::fs::read(dir.join(location)).unwrap(), &bytes[..1000]);
    let names: Vec<_> = std::fs::read_dir(dir.join("shared")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("up-1-000001-3.delta")]);
    // A missing file is named.
    let err = storage.upload_file("chk-1/op-0/gone", &local.join("gone")).unwrap_err().to_string();
    assert!(err.contains(&local.join("gone").display().to_string()), "{err}");
    for d in [&dir, &local] {
        std::fs::remove_dir_all(d).unwrap();
    }
    std::fs::remove_file(&fetched).unwrap();
}
