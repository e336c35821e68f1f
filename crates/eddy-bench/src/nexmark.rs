//! W5 `nexmark`: the Nexmark queries q0–q5, q7 and q8 as DataStream jobs over the
//! generator of `eddy-nexmark` (person, auction and bid events, deterministic per event
//! id, event time a function of the id). Watermarks trail event time by 4 s, as the
//! reference SQL's.
//!
//! Each query's checksum is a sum of one hash per output record, so that it does not
//! depend on parallelism or on the order of outputs (q4's running average does, and is
//! left out of its hash).

use crate::checksum::{checksum_of_job, ChecksumSink};
use crate::generator::splitmix64;
use crate::{Args, Report};
use eddy::prelude::*;
use eddy::time::WatermarkStrategy;
use eddy::window::{window_function, SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows};
use eddy_nexmark::{event, Auction, Bid, Event, GeneratorConfig, Person, WATERMARK_DELAY_MS};
use std::time::Duration;

/// Which query: `q0`…`q8` (q6 is not part of W5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Query {
    Q0,
    Q1,
    Q2,
    Q3,
    Q4,
    Q5,
    Q7,
    Q8,
}

/// A hash of several values, for checksum terms.
fn mix(values: &[u64]) -> u64 {
    values.iter().fold(0x5EED, |h, v| splitmix64(h ^ v))
}

fn text(s: &str) -> u64 {
    s.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3))
}

fn bids(events: &DataStream<Event>) -> DataStream<Bid> {
    events
        .flat_map(|e: Event, out: &mut Collector<'_, Bid>| {
            if let Event::Bid(b) = e {
                out.collect(b)
            }
        })
        .name("bids")
        .uid("bids")
        .with_timestamps(|b: &Bid| b.date_time)
}

fn auctions(events: &DataStream<Event>) -> DataStream<Auction> {
    events
        .flat_map(|e: Event, out: &mut Collector<'_, Auction>| {
            if let Event::Auction(a) = e {
                out.collect(a)
            }
        })
        .name("auctions")
        .uid("auctions")
        .with_timestamps(|a: &Auction| a.date_time)
}

