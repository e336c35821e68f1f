//! Records to stdout, Flink style.

use crate::function::{FunctionResult, RichFunction, RuntimeContext, Sink};
use std::fmt::Debug;
use std::io::Write;
use std::marker::PhantomData;

/// Prints `record` (parallelism 1) or `N> record` (N = subtask + 1), as Flink's `print()`.
pub struct PrintSink<T> {
    prefix: String,
    _type: PhantomData<fn(T)>,
}

impl<T> Clone for PrintSink<T> {
    fn clone(&self) -> Self {
        Self { prefix: self.prefix.clone(), _type: PhantomData }
    }
}

impl<T> PrintSink<T> {
    pub fn new() -> Self {
        Self { prefix: String::new(), _type: PhantomData }
    }
}

impl<T> Default for PrintSink<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> RichFunction for PrintSink<T> {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        if ctx.number_of_parallel_subtasks() > 1 {
            self.prefix = format!("{}> ", ctx.index_of_this_subtask().0 + 1);
        }
        Ok(())
    }
}

impl<T: Debug + 'static> Sink<T> for PrintSink<T> {
    fn invoke(&mut self, value: T) -> FunctionResult {
        writeln!(std::io::stdout().lock(), "{}{value:?}", self.prefix)?;
        Ok(())
    }
}
