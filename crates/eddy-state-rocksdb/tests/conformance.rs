//! The keyed-state conformance suite on RocksDB, with a heap cache far smaller than the
//! state so that reads really come from RocksDB.

use eddy_state::conformance::run_all;
use eddy_state_rocksdb::RocksDbStateBackend;

#[test]
fn rocksdb_backend_passes_the_conformance_suite() {
    let dir = std::env::temp_dir().join(format!("eddy-rocksdb-conformance-{}", std::process::id()));
    let backend = RocksDbStateBackend { cache_entries: 64, ..RocksDbStateBackend::new(&dir) };
    run_all(&|range, max| backend.create_backend("conformance", range, max).unwrap());
    let left: Vec<_> = std::fs::read_dir(&dir).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(left.is_empty(), "working directories are removed when backends close: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
