//! Every job's checkpoints in a directory of their own, as Flink keeps them under
//! `<checkpoint dir>/<job id>/chk-N`: two jobs given one checkpoint directory never write
//! into each other's checkpoints, and a restore of "the latest checkpoint" knows whose it
//! reads.
//!
//! - A fresh job takes a new directory, named by a new [`JobDirId`], under the checkpoint
//!   directory it was given.
//! - A job restored from a checkpoint of a job directory under its own checkpoint
//!   directory continues in that job directory (the same job, run again), so that the next
//!   restore of its latest checkpoint finds it, and CLAIM mode can take it over.
//! - While a job runs it holds its job directory's lock ([`JobDirLock`]), an advisory lock
//!   of the operating system on a file in it: a second process that would run the same
//!   job directory is refused, and a killed process loses its lock with its life.
//!   Object stores (`s3://…`) have no such lock; there the per-job directory alone keeps
//!   jobs apart.
//! - [`choose_latest`] decides which job a restore of the latest checkpoint in a
//!   directory reads, from what was found there: a pure function, tested below.

use crate::error::CheckpointError;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file in a job directory whose lock the running job holds; it says who holds it.
pub const JOB_LOCK_FILE: &str = "_job.lock";
/// Present in the job directory of a job that ran to its end and kept its checkpoints.
pub const JOB_FINISHED_FILE: &str = "_job.finished";

/// The name of a job's directory under a checkpoint directory: 32 hex digits, as Flink's
/// job ids look.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JobDirId(String);

