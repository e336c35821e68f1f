//! The partitioned `filesystem` sink (`PARTITIONED BY (dt, hm)`): rows go into
//! `path/dt=…/hm=…/` directories (values escaped as Flink escapes partition paths, the
//! partition columns not in the files), exactly once on two-phase commit: one part file
//! per partition and transaction, visible when the checkpoint after it completes. Partition
//! commit (`sink.partition-commit.policy.kind` = `success-file`) writes `_SUCCESS` into a
//! partition once it is complete: with the `partition-time` trigger when a partition whose
//! time (`partition.time-extractor.timestamp-pattern`) is later than its time plus
//! `sink.partition-commit.delay` was written (eddy's sinks do not see watermarks; in event
//! order that is when the watermark passed it), with `process-time` when the delay passed
//! since it was created; every partition at the end of the input.

use crate::expr::datetime;
use crate::format::Format;
use crate::row::Row;
use crate::table_env::parse_duration;
use eddy_api::sink::TransactionalSink;
use eddy_api::FunctionResult;
use eddy_types::SubtaskIndex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One transaction: a part file in each partition it wrote, and the partitions not yet
/// marked done (carried from transaction to transaction, so that they survive restores).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionedPart {
    pub subtask: u32,
    pub sequence: u64,
    pub attempt: u64,
    /// Partition directories (relative) this transaction wrote into.
    pub partitions: Vec<String>,
    /// Partitions written (by this or earlier transactions) and not yet marked done, with
    /// their partition time (ms) and creation time (ms).
    pub open: Vec<(String, i64, i64)>,
    /// The end of the input: every partition is done when this commits.
    pub last: bool,
}

#[derive(Clone, Debug)]
pub struct PartitionCommit {
    /// `success-file` in `sink.partition-commit.policy.kind`.
    pub success_file: Option<String>,
    pub partition_time: bool,
    pub delay_ms: i64,
    /// `$dt $hm:00`: partition values put into a timestamp string.
    pub pattern: String,
}

pub struct PartitionedFiles {
    dir: Arc<PathBuf>,
    format: Format,
    /// Indexes of the partition columns, in the declared order, with their names.
    keys: Arc<Vec<(usize, String)>>,
    commit: Arc<PartitionCommit>,
    attempt: u64,
    writers: BTreeMap<String, BufWriter<File>>,
    open: BTreeMap<String, (i64, i64)>,
    ended: bool,
}

impl Clone for PartitionedFiles {
    fn clone(&self) -> Self {
        Self {
            dir: self.dir.clone(),
            format: self.format.clone(),
            keys: self.keys.clone(),
            commit: self.commit.clone(),
            attempt: self.attempt,
            writers: BTreeMap::new(),
            open: BTreeMap::new(),
            ended: false,
        }
    }
}