fn persons(events: &DataStream<Event>) -> DataStream<Person> {
    events
        .flat_map(|e: Event, out: &mut Collector<'_, Person>| {
            if let Event::Person(p) = e {
                out.collect(p)
            }
        })
        .name("persons")
        .uid("persons")
        .with_timestamps(|p: &Person| p.date_time)
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let query = args.query.ok_or_else(|| anyhow::anyhow!("nexmark needs --query (q0, q1, q2, q3, q4, q5, q7, q8)"))?;
    let env = Env::new();
    args.configure(&env)?;
    let config = GeneratorConfig::default().with_events_total(args.events);
    let events = env
        .from_sequence(0, args.events - 1)
        .name("event ids")
        .uid("event-ids")
        .map(move |id| event(&config, id))
        .name("generate")
        .uid("generate")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(WATERMARK_DELAY_MS as u64))
                .with_timestamp_assigner(Event::event_time_ms),
        )
        .name("timestamps")
        .uid("timestamps");
    match query {
        Query::Q0 => {
            bids(&events).add_sink(ChecksumSink::new(q0_term)).name("q0").uid("q0");
        }
        Query::Q1 => {
            bids(&events)
                .map(|b| (b.auction, b.bidder, b.price * 908 / 1000, b.date_time))
                .name("dollars to euros")
                .uid("q1")
                .add_sink(ChecksumSink::new(q1_term));
        }
        Query::Q2 => {
            bids(&events)
                .filter(|b| b.auction % 123 == 0)
                .name("auction % 123 = 0")
                .uid("q2-filter")
                .map(|b| (b.auction, b.price))
                .uid("q2")
                .add_sink(ChecksumSink::new(q2_term));
        }
        Query::Q3 => {
            let sellers = persons(&events)
                .filter(|p| matches!(p.state.as_str(), "OR" | "ID" | "CA"))
                .uid("q3-states")
                .key_by(|p: &Person| p.id);
            let items =
                auctions(&events).filter(|a| a.category == 10).uid("q3-category").key_by(|a: &Auction| a.seller);
            sellers
                .connect(&items)
                .co_process(LocalItems::default())
                .name("local item suggestion")
                .uid("q3")
                .add_sink(ChecksumSink::new(q3_term));
        }
        Query::Q4 => {
            let closed = auctions(&events)
                .key_by(|a: &Auction| a.id)
                .connect(&bids(&events).key_by(|b: &Bid| b.auction))
                .co_process(WinningBids::default())
                .name("winning bids")
                .uid("q4-winning");
            closed
                .key_by(|w: &(u64, u64, u64)| w.0)
                .process(AveragePrice::default())
                .name("average price per category")
                .uid("q4")
                .add_sink(ChecksumSink::new(q4_term));
        }
        Query::Q5 => {
            bids(&events)
                .key_by(|b: &Bid| b.auction)
                .window(SlidingEventTimeWindows::of(Duration::from_secs(10), Duration::from_secs(2)))
                .aggregate_with(
                    CountBids,
                    window_function(|auction: &u64, w: &TimeWindow, counts: &mut dyn Iterator<Item = u64>, out| {
                        for count in counts {
                            out.collect((*auction, w.start, w.end, count));
                        }
                    }),
                )
                .name("bids per auction per window")
                .uid("q5-count")
                .with_timestamps(|r: &(u64, i64, i64, u64)| r.2 - 1)
                .key_by(|r: &(u64, i64, i64, u64)| r.1)
                .process(HotItems::default())
                .name("hot items")
                .uid("q5")
                .add_sink(ChecksumSink::new(q5_term));
        }
        Query::Q7 => {
            bids(&events)
                .key_by(|b: &Bid| b.auction)
                .window(TumblingEventTimeWindows::of(Duration::from_secs(10)))
                .aggregate_with(
                    HighestBids,
                    window_function(|_: &u64, w: &TimeWindow, best: &mut dyn Iterator<Item = Vec<Bid>>, out| {
                        for bids in best {
                            out.collect((w.end, bids));
                        }
                    }),
                )
                .name("highest bids per auction")
                .uid("q7-partial")
                .with_timestamps(|r: &(i64, Vec<Bid>)| r.0 - 1)
                .key_by(|r: &(i64, Vec<Bid>)| r.0)
                .process(HighestOfWindow::default())
                .name("highest bid")
                .uid("q7")
                .add_sink(ChecksumSink::new(q7_term));
        }
        Query::Q8 => {
            let people = persons(&events).map(|p| NewUser::Person(p.id, p.name, p.date_time)).uid("q8-persons");
            let sellers = auctions(&events).map(|a| NewUser::Seller(a.seller, a.date_time)).uid("q8-sellers");
            people
                .union(&[sellers])
                .with_timestamps(NewUser::time)
                .key_by(NewUser::id)
                .window(TumblingEventTimeWindows::of(Duration::from_secs(10)))
                .process(window_function(
                    |id: &u64,
                     w: &TimeWindow,
                     seen: &mut dyn Iterator<Item = NewUser>,
                     out: &mut Collector<'_, (u64, String, i64)>| {
                        let mut name = None;
                        let mut sold = false;
                        for user in seen {
                            match user {
                                NewUser::Person(_, n, _) => name = Some(n),
                                NewUser::Seller(..) => sold = true,
                            }
                        }
                        if let (Some(name), true) = (name, sold) {
                            out.collect((*id, name, w.start));
                        }
                    },
                ))
                .name("new users who sell")
                .uid("q8")
                .add_sink(ChecksumSink::new(q8_term));
        }
    }
    let result = env.execute(&format!("nexmark {query:?}"))?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra: args.checkpoints.report(&result),
    })
}

fn q0_term(b: &Bid) -> Result<u64, String> {
    Ok(mix(&[b.auction, b.bidder, b.price, b.date_time as u64, text(&b.url)]))
}

fn q1_term(&(auction, bidder, euros, time): &(u64, u64, u64, i64)) -> Result<u64, String> {
    Ok(mix(&[auction, bidder, euros, time as u64]))
}

fn q2_term(&(auction, price): &(u64, u64)) -> Result<u64, String> {
    Ok(mix(&[auction, price]))
}

fn q3_term((name, city, state, auction): &(String, String, String, u64)) -> Result<u64, String> {
    Ok(mix(&[text(name), text(city), text(state), *auction]))
}

fn q4_term(&(category, auction, price, _average): &(u64, u64, u64, u64)) -> Result<u64, String> {
    Ok(mix(&[category, auction, price]))
}

fn q5_term(&(auction, start, count): &(u64, i64, u64)) -> Result<u64, String> {
    Ok(mix(&[auction, start as u64, count]))
}

fn q7_term(b: &Bid) -> Result<u64, String> {
    Ok(mix(&[b.auction, b.price, b.bidder, b.date_time as u64]))
}

fn q8_term((id, name, start): &(u64, String, i64)) -> Result<u64, String> {
    Ok(mix(&[*id, text(name), *start as u64]))
}

/// q3: persons of OR, ID and CA joined with their auctions of category 10, as they come
/// (an incremental join: each side waits in keyed state for the other).
#[derive(Clone, Default)]
struct LocalItems {
    person: Option<ValueState<(String, String, String)>>,
    waiting: Option<ListState<u64>>,
}

