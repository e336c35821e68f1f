//! The streams a job is built from: [`DataStream`], [`KeyedStream`] (after `key_by`),
//! [`ConnectedStreams`] / [`KeyedConnectedStreams`] (after `connect`) and
//! [`BroadcastConnectedStream`]; [`WindowedStream`] and [`AllWindowedStream`] after
//! `window` and `window_all`.

mod all_windowed;
mod connected;
mod keyed;
mod windowed;

pub use all_windowed::AllWindowedStream;
pub use connected::{BroadcastConnectedStream, ConnectedStreams, KeyedBroadcastConnectedStream, KeyedConnectedStreams};
pub use keyed::KeyedStream;
pub use windowed::WindowedStream;

use crate::env::{EdgeDraft, Env, NodeDraft};
use crate::function::*;
use crate::key::{BorrowedKey, KeyFn, OwnedKey};
use crate::operator::logic::*;
use crate::operator::one_input::{OneInputLogic, OneInputOperator};
use crate::operator::timestamps::TimestampsAndWatermarks;
use crate::sink::{PrintSink, TextFileSink};
use crate::time::{TimestampFn, WatermarkStrategy};
use crate::Data;
use eddy_runtime::graph::{OperatorFactory, OutputPort, Partitioning, TypedPort};
use eddy_runtime::Collector;
use eddy_types::{Key, NodeId};
use std::fmt::{Debug, Display};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

/// A stream of records of type `T` (Flink's `DataStream`). Operations add operators to the
/// job; nothing runs until [`Env::execute`]. Setters (`name`, `uid`, `set_parallelism`)
/// apply to the operator that produced this stream.
pub struct DataStream<T> {
    pub(crate) env: Env,
    /// The output ports this stream reads from: one, or several after `union`.
    pub(crate) inputs: Vec<(NodeId, usize)>,
    pub(crate) partitioning: Option<Partitioning>,
    /// The records' event time, if the stream has timestamps (see [`crate::time`]).
    pub(crate) timestamps: Option<TimestampFn<T>>,
    pub(crate) _type: PhantomData<fn() -> T>,
}

impl<T> Clone for DataStream<T> {
    fn clone(&self) -> Self {
        Self {
            env: self.env.clone(),
            inputs: self.inputs.clone(),
            partitioning: self.partitioning.clone(),
            timestamps: self.timestamps.clone(),
            _type: PhantomData,
        }
    }
}

impl<T: Data> DataStream<T> {
    pub(crate) fn from_port(env: Env, node: NodeId, port: usize) -> Self {
        Self { env, inputs: vec![(node, port)], partitioning: None, timestamps: None, _type: PhantomData }
    }

    /// The edges from this stream into input `to_input` of a new node.
    pub(crate) fn edges(&self, to_input: usize) -> Vec<EdgeDraft> {
        self.inputs
            .iter()
            .map(|&(from, from_port)| EdgeDraft {
                from,
                from_port,
                to: NodeId(0),
                to_input,
                partitioning: self.partitioning.clone(),
            })
            .collect()
    }

    /// Adds a one-input operator reading this stream.
    pub(crate) fn one_input<O: Data, L>(&self, name: &str, logic: L, keyed: bool) -> DataStream<O>
    where
        L: OneInputLogic<T, O> + Clone + Send + Sync,
    {
        let node = NodeDraft {
            name: name.to_string(),
            uid: None,
            parallelism: None,
            non_parallel: false,
            keyed,
            factory: OperatorFactory::OneInput {
                operator: OneInputOperator::<T, O, L>::factory(logic, keyed),
                input: Arc::new(TypedPort::<T>::new()),
            },
            outputs: vec![OutputPort { tag: None, port_type: Arc::new(TypedPort::<O>::new()) }],
            chainable: true,
            coordinator: None,
            exclusive_resources: Vec::new(),
        };
        let id = self.env.add_node(node, self.edges(0));
        DataStream::from_port(self.env.clone(), id, 0)
    }

    /// Adds a sink reading this stream.
    pub(crate) fn sink_node<L>(&self, name: &str, logic: L) -> DataStreamSink
    where
        L: OneInputLogic<T, ()> + Clone + Send + Sync,
    {
        let node = NodeDraft {
            name: name.to_string(),
            uid: None,
            parallelism: None,
            non_parallel: false,
            keyed: false,
            factory: OperatorFactory::OneInput {
                operator: OneInputOperator::<T, (), L>::factory(logic, false),
                input: Arc::new(TypedPort::<T>::new()),
            },
            outputs: Vec::new(),
            chainable: true,
            coordinator: None,
            exclusive_resources: Vec::new(),
        };
        let node = self.env.add_node(node, self.edges(0));
        DataStreamSink { env: self.env.clone(), node }
    }

    fn with_partitioning(&self, partitioning: Partitioning) -> Self {
        Self { partitioning: Some(partitioning), ..self.clone() }
    }