/// Flink's `PartitionPathUtils.escapePathName`: the characters a path or Hive cannot take
/// as `%XX`.
pub fn escape_path_name(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escape = (c as u32) < 0x20
            || matches!(
                c,
                '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '\u{7f}' | '{' | '[' | ']' | '^'
            );
        if escape {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

impl PartitionedFiles {
    pub fn new(dir: PathBuf, format: Format, keys: Vec<(usize, String)>, commit: PartitionCommit) -> Self {
        Self {
            dir: Arc::new(dir),
            format,
            keys: Arc::new(keys),
            commit: Arc::new(commit),
            attempt: 0,
            writers: BTreeMap::new(),
            open: BTreeMap::new(),
            ended: false,
        }
    }

    fn file_name(part: &PartitionedPart) -> String {
        format!("part-{}-{:010}-{:016x}", part.subtask, part.sequence, part.attempt)
    }

    fn path(&self, partition: &str, part: &PartitionedPart, state: &str) -> PathBuf {
        let dir = self.dir.join(partition);
        match state {
            "" => dir.join(Self::file_name(part)),
            hidden => dir.join(format!(".{}.{hidden}", Self::file_name(part))),
        }
    }

    /// The partition's time from its values and the timestamp pattern (`$dt $hm:00`).
    fn partition_time(&self, values: &[String]) -> i64 {
        let mut text = self.commit.pattern.clone();
        // Longer names first, so that `$dt` does not replace part of `$dtx`.
        let mut keys: Vec<(&String, &String)> = self.keys.iter().map(|(_, k)| k).zip(values).collect();
        keys.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        for (k, v) in keys {
            text = text.replace(&format!("${k}"), v);
        }
        datetime::parse_timestamp(&text).map(|(ms, _)| ms).unwrap_or(i64::MIN)
    }

    fn mark_done(&self, partition: &str) -> FunctionResult {
        if let Some(name) = &self.commit.success_file {
            let path = self.dir.join(partition).join(name);
            File::create(&path).map_err(|e| io_error("create", &path, e))?;
        }
        Ok(())
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("filesystem sink: cannot {what} '{}': {}", path.display(), eddy_types::chain(&e))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl TransactionalSink<Row> for PartitionedFiles {
    type Transaction = PartitionedPart;

    fn begin(&mut self, subtask: SubtaskIndex, sequence: u64) -> FunctionResult<PartitionedPart> {
        self.writers.clear();
        Ok(PartitionedPart {
            subtask: subtask.0,
            sequence,
            attempt: self.attempt,
            partitions: Vec::new(),
            open: Vec::new(),
            last: false,
        })
    }

    fn write(&mut self, part: &mut PartitionedPart, row: Row) -> FunctionResult {
        let values: Vec<String> = self.keys.iter().map(|(i, _)| row.fields[*i].to_string()).collect();
        let partition: String = self
            .keys
            .iter()
            .zip(&values)
            .map(|((i, k), v)| match row.fields[*i].is_null() {
                true => format!("{k}=__DEFAULT_PARTITION__"),
                false => format!("{k}={}", escape_path_name(v)),
            })
            .collect::<Vec<_>>()
            .join("/");
        if !self.writers.contains_key(&partition) {
            let dir = self.dir.join(&partition);
            std::fs::create_dir_all(&dir).map_err(|e| io_error("create directory", &dir, e))?;
            let path = self.path(&partition, part, "inprogress");
            let file = File::create(&path).map_err(|e| io_error("create", &path, e))?;
            self.writers.insert(partition.clone(), BufWriter::new(file));
            part.partitions.push(partition.clone());
            let time = self.partition_time(&values);
            self.open.entry(partition.clone()).or_insert((time, now_ms()));
        }
        // The data file holds the other columns.
        let data: Vec<crate::value::Value> = row
            .fields
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.keys.iter().any(|(k, _)| k == i))
            .map(|(_, v)| v.clone())
            .collect();
        let line = self.format.encode(&Row { kind: row.kind, fields: data });
        let writer = self.writers.get_mut(&partition).expect("opened above");
        writeln!(writer, "{line}").map_err(|e| format!("filesystem sink: write failed: {}", eddy_types::chain(&e)))?;
        Ok(())
    }

    fn pre_commit(&mut self, part: &mut PartitionedPart) -> FunctionResult {
        for (partition, mut writer) in std::mem::take(&mut self.writers) {
            let from = self.path(&partition, part, "inprogress");
            writer.flush().map_err(|e| io_error("flush", &from, e))?;
            writer.get_ref().sync_data().map_err(|e| io_error("sync", &from, e))?;
            let to = self.path(&partition, part, "pending");
            std::fs::rename(&from, &to).map_err(|e| io_error("rename", &from, e))?;
        }
        part.open = self.open.iter().map(|(p, (t, c))| (p.clone(), *t, *c)).collect();
        part.last = self.ended;
        Ok(())
    }

    fn commit(&mut self, part: PartitionedPart) -> FunctionResult {
        for partition in &part.partitions {
            let (pending, visible) = (self.path(partition, &part, "pending"), self.path(partition, &part, ""));
            if pending.exists() {
                std::fs::rename(&pending, &visible).map_err(|e| io_error("commit", &pending, e))?;
            }
        }
        // Partition commit: the partitions complete now.
        let newest = part.open.iter().map(|(_, t, _)| *t).max().unwrap_or(i64::MIN);
        let mut done = BTreeSet::new();
        for (partition, time, created) in &part.open {
            let complete = part.last
                || if self.commit.partition_time {
                    time.saturating_add(self.commit.delay_ms) < newest
                } else {
                    created.saturating_add(self.commit.delay_ms) <= now_ms()
                };
            if complete {
                self.mark_done(partition)?;
                done.insert(partition.clone());
            }
        }
        // What a restored transaction still carried open stays open here.
        for (partition, time, created) in part.open {
            if !done.contains(&partition) {
                self.open.entry(partition).or_insert((time, created));
            }
        }
        for partition in done {
            self.open.remove(&partition);
        }
        Ok(())
    }

    fn abort(&mut self, part: PartitionedPart) -> FunctionResult {
        self.writers.clear();
        for partition in &part.partitions {
            for state in ["inprogress", "pending"] {
                let _ = std::fs::remove_file(self.path(partition, &part, state));
            }
        }
        Ok(())
    }

    fn start_attempt(&mut self, attempt: u64) {
        self.attempt = attempt;
    }

    fn abort_leftovers(&mut self, subtask: SubtaskIndex, parallelism: u32) -> FunctionResult {
        let this_attempt = format!("-{:016x}.", self.attempt);
        let mut dirs = vec![self.dir.as_ref().clone()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.contains(&this_attempt) {
                    continue;
                }
                let writer =
                    name.strip_prefix(".part-").and_then(|r| r.split('-').next()).and_then(|s| s.parse::<u32>().ok());
                if writer.is_some_and(|s| s % parallelism == subtask.0) {
                    std::fs::remove_file(&path).map_err(|e| io_error("remove leftover", &path, e))?;
                }
            }
        }
        Ok(())
    }

    fn end_of_input(&mut self) {
        self.ended = true;
    }
}

/// The partition commit options of a table.
pub fn commit_options(options: &BTreeMap<String, String>) -> Result<PartitionCommit, String> {
    let trigger = options.get("sink.partition-commit.trigger").map(String::as_str).unwrap_or("process-time");
    let partition_time = match trigger {
        "partition-time" => true,
        "process-time" => false,
        other => {
            return Err(format!(
                "'sink.partition-commit.trigger' must be 'partition-time' or 'process-time', not '{other}'"
            ))
        }
    };
    let delay_ms = match options.get("sink.partition-commit.delay") {
        None => 0,
        Some(d) => {
            parse_duration(d).ok_or_else(|| format!("'sink.partition-commit.delay' is not a duration: '{d}'"))? as i64
        }
    };
    let mut success_file = None;
    if let Some(kinds) = options.get("sink.partition-commit.policy.kind") {
        for kind in kinds.split(',').map(str::trim) {
            match kind {
                "success-file" => {
                    success_file = Some(
                        options
                            .get("sink.partition-commit.success-file.name")
                            .cloned()
                            .unwrap_or_else(|| "_SUCCESS".into()),
                    )
                }
                other => {
                    return Err(format!(
                        "the partition commit policy '{other}' is not supported (eddy writes 'success-file')"
                    ))
                }
            }
        }
    }
    let pattern = options.get("partition.time-extractor.timestamp-pattern").cloned().unwrap_or_else(|| "$dt".into());
    Ok(PartitionCommit { success_file, partition_time, delay_ms, pattern })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_escaped_as_flink_escapes_them() {
        assert_eq!(escape_path_name("09:05"), "09%3A05");
        assert_eq!(escape_path_name("2015-07-15"), "2015-07-15");
        assert_eq!(escape_path_name("a/b=c"), "a%2Fb%3Dc");
    }
}
