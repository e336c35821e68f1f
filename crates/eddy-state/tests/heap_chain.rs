//! Incremental heap checkpoints: a chain of a base and deltas, read back, must hold exactly
//! what a full canonical snapshot taken at the same barrier holds, byte for byte, at the
//! same and at another key-group range.

use eddy_state::conformance::set_key;
use eddy_state::keyed::{install_backend, read_heap_chains, take_backend, HeapChain, KeyedStateSnapshot};
use eddy_state::{ListState, ListStateDescriptor, MapState, MapStateDescriptor, TableKeyedStateBackend};
use eddy_state::{ValueState, ValueStateDescriptor};
use eddy_types::{key_group_range_for_subtask, CheckpointId, KeyGroupRange, MaxParallelism};
use std::collections::BTreeMap;

fn chained(range: KeyGroupRange, max: MaxParallelism) -> TableKeyedStateBackend {
    let chain = HeapChain::new(&std::env::temp_dir(), "test").unwrap();
    TableKeyedStateBackend::new(range, max).with_heap_chain(chain)
}

/// name → key groups of a canonical snapshot's states.
fn by_name(snapshot: &KeyedStateSnapshot) -> BTreeMap<String, Vec<(u32, Vec<u8>)>> {
    let states = snapshot.states.iter().filter(|s| !s.key_groups.is_empty());
    states.map(|s| (s.name.clone(), s.key_groups.clone())).collect()
}

/// The canonical key groups of `range` that `native` holds once read back.
fn read_back(native: &KeyedStateSnapshot, range: KeyGroupRange) -> BTreeMap<String, Vec<(u32, Vec<u8>)>> {
    let mut restored = native.clone();
    read_heap_chains(&mut restored, range).unwrap();
    assert!(restored.native.is_empty());
    by_name(&restored)
}

fn within(full: &BTreeMap<String, Vec<(u32, Vec<u8>)>>, range: KeyGroupRange) -> BTreeMap<String, Vec<(u32, Vec<u8>)>> {
    let mut states = full.clone();
    for groups in states.values_mut() {
        groups.retain(|(kg, _)| range.contains(eddy_types::KeyGroup(*kg)));
    }
    states.retain(|_, groups| !groups.is_empty());
    states
}

