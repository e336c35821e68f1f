//! Event synthesis: `NexmarkGenerator` and the `PersonGenerator`,
//! `AuctionGenerator`, `BidGenerator`, `PriceGenerator` logic.

use crate::config::{
    timestamp_with_delay, GeneratorConfig, FIRST_AUCTION_ID, FIRST_CATEGORY_ID, FIRST_PERSON_ID, WATERMARK_DELAY_MS,
};
use crate::model::{Auction, Bid, Event, Person};
use crate::rng::{event_seed, stream, Rng};
use crate::strings::{next_extra, next_string, push_next_string, tables, CHANNELS_NUMBER, HOT_CHANNELS};

// ---- constants of the reference model generators ----

/// Yet-to-be-created person ids a reference may point at (`PERSON_ID_LEAD`).
pub const PERSON_ID_LEAD: u64 = 10;
/// Yet-to-be-created auction ids a reference may point at (`AUCTION_ID_LEAD`).
pub const AUCTION_ID_LEAD: u64 = 10;
/// Number of categories (`NUM_CATEGORIES`).
pub const NUM_CATEGORIES: u64 = 5;
/// Hot sellers/auctions/bidders are the first (second for bidders) of each
/// batch of this many ids (`HOT_SELLER_RATIO`, `HOT_AUCTION_RATIO`,
/// `HOT_BIDDER_RATIO`, all 100).
pub const HOT_BATCH: u64 = 100;
/// `HOT_CHANNELS_RATIO`: a bid uses a hot channel with P = 1 - 1/2.
const HOT_CHANNELS_RATIO: u64 = 2;

const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const US_CITIES: [&str; 10] =
    ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"];
const FIRST_NAMES: [&str; 11] =
    ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"];
const LAST_NAMES: [&str; 9] = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"];

// ---- per-field random streams ----

const S_PERSON_NAME: u64 = stream(1);
const S_PERSON_EMAIL: u64 = stream(2);
const S_PERSON_CARD: u64 = stream(3);
const S_PERSON_CITY: u64 = stream(4);
const S_PERSON_STATE: u64 = stream(5);
const S_PERSON_EXTRA: u64 = stream(6);
const S_AUCTION_SELLER: u64 = stream(11);
const S_AUCTION_CATEGORY: u64 = stream(12);
const S_AUCTION_INITIAL_BID: u64 = stream(13);
const S_AUCTION_EXPIRES: u64 = stream(14);
const S_AUCTION_NAME: u64 = stream(15);
const S_AUCTION_DESC: u64 = stream(16);
const S_AUCTION_RESERVE: u64 = stream(17);
const S_AUCTION_EXTRA: u64 = stream(18);
const S_BID_AUCTION: u64 = stream(21);
const S_BID_BIDDER: u64 = stream(22);
const S_BID_PRICE: u64 = stream(23);
const S_BID_CHANNEL: u64 = stream(24);
const S_BID_EXTRA: u64 = stream(25);

// ---- id bookkeeping (pure functions of the event id) ----

/// Last person id (base 0) generated at or before `event_id`; the current
/// person's id if `event_id` is a person event (`lastBase0PersonId`).
#[inline]
pub fn last_base0_person_id(cfg: &GeneratorConfig, event_id: u64) -> u64 {
    let total = cfg.total_proportion();
    let epoch = event_id / total;
    let mut offset = event_id % total;
    if offset >= cfg.person_proportion {
        offset = cfg.person_proportion - 1;
    }
    epoch * cfg.person_proportion + offset
}

/// Last auction id (base 0) generated at or before `event_id`; the current
/// auction's id if `event_id` is an auction event (`lastBase0AuctionId`).
/// Is -1 for a person event in the first epoch.
#[inline]
pub fn last_base0_auction_id(cfg: &GeneratorConfig, event_id: u64) -> i64 {
    let total = cfg.total_proportion();
    let mut epoch = (event_id / total) as i64;
    let mut offset = event_id % total;
    if offset < cfg.person_proportion {
        epoch -= 1;
        offset = cfg.auction_proportion - 1;
    } else if offset >= cfg.person_proportion + cfg.auction_proportion {
        offset = cfg.auction_proportion - 1;
    } else {
        offset -= cfg.person_proportion;
    }
    epoch * cfg.auction_proportion as i64 + offset as i64
}

