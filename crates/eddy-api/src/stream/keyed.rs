//! [`KeyedStream`]: a stream partitioned by key, whose functions have keyed state.

use super::{DataStream, KeyedBroadcastConnectedStream, KeyedConnectedStreams};
use crate::function::*;
use crate::key::{HashingSelector, KeyFn, KeyScope};
use crate::operator::logic::*;
use crate::Data;
use eddy_runtime::graph::Partitioning;
use eddy_runtime::writer::{KeySelector, KeySelectorFactory};
use eddy_runtime::Collector;
use eddy_state::StateValue;
use eddy_types::Key;
use std::marker::PhantomData;
use std::sync::Arc;

/// A stream partitioned by key (Flink's `KeyedStream`): every record of a key reaches the
/// same subtask, and functions applied here see that key's state.
pub struct KeyedStream<T, K> {
    pub(crate) stream: DataStream<T>,
    pub(crate) key_fn: KeyFn<T, K>,
}

impl<T: Data, K: Key> KeyedStream<T, K> {
    pub(crate) fn new(input: &DataStream<T>, key_fn: KeyFn<T, K>) -> Self {
        let for_writers = key_fn.clone();
        let factory: KeySelectorFactory<T> =
            Arc::new(move || Box::new(HashingSelector::new(for_writers.clone())) as Box<dyn KeySelector<T>>);
        let mut stream = input.clone();
        stream.partitioning = Some(Partitioning::KeyGroups(Arc::new(factory)));
        Self { stream, key_fn }
    }

    pub(crate) fn scope(&self) -> KeyScope<T, K> {
        KeyScope::new(self.key_fn.clone())
    }

    /// A [`KeyedProcessFunction`] per record, with the current key, keyed state and side
    /// outputs.
    pub fn process<O: Data, F: KeyedProcessFunction<K, T, O>>(&self, function: F) -> DataStream<O> {
        let logic = KeyedProcessLogic { function, key: self.scope(), timestamps: self.stream.timestamps.clone() };
        self.stream.one_input("KeyedProcess", logic, true)
    }

    /// A rich map with keyed state.
    pub fn rich_map<O: Data, F: RichMapFunction<T, O>>(&self, function: F) -> DataStream<O> {
        self.stream.one_input("Map", RichMapLogic { function, key: Some(self.scope()) }, true)
    }

    /// A rich flat-map with keyed state (seed 004's state machine is one).
    pub fn rich_flat_map<O: Data, F: RichFlatMapFunction<T, O>>(&self, function: F) -> DataStream<O> {
        self.stream.one_input("Flat Map", RichFlatMapLogic { function, key: Some(self.scope()) }, true)
    }

    /// A stateless map after the key partitioning.
    pub fn map<O: Data, F>(&self, f: F) -> DataStream<O>
    where
        F: FnMut(T) -> O + Clone + Send + Sync + 'static,
    {
        self.stream.map(f)
    }

