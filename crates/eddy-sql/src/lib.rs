//! Flink SQL on eddy (under construction).
#![forbid(unsafe_code)]
pub mod catalog;
pub mod error;
pub mod expr;
pub mod parser;
pub mod plan;
pub mod row;
pub mod types;
pub mod value;