/// A random person among the last `num_active_people` plus up to
/// `PERSON_ID_LEAD` not yet created (`nextBase0PersonId`).
#[inline]
fn next_base0_person_id(cfg: &GeneratorConfig, event_id: u64, r: &mut Rng) -> u64 {
    let num_people = last_base0_person_id(cfg, event_id) + 1;
    let active = num_people.min(cfg.num_active_people);
    let n = r.below(active + PERSON_ID_LEAD);
    num_people - active + n
}

/// A random auction among the last `num_in_flight_auctions` plus up to
/// `AUCTION_ID_LEAD` not yet created (`nextBase0AuctionId`).
#[inline]
fn next_base0_auction_id(cfg: &GeneratorConfig, event_id: u64, r: &mut Rng) -> u64 {
    let max_auction = last_base0_auction_id(cfg, event_id);
    let min_auction = (max_auction - cfg.num_in_flight_auctions as i64).max(0);
    let span = (max_auction - min_auction + 1) as u64 + AUCTION_ID_LEAD;
    min_auction as u64 + r.below(span)
}

/// `PriceGenerator.nextPrice`: `round(10^(6u) * 100)`, log-uniform cents
/// in [100, 100_000_000].
#[inline]
fn next_price(r: &mut Rng) -> u64 {
    (10f64.powf(r.next_f64() * 6.0) * 100.0 + 0.5).floor() as u64
}

// ---- event construction ----

/// Where an event sits: its id, its (adjusted) event number and time.
#[derive(Clone, Copy)]
struct Slot {
    id: u64,
    number: u64,
    timestamp: i64,
    delay_us: f64,
    base_time_ms: i64,
}

#[inline]
fn slot(cfg: &GeneratorConfig, delay_us: f64, count: u64) -> Slot {
    let number = cfg.next_adjusted_event_number(count);
    Slot {
        id: cfg.first_event_id + number,
        number,
        timestamp: timestamp_with_delay(cfg.base_time_ms, delay_us, number),
        delay_us,
        base_time_ms: cfg.base_time_ms,
    }
}

/// The `count`-th event (0-based) of the (sub-)generator `cfg`.
///
/// Its event id is `cfg.event_id(count)`; every field except `date_time`
/// (and an auction's `expires`) depends only on that id and the config's
/// model parameters. `date_time` is `cfg.timestamp_for_event` of the event
/// number, as in the reference.
pub fn event(cfg: &GeneratorConfig, count: u64) -> Event {
    make_event(cfg, slot(cfg, cfg.inter_event_delay_us(), count))
}

#[inline]
fn make_event(cfg: &GeneratorConfig, s: Slot) -> Event {
    let rem = s.id % cfg.total_proportion();
    if rem < cfg.person_proportion {
        Event::Person(next_person(cfg, s))
    } else if rem < cfg.person_proportion + cfg.auction_proportion {
        Event::Auction(next_auction(cfg, s))
    } else {
        Event::Bid(next_bid(cfg, s))
    }
}

