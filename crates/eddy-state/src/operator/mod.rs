//! Operator state: state that belongs to one parallel instance of an operator rather than
//! to a key (Flink's `OperatorStateStore`).
//!
//! - even-split list state: on a change of parallelism the lists of all instances are
//!   concatenated and cut into contiguous parts (a source's split offsets);
//! - union list state: every new instance gets the whole concatenation;
//! - broadcast state: a map that every instance of a broadcast-connected operator holds
//!   identically; each new instance gets a copy.
//!
//! Values stay Rust values while the job runs; a snapshot serializes each list element and
//! each map entry separately, so that [`redistribute`] can move them without their types.

mod broadcast;
mod list;
mod redistribute;
mod store;

pub use broadcast::{BroadcastState, ReadOnlyBroadcastState};
pub use list::OperatorListState;
pub use redistribute::{redistribute, split_evenly};
pub use store::{BroadcastSnapshot, ListDistribution, ListSnapshot, OperatorStateSnapshot, OperatorStateStore};
