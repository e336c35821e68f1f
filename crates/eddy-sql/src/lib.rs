//! Flink SQL on eddy (under construction).
#![forbid(unsafe_code)]
pub mod error;
pub mod expr;
pub mod parser;
pub mod row;
pub mod types;
pub mod value;
