//! eddy's DataStream API: Flink's concepts with Rust idioms.
//!
//! Build a job from an [`Env`] (Flink's `StreamExecutionEnvironment`): sources give
//! [`DataStream`]s; `map`, `filter`, `flat_map`, `process`, `key_by`, `connect`, `union`
//! and the partitionings add operators; sinks end streams; [`Env::execute`] runs the job.
//! User functions implement the traits of [`function`] (or are closures for the simple
//! operators); keyed functions declare state through their [`RuntimeContext`] and set
//! timers through their context's [`TimerService`]. Event time is [`time`] (timestamps and
//! watermark strategies); [`window`] holds windows, triggers and evictors, used through
//! [`KeyedStream::window`]; [`join`] joins two streams over time (window join, coGroup,
//! interval join); [`async_io`] enriches records from external services without blocking.
//!
//! Depends on `eddy-jobmaster` (which runs the graph this crate builds, as its JobMaster)
//! and `eddy-runtime` (the data plane the graph is made of), `eddy-state`,
//! `eddy-types`, `eddy-checkpoint` (checkpoint directories among it) and `eddy-rpc` (a
//! job launched on a cluster); on tokio, whose runtime runs async I/O's requests; and,
//! only with their features, on `eddy-web` (`web`: a local job's REST server, a task
//! executor's `/metrics`) and `eddy-checkpoint-object` (`object-store`: `s3://` storage).

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod async_io;
pub mod env;
pub mod function;
pub mod join;
mod key;
mod operator;
pub mod sink;
pub mod source;
pub mod stream;
pub mod time;
pub mod web;
pub mod window;

pub use eddy_types::{CheckpointId, SubtaskIndex};
pub use env::Env;
pub use function::*;
pub use stream::{
    AllWindowedStream, BroadcastConnectedStream, ConnectedStreams, DataStream, DataStreamSink,
    KeyedBroadcastConnectedStream, KeyedConnectedStreams, KeyedStream, WindowedStream,
};

/// What a stream's records must be: cloneable (fan-out and broadcast copy them), sendable
/// to the next subtask's thread, and serializable (serde), as Flink requires a serializer
/// for every type: any edge that is not forward may cross to another process in a
/// cluster, where records travel in the compact binary form of [`eddy_types::codec`].
/// Within a process records are passed as values and never serialized. That form
/// (postcard) is not self-describing: serde attributes that need one (`flatten`,
/// `skip_serializing_if`, untagged enums) do not round-trip, so record types should not
/// use them.
pub trait Data: Clone + Send + serde::Serialize + serde::de::DeserializeOwned + 'static {}
impl<T: Clone + Send + serde::Serialize + serde::de::DeserializeOwned + 'static> Data for T {}
