//! Incremental RocksDB checkpoints from a job's point of view: a checkpoint after a small
//! change uploads little; retained checkpoints keep every shared file they need and no
//! other; each retained checkpoint restores to exactly the state it was taken at; a job
//! restored from a checkpoint never deletes its files (NO_CLAIM).
#![cfg(feature = "rocksdb")]

mod common;

use common::{temp_dir, Count};
use eddy::checkpoint::storage::load_checkpoint_dir;
use eddy::checkpoint::CheckpointConfig;
use eddy::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const KEYS: u64 = 50_000;
/// Small phases after the big first one.
const PHASES: u64 = 6;
const PHASE_KEYS: u64 = 20;

/// Phase 0 emits every key once, phase p ≥ 1 emits keys `(p-1)*20 .. p*20`. A phase
/// starts (and the source finishes) only after a checkpoint completed, so checkpoints fall
/// between small changes.
/// Each snapshot logs (checkpoint id, phase, offset in phase): what the checkpoint holds.
#[derive(Clone)]
struct Phases {
    phase: u64,
    offset: u64,
    /// Waits for the completion of a checkpoint with this id or a later one: one taken
    /// after the phase it emitted last (0: not waiting).
    waiting_for: u64,
    /// The id of the last checkpoint it took its snapshot for.
    last_snapshot: u64,
    log: Arc<Mutex<Vec<(u64, u64, u64)>>>,
}

fn phase_len(phase: u64) -> u64 {
    if phase == 0 {
        KEYS
    } else {
        PHASE_KEYS
    }
}

fn phase_key(phase: u64, i: u64) -> u64 {
    if phase == 0 {
        i
    } else {
        (phase - 1) * PHASE_KEYS + i
    }
}

impl RichFunction for Phases {
    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        // The end-of-input snapshot counts after every checkpoint.
        let id = ctx.checkpoint_id().map_or(u64::MAX, |c| c.0);
        self.log.lock().unwrap().push((id, self.phase, self.offset));
        self.last_snapshot = self.last_snapshot.max(id);
        Ok(())
    }

    fn notify_checkpoint_complete(&mut self, id: CheckpointId) -> FunctionResult {
        // An earlier checkpoint completing (taken before the phase) does not count.
        if id.0 >= self.waiting_for {
            self.waiting_for = 0;
        }
        Ok(())
    }
}

impl SourceFunction<u64> for Phases {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, u64>) -> FunctionResult<SourceStep> {
        // It finishes only once a checkpoint after its last phase completed: a checkpoint
        // taken after the source finished holds the records still in flight to `count`
        // then (aligned or not), and the jobs below, restoring it without this source,
        // would have nowhere to replay them (the restore fails).
        if self.waiting_for > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            return Ok(SourceStep::Idle);
        }
        if self.phase > PHASES {
            return Ok(SourceStep::Finished);
        }
        let end = phase_len(self.phase).min(self.offset + max_records as u64);
        for i in self.offset..end {
            out.collect(phase_key(self.phase, i));
        }
        self.offset = end;
        if end == phase_len(self.phase) {
            self.phase += 1;
            self.offset = 0;
            self.waiting_for = self.last_snapshot + 1;
        }
        Ok(SourceStep::More)
    }
}

/// Count per key after the source emitted up to (phase, offset).
fn expected_counts(phase: u64, offset: u64) -> BTreeMap<u64, u64> {
    let mut counts = BTreeMap::new();
    for p in 0..=phase.min(PHASES) {
        let emitted = if p < phase { phase_len(p) } else { offset };
        for i in 0..emitted {
            *counts.entry(phase_key(p, i)).or_insert(0) += 1;
        }
    }
    counts
}

fn rocksdb(dir: &Path) -> RocksDbStateBackend {
    RocksDbStateBackend::new(dir.join("working")).with_incremental_checkpoints(true)
}

/// The completed checkpoints in `dir` or in the job directories under it, oldest first.
fn checkpoint_dirs(dir: &Path) -> Vec<PathBuf> {
    let children = |d: &Path| std::fs::read_dir(d).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or(vec![]);
    let mut dirs: Vec<PathBuf> = children(dir)
        .into_iter()
        .flat_map(|c| {
            let mut found = children(&c);
            found.push(c);
            found
        })
        .filter(|p| p.join("_metadata").exists())
        .collect();
    // By number, oldest first (as names, chk-10 would come before chk-9).
    dirs.sort_by_key(|p| p.file_name().unwrap().to_string_lossy()["chk-".len()..].parse::<u64>().unwrap());
    dirs
}

