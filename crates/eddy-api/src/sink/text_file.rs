//! Records as lines of text files.

use crate::function::{FunctionResult, RichFunction, RuntimeContext, Sink};
use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::marker::PhantomData;
use std::path::PathBuf;

/// Writes `record` lines (`Display`): to `path` at parallelism 1, else to `path/N` for
/// subtask N (1-based), as Flink's `writeAsText`.
pub struct TextFileSink<T> {
    path: PathBuf,
    target: PathBuf,
    writer: Option<BufWriter<File>>,
    _type: PhantomData<fn(T)>,
}

impl<T> Clone for TextFileSink<T> {
    fn clone(&self) -> Self {
        Self::new(self.path.clone())
    }
}

impl<T> TextFileSink<T> {
    pub fn new(path: PathBuf) -> Self {
        Self { target: path.clone(), path, writer: None, _type: PhantomData }
    }
}

impl<T> RichFunction for TextFileSink<T> {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.target = if ctx.number_of_parallel_subtasks() == 1 {
            self.path.clone()
        } else {
            std::fs::create_dir_all(&self.path).map_err(|e| {
                format!("cannot create output directory '{}': {e}", self.path.display(), e = eddy_types::chain(&e))
            })?;
            self.path.join((ctx.index_of_this_subtask().0 + 1).to_string())
        };
        if let Some(parent) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                format!("cannot create directory '{}': {e}", parent.display(), e = eddy_types::chain(&e))
            })?;
        }
        let file = File::create(&self.target).map_err(|e| {
            format!("cannot create output file '{}': {e}", self.target.display(), e = eddy_types::chain(&e))
        })?;
        self.writer = Some(BufWriter::new(file));
        Ok(())
    }
}

impl<T: Display + 'static> Sink<T> for TextFileSink<T> {
    fn invoke(&mut self, value: T) -> FunctionResult {
        let writer = self.writer.as_mut().ok_or("text file sink used before open")?;
        writeln!(writer, "{value}")
            .map_err(|e| format!("cannot write '{}': {e}", self.target.display(), e = eddy_types::chain(&e)))?;
        Ok(())
    }

    fn finish(&mut self) -> FunctionResult {
        if let Some(writer) = self.writer.as_mut() {
            writer
                .flush()
                .map_err(|e| format!("cannot write '{}': {e}", self.target.display(), e = eddy_types::chain(&e)))?;
        }
        Ok(())
    }
}
