//! The `nexmark` connector: eddy's deterministic Nexmark generator behind the options and
//! the table shape of the benchmark's own connector (`event_type`, and the nested
//! `person`, `auction` and `bid` rows of `ddl_gen.sql`). Event `i` is the same event in
//! every run and at every parallelism; its time is the generator's (the reference's
//! spacing by `first-event.rate`).

use super::check_options;
use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::row::Row;
use crate::types::{DataType, Field, TypeKind};
use crate::value::Value;
use eddy_api::source::DataGeneratorSource;
use eddy_api::{DataStream, Env};
use eddy_nexmark::{Event, GeneratorConfig};
use std::sync::Arc;

const OPTIONS: &[&str] = &[
    "first-event.rate",
    "next-event.rate",
    "events.num",
    "person.proportion",
    "auction.proportion",
    "bid.proportion",
    "rate.shape",
    "rate.period",
    "rate.limited",
    "first-event.delay",
    "avg-person.byte-size",
    "avg-auction.byte-size",
    "avg-bid.byte-size",
    "hot-auction.ratio",
    "hot-seller.ratio",
    "hot-bidder.ratio",
    "num.in-flight.auctions",
    "num.active.people",
    "num.event.generators",
    "out-of-order-group-size",
    "base-time",
];

/// The reference table's physical columns, by name, with the field names of each row.
const SHAPE: &[(&str, &[&str])] = &[
    ("event_type", &[]),
    ("person", &["id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"]),
    (
        "auction",
        &[
            "id",
            "itemName",
            "description",
            "initialBid",
            "reserve",
            "dateTime",
            "expires",
            "seller",
            "category",
            "extra",
        ],
    ),
    ("bid", &["auction", "bidder", "price", "channel", "url", "dateTime", "extra"]),
];

fn number(table: &CatalogTable, key: &str, default: u64) -> Result<u64, SqlError> {
    match table.option(key) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| {
            SqlError::table(&table.name, format!("the option '{key}' must be a non-negative integer, not '{v}'"))
        }),
    }
}

pub fn check(table: &CatalogTable) -> Result<(), SqlError> {
    check_options(table, "nexmark", OPTIONS, None)?;
    config(table)?;
    let physical: Vec<&Field> = table.physical.iter().collect();
    let shape_ok = physical.len() == SHAPE.len()
        && physical.iter().zip(SHAPE).all(|(f, (name, fields))| {
            f.name == *name
                && match &f.ty.kind {
                    TypeKind::Row(row) => row.iter().map(|r| r.name.as_str()).eq(fields.iter().copied()),
                    k => fields.is_empty() && k.is_integer(),
                }
        });
    if !shape_ok {
        return Err(SqlError::table(
            &table.name,
            "the nexmark connector's table has the physical columns of the benchmark's ddl_gen.sql: event_type INT, \
             person ROW<id, name, emailAddress, creditCard, city, state, dateTime, extra>, auction ROW<id, itemName, \
             description, initialBid, reserve, dateTime, expires, seller, category, extra>, bid ROW<auction, bidder, \
             price, channel, url, dateTime, extra>",
        ));
    }
    Ok(())
}

fn config(table: &CatalogTable) -> Result<(GeneratorConfig, u64), SqlError> {
    let events = number(table, "events.num", 0)?;
    let rate = number(table, "first-event.rate", 10_000_000)?.max(1);
    let base = number(table, "base-time", eddy_nexmark::DEFAULT_BASE_TIME_MS as u64)? as i64;
    let mut cfg = GeneratorConfig::new(events, 0, rate, base);
    cfg.person_proportion = number(table, "person.proportion", cfg.person_proportion)?;
    cfg.auction_proportion = number(table, "auction.proportion", cfg.auction_proportion)?;
    cfg.bid_proportion = number(table, "bid.proportion", cfg.bid_proportion)?;
    if cfg.total_proportion() == 0 {
        return Err(SqlError::table(&table.name, "the proportions of person, auction and bid add up to 0"));
    }
    cfg = cfg.with_events_total(events);
    let limited = table.option("rate.limited") == Some("true");
    Ok((cfg, if limited { rate } else { 0 }))
}

fn text(s: &str) -> Value {
    Value::string(s)
}

/// An event as a row of the reference table.
pub fn row_of(event: &Event) -> Row {
    let ts = Value::timestamp_millis;
    let (kind, person, auction, bid) = match event {
        Event::Person(p) => (
            0,
            Value::Row(Arc::from(vec![
                Value::Int(p.id as i64),
                text(&p.name),
                text(&p.email_address),
                text(&p.credit_card),
                text(&p.city),
                text(&p.state),
                ts(p.date_time),
                text(&p.extra),
            ])),
            Value::Null,
            Value::Null,
        ),
        Event::Auction(a) => (
            1,
            Value::Null,
            Value::Row(Arc::from(vec![
                Value::Int(a.id as i64),
                text(&a.item_name),
                text(&a.description),
                Value::Int(a.initial_bid as i64),
                Value::Int(a.reserve as i64),
                ts(a.date_time),
                ts(a.expires),
                Value::Int(a.seller as i64),
                Value::Int(a.category as i64),
                text(&a.extra),
            ])),
            Value::Null,
        ),
        Event::Bid(b) => (
            2,
            Value::Null,
            Value::Null,
            Value::Row(Arc::from(vec![
                Value::Int(b.auction as i64),
                Value::Int(b.bidder as i64),
                Value::Int(b.price as i64),
                text(&b.channel),
                text(&b.url),
                ts(b.date_time),
                text(&b.extra),
            ])),
        ),
    };
    Row::insert(vec![Value::Int(kind), person, auction, bid])
}

pub fn source(table: &CatalogTable, env: &Env) -> Result<DataStream<Row>, SqlError> {
    let (cfg, rate) = config(table)?;
    let count = cfg.max_events;
    let cfg = Arc::new(cfg);
    Ok(env.add_parallel_source(DataGeneratorSource::new(count, rate, move |i| row_of(&eddy_nexmark::event(&cfg, i)))))
}

/// The physical columns of the benchmark's `datagen` table (`ddl_gen.sql`).
pub fn fields() -> Vec<Field> {
    let long = || DataType::bigint();
    let text = || DataType::string();
    let ts = || DataType::timestamp(3);
    let row = |fields: Vec<(&str, DataType)>| {
        DataType::new(TypeKind::Row(fields.into_iter().map(|(n, t)| Field::new(n, t)).collect()))
    };
    vec![
        Field::new("event_type", DataType::int()),
        Field::new(
            "person",
            row(vec![
                ("id", long()),
                ("name", text()),
                ("emailAddress", text()),
                ("creditCard", text()),
                ("city", text()),
                ("state", text()),
                ("dateTime", ts()),
                ("extra", text()),
            ]),
        ),
        Field::new(
            "auction",
            row(vec![
                ("id", long()),
                ("itemName", text()),
                ("description", text()),
                ("initialBid", long()),
                ("reserve", long()),
                ("dateTime", ts()),
                ("expires", ts()),
                ("seller", long()),
                ("category", long()),
                ("extra", text()),
            ]),
        ),
        Field::new(
            "bid",
            row(vec![
                ("auction", long()),
                ("bidder", long()),
                ("price", long()),
                ("channel", text()),
                ("url", text()),
                ("dateTime", ts()),
                ("extra", text()),
            ]),
        ),
    ]
}
