//! Event time: where a record's timestamp comes from, and how watermarks are made.
//!
//! Records carry no timestamp field. A stream's timestamps are a function of its records,
//! set by [`crate::DataStream::assign_timestamps_and_watermarks`] (or
//! [`crate::DataStream::with_timestamps`]) and kept by the operations that pass records on
//! unchanged (`filter`, `key_by`, `union`, the partitionings); the operators that need a
//! record's event time (windows, `ctx.timestamp()`) call it. So batches between subtasks
//! stay plain vectors of records, and jobs without event time pay nothing for it. A stream
//! made by `map` or a window has no timestamps until it is given some again.
//!
//! Watermarks are made by a [`WatermarkStrategy`]'s generator, per subtask, right after
//! the source, and travel in band: each task's watermark is the minimum over its input
//! channels (see `eddy_runtime::task::WatermarkValve`). Sources of one alignment group
//! pause while they are too far ahead of the group's slowest (`alignment.rs`).

mod alignment;
mod ingestion;
mod strategy;

pub(crate) use alignment::AlignmentMember;
pub use alignment::WatermarkAlignment;
pub use ingestion::Ingested;
pub(crate) use strategy::WatermarkForward;

pub use strategy::{
    BoundedOutOfOrderness, WatermarkGenerator, WatermarkOutput, WatermarkStrategy, DEFAULT_AUTO_WATERMARK_INTERVAL_MS,
};

use std::sync::Arc;

/// A record's event time, epoch ms (Flink's `TimestampAssigner`).
pub type TimestampFn<T> = Arc<dyn Fn(&T) -> i64 + Send + Sync>;