fn next_person(cfg: &GeneratorConfig, s: Slot) -> Person {
    let seed = event_seed(s.id);
    let id = last_base0_person_id(cfg, s.id) + FIRST_PERSON_ID;

    let mut r = Rng::field(seed, S_PERSON_NAME);
    let first = FIRST_NAMES[r.below(FIRST_NAMES.len() as u64) as usize];
    let last = LAST_NAMES[r.below(LAST_NAMES.len() as u64) as usize];
    let mut name = String::with_capacity(first.len() + 1 + last.len());
    name.push_str(first);
    name.push(' ');
    name.push_str(last);

    let mut r = Rng::field(seed, S_PERSON_EMAIL);
    let mut email = String::with_capacity(16);
    push_next_string(&mut email, &mut r, 7, b' ');
    email.push('@');
    push_next_string(&mut email, &mut r, 5, b' ');
    email.push_str(".com");

    let mut r = Rng::field(seed, S_PERSON_CARD);
    let mut card = [b' '; 19];
    for g in 0..4 {
        let v = r.below(10_000) as u16;
        let d = &mut card[g * 5..g * 5 + 4];
        d[0] = b'0' + (v / 1000) as u8;
        d[1] = b'0' + (v / 100 % 10) as u8;
        d[2] = b'0' + (v / 10 % 10) as u8;
        d[3] = b'0' + (v % 10) as u8;
    }
    let credit_card = std::str::from_utf8(&card).expect("ascii").to_owned();

    let city = US_CITIES[Rng::field(seed, S_PERSON_CITY).below(US_CITIES.len() as u64) as usize];
    let state = US_STATES[Rng::field(seed, S_PERSON_STATE).below(US_STATES.len() as u64) as usize];

    let current_size = 8 + name.len() + email.len() + credit_card.len() + city.len() + state.len();
    let extra = next_extra(&mut Rng::field(seed, S_PERSON_EXTRA), current_size as u64, cfg.avg_person_byte_size);
    Person {
        id,
        name,
        email_address: email,
        credit_card,
        city: city.to_owned(),
        state: state.to_owned(),
        date_time: s.timestamp,
        extra,
    }
}

fn next_auction(cfg: &GeneratorConfig, s: Slot) -> Auction {
    let seed = event_seed(s.id);
    let id = last_base0_auction_id(cfg, s.id) as u64 + FIRST_AUCTION_ID;

    // P(hot seller) = 1 - 1/hotSellersRatio: the first person of the
    // current batch of HOT_BATCH people.
    let mut r = Rng::field(seed, S_AUCTION_SELLER);
    let seller = if r.below(cfg.hot_sellers_ratio) > 0 {
        (last_base0_person_id(cfg, s.id) / HOT_BATCH) * HOT_BATCH
    } else {
        next_base0_person_id(cfg, s.id, &mut r)
    } + FIRST_PERSON_ID;

    let category = FIRST_CATEGORY_ID + Rng::field(seed, S_AUCTION_CATEGORY).below(NUM_CATEGORIES);
    let initial_bid = next_price(&mut Rng::field(seed, S_AUCTION_INITIAL_BID));

    // nextAuctionLengthMs: uniform in [1, 2 * horizon], where horizon is the
    // time until numInFlightAuctions more auctions have been generated.
    let events_for_auctions = (cfg.num_in_flight_auctions * cfg.total_proportion()) / cfg.auction_proportion;
    let future = timestamp_with_delay(s.base_time_ms, s.delay_us, s.number + events_for_auctions);
    let horizon = future - s.timestamp;
    let length = 1 + Rng::field(seed, S_AUCTION_EXPIRES).below((horizon * 2).max(1) as u64) as i64;
    let expires = s.timestamp + length;

    let item_name = next_string(&mut Rng::field(seed, S_AUCTION_NAME), 20);
    let description = next_string(&mut Rng::field(seed, S_AUCTION_DESC), 100);
    let reserve = initial_bid + next_price(&mut Rng::field(seed, S_AUCTION_RESERVE));

    let current_size = 8 + item_name.len() + description.len() + 8 + 8 + 8 + 8 + 8;
    let extra = next_extra(&mut Rng::field(seed, S_AUCTION_EXTRA), current_size as u64, cfg.avg_auction_byte_size);
    Auction {
        id,
        item_name,
        description,
        initial_bid,
        reserve,
        date_time: s.timestamp,
        expires,
        seller,
        category,
        extra,
    }
}

