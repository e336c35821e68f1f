//! Window join and coGroup (Flink's `JoinedStreams` and `CoGroupedStreams`): two streams
//! cut into the same windows by key, each window handed over with both sides' records.
//!
//! Built the way Flink builds them: each side's records are tagged ([`TaggedUnion`]), the
//! two tagged streams are united and keyed by the side's own key selector, and one window
//! operator holds both sides of a key and window. So every assigner, trigger, evictor,
//! allowed lateness and late side output of [`crate::WindowedStream`] works here too, and
//! the window contents are keyed state, checkpointed and rescaled like any other. A join
//! is a coGroup whose function pairs every record of one side with every record of the
//! other: once per window and pair, nothing for a window where one side is empty.

use crate::key::{KeyAccess, OwnedKey};
use crate::stream::{DataStream, KeyedStream, WindowedStream};
use crate::window::{Evictor, ProcessWindowFunction, Trigger, WindowAssigner, WindowContext};
use crate::{Data, FunctionResult, OutputTag, RichFunction};
use eddy_runtime::Collector;
use eddy_types::Key;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// A record of either input of a window join or coGroup (Flink's `TaggedUnion`): what the
/// window holds, and what a late side output of a join receives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaggedUnion<A, B> {
    One(A),
    Two(B),
}

/// The key of a tagged record: its side's key selector.
struct TaggedKey<A, B, K> {
    one: Arc<dyn KeyAccess<A, K>>,
    two: Arc<dyn KeyAccess<B, K>>,
}

impl<A, B, K> KeyAccess<TaggedUnion<A, B>, K> for TaggedKey<A, B, K> {
    #[inline]
    fn encode(&self, record: &TaggedUnion<A, B>, out: &mut Vec<u8>) {
        match record {
            TaggedUnion::One(a) => self.one.encode(a, out),
            TaggedUnion::Two(b) => self.two.encode(b, out),
        }
    }
}

/// Marks a builder as a window join (pairs of records).
pub struct Join;
/// Marks a builder as a coGroup (both groups of a window).
pub struct CoGroup;

/// Two streams to be joined or coGrouped (after `join` / `co_group`): name the first
/// side's key with [`TwoStreams::where_`].
pub struct TwoStreams<A, B, M> {
    first: DataStream<A>,
    second: DataStream<B>,
    _mode: PhantomData<M>,
}

/// Flink's `JoinedStreams`.
pub type JoinedStreams<A, B> = TwoStreams<A, B, Join>;
/// Flink's `CoGroupedStreams`.
pub type CoGroupedStreams<A, B> = TwoStreams<A, B, CoGroup>;

impl<A: Data + Sync> DataStream<A> {
    /// Joins with `other` in windows (Flink's `join`): `a.join(&b).where_(key_a)
    /// .equal_to(key_b).window(assigner).apply(|a, b| …)` calls the function once for
    /// every pair of records with equal keys in the same window.
    pub fn join<B: Data + Sync>(&self, other: &DataStream<B>) -> JoinedStreams<A, B> {
        TwoStreams { first: self.clone(), second: other.clone(), _mode: PhantomData }
    }

    /// Groups with `other` in windows (Flink's `coGroup`): the function gets both sides'
    /// records of a key and window, either possibly empty, so outer joins can be built.
    pub fn co_group<B: Data + Sync>(&self, other: &DataStream<B>) -> CoGroupedStreams<A, B> {
        TwoStreams { first: self.clone(), second: other.clone(), _mode: PhantomData }
    }
}

impl<A: Data + Sync, B: Data + Sync, M> TwoStreams<A, B, M> {
    /// The first input's key.
    pub fn where_<K: Key, F>(self, key: F) -> Where<A, B, K, M>
    where
        F: Fn(&A) -> K + Send + Sync + 'static,
    {
        Where { streams: self, key: Arc::new(OwnedKey(key, PhantomData)) }
    }
}

/// A join or coGroup with the first input's key: name the second's with
/// [`Where::equal_to`].
pub struct Where<A, B, K, M> {
    streams: TwoStreams<A, B, M>,
    key: Arc<dyn KeyAccess<A, K>>,
}