/// The shared area of the job directory `dir`, or of the one job directory under the
/// checkpoint directory `dir` (`dir/shared` when there is none: it holds nothing then).
fn shared_dir(dir: &Path) -> PathBuf {
    if dir.join("shared").is_dir() {
        return dir.join("shared");
    }
    let jobs = common::job_dirs(dir);
    assert!(jobs.len() <= 1, "one job directory at most: {jobs:?}");
    jobs.first().unwrap_or(&dir.to_path_buf()).join("shared")
}

/// The RocksDB files (relative to the storage root) the checkpoint in `dir` references,
/// shared or its own.
fn referenced_files(dir: &Path, shared_only: bool) -> BTreeSet<String> {
    let checkpoint = load_checkpoint_dir(dir).unwrap();
    let natives = checkpoint.operators.iter().filter_map(|o| o.keyed.as_ref()).flat_map(|k| &k.native);
    let files = natives.flat_map(|n| &n.files);
    files.filter(|f| !shared_only || f.shared_name.is_some()).map(|f| f.location.clone()).collect()
}

/// The shared files (relative to the storage root) the checkpoint in `dir` references.
fn referenced_shared_files(dir: &Path) -> BTreeSet<String> {
    referenced_files(dir, true)
}

fn files_in(dir: &Path) -> BTreeSet<String> {
    let entries = std::fs::read_dir(dir).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
    entries.into_iter().map(|e| format!("shared/{}", e.file_name().to_string_lossy())).collect()
}

/// Runs a job restored as `env` says (at parallelism 3, so rescaled) that reads every key
/// once more from a new source: each count must be one above `expected`'s. Its own
/// checkpoints go to `checkpoints` too and are removed when it finishes.
fn assert_restores(env: &Env, dir: &Path, checkpoints: &Path, expected: &BTreeMap<u64, u64>, what: &str) -> JobResult {
    let sink = CollectSink::new();
    env.set_parallelism(3);
    env.set_state_backend(rocksdb(dir));
    env.set_allow_non_restored_state(true);
    env.enable_checkpointing(20);
    env.set_checkpoint_dir(checkpoints);
    env.from_collection((0..KEYS).collect())
        .uid("verify")
        .key_by(|k: &u64| *k)
        .process(Count::default())
        .uid("count")
        .add_sink(sink.clone());
    let result = env.execute("verify").unwrap();
    let got: BTreeMap<u64, u64> = sink.take().into_iter().collect();
    assert_eq!(got.len() as u64, KEYS);
    for (key, count) in got {
        assert_eq!(count, expected.get(&key).copied().unwrap_or(0) + 1, "key {key} restored from {what}");
    }
    result
}

