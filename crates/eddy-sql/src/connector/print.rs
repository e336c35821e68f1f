//! The `print` connector: each row as Flink's print sink writes it, `+I[1, abc]`, after
//! `k> ` (the subtask, from 1) when several subtasks print, and `identifier:` before that
//! when `print-identifier` is set.

use crate::row::Row;
use eddy_api::{FunctionResult, RichFunction, RuntimeContext, Sink};
use std::io::Write;

#[derive(Clone, Debug)]
pub struct PrintRowSink {
    identifier: Option<String>,
    stderr: bool,
    prefix: String,
}

impl PrintRowSink {
    pub fn new(identifier: Option<String>, stderr: bool) -> Self {
        Self { identifier, stderr, prefix: String::new() }
    }
}

impl RichFunction for PrintRowSink {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let several = ctx.number_of_parallel_subtasks() > 1;
        self.prefix = match (&self.identifier, several) {
            (Some(id), true) => format!("{id}:{}> ", ctx.index_of_this_subtask().0 + 1),
            (Some(id), false) => format!("{id}> "),
            (None, true) => format!("{}> ", ctx.index_of_this_subtask().0 + 1),
            (None, false) => String::new(),
        };
        Ok(())
    }
}

impl Sink<Row> for PrintRowSink {
    fn invoke(&mut self, row: Row) -> FunctionResult {
        let line = format!("{}{row}\n", self.prefix);
        // One write a row, so that lines of several subtasks never interleave.
        if self.stderr {
            std::io::stderr().lock().write_all(line.as_bytes())?;
        } else {
            std::io::stdout().lock().write_all(line.as_bytes())?;
        }
        Ok(())
    }

    fn finish(&mut self) -> FunctionResult {
        std::io::stdout().flush()?;
        Ok(())
    }
}