#[test]
fn a_chain_of_deltas_restores_exactly_what_a_full_snapshot_holds() {
    let max = MaxParallelism::default();
    let all = KeyGroupRange::all(max);
    install_backend(Box::new(chained(all, max))).unwrap();
    let counts = ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    let seen = ListState::declare(&ListStateDescriptor::<u32>::new("seen")).unwrap();
    let tags = MapState::declare(&MapStateDescriptor::<String, u64>::new("tags")).unwrap();
    let mut file_counts = Vec::new();
    let mut last = None;
    for round in 0..12u64 {
        // Round 0 writes 2,000 keys; later rounds change a few, remove some, add new ones.
        let keys: Vec<u64> =
            if round == 0 { (0..2_000).collect() } else { (0..500).map(|i| (i * 53 + round * 7) % 2_100).collect() };
        for &k in &keys {
            set_key(&k);
            counts.update(k * 10 + round).unwrap();
            seen.add(round as u32).unwrap();
            tags.put(format!("t{}", k % 3), round).unwrap();
        }
        for k in (round * 11..round * 11 + 5).map(|k| k % 2_000) {
            set_key(&k);
            counts.clear().unwrap();
            tags.remove(&format!("t{}", k % 3)).unwrap();
        }
        if round == 7 {
            // A table that forgets its changes writes itself whole into the next segment.
            eddy_state::keyed::with_backend("test", |b| b.table_by_name_mut("seen").unwrap().clear_all()).unwrap();
        }
        let mut backend = take_backend().unwrap();
        let full = by_name(&backend.snapshot().unwrap());
        let mut checkpoint = backend.snapshot_for_checkpoint(CheckpointId(round + 1), false).unwrap();
        // The task goes on before the segment is written: none of this is in it.
        install_backend(backend).unwrap();
        for k in 0..50u64 {
            set_key(&k);
            counts.update(999_999).unwrap();
            seen.clear().unwrap();
        }
        checkpoint.complete_deferred().unwrap();
        assert_eq!(checkpoint.native.len(), 1);
        file_counts.push(checkpoint.native[0].files.len());
        assert_eq!(read_back(&checkpoint, all), full, "checkpoint {} read back", round + 1);
        let half = key_group_range_for_subtask(max, 2, 1);
        assert_eq!(
            read_back(&checkpoint, half),
            within(&full, half),
            "checkpoint {} at half the key groups",
            round + 1
        );
        last = Some((checkpoint, full));
    }
    take_backend();
    // A base, then a growing chain of deltas, until the deltas outgrow the base.
    assert_eq!(&file_counts[..4], &[1, 2, 3, 4], "{file_counts:?}");
    assert!(file_counts.windows(2).any(|w| w[1] < w[0]), "a new base came: {file_counts:?}");
    // A backend restored from the last checkpoint holds the same, and its own first
    // checkpoint is a base.
    let (checkpoint, full) = last.unwrap();
    let mut restored = checkpoint.clone();
    read_heap_chains(&mut restored, all).unwrap();
    let mut fresh = chained(all, max);
    eddy_state::KeyedStateBackend::set_restored(&mut fresh, restored);
    install_backend(Box::new(fresh)).unwrap();
    ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    ListState::declare(&ListStateDescriptor::<u32>::new("seen")).unwrap();
    MapState::declare(&MapStateDescriptor::<String, u64>::new("tags")).unwrap();
    let mut fresh = take_backend().unwrap();
    assert_eq!(by_name(&fresh.snapshot().unwrap()), full);
    let mut next = fresh.snapshot_for_checkpoint(CheckpointId(100), false).unwrap();
    next.complete_deferred().unwrap();
    assert_eq!(next.native[0].files.len(), 1);
    assert!(next.native[0].files[0].name.ends_with(".base"), "{:?}", next.native[0].files);
    assert_eq!(read_back(&next, all), full);
}

#[test]
fn a_damaged_segment_is_refused_with_its_name_never_a_panic() {
    let max = MaxParallelism::default();
    let all = KeyGroupRange::all(max);
    install_backend(Box::new(chained(all, max))).unwrap();
    let counts = ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    for k in 0..30u64 {
        set_key(&k);
        counts.update(k).unwrap();
    }
    let mut backend = take_backend().unwrap();
    let mut checkpoint = backend.snapshot_for_checkpoint(CheckpointId(1), false).unwrap();
    checkpoint.complete_deferred().unwrap();
    let file = &checkpoint.native[0].files[0];
    let path = checkpoint.native[0].local_dir().unwrap().join(&file.name);
    let good = std::fs::read(&path).unwrap();
    let mut damaged: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
    for i in 0..good.len() {
        let mut flipped = good.clone();
        flipped[i] ^= 0xff;
        damaged.push(flipped);
    }
    let mut longer = good.clone();
    longer.push(0);
    damaged.push(longer);
    let mut refused = 0;
    for bytes in damaged {
        std::fs::write(&path, &bytes).unwrap();
        let mut restored = checkpoint.clone();
        if let Err(e) = read_heap_chains(&mut restored, all) {
            assert!(e.to_string().contains(&file.name), "{e}");
            refused += 1;
        }
    }
    // Every truncation and the trailing byte at least; a flipped value byte may still read.
    assert!(refused > good.len(), "{refused} of {} refused", 2 * good.len() + 1);
}