#[test]
fn incremental_checkpoints_upload_little_keep_what_retained_ones_need_and_restore_exactly() {
    let dir = temp_dir("incremental");
    let checkpoints = dir.join("checkpoints");
    let log = Arc::new(Mutex::new(Vec::new()));
    let env = Env::new();
    env.set_parallelism(2);
    env.set_state_backend(rocksdb(&dir));
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 40,
        retained: 3,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(&checkpoints);
    let source = Phases { phase: 0, offset: 0, waiting_for: 0, last_snapshot: 0, log: log.clone() };
    env.add_source(source)
        .uid("phases")
        .set_parallelism(1)
        .key_by(|k: &u64| *k)
        .process(Count::default())
        .uid("count")
        .add_sink(CollectSink::new());
    let result = env.execute("incremental").unwrap();
    let history = &result.checkpoint_history;
    // At least one periodic checkpoint per phase (the final one is not in the history).
    assert!(history.len() >= PHASES as usize, "{history:?}");

    // The first checkpoint with all keys uploads them; the next one, after 20 changed
    // keys, uploads a small fraction of that.
    let log = log.lock().unwrap().clone();
    let first_full = log.iter().filter(|(_, phase, _)| *phase >= 1).map(|(id, _, _)| *id).min().unwrap();
    let at = history.iter().position(|c| c.id.0 == first_full).expect("that checkpoint completed");
    let (first, second) = (&history[at], &history[at + 1]);
    assert!(first.bytes > 100_000, "50,000 keys take room: {first:?}");
    assert!(
        second.incremental_bytes * 10 < first.bytes,
        "the checkpoint after a small change uploads far less: first {first:?}, second {second:?}"
    );
    assert!(second.bytes > first.bytes / 2, "and still references the whole state: {second:?}");

    // Three retained checkpoints; the shared area holds exactly the files they reference.
    let retained = checkpoint_dirs(&checkpoints);
    assert_eq!(retained.len(), 3, "{retained:?}");
    let needed: BTreeSet<String> = retained.iter().flat_map(|d| referenced_shared_files(d)).collect();
    assert!(!needed.is_empty());
    assert_eq!(files_in(&shared_dir(&checkpoints)), needed, "no shared file missing, none left over");

    // Each retained checkpoint restores to exactly its state: a job reading every key once
    // more (from a new source) sees each count one above the checkpoint's.
    let expected_at = |checkpoint: &Path| {
        let id: u64 = checkpoint.file_name().unwrap().to_string_lossy()["chk-".len()..].parse().unwrap();
        let &(_, phase, offset) = log
            .iter()
            .find(|(logged, _, _)| *logged == id)
            .or_else(|| log.iter().find(|(logged, _, _)| *logged == u64::MAX))
            .unwrap();
        expected_counts(phase, offset)
    };
    for checkpoint in &retained {
        let env = Env::new();
        env.restore_from(checkpoint);
        assert_restores(&env, &dir, &checkpoints, &expected_at(checkpoint), &format!("{checkpoint:?}"));
    }

    // A corrupt file only the newest checkpoint has: restoring the latest falls back to
    // the one before, and says which file was wrong.
    // (The newest may be the final checkpoint, after the source finished, with no shared
    // file of its own: then it is one of its own RocksDB files, say its MANIFEST.)
    let older: BTreeSet<String> = retained[..2].iter().flat_map(|d| referenced_files(d, false)).collect();
    let mut only_newest: Vec<String> = referenced_files(&retained[2], false).difference(&older).cloned().collect();
    only_newest.sort_by_key(|f| (!f.starts_with("shared/"), !f.contains("MANIFEST")));
    assert!(!only_newest.is_empty(), "the newest checkpoint has files of its own");
    let victim = common::job_dir(&checkpoints).join(&only_newest[0]);
    let original = std::fs::read(&victim).unwrap();
    let mut flipped = original.clone();
    flipped[original.len() / 2] ^= 0x20;
    // Written beside it and renamed over it: stored files may be links to one file (a
    // file uploaded twice), and the older checkpoints' must stay whole.
    let replace = |bytes: &[u8]| {
        let beside = victim.with_extension("corrupting");
        std::fs::write(&beside, bytes).unwrap();
        std::fs::rename(&beside, &victim).unwrap();
    };
    replace(&flipped);
    let env = Env::new();
    env.restore_latest_from(&checkpoints);
    let result = assert_restores(&env, &dir, &checkpoints, &expected_at(&retained[1]), "fallback");
    let warned = result.warnings.iter().any(|w| w.contains("skipping checkpoint") && w.contains(&only_newest[0]));
    assert!(warned, "{:?}", result.warnings);
    replace(&original);

    // The heap backend cannot read RocksDB's files: a clear error, not a panic.
    let env = Env::new();
    env.restore_from(&retained[0]);
    env.set_allow_non_restored_state(true);
    env.from_collection(vec![1u64]).uid("verify").key_by(|k: &u64| *k).process(Count::default()).uid("count");
    let message = env.execute("heap").unwrap_err().to_string();
    assert!(message.contains("restore it with the rocksdb backend, or take a savepoint"), "{message}");

    assert_eq!(checkpoint_dirs(&checkpoints), retained, "restored jobs deleted none of the retained checkpoints");
    assert_eq!(files_in(&shared_dir(&checkpoints)), needed, "nor any of their shared files");

    // `eddy checkpoint inspect` lists the files and verifies them; a missing one is named.
    let inspect = |checkpoint: &Path| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"))
            .args(["checkpoint", "inspect", checkpoint.to_str().unwrap()])
            .output()
            .unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (code, report) = inspect(&retained[2]);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("rocksdb files (incremental) for key groups") && report.contains("all checksums ok"));
    let victim = referenced_shared_files(&retained[2]).into_iter().next().unwrap();
    std::fs::remove_file(common::job_dir(&checkpoints).join(&victim)).unwrap();
    let (code, report) = inspect(&retained[2]);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains(&format!("native file {victim}: CORRUPT")), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts the given keys into the `count` state, from a source with its own uid.
fn keys_job(env: &Env, source: &str, keys: std::ops::Range<u64>) {
    env.from_collection(keys.collect())
        .uid(source)
        .key_by(|k: &u64| *k)
        .process(Count::default())
        .uid("count")
        .add_sink(CollectSink::new());
}

