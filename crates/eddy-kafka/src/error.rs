//! The connector's one error type.

/// What went wrong talking to Kafka, and where.
#[derive(Debug, thiserror::Error)]
pub enum KafkaConnectorError {
    /// librdkafka refused or failed an operation.
    #[error("Kafka {action} failed (brokers {brokers}): {source}")]
    Client {
        action: String,
        brokers: String,
        #[source]
        source: Box<rdkafka::error::KafkaError>,
    },
    /// A record the deserialization schema could not read.
    #[error("cannot deserialize the Kafka record at topic {topic}, partition {partition}, offset {offset}: {message}")]
    Deserialize { topic: String, partition: i32, offset: i64, message: String },
    /// The configuration cannot work (named setting, why).
    #[error("invalid Kafka connector configuration: {0}")]
    Config(String),
    /// The exactly-once sink found Kafka ahead of the restored state.
    #[error("{0}")]
    Recovery(String),
    /// A wait for the brokers ran out.
    #[error("Kafka {action} timed out after {seconds} s (brokers {brokers})")]
    Timeout { action: String, brokers: String, seconds: u64 },
}

impl KafkaConnectorError {
    pub(crate) fn client(action: impl Into<String>, brokers: &str, source: rdkafka::error::KafkaError) -> Self {
        Self::Client { action: action.into(), brokers: brokers.to_string(), source: Box::new(source) }
    }
}
