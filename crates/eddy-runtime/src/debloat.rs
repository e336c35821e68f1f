//! Buffer debloating (Flink's `taskmanager.network.memory.buffer-debloat.*`, 1.14): the
//! records in flight on a channel follow a target *time* instead of a fixed count.
//!
//! A checkpoint barrier waits behind every record queued before it. With fixed batches
//! of [`BATCH_RECORDS_MAX`](crate::channel::BATCH_RECORDS_MAX) records and a queue of
//! several batches, a consumer that takes 10 ms per record has many seconds of records
//! in front of each barrier, and aligned checkpoints stop completing exactly when the job
//! is under backpressure. Debloating measures how fast each channel drains and shrinks
//! the batches, so that a full queue holds about `target` worth of records:
//!
//! ```text
//! batch records = throughput (records/s) × target / queue capacity (batches)
//! ```
//!
//! Flink measures the throughput at the consumer and tells the producer a buffer size.
//! Here the producer measures it itself: a writer blocked on a full queue sends exactly as
//! fast as the consumer takes, and a writer that is not blocked sends as fast as it
//! produces, which bounds what is in flight once the queue is full, because then it is
//! blocked. A falling rate counts at once, and a blocked writer ends its periods while it
//! waits, so a consumer that slows down is followed within a period or two (the full
//! batches already queued still drain first, as Flink's full buffers do). So nothing travels back
//! from the consumer, in-process or across processes. Across processes a channel holds
//! more than its queue: the frames its consumer's credits let through. So the writer
//! counts the credits as queue capacity too, and a frame (one credit) carries one batch
//! instead of packing the queue into a network buffer.

use std::time::{Duration, Instant};

/// How long the in-flight records of a channel should take to drain (Flink's
/// `buffer-debloat.target`, 1 s by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BufferDebloat {
    pub target: Duration,
}

impl BufferDebloat {
    /// Flink's default target.
    pub const DEFAULT_TARGET: Duration = Duration::from_secs(1);

    pub fn new(target: Duration) -> Self {
        Self { target }
    }
}

impl Default for BufferDebloat {
    fn default() -> Self {
        Self::new(Self::DEFAULT_TARGET)
    }
}

/// How often a writer recomputes its batch sizes (Flink's `buffer-debloat.period`).
pub const DEBLOAT_PERIOD: Duration = Duration::from_millis(200);

/// Weight of the newest period in the smoothed throughput when it rises (Flink averages
/// over a window of samples; an exponential average needs no history).
const SMOOTHING: f64 = 0.3;

/// The batch sizes of one writer's channels: what each channel took in the current
/// period, its smoothed throughput, and the batch size that follows from it.
#[derive(Debug)]
pub struct BatchSizer {
    target_s: f64,
    period_start: Instant,
    /// Per channel: records sent this period, smoothed records/s (`None` until the first
    /// period), queue capacity in batches, and the batch size now.
    channels: Vec<ChannelRate>,
    max_records: usize,
}

#[derive(Debug, Clone)]
struct ChannelRate {
    sent: u64,
    rate: Option<f64>,
    capacity: usize,
    batch: usize,
}

impl BatchSizer {
    /// Sizes for channels whose queues hold `capacities` batches each, up to `max_records`
    /// records a batch. Batches start at one record: what is queued before the first
    /// measurement cannot be taken back, and full batches in front of a slow consumer
    /// would hold the first barriers for minutes. A fast channel reaches full batches
    /// after one period.
    pub fn new(config: BufferDebloat, capacities: &[usize], max_records: usize, now: Instant) -> Self {
        let max_records = max_records.max(1);
        let channels = capacities
            .iter()
            .map(|&capacity| ChannelRate { sent: 0, rate: None, capacity: capacity.max(1), batch: 1 })
            .collect();
        Self { target_s: config.target.as_secs_f64(), period_start: now, channels, max_records }
    }

    /// The records a batch on `channel` holds at most, now.
    #[inline]
    pub fn batch(&self, channel: usize) -> usize {
        self.channels[channel].batch
    }

    /// Every channel's batch size now, into `sizes` (one per channel).
    pub fn copy_sizes(&self, sizes: &mut [usize]) {
        for (size, channel) in sizes.iter_mut().zip(&self.channels) {
            *size = channel.batch;
        }
    }

    /// `records` went out on `channel`; at the end of a period every channel's size is
    /// computed anew. True if the sizes were.
    pub fn sent(&mut self, channel: usize, records: usize, now: Instant) -> bool {
        self.channels[channel].sent += records as u64;
        self.elapse(now)
    }

    /// Time passes (a writer blocked on a full queue looks every so often): ends the
    /// period if it is over. True if the sizes were computed anew.
    pub fn elapse(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.period_start);
        if elapsed < DEBLOAT_PERIOD {
            return false;
        }
        self.period_start = now;
        let seconds = elapsed.as_secs_f64();
        for channel in &mut self.channels {
            let measured = channel.sent as f64 / seconds;
            channel.sent = 0;
            // Down at once, up smoothed: a consumer that slows down must not find seconds
            // of full batches queued while an average catches up, and a queue too short
            // for a while costs only a little throughput.
            let rate = match channel.rate {
                Some(previous) if measured > previous => previous + SMOOTHING * (measured - previous),
                _ => measured,
            };
            channel.rate = Some(rate);
            let wanted = rate * self.target_s / channel.capacity as f64;
            channel.batch = (wanted as usize).clamp(1, self.max_records);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_channel_gets_batches_that_drain_within_the_target() {
        let start = Instant::now();
        let mut sizer = BatchSizer::new(BufferDebloat::new(Duration::from_secs(1)), &[8, 8], 1024, start);
        assert_eq!((sizer.batch(0), sizer.batch(1)), (1, 1), "single records until measured");
        // Channel 0 drains 100 records/s, channel 1 a million.
        let mut now = start;
        for _ in 0..50 {
            now += Duration::from_millis(10);
            sizer.sent(0, 1, now);
            sizer.sent(1, 10_000, now);
        }
        // 100 records/s × 1 s over 8 batches: 12 records a batch, so 96 in a full queue.
        assert_eq!(sizer.batch(0), 12);
        assert_eq!(sizer.batch(1), 1024, "a fast channel keeps full batches");
    }

    #[test]
    fn a_consumer_that_slows_down_is_followed_within_a_period() {
        let start = Instant::now();
        let mut sizer = BatchSizer::new(BufferDebloat::default(), &[8], 1024, start);
        let mut now = start;
        for _ in 0..20 {
            now += DEBLOAT_PERIOD;
            sizer.sent(0, 1_000_000, now);
        }
        assert_eq!(sizer.batch(0), 1024);
        // Blocked from now on: a period passes with nothing sent.
        now += DEBLOAT_PERIOD;
        assert!(sizer.elapse(now));
        assert_eq!(sizer.batch(0), 1, "nothing drained: single records");
    }

    #[test]
    fn a_channel_that_took_nothing_falls_to_single_records_and_recovers() {
        let start = Instant::now();
        let mut sizer = BatchSizer::new(BufferDebloat::default(), &[4], 1024, start);
        assert!(sizer.sent(0, 0, start + DEBLOAT_PERIOD));
        assert_eq!(sizer.batch(0), 1);
        let mut now = start + DEBLOAT_PERIOD;
        for _ in 0..20 {
            now += DEBLOAT_PERIOD;
            sizer.sent(0, 1_000_000, now);
        }
        assert_eq!(sizer.batch(0), 1024);
    }
}
