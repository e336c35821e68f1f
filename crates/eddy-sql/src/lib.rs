//! Flink SQL on eddy: the planner is a user of the DataStream API (`eddy-api`), not a part
//! of it.
//!
//! A script ([`parser`]: Flink's dialect on sqlparser-rs) changes the [`catalog`] (tables
//! with their connector options, views, functions) or runs a query: the [`plan`] builder
//! resolves names and types ([`expr`]), the rules push filters down and pick join
//! strategies, and [`exec`] makes eddy operators of the plan — checkpointed, rescaled and
//! restored like any other, with uids from the statement's text. Rows ([`row`]) carry
//! Flink's row kind, so that updating results (part 2) are the same data model; every
//! plan node knows its changelog mode, and a query whose result would update is refused
//! by the planner, naming the operator. [`connector`]s and [`format`]s take Flink's option
//! names. [`TableEnvironment`] runs statements; `eddy sql -f` runs a script.
#![forbid(unsafe_code)]

pub mod catalog;
pub mod connector;
pub mod error;
pub mod exec;
pub mod expr;
pub mod format;
pub mod parser;
pub mod plan;
pub mod row;
pub mod table_env;
pub mod types;
pub mod udf;
pub mod value;

pub use error::SqlError;
pub use expr::ScalarFunction;
pub use row::{Row, RowKind};
pub use table_env::{TableEnvironment, TableResult};
pub use types::{DataType, Field, TypeKind};
pub use value::Value;
