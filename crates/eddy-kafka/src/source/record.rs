//! What the source hands a deserialization schema, and the schema itself.

use rdkafka::message::{BorrowedMessage, Headers, Message};

/// One record as read from Kafka, borrowed from the consumer's buffer (no copy until the
/// schema makes its value).
pub struct KafkaRecord<'a> {
    message: &'a BorrowedMessage<'a>,
}

impl<'a> KafkaRecord<'a> {
    pub(crate) fn new(message: &'a BorrowedMessage<'a>) -> Self {
        Self { message }
    }
    pub fn topic(&self) -> &str {
        self.message.topic()
    }
    pub fn partition(&self) -> i32 {
        self.message.partition()
    }
    pub fn offset(&self) -> i64 {
        self.message.offset()
    }
    /// The record's timestamp (create or log-append time), epoch ms.
    pub fn timestamp(&self) -> Option<i64> {
        self.message.timestamp().to_millis()
    }
    pub fn key(&self) -> Option<&[u8]> {
        self.message.key()
    }
    pub fn value(&self) -> Option<&[u8]> {
        self.message.payload()
    }
    /// The headers, in order, each name with its value (`None`: a null value).
    pub fn headers(&self) -> Vec<(&str, Option<&[u8]>)> {
        self.message.headers().map(|h| h.iter().map(|h| (h.key, h.value)).collect()).unwrap_or_default()
    }
}

/// Turns Kafka records into the stream's values (Flink's `KafkaRecordDeserializationSchema`).
/// `Ok(None)` skips a record; an error fails the job naming topic, partition and offset
/// (see [`BadRecord`] to route such records instead).
pub trait KafkaDeserializationSchema<T>: Send + Sync + 'static {
    fn deserialize(&self, record: &KafkaRecord<'_>) -> Result<Option<T>, String>;
}

impl<T, F> KafkaDeserializationSchema<T> for F
where
    F: Fn(&KafkaRecord<'_>) -> Result<Option<T>, String> + Send + Sync + 'static,
{
    fn deserialize(&self, record: &KafkaRecord<'_>) -> Result<Option<T>, String> {
        self(record)
    }
}

/// A record the schema could not read, as a value: a source built with
/// `KafkaSource::routing_bad_records` emits `Err(BadRecord)` for it instead of failing,
/// for the job to send to a side output (`ctx.output(tag, bad)` in a process function).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BadRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub error: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// UTF-8 values as `String`s (records without a value are skipped).
pub fn utf8_values(record: &KafkaRecord<'_>) -> Result<Option<String>, String> {
    match record.value() {
        None => Ok(None),
        Some(bytes) => std::str::from_utf8(bytes)
            .map(|s| Some(s.to_string()))
            .map_err(|e| format!("value is not UTF-8: {e}", e = eddy_types::chain(&e))),
    }
}