impl RichFunction for LocalItems {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.person = Some(ctx.get_state(&ValueStateDescriptor::new("person"))?);
        self.waiting = Some(ctx.get_list_state(&ListStateDescriptor::new("auctions-waiting"))?);
        Ok(())
    }
}

type LocalItem = (String, String, String, u64);

impl KeyedCoProcessFunction<u64, Person, Auction, LocalItem> for LocalItems {
    fn process_element1(
        &mut self,
        p: Person,
        _: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, LocalItem>,
    ) -> FunctionResult {
        let (person, waiting) = (self.person.as_ref().ok_or("open")?, self.waiting.as_ref().ok_or("open")?);
        for auction in waiting.get()? {
            out.collect((p.name.clone(), p.city.clone(), p.state.clone(), auction));
        }
        waiting.clear()?;
        person.update((p.name, p.city, p.state))?;
        Ok(())
    }

    fn process_element2(
        &mut self,
        a: Auction,
        _: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, LocalItem>,
    ) -> FunctionResult {
        match self.person.as_ref().ok_or("open")?.value()? {
            Some((name, city, state)) => out.collect((name, city, state, a.id)),
            None => self.waiting.as_ref().ok_or("open")?.add(a.id)?,
        }
        Ok(())
    }
}

/// q4, first half: per auction, the highest bid between its start and its expiry, emitted
/// as (category, auction, price) when it expires (an event-time timer).
#[derive(Clone, Default)]
struct WinningBids {
    auction: Option<ValueState<(u64, i64, i64)>>,
    best: Option<ValueState<u64>>,
    early: Option<ListState<(i64, u64)>>,
}

impl RichFunction for WinningBids {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.auction = Some(ctx.get_state(&ValueStateDescriptor::new("auction"))?);
        self.best = Some(ctx.get_state(&ValueStateDescriptor::new("best-price"))?);
        self.early = Some(ctx.get_list_state(&ListStateDescriptor::new("bids-before-auction"))?);
        Ok(())
    }
}

impl WinningBids {
    fn offer(&self, price: u64) -> FunctionResult {
        let best = self.best.as_ref().ok_or("open")?;
        if best.value()?.is_none_or(|b| price > b) {
            best.update(price)?;
        }
        Ok(())
    }
}

impl KeyedCoProcessFunction<u64, Auction, Bid, (u64, u64, u64)> for WinningBids {
    fn process_element1(
        &mut self,
        a: Auction,
        ctx: &mut KeyedContext<'_, u64>,
        _: &mut Collector<'_, (u64, u64, u64)>,
    ) -> FunctionResult {
        self.auction.as_ref().ok_or("open")?.update((a.category, a.date_time, a.expires))?;
        let early = self.early.as_ref().ok_or("open")?;
        for (time, price) in early.get()? {
            if time >= a.date_time && time <= a.expires {
                self.offer(price)?;
            }
        }
        early.clear()?;
        ctx.timer_service().register_event_time_timer(a.expires)?;
        Ok(())
    }

