//! The three Nexmark record types, with the reference model's fields
//! (`com.github.nexmark.flink.model.{Person, Auction, Bid}`).
//!
//! Field names serialise in the reference's camelCase (`emailAddress`,
//! `dateTime`, `itemName`, ...), the column names of the reference's SQL
//! schema. Timestamps are epoch milliseconds (the reference uses `Instant`
//! with millisecond precision, `TIMESTAMP(3)` in SQL).

use serde::{Deserialize, Serialize};

/// A new person registering on the auction site.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// Primary key; `FIRST_PERSON_ID + n` for the n-th person.
    pub id: u64,
    pub name: String,
    pub email_address: String,
    pub credit_card: String,
    pub city: String,
    /// Upper-case US state code (`AZ, CA, ID, OR, WA, WY`).
    pub state: String,
    /// Event time, epoch ms.
    pub date_time: i64,
    pub extra: String,
}

/// A new auction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Auction {
    /// Primary key; `FIRST_AUCTION_ID + n` for the n-th auction.
    pub id: u64,
    pub item_name: String,
    pub description: String,
    pub initial_bid: u64,
    pub reserve: u64,
    /// Event time, epoch ms.
    pub date_time: i64,
    /// Expiry time, epoch ms (strictly after `date_time`).
    pub expires: i64,
    /// Foreign key to `Person::id`.
    pub seller: u64,
    /// Category id in `FIRST_CATEGORY_ID .. FIRST_CATEGORY_ID + 5`.
    pub category: u64,
    pub extra: String,
}

/// A bid on an auction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bid {
    /// Foreign key to `Auction::id`.
    pub auction: u64,
    /// Foreign key to `Person::id`.
    pub bidder: u64,
    pub price: u64,
    pub channel: String,
    pub url: String,
    /// Event time, epoch ms.
    pub date_time: i64,
    pub extra: String,
}

/// One generated event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    Person(Person),
    Auction(Auction),
    Bid(Bid),
}

/// The event kind, as numbered by the reference (`Event.Type`: 0 person,
/// 1 auction, 2 bid; the `event_type` column of the SQL schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    Person = 0,
    Auction = 1,
    Bid = 2,
}

impl Event {
    /// The event time (`dateTime`) in epoch milliseconds.
    #[inline]
    pub fn event_time_ms(&self) -> i64 {
        match self {
            Event::Person(p) => p.date_time,
            Event::Auction(a) => a.date_time,
            Event::Bid(b) => b.date_time,
        }
    }

    #[inline]
    pub fn event_type(&self) -> EventType {
        match self {
            Event::Person(_) => EventType::Person,
            Event::Auction(_) => EventType::Auction,
            Event::Bid(_) => EventType::Bid,
        }
    }

    /// The size the reference's padding aims at (see [`Person::reference_size`]).
    pub fn reference_size(&self) -> usize {
        match self {
            Event::Person(p) => p.reference_size(),
            Event::Auction(a) => a.reference_size(),
            Event::Bid(b) => b.reference_size(),
        }
    }

    /// Every field counted: 8 bytes per number/timestamp plus string lengths.
    pub fn field_bytes(&self) -> usize {
        match self {
            Event::Person(p) => p.field_bytes(),
            Event::Auction(a) => a.field_bytes(),
            Event::Bid(b) => b.field_bytes(),
        }
    }
}

impl Person {
    /// The size the reference generator accounts for when padding `extra`
    /// towards `avgPersonByteSize`: `8 + |name| + |email| + |creditCard| +
    /// |city| + |state| + |extra|` (it counts one 8-byte number).
    pub fn reference_size(&self) -> usize {
        8 + self.name.len()
            + self.email_address.len()
            + self.credit_card.len()
            + self.city.len()
            + self.state.len()
            + self.extra.len()
    }

    /// All fields: id and dateTime as 8 bytes each plus all strings.
    pub fn field_bytes(&self) -> usize {
        self.reference_size() + 8
    }
}

impl Auction {
    /// The size the reference accounts for when padding `extra` towards
    /// `avgAuctionByteSize`: `8 + |itemName| + |description| + 5 * 8 + |extra|`.
    pub fn reference_size(&self) -> usize {
        8 + self.item_name.len() + self.description.len() + 5 * 8 + self.extra.len()
    }

    /// All fields: seven 8-byte numbers/timestamps plus all strings.
    pub fn field_bytes(&self) -> usize {
        self.reference_size() + 8
    }
}

impl Bid {
    /// The size the reference accounts for when padding `extra` towards
    /// `avgBidByteSize`: `4 * 8 + |extra|` (channel and url are not counted).
    pub fn reference_size(&self) -> usize {
        4 * 8 + self.extra.len()
    }

    /// All fields: four 8-byte numbers/timestamps plus all strings
    /// (including channel and url, which the reference's padding ignores).
    pub fn field_bytes(&self) -> usize {
        self.reference_size() + self.channel.len() + self.url.len()
    }
}
