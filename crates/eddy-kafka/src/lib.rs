//! eddy's Kafka connector, on librdkafka (the `rdkafka` crate, built from its bundled
//! sources): [`KafkaSource`] and [`KafkaSink`], with Flink's names and guarantees.
//!
//! - [`source`]: partitions are splits (Flink's FLIP-27 `KafkaPartitionSplit`), each
//!   with its next offset in the source's operator state; every subtask finds the
//!   partitions it owns by Flink's owner function, so a restore at another parallelism
//!   hands every partition to exactly one reader. Offsets go back to Kafka only after a
//!   checkpoint completes, for lag tools; a restore reads the checkpointed ones.
//! - [`sink`]: none, at-least-once (flush at every checkpoint) and exactly-once, a
//!   write-ahead sink whose transactions are short, re-done after a failure and marked
//!   in a progress topic (librdkafka cannot resume another producer's transaction, so
//!   Flink's recovery path is closed; see the README).
//! - [`admin`]: creating topics and partitions, and reading end offsets (what the
//!   benchmark's producer, the tests and consumer lag need).
//! - [`testing`]: Apache Kafka brokers on loopback for tests and benchmarks (one, shared,
//!   or a cluster whose brokers a test kills and restarts), a proxy that can cut the
//!   connection, and readers of committed output through librdkafka and Kafka's own Java
//!   consumer.
//!
//! This crate is a leaf: only jobs that use Kafka build librdkafka (the `kafka` feature of
//! the `eddy` crate).

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod admin;
mod client;
mod error;
pub mod sink;
pub mod source;
/// Apache Kafka brokers started for tests and benchmarks (processes, ports): with the
/// `testing` feature only.
#[cfg(feature = "testing")]
pub mod testing;

pub use client::KafkaProperties;
pub use error::KafkaConnectorError;
/// The librdkafka binding the connector is built on, for jobs that need it directly.
pub use rdkafka;
pub use sink::{DeliveryGuarantee, KafkaSerializationSchema, KafkaSink, MAX_UNCOMMITTED_BYTES_DEFAULT};
pub use source::{
    BadRecord, KafkaDeserializationSchema, KafkaRecord, KafkaSource, OffsetResetStrategy, StartingOffsets,
};