    fn process_element2(
        &mut self,
        b: Bid,
        _: &mut KeyedContext<'_, u64>,
        _: &mut Collector<'_, (u64, u64, u64)>,
    ) -> FunctionResult {
        match self.auction.as_ref().ok_or("open")?.value()? {
            Some((_, start, expires)) if b.date_time >= start && b.date_time <= expires => self.offer(b.price)?,
            Some(_) => {}
            None => self.early.as_ref().ok_or("open")?.add((b.date_time, b.price))?,
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        _: i64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, (u64, u64, u64)>,
    ) -> FunctionResult {
        let (auction, best) = (self.auction.as_ref().ok_or("open")?, self.best.as_ref().ok_or("open")?);
        if let (Some((category, _, _)), Some(price)) = (auction.value()?, best.value()?) {
            out.collect((category, *ctx.current_key(), price));
        }
        auction.clear()?;
        best.clear()?;
        Ok(())
    }
}

/// q4, second half: the running average winning price per category.
#[derive(Clone, Default)]
struct AveragePrice {
    sum_count: Option<ValueState<(u64, u64)>>,
}

impl RichFunction for AveragePrice {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.sum_count = Some(ctx.get_state(&ValueStateDescriptor::new("sum-count"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, (u64, u64, u64), (u64, u64, u64, u64)> for AveragePrice {
    fn process_element(
        &mut self,
        (category, auction, price): (u64, u64, u64),
        _: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, (u64, u64, u64, u64)>,
    ) -> FunctionResult {
        let state = self.sum_count.as_ref().ok_or("open")?;
        let (sum, count) = state.value()?.unwrap_or((0, 0));
        let (sum, count) = (sum + price, count + 1);
        state.update((sum, count))?;
        out.collect((category, auction, price, sum / count));
        Ok(())
    }
}

/// Counts a window's bids.
#[derive(Debug, Clone, Copy)]
struct CountBids;

impl AggregateFunction for CountBids {
    type In = Bid;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: Bid, count: u64) -> u64 {
        count + 1
    }
    fn get_result(&self, count: &u64) -> u64 {
        *count
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// q5, second half: per window (keyed by its start), the auctions with the most bids,
/// emitted when the watermark passes the window's end.
#[derive(Clone, Default)]
struct HotItems {
    counts: Option<ListState<(u64, u64)>>,
}

impl RichFunction for HotItems {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.counts = Some(ctx.get_list_state(&ListStateDescriptor::new("auction-counts"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<i64, (u64, i64, i64, u64), (u64, i64, u64)> for HotItems {
    fn process_element(
        &mut self,
        (auction, _start, end, count): (u64, i64, i64, u64),
        ctx: &mut KeyedContext<'_, i64>,
        _: &mut Collector<'_, (u64, i64, u64)>,
    ) -> FunctionResult {
        self.counts.as_ref().ok_or("open")?.add((auction, count))?;
        ctx.timer_service().register_event_time_timer(end - 1)?;
        Ok(())
    }

    fn on_timer(
        &mut self,
        _: i64,
        ctx: &mut KeyedContext<'_, i64>,
        out: &mut Collector<'_, (u64, i64, u64)>,
    ) -> FunctionResult {
        let counts = self.counts.as_ref().ok_or("open")?;
        let all = counts.get()?;
        let max = all.iter().map(|(_, c)| *c).max().unwrap_or(0);
        for (auction, count) in all {
            if count == max {
                out.collect((auction, *ctx.current_key(), count));
            }
        }
        counts.clear()?;
        Ok(())
    }
}

/// q7, first half: an auction's bids with the highest price in a window.
#[derive(Debug, Clone, Copy)]
struct HighestBids;

impl AggregateFunction for HighestBids {
    type In = Bid;
    type Acc = Vec<Bid>;
    type Out = Vec<Bid>;
    fn create_accumulator(&self) -> Vec<Bid> {
        Vec::new()
    }
    fn add(&self, bid: Bid, mut best: Vec<Bid>) -> Vec<Bid> {
        match best.first().map(|b| b.price) {
            Some(price) if bid.price < price => {}
            Some(price) if bid.price == price => best.push(bid),
            _ => best = vec![bid],
        }
        best
    }
    fn get_result(&self, best: &Vec<Bid>) -> Vec<Bid> {
        best.clone()
    }
    fn merge(&self, a: Vec<Bid>, b: Vec<Bid>) -> Vec<Bid> {
        b.into_iter().fold(a, |best, bid| self.add(bid, best))
    }
}

/// q7, second half: per window (keyed by its end), the bids with the highest price of all
/// auctions', emitted when the watermark passes the window's end.
#[derive(Clone, Default)]
struct HighestOfWindow {
    best: Option<ValueState<Vec<Bid>>>,
}

impl RichFunction for HighestOfWindow {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.best = Some(ctx.get_state(&ValueStateDescriptor::new("highest-bids"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<i64, (i64, Vec<Bid>), Bid> for HighestOfWindow {
    fn process_element(
        &mut self,
        (end, bids): (i64, Vec<Bid>),
        ctx: &mut KeyedContext<'_, i64>,
        _: &mut Collector<'_, Bid>,
    ) -> FunctionResult {
        let state = self.best.as_ref().ok_or("open")?;
        let best = state.value()?.unwrap_or_default();
        state.update(HighestBids.merge(best, bids))?;
        ctx.timer_service().register_event_time_timer(end - 1)?;
        Ok(())
    }

    fn on_timer(&mut self, _: i64, _: &mut KeyedContext<'_, i64>, out: &mut Collector<'_, Bid>) -> FunctionResult {
        let state = self.best.as_ref().ok_or("open")?;
        for bid in state.value()?.unwrap_or_default() {
            out.collect(bid);
        }
        state.clear()?;
        Ok(())
    }
}

/// q8's input: a new person, or a person who opened an auction.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
enum NewUser {
    /// Id, name, event time.
    Person(u64, String, i64),
    /// Seller id, event time.
    Seller(u64, i64),
}

impl NewUser {
    fn id(&self) -> u64 {
        match self {
            NewUser::Person(id, ..) | NewUser::Seller(id, _) => *id,
        }
    }

    fn time(&self) -> i64 {
        match self {
            NewUser::Person(_, _, time) | NewUser::Seller(_, time) => *time,
        }
    }
}
