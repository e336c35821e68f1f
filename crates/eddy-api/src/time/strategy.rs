//! [`WatermarkStrategy`]: a timestamp assigner and a watermark generator (Flink's
//! `WatermarkStrategy`, `WatermarkGenerator` and the built-in generators), with idleness.

use super::TimestampFn;
use std::sync::Arc;
use std::time::Duration;

/// How often periodic generators are asked for a watermark (Flink's
/// `pipeline.auto-watermark-interval`).
pub const DEFAULT_AUTO_WATERMARK_INTERVAL_MS: u64 = 200;

/// Where a generator puts watermarks and idleness. Only a watermark higher than the last
/// one emitted goes out.
#[derive(Debug, Default)]
pub struct WatermarkOutput {
    pub(crate) watermark: Option<i64>,
    pub(crate) idle: Option<bool>,
}

impl WatermarkOutput {
    /// Event time reached `timestamp`: no record at or before it is still to come.
    pub fn emit_watermark(&mut self, timestamp: i64) {
        self.watermark = Some(self.watermark.map_or(timestamp, |w| w.max(timestamp)));
        self.idle = Some(false);
    }

    /// This subtask has nothing to read for now: downstream stops waiting for it.
    pub fn mark_idle(&mut self) {
        self.idle = Some(true);
    }

    /// This subtask emits again.
    pub fn mark_active(&mut self) {
        self.idle = Some(false);
    }

    /// Takes the highest watermark emitted since the last take (for sources that combine
    /// the watermarks of their splits).
    pub fn take_watermark(&mut self) -> Option<i64> {
        self.watermark.take()
    }
}

/// Passes what a [`WatermarkOutput`] holds on downstream: a watermark only if higher
/// than the last one sent, idleness only when it changes. What the timestamps operator
/// and sources with their own watermarks share.
#[derive(Debug)]
pub(crate) struct WatermarkForward {
    pub(crate) emitted: i64,
    pub(crate) idle: bool,
}

impl Default for WatermarkForward {
    fn default() -> Self {
        Self { emitted: i64::MIN, idle: false }
    }
}

