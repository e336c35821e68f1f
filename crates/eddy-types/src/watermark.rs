//! Event time's progress: a watermark `t` says no record with a timestamp of `t` or less
//! is still to come (Flink's `Watermark`). Timestamps are milliseconds since the Unix epoch.

/// Event time has reached `timestamp` (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Watermark(pub i64);

impl Watermark {
    /// Before any event time: what a stream starts from.
    pub const MIN: Watermark = Watermark(i64::MIN);
    /// The end of event time: an input that ended emits it, closing every window.
    pub const MAX: Watermark = Watermark(i64::MAX);
}

impl std::fmt::Display for Watermark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Watermark::MIN => f.write_str("MIN"),
            Watermark::MAX => f.write_str("MAX"),
            Watermark(t) => write!(f, "{t}"),
        }
    }
}

/// Whether a stream still moves event time on (Flink's `WatermarkStatus`). An idle stream
/// (a source with nothing to read, marked idle by its watermark strategy) holds no
/// watermark back: consumers take the minimum over their active channels only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatermarkStatus {
    Active,
    Idle,
}
