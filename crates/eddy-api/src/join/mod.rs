//! Joining two streams over time, with bounded state (Flink's DataStream joins):
//!
//! - `window.rs`: window join and coGroup, `a.join(&b).where_(…).equal_to(…).window(…)`:
//!   both sides in the same windows of a key, on every window assigner.
//! - `interval.rs`: interval join, `a.key_by(…).interval_join(&b.key_by(…)).between(…)`:
//!   each record with the other side's records of its key within a time interval of it,
//!   in event time.
//!
//! Both are keyed operators over keyed state, so they are checkpointed, restored and
//! rescaled by key group like any other; Flink SQL's window and interval joins are the
//! same operators.

mod interval;
mod window;

pub use interval::{join_function, IntervalJoin, IntervalJoined, JoinContext, JoinFn, ProcessJoinFunction};
pub use window::{CoGroup, CoGroupedStreams, EqualTo, Join, JoinedStreams, TaggedUnion, TwoStreams, Where, WithWindow};
