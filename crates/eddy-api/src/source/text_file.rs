//! Lines of text files.

use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;

const POSITIONS_STATE: &str = "text-file-positions";

/// Reads a file, or every file of a directory (sorted by name, spread round-robin over the
/// subtasks). Each subtask keeps `(file, byte offset)` of the files it still has to read
/// in operator state.
#[derive(Debug)]
pub struct TextFileSource {
    path: PathBuf,
    /// Files still to read with the byte offset reached.
    positions: Vec<(String, u64)>,
    reader: Option<BufReader<File>>,
    line: String,
}

impl Clone for TextFileSource {
    fn clone(&self) -> Self {
        Self::new(self.path.clone())
    }
}

impl TextFileSource {
    pub fn new(path: PathBuf) -> Self {
        Self { path, positions: Vec::new(), reader: None, line: String::new() }
    }

    fn files(&self) -> Result<Vec<PathBuf>, String> {
        let what = |e: std::io::Error| {
            format!("cannot read text file source path '{}': {e}", self.path.display(), e = eddy_types::chain(&e))
        };
        let metadata = std::fs::metadata(&self.path).map_err(what)?;
        if !metadata.is_dir() {
            return Ok(vec![self.path.clone()]);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.path)
            .map_err(what)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        Ok(files)
    }

    fn descriptor() -> ListStateDescriptor<(String, u64)> {
        ListStateDescriptor::new(POSITIONS_STATE)
    }
}

impl RichFunction for TextFileSource {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let (index, parallelism) = (ctx.index_of_this_subtask().0 as usize, ctx.number_of_parallel_subtasks() as usize);
        let store = ctx.operator_state();
        let restored = store.is_restored();
        let state = store.list_state(&Self::descriptor())?;
        self.positions = if restored {
            state.get()
        } else {
            let files = self.files()?;
            files
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % parallelism == index)
                .map(|(_, f)| (f.to_string_lossy().into_owned(), 0))
                .collect()
        };
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&Self::descriptor())?.update(self.positions.clone());
        Ok(())
    }
}

impl SourceFunction<String> for TextFileSource {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, String>) -> FunctionResult<SourceStep> {
        let Some((path, offset)) = self.positions.first_mut() else {
            return Ok(SourceStep::Finished);
        };
        if self.reader.is_none() {
            let mut file = File::open(&*path)
                .map_err(|e| format!("cannot open text file '{path}': {e}", e = eddy_types::chain(&e)))?;
            file.seek(SeekFrom::Start(*offset))
                .map_err(|e| format!("cannot seek in text file '{path}': {e}", e = eddy_types::chain(&e)))?;
            self.reader = Some(BufReader::new(file));
        }
        let reader = self.reader.as_mut().expect("opened above");
        for _ in 0..max_records {
            self.line.clear();
            let read = reader
                .read_line(&mut self.line)
                .map_err(|e| format!("cannot read text file '{path}': {e}", e = eddy_types::chain(&e)))?;
            if read == 0 {
                self.positions.remove(0);
                self.reader = None;
                return Ok(SourceStep::More);
            }
            *offset += read as u64;
            let line = self.line.strip_suffix('\n').unwrap_or(&self.line);
            out.collect(line.strip_suffix('\r').unwrap_or(line).to_string());
        }
        Ok(SourceStep::More)
    }
}