    fn with_node(&self, f: impl FnOnce(&mut NodeDraft)) {
        if let [(node, _)] = self.inputs[..] {
            f(&mut self.env.inner.borrow_mut().nodes[node.0 as usize]);
        }
    }

    /// One record in, one out.
    pub fn map<O: Data, F>(&self, f: F) -> DataStream<O>
    where
        F: FnMut(T) -> O + Clone + Send + Sync + 'static,
    {
        self.one_input("Map", MapLogic(f, NoLifecycle), false)
    }

    /// Keeps the records for which `f` is true.
    pub fn filter<F>(&self, f: F) -> DataStream<T>
    where
        F: FnMut(&T) -> bool + Clone + Send + Sync + 'static,
    {
        let mut filtered = self.one_input("Filter", FilterLogic(f, NoLifecycle), false);
        filtered.timestamps = self.timestamps.clone();
        filtered
    }

    /// Gives the records timestamps and makes watermarks from them, per subtask, right
    /// here (Flink's `assignTimestampsAndWatermarks`): watermarks from upstream are
    /// replaced by the strategy's. The strategy needs a timestamp assigner.
    pub fn assign_timestamps_and_watermarks(&self, strategy: WatermarkStrategy<T>) -> DataStream<T> {
        let Some(timestamps) = strategy.timestamps.clone() else {
            self.env.inner.borrow_mut().problems.push(
                "assign_timestamps_and_watermarks: the watermark strategy has no timestamp assigner; add one with \
                    `with_timestamp_assigner`"
                    .to_string(),
            );
            return self.clone();
        };
        let logic = TimestampsAndWatermarks::new(strategy, timestamps.clone());
        let mut stream = self.one_input("Timestamps/Watermarks", logic, false);
        stream.timestamps = Some(timestamps);
        stream
    }

    /// The same stream, whose records' event time is `timestamps` (watermarks come from
    /// upstream as they are): after an operation that made new records, such as a window.
    pub fn with_timestamps(&self, timestamps: impl Fn(&T) -> i64 + Send + Sync + 'static) -> DataStream<T> {
        DataStream { timestamps: Some(Arc::new(timestamps)), ..self.clone() }
    }

    /// One record in, any number out through the collector.
    pub fn flat_map<O: Data, F>(&self, f: F) -> DataStream<O>
    where
        F: FnMut(T, &mut Collector<'_, O>) + Clone + Send + Sync + 'static,
    {
        self.one_input("Flat Map", FlatMapLogic(f, NoLifecycle), false)
    }

    /// A map with lifecycle and operator state.
    pub fn rich_map<O: Data, F: RichMapFunction<T, O>>(&self, function: F) -> DataStream<O> {
        self.one_input("Map", RichMapLogic::<T, (), F> { function, key: None }, false)
    }

    /// A flat-map with lifecycle and operator state.
    pub fn rich_flat_map<O: Data, F: RichFlatMapFunction<T, O>>(&self, function: F) -> DataStream<O> {
        self.one_input("Flat Map", RichFlatMapLogic::<T, (), F> { function, key: None }, false)
    }

    /// A [`ProcessFunction`]: records and side outputs.
    pub fn process<O: Data, F: ProcessFunction<T, O>>(&self, function: F) -> DataStream<O> {
        self.one_input("Process", ProcessLogic(function), false)
    }

    /// Partitions the stream by key: every record of a key goes to the same subtask, whose
    /// keyed state holds that key's state.
    pub fn key_by<K: Key, F>(&self, key_fn: F) -> KeyedStream<T, K>
    where
        F: Fn(&T) -> K + Send + Sync + 'static,
    {
        KeyedStream::new(self, Arc::new(OwnedKey(key_fn, PhantomData)) as KeyFn<T, K>)
    }

    /// Like [`DataStream::key_by`], with a selector that returns a reference to the key
    /// inside the record (`|e: &Event| &e.path`): the key is never cloned, neither for
    /// routing nor for state access.
    pub fn key_by_ref<K: Key, F>(&self, key_fn: F) -> KeyedStream<T, K>
    where
        F: for<'a> Fn(&'a T) -> &'a K + Send + Sync + 'static,
    {
        KeyedStream::new(self, Arc::new(BorrowedKey(key_fn, PhantomData)) as KeyFn<T, K>)
    }

    /// This stream and others as one stream.
    pub fn union(&self, others: &[DataStream<T>]) -> DataStream<T> {
        let mut union = self.clone();
        for other in others {
            union.inputs.extend(other.inputs.iter().copied());
        }
        union
    }

    /// Round-robin over the next operator's subtasks.
    pub fn rebalance(&self) -> DataStream<T> {
        self.with_partitioning(Partitioning::Rebalance)
    }

    /// Uniformly random over the next operator's subtasks.
    pub fn shuffle(&self) -> DataStream<T> {
        self.with_partitioning(Partitioning::Shuffle)
    }

    /// Every record to every subtask of the next operator.
    pub fn broadcast(&self) -> DataStream<T> {
        self.with_partitioning(Partitioning::Broadcast)
    }