    /// A stateless flat-map after the key partitioning.
    pub fn flat_map<O: Data, F>(&self, f: F) -> DataStream<O>
    where
        F: FnMut(T, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
    {
        self.stream.flat_map(f)
    }

    /// The running reduction per key, emitted after every record (Flink's `reduce`).
    pub fn reduce<F>(&self, reduce: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        F: Fn(T, T) -> T + Clone + Send + Sync + 'static,
    {
        self.stream.one_input(
            "Keyed Reduce",
            KeyedProcessLogic {
                function: Reducer { reduce, state: None, _type: PhantomData },
                key: self.scope(),
                timestamps: None,
            },
            true,
        )
    }

    /// The running sum of a field per key, emitted after every record (Flink's `sum`):
    /// the key's first record with the field replaced by the sum so far. The field is
    /// named by a closure, `|o: &mut Order| &mut o.amount`, as Rust has no field positions.
    /// The sum follows Rust's `+=`: an integer overflow panics in a debug build and wraps
    /// in a release build (Java's, in Flink, always wraps).
    pub fn sum<N, F>(&self, field: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        N: std::ops::AddAssign + Clone,
        F: Fn(&mut T) -> &mut N + Clone + Send + Sync + 'static,
    {
        self.rolling("Keyed Aggregation (sum)", move |mut so_far: T, mut next: T| {
            let add = field(&mut next).clone();
            *field(&mut so_far) += add;
            so_far
        })
    }

    /// The running minimum of a field per key (Flink's `min`): the key's first record with
    /// the field replaced by the smallest value so far. [`KeyedStream::min_by`] gives the
    /// record that holds the minimum instead.
    pub fn min<N, F>(&self, field: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        N: PartialOrd + Clone,
        F: Fn(&mut T) -> &mut N + Clone + Send + Sync + 'static,
    {
        self.rolling("Keyed Aggregation (min)", move |mut so_far: T, mut next: T| {
            let candidate = field(&mut next).clone();
            let current = field(&mut so_far);
            if candidate < *current {
                *current = candidate;
            }
            so_far
        })
    }

    /// The running maximum of a field per key (Flink's `max`), as [`KeyedStream::min`].
    pub fn max<N, F>(&self, field: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        N: PartialOrd + Clone,
        F: Fn(&mut T) -> &mut N + Clone + Send + Sync + 'static,
    {
        self.rolling("Keyed Aggregation (max)", move |mut so_far: T, mut next: T| {
            let candidate = field(&mut next).clone();
            let current = field(&mut so_far);
            if candidate > *current {
                *current = candidate;
            }
            so_far
        })
    }

    /// The record with the smallest `value` per key so far, emitted after every record
    /// (Flink's `minBy`); of equal values the first record is kept.
    pub fn min_by<N, F>(&self, value: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        N: PartialOrd,
        F: Fn(&T) -> N + Clone + Send + Sync + 'static,
    {
        self.rolling(
            "Keyed Aggregation (minBy)",
            move |so_far: T, next: T| {
                if value(&next) < value(&so_far) {
                    next
                } else {
                    so_far
                }
            },
        )
    }

    /// The record with the largest `value` per key so far (Flink's `maxBy`); of equal
    /// values the first record is kept.
    pub fn max_by<N, F>(&self, value: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        N: PartialOrd,
        F: Fn(&T) -> N + Clone + Send + Sync + 'static,
    {
        self.rolling(
            "Keyed Aggregation (maxBy)",
            move |so_far: T, next: T| {
                if value(&next) > value(&so_far) {
                    next
                } else {
                    so_far
                }
            },
        )
    }

    /// A rolling aggregation: a reduce under its own name.
    fn rolling<F>(&self, name: &str, reduce: F) -> DataStream<T>
    where
        T: StateValue + Sync,
        F: Fn(T, T) -> T + Clone + Send + Sync + 'static,
    {
        self.reduce(reduce).name(name)
    }

    /// Connects with another stream keyed by the same key type: both sides share the keyed
    /// state of a key (seed 000's two-topic join).
    pub fn connect<B: Data>(&self, other: &KeyedStream<B, K>) -> KeyedConnectedStreams<T, B, K> {
        KeyedConnectedStreams { first: self.clone(), second: other.clone() }
    }

    /// Connects with a stream whose records go to every subtask and update broadcast
    /// state (Flink's `connect(broadcastStream)` on a keyed stream).
    pub fn connect_broadcast<B: Data>(&self, broadcast: &DataStream<B>) -> KeyedBroadcastConnectedStream<T, B, K> {
        KeyedBroadcastConnectedStream { keyed: self.clone(), broadcast: broadcast.broadcast() }
    }

    /// The stream with its key partitioning, for non-keyed operations.
    pub fn as_data_stream(&self) -> DataStream<T> {
        self.stream.clone()
    }
}

impl<T, K> Clone for KeyedStream<T, K> {
    fn clone(&self) -> Self {
        Self { stream: self.stream.clone(), key_fn: self.key_fn.clone() }
    }
}
