//! Where a source starts (Flink's `OffsetsInitializer`).

/// Where the partitions found at the first start begin. Partitions found later always
/// begin at their earliest offset, so that nothing written between a partition's
/// creation and its discovery is lost (Flink's FLIP-288).
///
/// `Latest`, `Timestamp` and `Committed` are resolved to concrete offsets once, by the
/// split enumerator, before the partition is handed to its reader: a restore uses the
/// resolved offsets, never "latest" again (Flink's FLINK-28303).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartingOffsets {
    Earliest,
    Latest,
    /// The first record at or after this timestamp (epoch ms); the end if none.
    Timestamp(i64),
    /// The consumer group's committed offsets; partitions without one use the fallback.
    Committed(OffsetResetStrategy),
    /// Explicit offsets per `(topic, partition)`; other partitions use the fallback.
    Offsets(Vec<(String, i32, i64)>, OffsetResetStrategy),
}

/// Where a partition without a usable offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetResetStrategy {
    Earliest,
    Latest,
    /// No fallback: fail naming the partition.
    None,
}
