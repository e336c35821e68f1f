//! The `blackhole` connector: takes every row and keeps none (for benchmarks).

use crate::row::Row;
use eddy_api::{FunctionResult, RichFunction, Sink};

#[derive(Clone, Debug)]
pub struct BlackholeSink;

impl RichFunction for BlackholeSink {}

impl Sink<Row> for BlackholeSink {
    fn invoke(&mut self, row: Row) -> FunctionResult {
        std::hint::black_box(row);
        Ok(())
    }
}
