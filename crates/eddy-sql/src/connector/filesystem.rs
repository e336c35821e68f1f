//! The `filesystem` connector: a file or a directory of files, read in `format` (each file
//! by one subtask, its position in the checkpoints); written exactly once, in part files
//! that become visible when the checkpoint after them completes.

use super::{check_options, format_of};
use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::format::Format;
use crate::row::Row;
use eddy_api::sink::ExactlyOnceFileSink;
use eddy_api::source::TextFileSource;
use eddy_api::{Context, DataStream, DataStreamSink, Env, FunctionResult, ProcessFunction, RichFunction};
use eddy_runtime::Collector;
use std::path::PathBuf;

const OPTIONS: &[&str] = &[
    "path",
    "format",
    "source.monitor-interval",
    "source.path.regex-pattern",
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.rolling-policy.check-interval",
    "sink.rolling-policy.inactivity-interval",
    "sink.parallelism",
    "sink.shuffle-by-partition.enable",
    "partition.default-name",
    "sink.partition-commit.trigger",
    "sink.partition-commit.delay",
    "sink.partition-commit.watermark-time-zone",
    "sink.partition-commit.policy.kind",
    "sink.partition-commit.success-file.name",
    "partition.time-extractor.kind",
    "partition.time-extractor.timestamp-pattern",
    "partition.time-extractor.timestamp-formatter",
    "auto-compaction",
    "compaction.file-size",
];

pub fn check(table: &CatalogTable, sink: bool) -> Result<(), SqlError> {
    let format = table.option("format").unwrap_or("");
    check_options(table, "filesystem", OPTIONS, Some(format))?;
    path_of(table)?;
    format_of(table)?;
    if sink {
        super::partitioned::commit_options(&table.options).map_err(|m| SqlError::table(&table.name, m))?;
    }
    if !sink && !table.partition_keys.is_empty() {
        return Err(SqlError::unsupported(
            Some(table.location),
            format!("reading the partitioned filesystem table '{}'", table.name),
        ));
    }
    Ok(())
}

/// The `path` option, `file://` stripped.
pub fn path_of(table: &CatalogTable) -> Result<PathBuf, SqlError> {
    let path = table
        .option("path")
        .ok_or_else(|| SqlError::table(&table.name, "the filesystem connector needs the option 'path'"))?;
    let path = path.strip_prefix("file://").unwrap_or(path);
    if path.contains("://") {
        return Err(SqlError::table(&table.name, format!("the path '{path}' is not a local path (file:// or none)")));
    }
    Ok(PathBuf::from(path))
}

/// Lines to rows; a line that is not a row fails the job, naming it.
#[derive(Clone)]
struct Decode {
    format: Format,
    table: String,
}

impl RichFunction for Decode {}

impl ProcessFunction<String, Row> for Decode {
    fn process_element(
        &mut self,
        line: String,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let mut rows = Vec::new();
        self.format.decode(&line, &mut rows).map_err(|e| format!("table '{}': {e}", self.table))?;
        for row in rows {
            out.collect(row);
        }
        Ok(())
    }
}

/// Every row of the table's file, or of the files of its directory (a lookup join's
/// table, read whole when the join starts, as Flink's filesystem lookup source reads it).
pub fn read_all(table: &CatalogTable) -> Result<Vec<Row>, SqlError> {
    let path = path_of(table)?;
    let format = format_of(table)?;
    let io = |e: std::io::Error, p: &std::path::Path| SqlError::Io { path: p.display().to_string(), source: e };
    let mut files = Vec::new();
    if path.is_dir() {
        for entry in std::fs::read_dir(&path).map_err(|e| io(e, &path))? {
            let file = entry.map_err(|e| io(e, &path))?.path();
            let hidden =
                file.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') || n.starts_with('_'));
            if file.is_file() && !hidden {
                files.push(file);
            }
        }
        files.sort();
    } else {
        files.push(path);
    }
    let mut rows = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| io(e, &file))?;
        for (n, line) in text.lines().enumerate() {
            format
                .decode(line, &mut rows)
                .map_err(|e| SqlError::table(&table.name, format!("{}, line {}: {e}", file.display(), n + 1)))?;
        }
    }
    Ok(rows)
}

pub fn source(table: &CatalogTable, env: &Env, uid: &str) -> Result<DataStream<Row>, SqlError> {
    let path = path_of(table)?;
    if !path.exists() {
        return Err(SqlError::table(&table.name, format!("the path '{}' does not exist", path.display())));
    }
    let format = format_of(table)?;
    Ok(env
        .add_parallel_source(TextFileSource::new(path))
        .name(&format!("{} files", table.name))
        .uid(&format!("{uid}-files"))
        .process(Decode { format, table: table.name.clone() }))
}

pub fn sink(table: &CatalogTable, rows: DataStream<Row>) -> Result<DataStreamSink, SqlError> {
    let path = path_of(table)?;
    let format = format_of(table)?;
    if !table.partition_keys.is_empty() {
        let keys: Vec<(usize, String)> = table
            .partition_keys
            .iter()
            .map(|k| (table.physical.iter().position(|f| &f.name == k).expect("checked: a physical column"), k.clone()))
            .collect();
        let data_fields: Vec<crate::types::Field> =
            table.physical.iter().filter(|f| !table.partition_keys.contains(&f.name)).cloned().collect();
        let format = Format::new(table.option("format").unwrap_or(""), &table.options, &data_fields)
            .map_err(|m| SqlError::table(&table.name, m))?;
        let commit = super::partitioned::commit_options(&table.options).map_err(|m| SqlError::table(&table.name, m))?;
        let marks_done = commit.success_file.is_some();
        let files = super::partitioned::PartitionedFiles::new(path, format, keys, commit);
        let sink = rows.add_sink(eddy_api::sink::TwoPhaseCommitSink::new(files));
        // One writer decides when a partition is complete (Flink has one committer): with
        // several, one could mark a partition done while another still writes into it.
        return Ok(if marks_done { sink.set_parallelism(1) } else { sink });
    }
    std::fs::create_dir_all(&path)
        .map_err(|e| SqlError::table(&table.name, format!("cannot create '{}': {e}", path.display())))?;
    Ok(rows.map(move |row: Row| format.encode(&row)).add_sink(ExactlyOnceFileSink::new_in(path)))
}
