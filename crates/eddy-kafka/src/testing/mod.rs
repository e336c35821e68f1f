//! Apache Kafka for tests and benchmarks, real and local: [`KafkaCluster`] formats and
//! starts Apache Kafka brokers (KRaft mode, from the jars `scripts/install-deps.sh` copies
//! from Maven Central) on free loopback ports, one or several, and SIGKILLs and restarts
//! them on their log directories; [`Proxy`] is a TCP forwarder in front of a broker that a
//! test can cut and restore; [`produce`] and the readers write and read topics, the
//! readers as `read_committed` consumers of librdkafka ([`read_committed`]) or of Kafka's
//! own Java client ([`read_committed_with_java`]), so that a librdkafka fault cannot hide
//! behind librdkafka on both sides.

mod cluster;
mod proxy;
mod records;

pub use cluster::{free_port, kafka_libs, KafkaCluster};
pub use proxy::Proxy;
pub use records::{describe_ends, produce, read_committed, read_committed_with_java, ReadRecord};
