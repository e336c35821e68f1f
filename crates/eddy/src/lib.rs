//! eddy: a stateful stream processor in the model of Apache Flink.
//!
//! This crate is what a job depends on: it re-exports the DataStream API ([`Env`],
//! [`DataStream`], [`KeyedStream`], the function traits), the state types ([`state`]) and
//! the runtime's results and errors, and [`log_to_stderr`] for what a running job logs.
//! [`cluster`] is how a program takes a cluster role (JobManager, TaskManager, job
//! control) and submits its job to a cluster, both explicit calls in its `main`. The
//! `eddy` binary is the command line.
//!
//! What a job uses beyond that comes with a feature, so that a job compiles only what it
//! uses: `rocksdb` (the RocksDB state backend), `kafka` (the Kafka connector), `web` (the
//! REST API, dashboard and `/metrics` of `--rest-bind`) and `object-store` (checkpoints at
//! `s3://` locations; local directories need nothing); `testing` brings test harnesses
//! (Apache Kafka brokers, with `kafka`) for a job's own tests.
//!
//! ```
//! use eddy::prelude::*;
//!
//! let env = Env::new();
//! env.set_parallelism(2);
//! let out = CollectSink::new();
//! env.from_collection(vec!["a b".to_string(), "b c".to_string(), "b".to_string()])
//!     .flat_map(|line: String, out: &mut Collector<'_, (String, u64)>| {
//!         for word in line.split(' ') {
//!             out.collect((word.to_string(), 1));
//!         }
//!     })
//!     .key_by(|(word, _)| word.clone())
//!     .reduce(|(w, a), (_, b)| (w, a + b))
//!     .add_sink(out.clone());
//! env.execute("word count").unwrap();
//! let mut counts = out.take();
//! counts.sort();
//! assert_eq!(counts.last(), Some(&("c".to_string(), 1)));
//! ```

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod cluster;

/// Connectors to outside systems, each behind a feature of its own.
pub mod connector {
    /// Kafka: `KafkaSource` and `KafkaSink` (feature `kafka`).
    #[cfg(feature = "kafka")]
    pub use eddy_kafka as kafka;
}

/// Flink SQL (feature `sql`): the `TableEnvironment`, the catalog, the planner and the SQL
/// connectors; the CLI's `eddy sql -f script.sql`.
#[cfg(feature = "sql")]
pub use eddy_sql as sql;

/// Defaults of the runtime a job's command line may want to show.
pub mod runtime_defaults {
    /// Flink's `execution.buffer-timeout`: see `Env::set_buffer_timeout`.
    pub const BUFFER_TIMEOUT_MS: u64 = eddy_runtime::channel::DEFAULT_BUFFER_TIMEOUT_MS;
}
mod cluster_error;
mod cluster_web;
mod logging;

/// The Rust blocks of the README and of `docs/` compile (and run, unless marked `no_run`)
/// as this crate's doctests: what the documentation shows is what works.
#[cfg(doctest)]
mod documentation {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/fault-tolerance.md")]
    struct FaultTolerance;
    #[doc = include_str!("../../../docs/event-time-and-windows.md")]
    struct EventTimeAndWindows;
    #[doc = include_str!("../../../docs/joins-and-async-io.md")]
    struct JoinsAndAsyncIo;
    #[cfg(feature = "kafka")]
    #[doc = include_str!("../../../docs/kafka.md")]
    struct Kafka;
}

pub use eddy_api::*;
/// Checkpoints: their configuration, formats and storage (checkpoint directories, and the
/// object-store storage with the `object-store` feature).
pub mod checkpoint {
    pub use eddy_checkpoint::*;
    /// Where checkpoints go: the storage interface, memory, directories, and object stores
    /// (with the `object-store` feature).
    pub mod storage {
        pub use eddy_checkpoint::storage::*;
        #[cfg(feature = "object-store")]
        pub use eddy_checkpoint_object::*;
    }
}
pub use eddy_jobmaster::JobResult;
pub use eddy_runtime::graph::{Autoscaling, RestoreMode, SchedulerMode};
/// The job's accumulator of the in-flight bytes its unaligned checkpoints stored.
pub use eddy_runtime::task::IN_FLIGHT_BYTES;
pub use eddy_runtime::{CheckpointStats, Collector, FailureKind, JobError};
pub use eddy_types as types;
pub use logging::{log_to_stderr, LOG_FILTER_VAR};

/// Keyed and operator state: descriptors, handles and the state backends.
pub mod state {
    pub use eddy_state::{
        AggregateFunction, AggregatingState, AggregatingStateDescriptor, BroadcastState, DeclaredState, ListState,
        ListStateDescriptor, MapState, MapStateDescriptor, OperatorListState, OperatorStateStore,
        ReadOnlyBroadcastState, ReducingState, ReducingStateDescriptor, StateError, StateErrorKind, ValueState,
        ValueStateDescriptor,
    };
    pub use eddy_state::{
        BackendInstance, HeapStateBackend, KeyedBackendFactory, KeyedStateBackend, KeyedStateSnapshot, StateTtlConfig,
        TtlUpdateType,
    };
    #[cfg(feature = "rocksdb")]
    pub use eddy_state_rocksdb::RocksDbStateBackend;
}

/// Everything a job usually needs, in one `use`.
pub mod prelude {
    pub use crate::checkpoint;
    pub use crate::state::*;
    pub use eddy_api::sink::{CollectSink, ExactlyOnceFileSink};
    pub use eddy_api::time::WatermarkStrategy;
    pub use eddy_api::window::{
        EventTimeSessionWindows, GlobalWindows, ProcessWindowFunction, ProcessingTimeSessionWindows,
        SlidingEventTimeWindows, SlidingProcessingTimeWindows, TimeWindow, TumblingEventTimeWindows,
        TumblingProcessingTimeWindows, WindowContext,
    };
    pub use eddy_api::*;
    pub use eddy_checkpoint::restart::RestartStrategy;
    pub use eddy_jobmaster::JobResult;
    pub use eddy_runtime::graph::{RestoreMode, SchedulerMode};
    pub use eddy_runtime::{CheckpointStats, Collector, FailureKind, JobError};
}