impl<A: Data + Sync, B: Data + Sync, K: Key, M> Where<A, B, K, M> {
    /// The second input's key: records of both sides with equal keys meet.
    pub fn equal_to<F>(self, key: F) -> EqualTo<A, B, K, M>
    where
        F: Fn(&B) -> K + Send + Sync + 'static,
    {
        let TwoStreams { first, second, .. } = self.streams;
        let tagged_key = TaggedKey { one: self.key, two: Arc::new(OwnedKey(key, PhantomData)) };
        // Each side's event time, read through the tag: the window needs both.
        let timestamps = match (first.timestamps.clone(), second.timestamps.clone()) {
            (Some(one), Some(two)) => Some(Arc::new(move |record: &TaggedUnion<A, B>| match record {
                TaggedUnion::One(a) => one(a),
                TaggedUnion::Two(b) => two(b),
            }) as crate::time::TimestampFn<TaggedUnion<A, B>>),
            _ => None,
        };
        let missing = match (first.timestamps.is_some(), second.timestamps.is_some()) {
            (true, true) => None,
            (false, true) => Some("the first"),
            (true, false) => Some("the second"),
            (false, false) => Some("either"),
        };
        let one = first.map(TaggedUnion::One);
        let two = second.map(TaggedUnion::Two);
        let mut union = one.union(&[two]);
        union.timestamps = timestamps;
        let keyed = KeyedStream::new(&union, Arc::new(tagged_key));
        EqualTo { keyed, missing_timestamps: missing, _mode: PhantomData }
    }
}

/// A join or coGroup keyed on both sides: choose its windows with [`EqualTo::window`].
pub struct EqualTo<A, B, K, M> {
    keyed: KeyedStream<TaggedUnion<A, B>, K>,
    /// Which input has no timestamps, if any (event-time windows need both).
    missing_timestamps: Option<&'static str>,
    _mode: PhantomData<M>,
}

impl<A: Data + Sync, B: Data + Sync, K: Key, M> EqualTo<A, B, K, M> {
    /// The windows both sides are cut into, fired by the assigner's default trigger.
    pub fn window<W: WindowAssigner>(self, assigner: W) -> WithWindow<A, B, K, W, W::DefaultTrigger, M> {
        if let (true, Some(side)) = (assigner.is_event_time(), self.missing_timestamps) {
            self.keyed.stream.env.inner.borrow_mut().problems.push(format!(
                "an event-time window join needs timestamps on both inputs, and {side} has none: call \
                    assign_timestamps_and_watermarks (or with_timestamps) on it before join / co_group"
            ));
            // Reported once: the window below would say it again in other words.
            let mut keyed = self.keyed;
            keyed.stream.timestamps = Some(Arc::new(|_| 0));
            return WithWindow { windowed: keyed.window(assigner), _mode: PhantomData };
        }
        WithWindow { windowed: self.keyed.window(assigner), _mode: PhantomData }
    }
}

/// A join or coGroup in windows (Flink's `WithWindow`): set a trigger, an evictor,
/// allowed lateness or a late side output, then end it with `apply`.
pub struct WithWindow<A, B, K, W: WindowAssigner, Tr, M> {
    windowed: WindowedStream<TaggedUnion<A, B>, K, W, Tr>,
    _mode: PhantomData<M>,
}