impl JobDirId {
    /// A new id from two 64-bit draws (random, or derived from a simulation's seed).
    pub fn from_parts(high: u64, low: u64) -> Self {
        JobDirId(format!("{high:016x}{low:016x}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobDirId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A job directory found under a checkpoint directory, with its newest completed
/// checkpoint (its files checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundJob {
    /// The job directory's location.
    pub dir: String,
    /// The job's name, as its newest checkpoint's metadata records it.
    pub job_name: String,
    /// The newest completed checkpoint's location and number.
    pub newest: String,
    pub newest_id: u64,
    /// Whether another running process holds the job directory's lock.
    pub in_use: Option<String>,
    /// The job ran to its end (and kept its checkpoints).
    pub finished: bool,
}

/// Which job a restore of the latest checkpoint under `dir` reads, for the job named
/// `job_name`, from the jobs found there (`found`, each with a completed checkpoint):
///
/// - the one job of that name whose directory no running process holds, preferring one
///   that did not finish (a restore resumes an interrupted job: a job of the same name
///   that ran through beside it must not be taken for it);
/// - else the one job found there at all, if no process holds it (a job that was renamed);
/// - an error naming the holder when every such job runs elsewhere (restoring it here
///   would run it twice);
/// - an error listing the candidates when there are several (two jobs of one name, killed
///   both: the newest checkpoint may be the other one's, and restoring it would lose this
///   one's records); the user names the job directory to restore;
/// - an error listing the other jobs when none has this name.
pub fn choose_latest<'a>(dir: &str, job_name: &str, found: &'a [FoundJob]) -> Result<&'a FoundJob, CheckpointError> {
    let named: Vec<&FoundJob> = found.iter().filter(|j| j.job_name == job_name).collect();
    let free: Vec<&FoundJob> = named.iter().copied().filter(|j| j.in_use.is_none()).collect();
    let unfinished: Vec<&FoundJob> = free.iter().copied().filter(|j| !j.finished).collect();
    let free = if unfinished.is_empty() { free } else { unfinished };
    let ambiguous = |message: String| CheckpointError::AmbiguousRestore { dir: dir.to_string(), message };
    let any_free: Vec<&FoundJob> = found.iter().filter(|j| j.in_use.is_none()).collect();
    match (free.as_slice(), named.as_slice()) {
        ([one], _) => Ok(one),
        ([], []) if found.len() == 1 && any_free.len() == 1 => Ok(any_free[0]),
        ([], []) if found.is_empty() => Err(CheckpointError::NoCheckpoint(dir.to_string())),
        ([], []) => Err(ambiguous(format!(
            "it holds no checkpoint of a job named '{job_name}', only of {}; to restore one of them, name its job \
                directory",
            describe(found)
        ))),
        ([], busy) => Err(ambiguous(format!(
            "every job named '{job_name}' there is running: {}; a job directory runs one job at a time",
            busy.iter()
                .map(|j| format!("{} ({})", j.dir, j.in_use.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        (several, _) => Err(ambiguous(format!(
            "it holds the checkpoints of {} jobs named '{job_name}': {}; name the job directory to restore the latest \
                checkpoint of",
            several.len(),
            describe(&several.iter().map(|j| (*j).clone()).collect::<Vec<_>>())
        ))),
    }
}

fn describe(jobs: &[FoundJob]) -> String {
    jobs.iter()
        .map(|j| {
            let finished = if j.finished { ", finished" } else { "" };
            format!("'{}' in {} (newest chk-{}{finished})", j.job_name, j.dir, j.newest_id)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `job_dir` is `base` itself or a directory directly under it: a job restored
/// from it continues in it. Local paths are compared canonicalized, URLs as strings.
pub fn is_job_dir_of(base: &str, job_dir: &str) -> bool {
    if is_object_store(base) || is_object_store(job_dir) {
        let (base, job_dir) = (base.trim_end_matches('/'), job_dir.trim_end_matches('/'));
        return job_dir == base || job_dir.rsplit_once('/').is_some_and(|(parent, _)| parent == base);
    }
    let canonical = |p: &str| Path::new(p.strip_prefix("file://").unwrap_or(p)).canonicalize().ok();
    match (canonical(base), canonical(job_dir)) {
        (Some(base), Some(job_dir)) => job_dir == base || job_dir.parent() == Some(base.as_path()),
        _ => false,
    }
}

fn is_object_store(location: &str) -> bool {
    location.contains("://") && !location.starts_with("file://")
}

/// The lock a running job holds on its job directory (local directories only). Dropping
/// it releases the lock; so does the process's death.
#[derive(Debug)]
pub struct JobDirLock {
    file: std::fs::File,
    dir: PathBuf,
}

impl JobDirLock {
    /// Takes the lock of the job directory at `location` for the job `job_name`, creating
    /// the directory if needed; `Ok(None)` for object stores, which have no lock. Fails,
    /// naming the holder, when another process holds it.
    pub fn acquire(location: &str, job_name: &str) -> Result<Option<JobDirLock>, CheckpointError> {
        if is_object_store(location) {
            return Ok(None);
        }
        let dir = PathBuf::from(location.strip_prefix("file://").unwrap_or(location));
        let io = |e: std::io::Error| CheckpointError::Io {
            path: dir.join(JOB_LOCK_FILE).display().to_string(),
            source: e.into(),
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let path = dir.join(JOB_LOCK_FILE);
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(CheckpointError::InUse {
                    location: dir.display().to_string(),
                    holder: holder.trim().to_string(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        // Who holds it, for the message of the next process that tries.
        file.set_len(0).map_err(io)?;
        writeln!(file, "job '{job_name}', process {}", std::process::id()).map_err(io)?;
        // It runs again: no longer a finished job's directory.
        let _ = std::fs::remove_file(dir.join(JOB_FINISHED_FILE));
        Ok(Some(JobDirLock { file, dir }))
    }

    /// Another process holds the lock of the job directory at `location` (local only):
    /// its words, else `None`. Takes the lock for a moment when it is free.
    pub fn holder(location: &str) -> Option<String> {
        if is_object_store(location) {
            return None;
        }
        // A probe: opens the lock file if there is one, writes nothing.
        let path = Path::new(location).join(JOB_LOCK_FILE);
        let file = std::fs::File::open(&path).ok()?;
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) => {
                Some(std::fs::read_to_string(&path).unwrap_or_default().trim().to_string())
            }
            _ => None,
        }
    }

    /// The job ran to its end: marks its directory finished (so that a restore of the
    /// latest checkpoint prefers an interrupted job of the same name), releases the lock,
    /// and removes the directory if nothing else is left in it (the job deleted its
    /// checkpoints).
    pub fn finish(self) {
        let JobDirLock { file, dir } = self;
        let holds_checkpoints = std::fs::read_dir(&dir)
            .map(|entries| entries.flatten().any(|e| e.path().join(crate::metadata::METADATA_FILE).exists()))
            .unwrap_or(true);
        if holds_checkpoints {
            let _ = std::fs::write(dir.join(JOB_FINISHED_FILE), b"");
        }
        let _ = std::fs::remove_file(dir.join(JOB_LOCK_FILE));
        drop(file);
        if !holds_checkpoints {
            // An emptied shared area goes too; anything else left keeps the directory.
            let _ = std::fs::remove_dir(dir.join(super::SHARED_DIR));
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &str, name: &str, newest_id: u64, in_use: Option<&str>) -> FoundJob {
        FoundJob {
            dir: dir.into(),
            job_name: name.into(),
            newest: format!("{dir}/chk-{newest_id}"),
            newest_id,
            in_use: in_use.map(String::from),
            finished: false,
        }
    }

    #[test]
    fn an_interrupted_job_is_preferred_to_a_finished_one_of_its_name() {
        let finished = FoundJob { finished: true, ..job("/c/b", "api count", 44, None) };
        let found = [job("/c/a", "api count", 31, None), finished.clone()];
        assert_eq!(choose_latest("/c", "api count", &found).unwrap().dir, "/c/a");
        assert_eq!(choose_latest("/c", "api count", std::slice::from_ref(&finished)).unwrap().dir, "/c/b");
    }

    #[test]
    fn the_one_job_of_the_name_is_chosen_even_when_another_is_newer() {
        let found = [job("/c/a", "api count", 31, None), job("/c/b", "other", 44, None)];
        assert_eq!(choose_latest("/c", "api count", &found).unwrap().dir, "/c/a");
    }

    #[test]
    fn a_running_job_of_the_name_is_not_restored_twice() {
        let found = [job("/c/a", "api count", 31, None), job("/c/b", "api count", 44, Some("process 7"))];
        assert_eq!(choose_latest("/c", "api count", &found).unwrap().dir, "/c/a");
        let only_busy = [job("/c/b", "api count", 44, Some("process 7"))];
        let error = choose_latest("/c", "api count", &only_busy).unwrap_err().to_string();
        assert!(error.contains("running") && error.contains("process 7"), "{error}");
    }

    #[test]
    fn two_jobs_of_one_name_are_refused_with_both_named() {
        let found = [job("/c/a", "api count", 31, None), job("/c/b", "api count", 44, None)];
        let error = choose_latest("/c", "api count", &found).unwrap_err().to_string();
        assert!(error.contains("/c/a") && error.contains("/c/b") && error.contains("2 jobs"), "{error}");
    }

    #[test]
    fn no_job_of_the_name_lists_the_others_and_nothing_at_all_says_so() {
        let renamed = [job("/c/b", "other", 44, None)];
        assert_eq!(choose_latest("/c", "api count", &renamed).unwrap().dir, "/c/b", "the only job there");
        let found = [job("/c/b", "other", 44, None), job("/c/c", "third", 4, None)];
        let error = choose_latest("/c", "api count", &found).unwrap_err().to_string();
        assert!(error.contains("'other' in /c/b"), "{error}");
        assert!(matches!(choose_latest("/c", "api count", &[]), Err(CheckpointError::NoCheckpoint(_))));
    }

    #[test]
    fn job_directories_are_the_base_or_directly_under_it() {
        assert!(is_job_dir_of("s3://b/chk", "s3://b/chk/0123"));
        assert!(is_job_dir_of("s3://b/chk/", "s3://b/chk"));
        assert!(!is_job_dir_of("s3://b/chk", "s3://b/other/0123"));
        let base = std::env::temp_dir().join(format!("eddy-job-dir-{}", std::process::id()));
        std::fs::create_dir_all(base.join("j")).unwrap();
        let (b, j) = (base.display().to_string(), base.join("j").display().to_string());
        assert!(is_job_dir_of(&b, &j) && is_job_dir_of(&b, &b) && !is_job_dir_of(&j, &b));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_held_lock_refuses_a_second_holder_and_names_the_first() {
        let dir = std::env::temp_dir().join(format!("eddy-job-lock-{}", std::process::id()));
        let location = dir.display().to_string();
        let lock = JobDirLock::acquire(&location, "first").unwrap().unwrap();
        let error = JobDirLock::acquire(&location, "second").unwrap_err().to_string();
        assert!(error.contains("job 'first'"), "{error}");
        assert_eq!(
            JobDirLock::holder(&location).as_deref(),
            Some(&*format!("job 'first', process {}", std::process::id()))
        );
        lock.finish();
        assert!(!dir.exists(), "an emptied job directory goes with its lock");
        assert!(JobDirLock::holder(&location).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_finished_job_directory_run_again_is_no_longer_finished() {
        let dir = std::env::temp_dir().join(format!("eddy-job-rerun-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("chk-1")).unwrap();
        std::fs::write(dir.join("chk-1").join(crate::metadata::METADATA_FILE), b"x").unwrap();
        let location = dir.display().to_string();
        JobDirLock::acquire(&location, "job").unwrap().unwrap().finish();
        assert!(dir.join(JOB_FINISHED_FILE).exists(), "kept checkpoints: marked finished");
        assert!(JobDirLock::holder(&location).is_none(), "a probe takes nothing");
        let again = JobDirLock::acquire(&location, "job").unwrap().unwrap();
        assert!(!dir.join(JOB_FINISHED_FILE).exists(), "running again, it is an interrupted job if killed");
        assert!(JobDirLock::holder(&location).is_some());
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