fn next_bid(cfg: &GeneratorConfig, s: Slot) -> Bid {
    let seed = event_seed(s.id);

    // P(hot auction) = 1 - 1/hotAuctionRatio: the first auction of the
    // current batch of HOT_BATCH auctions.
    let mut r = Rng::field(seed, S_BID_AUCTION);
    let auction = if r.below(cfg.hot_auction_ratio) > 0 {
        (last_base0_auction_id(cfg, s.id) as u64 / HOT_BATCH) * HOT_BATCH
    } else {
        next_base0_auction_id(cfg, s.id, &mut r)
    } + FIRST_AUCTION_ID;

    // P(hot bidder) = 1 - 1/hotBiddersRatio: the second person of the
    // current batch (so hot bidders and hot sellers differ).
    // FIRST_PERSON_ID is added once (the reference adds it twice; see REPORT).
    let mut r = Rng::field(seed, S_BID_BIDDER);
    let bidder = if r.below(cfg.hot_bidders_ratio) > 0 {
        (last_base0_person_id(cfg, s.id) / HOT_BATCH) * HOT_BATCH + 1
    } else {
        next_base0_person_id(cfg, s.id, &mut r)
    } + FIRST_PERSON_ID;

    let price = next_price(&mut Rng::field(seed, S_BID_PRICE));

    let t = tables();
    let mut r = Rng::field(seed, S_BID_CHANNEL);
    let (channel, url) = if r.below(HOT_CHANNELS_RATIO) > 0 {
        let i = r.below(HOT_CHANNELS.len() as u64) as usize;
        (HOT_CHANNELS[i], t.hot_urls[i].as_str())
    } else {
        let c = &t.channels[r.below(CHANNELS_NUMBER) as usize];
        (c.0.as_str(), c.1.as_str())
    };

    let extra = next_extra(&mut Rng::field(seed, S_BID_EXTRA), 8 + 8 + 8 + 8, cfg.avg_bid_byte_size);
    Bid { auction, bidder, price, channel: channel.to_owned(), url: url.to_owned(), date_time: s.timestamp, extra }
}

// ---- iterator ----

/// An event with its event time and watermark (the reference's `NextEvent`,
/// minus the wall-clock emission time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextEvent {
    pub event: Event,
    /// Event time in epoch ms (equals `event.event_time_ms()`).
    pub event_time_ms: i64,
    /// The generator's watermark (minimum of this and all later event
    /// times; equal to the event time without out-of-orderness) minus the
    /// SQL DDL's 4 s delay, [`WATERMARK_DELAY_MS`].
    pub watermark_ms: i64,
}

/// Iterator over the events of one (sub-)config: counts `0 .. max_events`.
#[derive(Clone, Debug)]
pub struct Generator {
    cfg: GeneratorConfig,
    delay_us: f64,
    count: u64,
}

impl Generator {
    pub fn new(cfg: GeneratorConfig) -> Self {
        assert!(cfg.rate_per_sec > 0 && cfg.num_event_generators > 0);
        let delay_us = cfg.inter_event_delay_us();
        Generator { cfg, delay_us, count: 0 }
    }

    /// Resumes after `events_so_far` events (like the reference's
    /// `eventsCountSoFar` restored from a checkpoint).
    pub fn resume(cfg: GeneratorConfig, events_so_far: u64) -> Self {
        let mut g = Self::new(cfg);
        g.count = events_so_far;
        g
    }

    pub fn config(&self) -> &GeneratorConfig {
        &self.cfg
    }

    /// Number of events produced so far.
    pub fn events_so_far(&self) -> u64 {
        self.count
    }

    /// Event id of the next event.
    pub fn next_event_id(&self) -> u64 {
        self.cfg.event_id(self.count)
    }

    /// Next event with its event time and watermark.
    pub fn next_event(&mut self) -> Option<NextEvent> {
        if self.count >= self.cfg.max_events {
            return None;
        }
        let s = slot(&self.cfg, self.delay_us, self.count);
        let wm_number = self.cfg.next_event_number_for_watermark(self.count);
        let watermark = timestamp_with_delay(self.cfg.base_time_ms, self.delay_us, wm_number);
        let event = make_event(&self.cfg, s);
        self.count += 1;
        Some(NextEvent { event, event_time_ms: s.timestamp, watermark_ms: watermark - WATERMARK_DELAY_MS })
    }
}

impl Iterator for Generator {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        if self.count >= self.cfg.max_events {
            return None;
        }
        let e = make_event(&self.cfg, slot(&self.cfg, self.delay_us, self.count));
        self.count += 1;
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.cfg.max_events.saturating_sub(self.count);
        let n = usize::try_from(left).unwrap_or(usize::MAX);
        (n, usize::try_from(left).ok())
    }

    fn nth(&mut self, n: usize) -> Option<Event> {
        self.count = self.count.saturating_add(n as u64).min(self.cfg.max_events);
        self.next()
    }
}