/// Checkpoints overlap: the second's segment may be asked for before the first's is
/// written (and a base after a delta); each waits for the one before, and each reads back
/// as its own barrier's state.
#[test]
fn overlapping_checkpoints_write_their_segments_in_order() {
    let max = MaxParallelism::default();
    let all = KeyGroupRange::all(max);
    install_backend(Box::new(chained(all, max))).unwrap();
    let counts = ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    let mut pending = Vec::new();
    for round in 0..6u64 {
        // Round 3 changes every key: its deltas outgrow the base, and a base follows.
        let keys = if round == 0 || round == 3 { 0..500u64 } else { round..round + 3 };
        for k in keys {
            set_key(&k);
            counts.update(k + 1_000 * round).unwrap();
        }
        let mut backend = take_backend().unwrap();
        let full = by_name(&backend.snapshot().unwrap());
        pending.push((backend.snapshot_for_checkpoint(CheckpointId(round + 1), false).unwrap(), full));
        install_backend(backend).unwrap();
    }
    take_backend();
    // The last first: it writes every segment before it.
    for (mut checkpoint, full) in pending.into_iter().rev() {
        checkpoint.complete_deferred().unwrap();
        assert_eq!(read_back(&checkpoint, all), full);
    }
}

/// A base taken while the delta before it is still pending: the base is written after it,
/// removes the segments before it only once that delta linked them, and both checkpoints
/// read back as their own barriers' state.
#[test]
fn a_base_after_a_pending_delta_leaves_the_delta_its_segments() {
    let max = MaxParallelism::default();
    let all = KeyGroupRange::all(max);
    install_backend(Box::new(chained(all, max))).unwrap();
    let counts = ValueState::declare(&ValueStateDescriptor::<u64>::new("counts")).unwrap();
    let round = |n: u64, keys: std::ops::Range<u64>| {
        for k in keys {
            set_key(&k);
            counts.update(k + 1_000 * n).unwrap();
        }
        let mut backend = take_backend().unwrap();
        let full = by_name(&backend.snapshot().unwrap());
        let checkpoint = backend.snapshot_for_checkpoint(CheckpointId(n), false).unwrap();
        install_backend(backend).unwrap();
        (checkpoint, full)
    };
    let (mut base, base_full) = round(1, 0..100);
    base.complete_deferred().unwrap();
    // Every key again and more: this delta outgrows the base, so the one after the next
    // is a base.
    let (mut big, big_full) = round(2, 0..300);
    let (pending, pending_full) = round(3, 5..8);
    big.complete_deferred().unwrap();
    let (mut rebased, rebased_full) = round(4, 8..9);
    take_backend();
    rebased.complete_deferred().unwrap();
    assert_eq!(rebased.native[0].files.len(), 1, "{:?}", rebased.native[0].files);
    assert_eq!(read_back(&rebased, all), rebased_full);
    let mut pending = pending;
    pending.complete_deferred().unwrap();
    assert_eq!(pending.native[0].files.len(), 3);
    assert_eq!(read_back(&pending, all), pending_full);
    assert_eq!(read_back(&big, all), big_full);
    assert_eq!(read_back(&base, all), base_full);
}

/// Values with a time to live that expire without changing leave the chain with the
/// next delta, as they leave a full snapshot.
#[test]
fn values_that_expire_unchanged_leave_the_chain() {
    use eddy_state::StateTtlConfig;
    let max = MaxParallelism::default();
    let all = KeyGroupRange::all(max);
    let clock = eddy_types::ManualClock::new(1_000);
    let backend = chained(all, max).with_clock(std::sync::Arc::new(clock.clone()));
    install_backend(Box::new(backend)).unwrap();
    let ttl = ValueStateDescriptor::<u64>::new("ttl").with_ttl(StateTtlConfig::new(100));
    let w = ValueState::declare(&ttl).unwrap();
    for (round, key) in [(0u64, 0..10u64), (1, 100..101), (2, 200..201)] {
        for k in key {
            set_key(&k);
            w.update(k).unwrap();
        }
        let mut backend = take_backend().unwrap();
        let full = by_name(&backend.snapshot().unwrap());
        let mut checkpoint = backend.snapshot_for_checkpoint(CheckpointId(round + 1), false).unwrap();
        checkpoint.complete_deferred().unwrap();
        assert_eq!(read_back(&checkpoint, all), full, "checkpoint {}", round + 1);
        install_backend(backend).unwrap();
        clock.advance_ms(60);
    }
    take_backend();
}

static SERIALIZED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static FAIL_AT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

