//! An exactly-once file sink on two-phase commit: each transaction is a file, hidden while
//! it is written (`.part-S-N-A.inprogress`) and while it waits for its checkpoint
//! (`.part-S-N-A.pending`), visible once committed (`part-S-N-A`). `A` names the attempt
//! (run) that wrote it: after a restart the new attempt's transactions never share a name
//! with the old one's, so an old subtask still running somewhere (a TaskManager cut off,
//! not yet dead) can neither write into nor delete the new attempt's files.

use super::two_phase::{TransactionalSink, TwoPhaseCommitSink};
use crate::function::FunctionResult;
use eddy_types::SubtaskIndex;
use serde::{Deserialize, Serialize};
use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One transaction: one part file of one subtask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartFile {
    pub subtask: u32,
    pub sequence: u64,
    /// The attempt that wrote it ([`RuntimeContext::attempt_id`](crate::RuntimeContext)).
    pub attempt: u64,
}

impl PartFile {
    fn name(&self) -> String {
        format!("part-{}-{:010}-{:016x}", self.subtask, self.sequence, self.attempt)
    }
}

/// Writes lines (`Display`) into part files of a directory, exactly once.
pub struct FileTransactions<T> {
    dir: Arc<PathBuf>,
    writer: Option<BufWriter<File>>,
    attempt: u64,
    _type: PhantomData<fn(T)>,
}

impl<T> Clone for FileTransactions<T> {
    fn clone(&self) -> Self {
        Self { dir: self.dir.clone(), writer: None, attempt: self.attempt, _type: PhantomData }
    }
}

/// The exactly-once file sink: `stream.add_sink(ExactlyOnceFileSink::new(dir))`.
pub type ExactlyOnceFileSink<T> = TwoPhaseCommitSink<FileTransactions<T>, T>;

impl<T: Display + 'static> TwoPhaseCommitSink<FileTransactions<T>, T> {
    /// Committed output appears in `dir` as `part-<subtask>-<n>` files.
    pub fn new_in(dir: impl Into<PathBuf>) -> Self {
        TwoPhaseCommitSink::new(FileTransactions {
            dir: Arc::new(dir.into()),
            writer: None,
            attempt: 0,
            _type: PhantomData,
        })
    }
}

impl<T> FileTransactions<T> {
    fn path(&self, part: &PartFile, state: &str) -> PathBuf {
        match state {
            "" => self.dir.join(part.name()),
            hidden => self.dir.join(format!(".{}.{hidden}", part.name())),
        }
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("exactly-once file sink: cannot {what} '{}': {e}", path.display(), e = eddy_types::chain(&e))
}

impl<T: Display + 'static> TransactionalSink<T> for FileTransactions<T> {
    type Transaction = PartFile;

    fn begin(&mut self, subtask: SubtaskIndex, sequence: u64) -> FunctionResult<PartFile> {
        std::fs::create_dir_all(&*self.dir).map_err(|e| io_error("create directory", &self.dir, e))?;
        let part = PartFile { subtask: subtask.0, sequence, attempt: self.attempt };
        let path = self.path(&part, "inprogress");
        let file = File::create(&path).map_err(|e| io_error("create", &path, e))?;
        self.writer = Some(BufWriter::new(file));
        Ok(part)
    }

    fn write(&mut self, _part: &mut PartFile, value: T) -> FunctionResult {
        let writer = self.writer.as_mut().ok_or("exactly-once file sink: no open part file")?;
        writeln!(writer, "{value}")
            .map_err(|e| format!("exactly-once file sink: write failed: {e}", e = eddy_types::chain(&e)))?;
        Ok(())
    }

    fn pre_commit(&mut self, part: &mut PartFile) -> FunctionResult {
        let (from, to) = (self.path(part, "inprogress"), self.path(part, "pending"));
        if let Some(mut writer) = self.writer.take() {
            writer.flush().map_err(|e| io_error("flush", &from, e))?;
            writer.get_ref().sync_data().map_err(|e| io_error("sync", &from, e))?;
        }
        std::fs::rename(&from, &to).map_err(|e| io_error("rename", &from, e))?;
        Ok(())
    }

    fn commit(&mut self, part: PartFile) -> FunctionResult {
        let (pending, visible) = (self.path(&part, "pending"), self.path(&part, ""));
        match std::fs::metadata(&pending) {
            // Empty transactions leave no file behind.
            Ok(m) if m.len() == 0 => std::fs::remove_file(&pending).map_err(|e| io_error("remove", &pending, e))?,
            Ok(_) => std::fs::rename(&pending, &visible).map_err(|e| io_error("commit", &pending, e))?,
            // Committed before a failure: nothing to do.
            Err(_) if visible.exists() => {}
            Err(_) => {}
        }
        Ok(())
    }

    fn abort(&mut self, part: PartFile) -> FunctionResult {
        self.writer = None;
        for state in ["inprogress", "pending"] {
            let _ = std::fs::remove_file(self.path(&part, state));
        }
        Ok(())
    }

    fn start_attempt(&mut self, attempt: u64) {
        self.attempt = attempt;
    }

    fn abort_leftovers(&mut self, subtask: SubtaskIndex, parallelism: u32) -> FunctionResult {
        let Ok(entries) = std::fs::read_dir(&*self.dir) else { return Ok(()) };
        let this_attempt = format!("-{:016x}.", self.attempt);
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.contains(&this_attempt) {
                continue;
            }
            // `.part-<s>-<n>.<state>`: the subtask that wrote it.
            let writer =
                name.strip_prefix(".part-").and_then(|rest| rest.split('-').next()).and_then(|s| s.parse::<u32>().ok());
            if writer.is_some_and(|s| s % parallelism == subtask.0) {
                let path = entry.path();
                std::fs::remove_file(&path).map_err(|e| io_error("remove leftover", &path, e))?;
            }
        }
        Ok(())
    }
}
