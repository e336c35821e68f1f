//! The `nexmark` connector: eddy's deterministic Nexmark generator behind the options and
//! the table shape of the benchmark's own connector (`event_type`, and the nested
//! `person`, `auction` and `bid` rows of `ddl_gen.sql`). Event `i` is the same event in
//! every run and at every parallelism; its time is the generator's (the reference's
//! spacing by `first-event.rate`). Only the fields the query, the computed columns and the
//! watermark read are made (projection push-down, `plan::reads`); the rest are NULL.

use super::check_options;
use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::plan::reads::ReadColumns;
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
    row_with(event, &Wanted::all(), SHAPE.len())
}

/// Which fields of `person`, `auction` and `bid` a query reads (`None`: the column is not
/// read at all). What is not read stays NULL and costs nothing to make.
#[derive(Clone, Debug)]
struct Wanted([Option<Vec<bool>>; 3]);

impl Wanted {
    fn all() -> Self {
        Wanted([1, 2, 3].map(|c| Some(vec![true; SHAPE[c].1.len()])))
    }

    fn of(read: &ReadColumns) -> Self {
        Wanted(
            [1, 2, 3].map(|c| read.reads(c).then(|| (0..SHAPE[c].1.len()).map(|f| read.reads_field(c, f)).collect())),
        )
    }
}

/// The nested row of a column that is read, each field made only if it is wanted (`make`
/// is called with the field's index).
#[inline(always)]
fn nested<const N: usize>(wanted: &Option<Vec<bool>>, make: impl Fn(usize) -> Value) -> Value {
    match wanted {
        None => Value::Null,
        Some(wanted) => {
            Value::Row(Arc::from(std::array::from_fn::<Value, N, _>(|i| if wanted[i] { make(i) } else { Value::Null })))
        }
    }
}

/// An event as a row of the reference table, with only the wanted fields made, and room
/// for `columns` values in all (the table's computed columns are added in place).
fn row_with(event: &Event, wanted: &Wanted, columns: usize) -> Row {
    let ts = Value::timestamp_millis;
    let int = |v: u64| Value::Int(v as i64);
    let row = match event {
        Event::Person(p) => {
            let person = nested::<8>(&wanted.0[0], |i| match i {
                0 => int(p.id),
                1 => text(&p.name),
                2 => text(&p.email_address),
                3 => text(&p.credit_card),
                4 => text(&p.city),
                5 => text(&p.state),
                6 => ts(p.date_time),
                _ => text(&p.extra),
            });
            [Value::Int(0), person, Value::Null, Value::Null]
        }
        Event::Auction(a) => {
            let auction = nested::<10>(&wanted.0[1], |i| match i {
                0 => int(a.id),
                1 => text(&a.item_name),
                2 => text(&a.description),
                3 => int(a.initial_bid),
                4 => int(a.reserve),
                5 => ts(a.date_time),
                6 => ts(a.expires),
                7 => int(a.seller),
                8 => int(a.category),
                _ => text(&a.extra),
            });
            [Value::Int(1), Value::Null, auction, Value::Null]
        }
        Event::Bid(b) => {
            let bid = nested::<7>(&wanted.0[2], |i| match i {
                0 => int(b.auction),
                1 => int(b.bidder),
                2 => int(b.price),
                3 => text(&b.channel),
                4 => text(&b.url),
                5 => ts(b.date_time),
                _ => text(&b.extra),
            });
            [Value::Int(2), Value::Null, Value::Null, bid]
        }
    };
    let mut fields = Vec::with_capacity(columns.max(row.len()));
    fields.extend(row);
    Row::insert(fields)
}

/// The table's rows; fields `read` leaves out are NULL.
pub fn source(table: &CatalogTable, env: &Env, read: &ReadColumns) -> Result<DataStream<Row>, SqlError> {
    let (cfg, rate) = config(table)?;
    let count = cfg.max_events;
    let cfg = Arc::new(cfg);
    let wanted = Wanted::of(read);
    let columns = table.columns.len();
    Ok(env.add_parallel_source(DataGeneratorSource::new(count, rate, move |i| {
        row_with(&eddy_nexmark::event(&cfg, i), &wanted, columns)
    })))
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