/// A value whose serialization fails when told to.
#[derive(Clone, serde::Deserialize)]
struct Flaky(u64);

impl serde::Serialize for Flaky {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use std::sync::atomic::Ordering::SeqCst;
        if SERIALIZED.fetch_add(1, SeqCst) + 1 == FAIL_AT.load(SeqCst) {
            return Err(serde::ser::Error::custom("flaky"));
        }
        s.serialize_u64(self.0)
    }
}

/// A segment that fails halfway through a state leaves nothing half-framed for the next
/// (a base), which reads back as the state at its own barrier.
#[test]
fn a_failed_segment_leaves_nothing_behind_for_the_next() {
    use std::sync::atomic::Ordering::SeqCst;
    let max = MaxParallelism::new(1).unwrap();
    let all = KeyGroupRange::all(max);
    install_backend(Box::new(chained(all, max))).unwrap();
    let a = ValueState::declare(&ValueStateDescriptor::<u64>::new("a")).unwrap();
    let b = ValueState::declare(&ValueStateDescriptor::<Flaky>::new("b")).unwrap();
    for k in 0..3u64 {
        set_key(&k);
        a.update(k).unwrap();
    }
    for k in 10..13u64 {
        set_key(&k);
        b.update(Flaky(k)).unwrap();
    }
    let mut backend = take_backend().unwrap();
    let mut failing = backend.snapshot_for_checkpoint(CheckpointId(1), false).unwrap();
    FAIL_AT.store(SERIALIZED.load(SeqCst) + 2, SeqCst);
    assert!(failing.complete_deferred().is_err());
    FAIL_AT.store(u32::MAX, SeqCst);
    let full = by_name(&backend.snapshot().unwrap());
    let mut next = backend.snapshot_for_checkpoint(CheckpointId(2), false).unwrap();
    next.complete_deferred().unwrap();
    assert_eq!(next.native[0].files.len(), 1, "a base after the failure");
    assert_eq!(read_back(&next, all), full);
}

/// A chain's directories (its segments', its checkpoints' links) are marked as their
/// process's: what a process killed with SIGKILL left behind is removed by the next one,
/// and nothing of a live process (another one's, or this one's) ever is.
#[test]
fn directories_a_killed_process_left_are_removed_and_live_ones_stay() {
    use eddy_state::keyed::{remove_orphans, LocalFiles};
    const CHILD: &str = "EDDY_TEST_ORPHAN_DIR";
    if let Ok(dir) = std::env::var(CHILD) {
        // The child: owns a directory, says so, and waits to be killed.
        let owned = LocalFiles::new(dir.into());
        owned.create_owned().unwrap();
        println!("owned");
        std::thread::sleep(std::time::Duration::from_secs(120));
        return;
    }
    let parent = std::env::temp_dir().join(format!("eddy-test-orphans-{}", std::process::id()));
    std::fs::create_dir_all(&parent).unwrap();
    let (killed, live, unmarked) = (
        parent.join("eddy-heap-chain-killed"),
        parent.join("eddy-heap-chain-live"),
        parent.join("eddy-heap-chain-old"),
    );
    let test = "directories_a_killed_process_left_are_removed_and_live_ones_stay";
    let mut child = eddy_state::conformance::spawn_child_test(test, CHILD, &killed, "owned");
    let ours = LocalFiles::new(live.clone());
    ours.create_owned().unwrap();
    ours.create_owned().unwrap();
    std::fs::create_dir_all(&unmarked).unwrap();

    assert_eq!(remove_orphans(&parent, "eddy-heap-chain-"), 0, "the child is alive, and so are we");
    assert!(killed.is_dir() && live.is_dir());
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    assert!(killed.is_dir(), "a killed process removes nothing itself");
    assert_eq!(remove_orphans(&parent, "eddy-heap-chain-"), 1);
    assert!(!killed.exists(), "what the killed process owned is gone");
    assert!(live.is_dir() && unmarked.is_dir(), "ours stays, and a directory without an owner is left alone");
    drop(ours);
    assert!(!live.exists());
    std::fs::remove_dir_all(&parent).unwrap();
}
