//! The job's checkpoint storage and what it restores, decided once when the job starts.
//!
//! With a checkpoint directory, the job writes into a job directory of its own under it
//! (`<dir>/<job dir id>/chk-N`, see [`eddy_checkpoint::storage::JobDirLock`]) and holds
//! that directory's lock while it runs. A restore of "the latest checkpoint" in a
//! directory reads the newest checkpoint of the one job of this name found there, never
//! another job's ([`choose_latest`]); a job restored from a checkpoint of a job directory
//! under its own checkpoint directory continues in that job directory.

use super::restore::{load_latest, open_restore_path};
use eddy_checkpoint::storage::{
    choose_latest, is_job_dir_of, CheckpointStorage, FoundJob, JobDirId, JobDirLock, OpenStorage, JOB_FINISHED_FILE,
};
use eddy_checkpoint::CheckpointError;
use eddy_runtime::deployment::restore::RestoreSource;
use eddy_runtime::graph::{JobConfig, RestoreFrom, StorageChoice};
use eddy_types::RunSeed;
use std::path::Path;
use std::sync::Arc;

/// Where the job's checkpoints go, and what it starts from.
pub(crate) struct JobStorage {
    pub(crate) storage: Arc<dyn CheckpointStorage>,
    /// The job directory's location (for task executors in other processes); `None` in
    /// the JobManager's memory.
    pub(crate) job_dir: Option<String>,
    pub(crate) restore: Option<RestoreSource>,
    /// Held while the job runs (local job directories).
    lock: Option<JobDirLock>,
}

impl JobStorage {
    /// Opens the job's storage and finds what it restores; `simulation` is the seed of a
    /// simulated run (its job directory is named from it, so that the run repeats).
    pub(crate) fn open(
        config: &JobConfig,
        opener: &dyn OpenStorage,
        job_name: &str,
        simulation: Option<RunSeed>,
        warnings: &mut Vec<String>,
    ) -> Result<JobStorage, CheckpointError> {
        let mut lock = None;
        let restore = match &config.restore {
            None => None,
            Some(RestoreFrom::Path(path)) => Some(open_restore_path(opener, path)?),
            Some(RestoreFrom::LatestIn(dir)) => {
                let (source, held) = latest_in(opener, dir, job_name, warnings)?;
                lock = held;
                Some(source)
            }
            Some(RestoreFrom::LatestOrFresh) => {
                let StorageChoice::Directory(base) = &config.storage else {
                    return Err(CheckpointError::InvalidLocation {
                        location: "the JobManager's memory".into(),
                        message: "restoring the latest checkpoint needs a checkpoint directory \
                                  (Env::set_checkpoint_dir)"
                            .into(),
                    });
                };
                match latest_in(opener, base, job_name, warnings) {
                    Ok((source, held)) => {
                        lock = held;
                        Some(source)
                    }
                    Err(CheckpointError::NoCheckpoint(dir)) => {
                        tracing::info!(job = %job_name, checkpoint_dir = %dir, "no checkpoint of the job yet: \
                            starting fresh");
                        warnings.push(format!("no checkpoint of job '{job_name}' in {dir} yet: started fresh"));
                        None
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let (storage, job_dir): (Arc<dyn CheckpointStorage>, _) = match &config.storage {
            StorageChoice::Memory => {
                // It writes nothing where it restored from: that directory stays free.
                lock = None;
                (config.memory_storage(), None)
            }
            StorageChoice::Directory(base) => {
                let base = base.to_string_lossy().into_owned();
                let restored_dir = restore.as_ref().map(|r| r.storage.describe());
                let job_dir = match restored_dir {
                    // The same job run again: it goes on in its own job directory (one
                    // under the checkpoint directory; checkpoints written straight into
                    // it, before job directories, are restored into a new one).
                    Some(dir) if is_job_dir_of(&base, &dir) && !is_job_dir_of(&dir, &base) => dir,
                    _ => {
                        lock = None;
                        fresh_job_dir(&base, job_name, simulation)
                    }
                };
                if lock.is_none() {
                    lock = JobDirLock::acquire(&job_dir, job_name)?;
                }
                let storage = opener.open(&job_dir)?;
                // As the storage names itself (canonical), for processes elsewhere.
                let job_dir = storage.describe();
                (storage, Some(job_dir))
            }
        };
        Ok(JobStorage { storage, job_dir, restore, lock })
    }

    /// The job ended and deleted its checkpoints: its job directory goes if empty.
    pub(crate) fn finish(self) {
        if let Some(lock) = self.lock {
            lock.finish();
        }
    }
}

/// A new job directory's location under `base`: named by a random id, or under
/// simulation by one derived from its seed.
fn fresh_job_dir(base: &str, job_name: &str, simulation: Option<RunSeed>) -> String {
    let seed = simulation.map_or_else(RunSeed::draw, |s| s.derive(job_name.as_bytes()));
    let id = JobDirId::from_parts(seed.0, seed.derive(b"low").0);
    format!("{}/{id}", base.trim_end_matches('/'))
}

/// The newest checkpoint to restore from `dir`: its own when it holds checkpoints itself
/// (a job directory, or one written before job directories), else the newest of the one
/// job named `job_name` among the job directories under it. Returns the lock of the job
/// directory it chose, taken (so that no other process starts it meanwhile).
fn latest_in(
    opener: &dyn OpenStorage,
    dir: &Path,
    job_name: &str,
    warnings: &mut Vec<String>,
) -> Result<(RestoreSource, Option<JobDirLock>), CheckpointError> {
    let shown = dir.display().to_string();
    let top = opener.open(&shown)?;
    let mut found = Vec::new();
    let mut sources = Vec::new();
    // `dir` itself when it holds checkpoints (a job directory named, or checkpoints from
    // before job directories), and the job directories under it.
    let mut candidates = vec![top.clone()];
    for sub in top.subdirectories()? {
        candidates.push(opener.open(&sub)?);
    }
    let named_itself = !top.completed()?.is_empty();
    for storage in candidates {
        if storage.completed()?.is_empty() {
            continue;
        }
        let Some(source) = load_latest(&storage, warnings)? else { continue };
        found.push(FoundJob {
            dir: storage.describe(),
            job_name: source.metadata.job_name.clone(),
            newest: source.location.clone(),
            newest_id: source.id().0,
            in_use: JobDirLock::holder(&storage.describe()),
            finished: Path::new(&storage.describe()).join(JOB_FINISHED_FILE).exists(),
        });
        sources.push(source);
    }
    // A job directory named by the user is the one meant, whatever its job's name.
    let chosen = match (named_itself, found.first()) {
        (true, Some(itself)) if itself.in_use.is_none() => itself,
        _ => choose_latest(&shown, job_name, &found)?,
    };
    if chosen.job_name != job_name {
        warnings.push(format!(
            "restoring job '{job_name}' from {}, a checkpoint of job '{}' (the only job in {shown})",
            chosen.newest, chosen.job_name
        ));
    }
    let index = found.iter().position(|j| std::ptr::eq(j, chosen)).unwrap_or(0);
    let lock = JobDirLock::acquire(&chosen.dir, job_name)?;
    Ok((sources.swap_remove(index), lock))
}
