//! Deterministic Rust port of the Nexmark event generator
//! (`nexmark/nexmark`, `nexmark-flink/.../generator/`).
//!
//! ```
//! use eddy_nexmark::{event, Event, GeneratorConfig};
//!
//! let cfg = GeneratorConfig::default().with_events_total(1_000);
//! // Event 0 is the first person (id 1000), events 1..=3 auctions, then bids.
//! assert!(matches!(event(&cfg, 0), Event::Person(ref p) if p.id == 1000));
//! // Four parallel source subtasks, each a contiguous range of event ids:
//! let total: usize = cfg.split(4).iter().map(|c| c.generator().count()).sum();
//! assert_eq!(total, 1_000);
//! ```
//!
//! See the crate's `README.md` for what follows the reference and where it deviates.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

mod config;
mod generator;
mod model;
mod rng;
mod strings;

pub use config::{
    GeneratorConfig, DEFAULT_BASE_TIME_MS, FIRST_AUCTION_ID, FIRST_CATEGORY_ID, FIRST_PERSON_ID, WATERMARK_DELAY_MS,
};
pub use generator::{
    event, last_base0_auction_id, last_base0_person_id, Generator, NextEvent, AUCTION_ID_LEAD, HOT_BATCH,
    NUM_CATEGORIES, PERSON_ID_LEAD,
};
pub use model::{Auction, Bid, Event, EventType, Person};