    /// Subtask i to subtask i; the next operator must have the same parallelism.
    pub fn forward(&self) -> DataStream<T> {
        self.with_partitioning(Partitioning::Forward)
    }

    /// Connects with another stream for a two-input operator.
    pub fn connect<B: Data>(&self, other: &DataStream<B>) -> ConnectedStreams<T, B> {
        ConnectedStreams { first: self.clone(), second: other.clone() }
    }

    /// Connects with a stream whose records are broadcast to every subtask and update
    /// broadcast state (Flink's `connect(broadcastStream)`).
    pub fn connect_broadcast<B: Data>(&self, broadcast: &DataStream<B>) -> BroadcastConnectedStream<T, B> {
        BroadcastConnectedStream { stream: self.clone(), broadcast: broadcast.broadcast() }
    }

    /// The side output `tag` of the operator that produced this stream.
    pub fn side_output<X: Data>(&self, tag: &OutputTag<X>) -> DataStream<X> {
        let (node, _) = self.inputs[0];
        let mut inner = self.env.inner.borrow_mut();
        let draft = &mut inner.nodes[node.0 as usize];
        let outputs = &mut draft.outputs;
        let port = match outputs.iter().position(|p| p.tag.as_deref() == Some(tag.id())) {
            Some(port) if outputs[port].port_type.type_name() != std::any::type_name::<X>() => {
                let problem = format!(
                    "side output '{}' of operator '{}' is read as {} and as {}; use one type per tag",
                    tag.id(),
                    draft.name,
                    outputs[port].port_type.type_name(),
                    std::any::type_name::<X>()
                );
                inner.problems.push(problem);
                // A port of its own keeps the graph well-typed until the job is refused.
                let outputs = &mut inner.nodes[node.0 as usize].outputs;
                outputs
                    .push(OutputPort { tag: Some(tag.id().to_string()), port_type: Arc::new(TypedPort::<X>::new()) });
                outputs.len() - 1
            }
            Some(port) => port,
            None => {
                outputs
                    .push(OutputPort { tag: Some(tag.id().to_string()), port_type: Arc::new(TypedPort::<X>::new()) });
                outputs.len() - 1
            }
        };
        drop(inner);
        DataStream::from_port(self.env.clone(), node, port)
    }

    /// Writes every record to stdout (Flink's `print`): `N> record` at parallelism > 1.
    pub fn print(&self) -> DataStreamSink
    where
        T: Debug + Sync,
    {
        self.sink_node("Print to Std. Out", SinkLogic(PrintSink::new()))
    }

    /// Writes every record as a line of text: one file at parallelism 1, else a directory
    /// with one file per subtask (`1`, `2`, …).
    pub fn write_as_text(&self, path: impl Into<PathBuf>) -> DataStreamSink
    where
        T: Display + Sync,
    {
        self.sink_node("Text File Sink", SinkLogic(TextFileSink::new(path.into())))
    }

    /// A user sink.
    pub fn add_sink<S: Sink<T>>(&self, sink: S) -> DataStreamSink {
        let exclusive = sink.exclusive_resources();
        self.sink_node("Sink", SinkLogic(sink)).with_node(|n| n.exclusive_resources = exclusive)
    }

    /// Names the operator that produced this stream.
    pub fn name(self, name: &str) -> Self {
        self.with_node(|n| n.name = name.to_string());
        self
    }

    /// Sets a stable id for the operator, used to match its state on restore.
    pub fn uid(self, uid: &str) -> Self {
        self.with_node(|n| n.uid = Some(uid.to_string()));
        self
    }

    pub fn set_parallelism(self, parallelism: u32) -> Self {
        self.with_node(|n| n.parallelism = Some(parallelism));
        self
    }

    /// Runs the producing operator in its own subtask, never fused with its neighbours.
    pub fn disable_chaining(self) -> Self {
        self.with_node(|n| n.chainable = false);
        self
    }

    pub(crate) fn set_non_parallel(self) -> Self {
        self.with_node(|n| {
            n.non_parallel = true;
            n.parallelism = Some(1);
        });
        self
    }
}

/// The end of a stream (Flink's `DataStreamSink`), to name it or set its parallelism.
pub struct DataStreamSink {
    env: Env,
    node: NodeId,
}

impl DataStreamSink {
    fn with_node(self, f: impl FnOnce(&mut NodeDraft)) -> Self {
        f(&mut self.env.inner.borrow_mut().nodes[self.node.0 as usize]);
        self
    }

    pub fn name(self, name: &str) -> Self {
        self.with_node(|n| n.name = name.to_string())
    }

    pub fn uid(self, uid: &str) -> Self {
        self.with_node(|n| n.uid = Some(uid.to_string()))
    }

    pub fn set_parallelism(self, parallelism: u32) -> Self {
        self.with_node(|n| n.parallelism = Some(parallelism))
    }

    pub fn disable_chaining(self) -> Self {
        self.with_node(|n| n.chainable = false)
    }
}
