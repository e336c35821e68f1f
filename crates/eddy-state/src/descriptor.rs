//! State descriptors: a state's name, kind and types, and for reducing and aggregating
//! state the function that folds values. A function declares its state by handing a
//! descriptor to its runtime context; the same name always means the same state.

use std::any::{type_name, TypeId};
use std::marker::PhantomData;
use std::sync::Arc;

/// The five kinds of keyed state (and the list / broadcast kinds of operator state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Value,
    List,
    Map,
    Reducing,
    Aggregating,
}

/// What a backend records about a declared state, to recognise a second declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateMeta {
    pub name: String,
    pub kind: StateKind,
    /// The Rust type kept per key, for messages.
    pub stored_type: &'static str,
    pub stored_type_id: TypeId,
}

impl StateMeta {
    pub(crate) fn of<S: 'static>(name: &str, kind: StateKind) -> Self {
        Self { name: name.to_string(), kind, stored_type: type_name::<S>(), stored_type_id: TypeId::of::<S>() }
    }

    pub(crate) fn describe(&self) -> String {
        format!("{:?}State<{}>", self.kind, self.stored_type)
    }
}

/// Declares a `ValueState<T>`: one value per key, with an optional default returned when
/// the key has no value yet.
#[derive(Clone)]
pub struct ValueStateDescriptor<T> {
    pub(crate) name: String,
    pub(crate) default: Option<T>,
}

impl<T> ValueStateDescriptor<T> {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), default: None }
    }

    /// The value `value()` returns for a key that has none.
    pub fn with_default(mut self, default: T) -> Self {
        self.default = Some(default);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Declares a `ListState<T>` (keyed) or an operator list state.
pub struct ListStateDescriptor<T> {
    pub(crate) name: String,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for ListStateDescriptor<T> {
    fn clone(&self) -> Self {
        Self::new(self.name.clone())
    }
}

impl<T> ListStateDescriptor<T> {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), _type: PhantomData }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Declares a `MapState<K, V>` (keyed) or a broadcast state.
pub struct MapStateDescriptor<K, V> {
    pub(crate) name: String,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for MapStateDescriptor<K, V> {
    fn clone(&self) -> Self {
        Self::new(self.name.clone())
    }
}

impl<K, V> MapStateDescriptor<K, V> {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), _types: PhantomData }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The function a `ReducingState<T>` folds added values with.
pub type ReduceFn<T> = Arc<dyn Fn(T, T) -> T + Send + Sync>;

/// Declares a `ReducingState<T>`: `add` folds the value into the stored one with `reduce`.
pub struct ReducingStateDescriptor<T> {
    pub(crate) name: String,
    pub(crate) reduce: ReduceFn<T>,
}

impl<T> Clone for ReducingStateDescriptor<T> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), reduce: self.reduce.clone() }
    }
}

impl<T> ReducingStateDescriptor<T> {
    pub fn new(name: impl Into<String>, reduce: impl Fn(T, T) -> T + Send + Sync + 'static) -> Self {
        Self { name: name.into(), reduce: Arc::new(reduce) }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Flink's `AggregateFunction<IN, ACC, OUT>`: folds inputs into an accumulator and reads a
/// result from it.
pub trait AggregateFunction: Send + Sync + 'static {
    type In;
    type Acc;
    type Out;
    fn create_accumulator(&self) -> Self::Acc;
    fn add(&self, value: Self::In, accumulator: Self::Acc) -> Self::Acc;
    fn get_result(&self, accumulator: &Self::Acc) -> Self::Out;
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

/// Declares an `AggregatingState<IN, OUT>` backed by an [`AggregateFunction`].
pub struct AggregatingStateDescriptor<F> {
    pub(crate) name: String,
    pub(crate) function: Arc<F>,
}

impl<F> Clone for AggregatingStateDescriptor<F> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), function: self.function.clone() }
    }
}

impl<F: AggregateFunction> AggregatingStateDescriptor<F> {
    pub fn new(name: impl Into<String>, function: F) -> Self {
        Self { name: name.into(), function: Arc::new(function) }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
