//! Event time per split (Flink's per-split watermarks in its `SourceOperator`): a
//! watermark generator per partition; the source's watermark is the lowest of those
//! neither idle nor finished.

use super::KafkaSource;
use eddy_api::time::{WatermarkGenerator, WatermarkOutput};
use std::time::Instant;

/// One split's event time: its own watermark generator (Flink's per-split watermarks),
/// the highest watermark it made, and whether records came lately.
pub(super) struct SplitClock<T> {
    generator: Box<dyn WatermarkGenerator<T>>,
    output: WatermarkOutput,
    watermark: i64,
    active_since_last_look: bool,
    last_active: Instant,
    idle: bool,
}

impl<T: 'static> SplitClock<T> {
    /// A record of this split at `timestamp` was emitted.
    #[inline]
    pub(super) fn on_record(&mut self, record: &T, timestamp: i64) {
        self.generator.on_event(record, timestamp, &mut self.output);
        self.active_since_last_look = true;
    }
}

impl<T: 'static> KafkaSource<T> {
    /// One clock per split, new splits' clocks made here.
    pub(super) fn sync_clocks(&mut self) {
        let Some(strategy) = &self.watermarks else { return };
        let splits = self.reader.as_deref().map_or(0, |r| r.splits.len());
        while self.clocks.len() < splits {
            self.clocks.push(SplitClock {
                generator: strategy.create_watermark_generator(),
                output: WatermarkOutput::default(),
                watermark: i64::MIN,
                active_since_last_look: false,
                last_active: Instant::now(),
                idle: false,
            });
        }
    }

    /// The source's watermark: each split's generator asked (periodically), idle splits
    /// found, the lowest of the splits neither idle nor finished emitted; no such split:
    /// idle.
    pub(super) fn split_watermarks(&mut self, output: &mut WatermarkOutput) {
        let Some(strategy) = &self.watermarks else { return };
        let Some(reader) = self.reader.as_deref() else { return };
        let now = Instant::now();
        let periodic = self.next_periodic.is_none_or(|at| now >= at);
        if periodic {
            self.next_periodic = Some(now + strategy.auto_watermark_interval());
        }
        let idleness = strategy.idleness();
        let mut lowest: Option<i64> = None;
        for (split, clock) in reader.splits.iter().zip(&mut self.clocks) {
            if periodic {
                clock.generator.on_periodic_emit(&mut clock.output);
                if std::mem::take(&mut clock.active_since_last_look) {
                    clock.last_active = now;
                    clock.idle = false;
                } else if idleness.is_some_and(|timeout| now.duration_since(clock.last_active) >= timeout) {
                    clock.idle = true;
                }
            }
            if let Some(watermark) = clock.output.take_watermark() {
                clock.watermark = clock.watermark.max(watermark);
            }
            // Finished and idle splits hold nobody back.
            if !split.is_finished() && !clock.idle {
                lowest = Some(lowest.map_or(clock.watermark, |l| l.min(clock.watermark)));
            }
        }
        match lowest {
            Some(watermark) => output.emit_watermark(watermark),
            // No split, or all idle: downstream does not wait for this reader.
            None => output.mark_idle(),
        }
    }
}