impl<A, B, K, W, Tr, M> WithWindow<A, B, K, W, Tr, M>
where
    A: Data + Sync,
    B: Data + Sync,
    K: Key,
    W: WindowAssigner,
    Tr: Trigger<TaggedUnion<A, B>, W::W>,
{
    /// Fires by `trigger` instead of the assigner's default.
    pub fn trigger<Tr2: Trigger<TaggedUnion<A, B>, W::W>>(self, trigger: Tr2) -> WithWindow<A, B, K, W, Tr2, M> {
        WithWindow { windowed: self.windowed.trigger(trigger), _mode: PhantomData }
    }

    /// Thins a firing window's records (of both sides).
    pub fn evictor(self, evictor: impl Evictor<TaggedUnion<A, B>, W::W>) -> Self {
        WithWindow { windowed: self.windowed.evictor(evictor), _mode: PhantomData }
    }

    /// Keeps event-time windows this long past their end; a record that comes meanwhile
    /// fires its window again, with all of the window's records.
    pub fn allowed_lateness(self, lateness: Duration) -> Self {
        WithWindow { windowed: self.windowed.allowed_lateness(lateness), _mode: PhantomData }
    }

    /// Records too late for all their windows go to side output `tag` of the result,
    /// tagged with their side, instead of being dropped.
    pub fn side_output_late_data(self, tag: &OutputTag<TaggedUnion<A, B>>) -> Self {
        WithWindow { windowed: self.windowed.side_output_late_data(tag), _mode: PhantomData }
    }

    fn groups<O: Data, F>(&self, name: &str, function: F) -> DataStream<O>
    where
        F: FnMut(&K, &W::W, Vec<A>, Vec<B>, &mut Collector<'_, O>) -> FunctionResult + Clone + Send + Sync + 'static,
    {
        self.windowed.process(SplitSides { function, _types: PhantomData }).name(name)
    }
}

impl<A, B, K, W, Tr> WithWindow<A, B, K, W, Tr, Join>
where
    A: Data + Sync,
    B: Data + Sync,
    K: Key,
    W: WindowAssigner,
    Tr: Trigger<TaggedUnion<A, B>, W::W>,
{
    /// One result per pair of records with equal keys in a firing window (Flink's
    /// `apply(JoinFunction)`).
    pub fn apply<O: Data, F>(&self, mut join: F) -> DataStream<O>
    where
        F: FnMut(&A, &B) -> O + Clone + Send + Sync + 'static,
    {
        self.groups("Window Join", move |_: &K, _: &W::W, ones: Vec<A>, twos: Vec<B>, out: &mut Collector<'_, O>| {
            for a in &ones {
                for b in &twos {
                    out.collect(join(a, b));
                }
            }
            Ok(())
        })
    }

    /// Any number of results per pair (Flink's `apply(FlatJoinFunction)`).
    pub fn flat_apply<O: Data, F>(&self, mut join: F) -> DataStream<O>
    where
        F: FnMut(&A, &B, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
    {
        self.groups("Window Join", move |_: &K, _: &W::W, ones: Vec<A>, twos: Vec<B>, out: &mut Collector<'_, O>| {
            for a in &ones {
                for b in &twos {
                    join(a, b, out);
                }
            }
            Ok(())
        })
    }
}

impl<A, B, K, W, Tr> WithWindow<A, B, K, W, Tr, CoGroup>
where
    A: Data + Sync,
    B: Data + Sync,
    K: Key,
    W: WindowAssigner,
    Tr: Trigger<TaggedUnion<A, B>, W::W>,
{
    /// Both sides' records of a key and firing window, in arrival order, either possibly
    /// empty (Flink's `apply(CoGroupFunction)`).
    pub fn apply<O: Data, F>(&self, mut co_group: F) -> DataStream<O>
    where
        F: FnMut(Vec<A>, Vec<B>, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
    {
        self.groups("Window CoGroup", move |_: &K, _: &W::W, ones, twos, out: &mut Collector<'_, O>| {
            co_group(ones, twos, out);
            Ok(())
        })
    }

    /// Like [`WithWindow::apply`], with the key and the window too (what a SQL window
    /// join emits as `window_start` and `window_end`).
    pub fn process<O: Data, F>(&self, mut co_group: F) -> DataStream<O>
    where
        F: FnMut(&K, &W::W, Vec<A>, Vec<B>, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
    {
        self.groups("Window CoGroup", move |key: &K, window: &W::W, ones, twos, out: &mut Collector<'_, O>| {
            co_group(key, window, ones, twos, out);
            Ok(())
        })
    }
}

/// The window function of a join or coGroup: splits a window's tagged records by side.
struct SplitSides<A, B, F> {
    function: F,
    _types: PhantomData<fn() -> (A, B)>,
}

impl<A, B, F: Clone> Clone for SplitSides<A, B, F> {
    fn clone(&self) -> Self {
        Self { function: self.function.clone(), _types: PhantomData }
    }
}

impl<A, B, F> RichFunction for SplitSides<A, B, F> {}

impl<A, B, O, K, W, F> ProcessWindowFunction<TaggedUnion<A, B>, O, K, W> for SplitSides<A, B, F>
where
    A: 'static,
    B: 'static,
    F: FnMut(&K, &W, Vec<A>, Vec<B>, &mut Collector<'_, O>) -> FunctionResult + Clone + Send + Sync + 'static,
{
    fn process(
        &mut self,
        key: &K,
        ctx: &mut WindowContext<'_, W>,
        elements: &mut dyn Iterator<Item = TaggedUnion<A, B>>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        let (mut ones, mut twos) = (Vec::new(), Vec::new());
        for element in elements {
            match element {
                TaggedUnion::One(a) => ones.push(a),
                TaggedUnion::Two(b) => twos.push(b),
            }
        }
        (self.function)(key, ctx.window(), ones, twos, out)
    }

    fn uses_keyed_state(&self) -> bool {
        false
    }
}