/// Job A leaves one checkpoint of 50,000 keys; job B restores it, changes 10 keys and
/// takes its final checkpoint. NO_CLAIM: B uploads its own copy and leaves A's checkpoint
/// whole. CLAIM: B references A's files and, finishing, deletes both. Both runs have the
/// same seed: B's file names must differ from A's all the same.
#[test]
fn restore_modes_decide_who_owns_the_restored_checkpoint() {
    for mode in [RestoreMode::NoClaim, RestoreMode::Claim] {
        let dir = temp_dir(&format!("claim-{mode:?}"));
        let checkpoints = dir.join("checkpoints");
        let config = |retain_on_cancel| CheckpointConfig {
            interval_ms: 600_000,
            retained: 1,
            retain_on_cancel,
            ..CheckpointConfig::default()
        };
        let env = Env::new();
        env.set_seed(42);
        env.set_parallelism(2);
        env.set_state_backend(rocksdb(&dir));
        env.set_checkpoint_config(config(true));
        env.set_checkpoint_dir(&checkpoints);
        keys_job(&env, "all", 0..KEYS);
        env.execute("a").unwrap();
        let from_a = checkpoint_dirs(&checkpoints);
        assert_eq!(from_a.len(), 1, "the final checkpoint of A");
        let files_of_a = files_in(&shared_dir(&checkpoints));

        let env = Env::new();
        env.set_seed(42);
        env.set_parallelism(2);
        env.set_state_backend(rocksdb(&dir));
        env.set_checkpoint_config(config(false));
        env.set_checkpoint_dir(&checkpoints);
        env.restore_latest_from(&checkpoints);
        env.set_restore_mode(mode);
        env.set_allow_non_restored_state(true);
        keys_job(&env, "few", 0..10);
        let result = env.execute("b").unwrap();
        let last = result.last_checkpoint.as_ref().expect("B's final checkpoint (its only one)");
        match mode {
            RestoreMode::Claim => {
                assert!(last.incremental_bytes * 10 < last.bytes, "B references A's files: {last:?}");
                assert!(checkpoint_dirs(&checkpoints).is_empty(), "B deleted the claimed checkpoint with its own");
                assert!(files_in(&shared_dir(&checkpoints)).is_empty(), "and every shared file");
            }
            RestoreMode::NoClaim => {
                assert!(last.incremental_bytes * 10 > last.bytes * 9, "B uploads its own copy: {last:?}");
                assert_eq!(checkpoint_dirs(&checkpoints), from_a, "A's checkpoint stays");
                assert_eq!(files_in(&shared_dir(&checkpoints)), files_of_a, "with all its files");
                load_checkpoint_dir(&from_a[0]).expect("and still loads, every file verified");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn claim_refuses_a_checkpoint_outside_the_jobs_directory() {
    let dir = temp_dir("claim-elsewhere");
    let env = Env::new();
    env.set_state_backend(rocksdb(&dir));
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 600_000,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(dir.join("a"));
    keys_job(&env, "all", 0..100);
    env.execute("a").unwrap();
    let env = Env::new();
    env.set_state_backend(rocksdb(&dir));
    env.enable_checkpointing(1_000);
    env.set_checkpoint_dir(dir.join("b"));
    env.restore_latest_from(dir.join("a"));
    env.set_restore_mode(RestoreMode::Claim);
    keys_job(&env, "all", 0..100);
    let message = env.execute("b").unwrap_err().to_string();
    assert!(
        message.contains("restore mode CLAIM takes over a checkpoint in the job's own checkpoint directory"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `eddy checkpoint clean-shared` deletes shared files no complete checkpoint references
/// (as a process killed mid-checkpoint leaves them) and nothing else.
#[test]
fn clean_shared_deletes_only_unreferenced_files() {
    let dir = temp_dir("clean-shared");
    let checkpoints = dir.join("checkpoints");
    let env = Env::new();
    env.set_parallelism(2);
    env.set_state_backend(rocksdb(&dir));
    env.set_checkpoint_config(CheckpointConfig {
        interval_ms: 600_000,
        retain_on_cancel: true,
        ..CheckpointConfig::default()
    });
    env.set_checkpoint_dir(&checkpoints);
    keys_job(&env, "all", 0..1_000);
    env.execute("a").unwrap();
    // The command reads one job directory.
    let checkpoints = common::job_dir(&checkpoints);
    let kept = files_in(&shared_dir(&checkpoints));
    let some = checkpoints.join(kept.iter().next().unwrap());
    std::fs::copy(&some, checkpoints.join("shared/orphan-000042.sst")).unwrap();
    let clean = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"))
            .args(["checkpoint", "clean-shared", checkpoints.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let listed = clean(&["--dry-run"]);
    assert!(listed.contains("would delete shared/orphan-000042.sst") && listed.contains("1 unreferenced"), "{listed}");
    assert!(checkpoints.join("shared/orphan-000042.sst").exists());
    let done = clean(&[]);
    assert!(done.contains("deleted shared/orphan-000042.sst"), "{done}");
    assert_eq!(files_in(&shared_dir(&checkpoints)), kept, "the referenced files stay");
    load_checkpoint_dir(&checkpoint_dirs(&checkpoints)[0]).expect("the checkpoint still loads");
    let _ = std::fs::remove_dir_all(&dir);
}
