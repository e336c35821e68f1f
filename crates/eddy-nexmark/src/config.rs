//! Generator configuration: the reference's `GeneratorConfig` together with
//! the generator-related defaults of `NexmarkConfiguration`.

use serde::{Deserialize, Serialize};

/// First person id (`GeneratorConfig.FIRST_PERSON_ID`).
pub const FIRST_PERSON_ID: u64 = 1000;
/// First auction id (`GeneratorConfig.FIRST_AUCTION_ID`).
pub const FIRST_AUCTION_ID: u64 = 1000;
/// First category id (`GeneratorConfig.FIRST_CATEGORY_ID`).
pub const FIRST_CATEGORY_ID: u64 = 10;

/// Default base time: 2015-07-15T00:00:00.000Z in epoch ms.
///
/// The Flink reference has no fixed base time: `NexmarkTableSourceFactory`
/// passes `System.currentTimeMillis()` (wall clock at job creation). This port
/// needs a deterministic default, so it uses the fixed `BASE_TIME` of the
/// original Apache Beam Nexmark suite (`NexmarkUtils.BASE_TIME`), from which
/// the Flink generator descends.
pub const DEFAULT_BASE_TIME_MS: i64 = 1_436_918_400_000;

/// Watermark delay of the reference's SQL DDL:
/// `WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND`.
pub const WATERMARK_DELAY_MS: i64 = 4_000;

/// Parameters controlling how events are synthesised.
///
/// Defaults (via [`Default`]) are the reference `NexmarkConfiguration`
/// defaults, a single generator, an unbounded event count, first event id 0
/// and [`DEFAULT_BASE_TIME_MS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GeneratorConfig {
    /// Proportions of people/auctions/bids (1 : 3 : 46).
    pub person_proportion: u64,
    pub auction_proportion: u64,
    pub bid_proportion: u64,

    /// Average event sizes the `extra` padding aims at (200/500/100 bytes).
    pub avg_person_byte_size: u64,
    pub avg_auction_byte_size: u64,
    pub avg_bid_byte_size: u64,

    /// Hot ratios: ratio r means P(hot) = 1 - 1/r (2 / 4 / 4).
    pub hot_auction_ratio: u64,
    pub hot_sellers_ratio: u64,
    pub hot_bidders_ratio: u64,

    /// Number of auctions considered in flight (100).
    pub num_in_flight_auctions: u64,
    /// Number of people considered active (1000).
    pub num_active_people: u64,

    /// Out-of-order group size (1 = events in order; reference default).
    pub out_of_order_group_size: u64,

    /// `firstEventRate`: events per second (10,000).
    pub rate_per_sec: u64,
    /// `numEventGenerators`: the reference multiplies the inter-event delay by
    /// it, so that `n` parallel generators together produce `rate_per_sec`.
    /// The Flink table source sets it to the source parallelism.
    pub num_event_generators: u64,

    /// Time of event number 0, epoch ms.
    pub base_time_ms: i64,
    /// `firstEventId`: event ids of this (sub-)generator start at
    /// `first_event_id + first_event_number`.
    pub first_event_id: u64,
    /// `firstEventNumber`: event number (for timestamps) of the first event.
    pub first_event_number: u64,
    /// `maxEvents`: number of events this (sub-)generator produces.
    pub max_events: u64,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        let mut c = GeneratorConfig {
            person_proportion: 1,
            auction_proportion: 3,
            bid_proportion: 46,
            avg_person_byte_size: 200,
            avg_auction_byte_size: 500,
            avg_bid_byte_size: 100,
            hot_auction_ratio: 2,
            hot_sellers_ratio: 4,
            hot_bidders_ratio: 4,
            num_in_flight_auctions: 100,
            num_active_people: 1000,
            out_of_order_group_size: 1,
            rate_per_sec: 10_000,
            num_event_generators: 1,
            base_time_ms: DEFAULT_BASE_TIME_MS,
            first_event_id: 0,
            first_event_number: 0,
            max_events: 0,
        };
        c.max_events = c.resolve_max_events(0);
        c
    }
}

impl GeneratorConfig {
    /// A default config with the given totals. `events_total == 0` means
    /// unbounded, resolved like the reference to
    /// `i64::MAX / (total_proportion * max(avg sizes))`.
    pub fn new(events_total: u64, first_event_id: u64, rate_per_sec: u64, base_time_ms: i64) -> Self {
        assert!(rate_per_sec > 0, "rate must be positive");
        let mut c = GeneratorConfig { first_event_id, rate_per_sec, base_time_ms, ..Default::default() };
        c.max_events = c.resolve_max_events(events_total);
        c
    }

