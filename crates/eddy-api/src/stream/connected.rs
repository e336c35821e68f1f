//! Two streams into one two-input operator.

use super::{DataStream, KeyedStream};
use crate::env::NodeDraft;
use crate::function::*;
use crate::operator::logic::*;
use crate::operator::two_input::{TwoInputLogic, TwoInputOp};
use crate::Data;
use eddy_runtime::graph::{OperatorFactory, OutputPort, TypedPort};
use eddy_types::Key;
use std::sync::Arc;

#[allow(clippy::too_many_arguments)]
fn two_input<A: Data, B: Data, O: Data, L>(
    name: &str,
    first: &DataStream<A>,
    second: &DataStream<B>,
    logic: L,
    keyed: bool,
    second_first: bool,
) -> DataStream<O>
where
    L: TwoInputLogic<A, B, O> + Clone + Send + Sync,
{
    let node = NodeDraft {
        name: name.to_string(),
        uid: None,
        parallelism: None,
        non_parallel: false,
        keyed,
        factory: OperatorFactory::TwoInput {
            operator: TwoInputOp::<A, B, O, L>::factory(logic, keyed),
            driver: TwoInputOp::<A, B, O, L>::driver_factory(second_first),
        },
        outputs: vec![OutputPort { tag: None, port_type: Arc::new(TypedPort::<O>::new()) }],
        chainable: true,
        coordinator: None,
        exclusive_resources: Vec::new(),
    };
    let mut edges = first.edges(0);
    edges.extend(second.edges(1));
    let id = first.env.add_node(node, edges);
    DataStream::from_port(first.env.clone(), id, 0)
}

/// Two streams connected without keys (Flink's `ConnectedStreams`).
pub struct ConnectedStreams<A, B> {
    pub(crate) first: DataStream<A>,
    pub(crate) second: DataStream<B>,
}

impl<A: Data, B: Data> ConnectedStreams<A, B> {
    /// A [`CoFlatMapFunction`] over both inputs.
    pub fn co_flat_map<O: Data, F: CoFlatMapFunction<A, B, O>>(&self, function: F) -> DataStream<O> {
        two_input(
            "Co-Flat Map",
            &self.first,
            &self.second,
            CoFlatMapLogic::<A, B, (), F> { function, keys: None },
            false,
            false,
        )
    }
}

/// Two streams keyed by the same key type, connected (Flink's keyed `ConnectedStreams`).
pub struct KeyedConnectedStreams<A, B, K> {
    pub(crate) first: KeyedStream<A, K>,
    pub(crate) second: KeyedStream<B, K>,
}

impl<A: Data, B: Data, K: Key> KeyedConnectedStreams<A, B, K> {
    /// A [`CoFlatMapFunction`] with keyed state shared by both sides of a key.
    pub fn co_flat_map<O: Data, F: CoFlatMapFunction<A, B, O>>(&self, function: F) -> DataStream<O> {
        let keys = Some((self.first.scope(), self.second.scope()));
        two_input(
            "Co-Flat Map",
            &self.first.stream,
            &self.second.stream,
            CoFlatMapLogic { function, keys },
            true,
            false,
        )
    }

    /// A [`KeyedCoProcessFunction`]: the current key, keyed state, side outputs.
    pub fn co_process<O: Data, F: KeyedCoProcessFunction<K, A, B, O>>(&self, function: F) -> DataStream<O> {
        let keys = (self.first.scope(), self.second.scope());
        two_input(
            "Co-Process",
            &self.first.stream,
            &self.second.stream,
            KeyedCoProcessLogic {
                function,
                keys,
                timestamps: (self.first.stream.timestamps.clone(), self.second.stream.timestamps.clone()),
            },
            true,
            false,
        )
    }
}

/// A stream connected with a broadcast stream (Flink's `BroadcastConnectedStream`).
pub struct BroadcastConnectedStream<I, B> {
    pub(crate) stream: DataStream<I>,
    pub(crate) broadcast: DataStream<B>,
}

impl<I: Data, B: Data> BroadcastConnectedStream<I, B> {
    /// A [`BroadcastProcessFunction`]: broadcast elements update broadcast state, stream
    /// elements read it.
    pub fn process<O: Data, F: BroadcastProcessFunction<I, B, O>>(&self, function: F) -> DataStream<O> {
        let broadcast_first = function.broadcast_first();
        two_input("Broadcast Process", &self.stream, &self.broadcast, BroadcastLogic(function), false, broadcast_first)
    }
}

/// A keyed stream connected with a broadcast stream (Flink's `BroadcastConnectedStream`
/// of a `KeyedStream`).
pub struct KeyedBroadcastConnectedStream<I, B, K> {
    pub(crate) keyed: KeyedStream<I, K>,
    pub(crate) broadcast: DataStream<B>,
}

impl<I: Data, B: Data, K: Key> KeyedBroadcastConnectedStream<I, B, K> {
    /// A [`KeyedBroadcastProcessFunction`]: keyed state and timers for stream elements,
    /// broadcast state written by broadcast elements.
    pub fn process<O: Data, F: KeyedBroadcastProcessFunction<K, I, B, O>>(&self, function: F) -> DataStream<O> {
        let second_first = function.broadcast_first();
        let logic =
            KeyedBroadcastLogic { function, key: self.keyed.scope(), timestamps: self.keyed.stream.timestamps.clone() };
        two_input("Keyed Broadcast Process", &self.keyed.stream, &self.broadcast, logic, true, second_first)
    }
}