impl WatermarkForward {
    pub(crate) fn forward<L: eddy_runtime::Lifecycle + ?Sized>(
        &mut self,
        output: &mut WatermarkOutput,
        main: &mut L,
    ) -> Result<(), eddy_runtime::TaskError> {
        use eddy_types::{Watermark, WatermarkStatus};
        if let Some(watermark) = output.watermark.take() {
            if watermark > self.emitted {
                self.emitted = watermark;
                if self.idle {
                    self.idle = false;
                    main.on_watermark_status(WatermarkStatus::Active)?;
                }
                main.on_watermark(Watermark(watermark))?;
            }
        }
        match output.idle.take() {
            Some(true) if !self.idle => {
                self.idle = true;
                main.on_watermark_status(WatermarkStatus::Idle)?;
            }
            Some(false) if self.idle => {
                self.idle = false;
                main.on_watermark_status(WatermarkStatus::Active)?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Makes watermarks from the records of one subtask (Flink's `WatermarkGenerator`):
/// punctuated generators emit in `on_event`, periodic ones in `on_periodic_emit`.
pub trait WatermarkGenerator<T>: Send + Sync + 'static {
    fn on_event(&mut self, event: &T, timestamp: i64, output: &mut WatermarkOutput);
    fn on_periodic_emit(&mut self, output: &mut WatermarkOutput);
}

/// Watermarks that trail the highest timestamp seen by `max_out_of_orderness`: a record
/// more than that behind is late (Flink's `BoundedOutOfOrdernessWatermarks`). The
/// watermark is the highest timestamp − out-of-orderness − 1.
#[derive(Debug, Clone)]
pub struct BoundedOutOfOrderness {
    out_of_orderness_ms: i64,
    max_timestamp: i64,
}

impl BoundedOutOfOrderness {
    pub fn new(max_out_of_orderness: Duration) -> Self {
        let out_of_orderness_ms = max_out_of_orderness.as_millis() as i64;
        // So that the first watermark, before any record, is i64::MIN.
        Self { out_of_orderness_ms, max_timestamp: i64::MIN.saturating_add(out_of_orderness_ms + 1) }
    }
}

impl<T> WatermarkGenerator<T> for BoundedOutOfOrderness {
    fn on_event(&mut self, _event: &T, timestamp: i64, _output: &mut WatermarkOutput) {
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    fn on_periodic_emit(&mut self, output: &mut WatermarkOutput) {
        output.emit_watermark(self.max_timestamp - self.out_of_orderness_ms - 1);
    }
}

type GeneratorFactory<T> = Arc<dyn Fn() -> Box<dyn WatermarkGenerator<T>> + Send + Sync>;

/// How a stream gets timestamps and watermarks.
pub struct WatermarkStrategy<T> {
    pub(crate) generator: GeneratorFactory<T>,
    pub(crate) timestamps: Option<TimestampFn<T>>,
    pub(crate) idleness_ms: Option<u64>,
    pub(crate) interval_ms: u64,
    pub(crate) alignment: Option<super::WatermarkAlignment>,
}

impl<T> Clone for WatermarkStrategy<T> {
    fn clone(&self) -> Self {
        Self {
            generator: self.generator.clone(),
            timestamps: self.timestamps.clone(),
            idleness_ms: self.idleness_ms,
            interval_ms: self.interval_ms,
            alignment: self.alignment.clone(),
        }
    }
}

impl<T: 'static> WatermarkStrategy<T> {
    /// A custom generator, one per subtask (Flink's `forGenerator`).
    pub fn for_generator<G, F>(make: F) -> Self
    where
        G: WatermarkGenerator<T>,
        F: Fn() -> G + Send + Sync + 'static,
    {
        Self {
            generator: Arc::new(move || Box::new(make()) as Box<dyn WatermarkGenerator<T>>),
            timestamps: None,
            idleness_ms: None,
            interval_ms: DEFAULT_AUTO_WATERMARK_INTERVAL_MS,
            alignment: None,
        }
    }

    /// Timestamps that never go back (Flink's `forMonotonousTimestamps`).
    pub fn for_monotonous_timestamps() -> Self {
        Self::for_bounded_out_of_orderness(Duration::ZERO)
    }

    /// Records at most `max_out_of_orderness` behind the highest timestamp seen (Flink's
    /// `forBoundedOutOfOrderness`).
    pub fn for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> Self {
        Self::for_generator(move || BoundedOutOfOrderness::new(max_out_of_orderness))
    }

    /// Timestamps from the records (Flink's `withTimestampAssigner`).
    pub fn with_timestamp_assigner(mut self, timestamps: impl Fn(&T) -> i64 + Send + Sync + 'static) -> Self {
        self.timestamps = Some(Arc::new(timestamps));
        self
    }

    /// A subtask that emitted no record for `timeout` of processing time is idle: it
    /// holds no watermark back downstream until it emits again (Flink's `withIdleness`).
    pub fn with_idleness(mut self, timeout: Duration) -> Self {
        self.idleness_ms = Some(timeout.as_millis() as u64);
        self
    }

    /// Keeps the sources of `group` within `max_drift` of event time of the group's
    /// slowest, looking every `update_interval` (Flink's `withWatermarkAlignment`). Apply
    /// the strategy right after the source (in its task): the source is what pauses.
    pub fn with_watermark_alignment(mut self, group: &str, max_drift: Duration, update_interval: Duration) -> Self {
        self.alignment = Some(super::WatermarkAlignment::new(group, max_drift, update_interval));
        self
    }

    /// A new generator, for one subtask or one split (Flink's `createWatermarkGenerator`).
    pub fn create_watermark_generator(&self) -> Box<dyn WatermarkGenerator<T>> {
        (self.generator)()
    }

    /// The timestamp assigner, if the strategy has one.
    pub fn timestamp_assigner(&self) -> Option<TimestampFn<T>> {
        self.timestamps.clone()
    }

    /// After how long without records an input counts as idle, if at all.
    pub fn idleness(&self) -> Option<std::time::Duration> {
        self.idleness_ms.map(std::time::Duration::from_millis)
    }

    /// How often periodic generators are asked for a watermark.
    pub fn auto_watermark_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.interval_ms)
    }

    /// How often periodic generators emit (default 200 ms).
    pub fn with_auto_watermark_interval(mut self, interval: Duration) -> Self {
        self.interval_ms = (interval.as_millis() as u64).max(1);
        self
    }
}