    /// Exactly what the reference Flink table source builds
    /// (`NexmarkTableSourceFactory`): `numEventGenerators = parallelism`,
    /// `firstEventId = 1`, `firstEventNumber = 1` (so the first event id is
    /// 2). Split it with `split(parallelism)` as `NexmarkSource` does.
    pub fn flink_reference(parallelism: u64, events_total: u64, base_time_ms: i64) -> Self {
        assert!(parallelism > 0);
        let mut c = GeneratorConfig {
            num_event_generators: parallelism,
            first_event_id: 1,
            first_event_number: 1,
            base_time_ms,
            ..Default::default()
        };
        c.max_events = c.resolve_max_events(events_total);
        c
    }

    fn resolve_max_events(&self, events_total: u64) -> u64 {
        if events_total == 0 {
            let max_avg = self.avg_person_byte_size.max(self.avg_auction_byte_size).max(self.avg_bid_byte_size).max(1);
            (i64::MAX as u64) / (self.total_proportion() * max_avg)
        } else {
            events_total
        }
    }

    /// Sets the number of events (0 = unbounded, as in [`GeneratorConfig::new`]).
    pub fn with_events_total(mut self, events_total: u64) -> Self {
        self.max_events = self.resolve_max_events(events_total);
        self
    }

    #[inline]
    pub fn total_proportion(&self) -> u64 {
        self.person_proportion + self.auction_proportion + self.bid_proportion
    }

    /// Inter-event delay of one generator in µs, computed as the reference
    /// does: `1_000_000.0 / firstEventRate * numEventGenerators`.
    #[inline]
    pub fn inter_event_delay_us(&self) -> f64 {
        1_000_000.0 / self.rate_per_sec as f64 * self.num_event_generators as f64
    }

    /// Event time of the event with event number `n`
    /// (`GeneratorConfig.timestampForEvent`):
    /// `base_time_ms + trunc(n * inter_event_delay_us) / 1000`.
    #[inline]
    pub fn timestamp_for_event(&self, event_number: u64) -> i64 {
        timestamp_with_delay(self.base_time_ms, self.inter_event_delay_us(), event_number)
    }

    /// Event number of the `count`-th event of this generator (0-based).
    #[inline]
    pub fn next_event_number(&self, count: u64) -> u64 {
        self.first_event_number + count
    }

    /// Event number after the reference's out-of-order jitter
    /// (identity for the default group size 1).
    #[inline]
    pub fn next_adjusted_event_number(&self, count: u64) -> u64 {
        let n = self.out_of_order_group_size.max(1);
        let number = self.next_event_number(count);
        (number / n) * n + number.wrapping_mul(953) % n
    }

    /// Event number whose timestamp is the generator's watermark after
    /// `count` events (the reference's `nextEventNumberForWatermark`).
    #[inline]
    pub fn next_event_number_for_watermark(&self, count: u64) -> u64 {
        let n = self.out_of_order_group_size.max(1);
        (self.next_event_number(count) / n) * n
    }

    /// Event id of the `count`-th event of this generator
    /// (`firstEventId + nextAdjustedEventNumber(count)`).
    #[inline]
    pub fn event_id(&self, count: u64) -> u64 {
        self.first_event_id + self.next_adjusted_event_number(count)
    }

    /// First event id this config generates (`getStartEventId`).
    pub fn start_event_id(&self) -> u64 {
        self.first_event_id + self.first_event_number
    }

    /// One past the last event id this config generates (`getStopEventId`).
    pub fn stop_event_id(&self) -> u64 {
        self.start_event_id() + self.max_events
    }

    /// Splits into `n` sub-configs exactly as the reference's
    /// `GeneratorConfig.split`: each gets `max_events / n` events (the last
    /// one also the remainder) and a contiguous id range, consecutive
    /// `first_event_id`s; all keep the same `first_event_number`,
    /// `base_time_ms` and inter-event delay, so they run on parallel
    /// timelines that all start at the base time.
    pub fn split(&self, n: u64) -> Vec<GeneratorConfig> {
        assert!(n > 0, "split into zero parts");
        if n == 1 {
            return vec![self.clone()];
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut sub_max = self.max_events / n;
        let mut sub_first = self.first_event_id;
        for i in 0..n {
            if i == n - 1 {
                sub_max = self.max_events - sub_max * (n - 1);
            }
            out.push(GeneratorConfig { first_event_id: sub_first, max_events: sub_max, ..self.clone() });
            sub_first += sub_max;
        }
        out
    }

    /// Iterator over this (sub-)config's events.
    pub fn generator(&self) -> crate::Generator {
        crate::Generator::new(self.clone())
    }
}

#[inline(always)]
pub(crate) fn timestamp_with_delay(base_time_ms: i64, delay_us: f64, event_number: u64) -> i64 {
    base_time_ms + ((event_number as f64 * delay_us) as i64) / 1000
}
