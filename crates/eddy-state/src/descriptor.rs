//! State descriptors: a state's name, kind and types, and for reducing and aggregating
//! state the function that folds values. A function declares its state by handing a
//! descriptor to its runtime context; the same name always means the same state.

use std::any::{type_name, TypeId};
use std::marker::PhantomData;
use std::sync::Arc;

/// When a keyed state value's time to live starts again (Flink's `StateTtlConfig.UpdateType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlUpdateType {
    /// Creating or writing a value resets its time to live.
    OnCreateAndWrite,
    /// Reading it does too.
    OnReadAndWrite,
}

/// Time to live of keyed state values (Flink's `StateTtlConfig`): an expired value is never
/// returned; it is dropped when it is next touched and left out of snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateTtlConfig {
    pub ttl_ms: u64,
    pub update_type: TtlUpdateType,
}

impl StateTtlConfig {
    /// Values live `ttl_ms` after they were created or last written.
    pub fn new(ttl_ms: u64) -> Self {
        Self { ttl_ms, update_type: TtlUpdateType::OnCreateAndWrite }
    }

    pub fn with_update_type(mut self, update_type: TtlUpdateType) -> Self {
        self.update_type = update_type;
        self
    }
}

/// The five kinds of keyed state (and the list / broadcast kinds of operator state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Value,
    List,
    Map,
    Reducing,
    Aggregating,
    /// A keyed operator's timers: kept on the heap on every backend.
    Timers,
}

/// What a backend records about a declared state, to recognise a second declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateMeta {
    pub name: String,
    pub kind: StateKind,
    /// The Rust type kept per key, for messages.
    pub stored_type: &'static str,
    pub stored_type_id: TypeId,
    pub ttl: Option<StateTtlConfig>,
}

impl StateMeta {
    pub(crate) fn of<S: 'static>(name: &str, kind: StateKind) -> Self {
        Self {
            name: name.to_string(),
            kind,
            stored_type: type_name::<S>(),
            stored_type_id: TypeId::of::<S>(),
            ttl: None,
        }
    }

    /// Its kind and type without the time to live: what a snapshot records
    /// ([`crate::keyed::StateType`]).
    pub(crate) fn declared_as(&self) -> String {
        format!("{:?}State<{}>", self.kind, short_type_name(self.stored_type))
    }

    pub(crate) fn describe(&self) -> String {
        match self.ttl {
            None => self.declared_as(),
            Some(ttl) => format!("{} with a time to live of {} ms", self.declared_as(), ttl.ttl_ms),
        }
    }
}

/// A type's name without module paths (`alloc::vec::Vec<app::Order>` → `Vec<Order>`):
/// how snapshots record a state's type, so that moving a type between modules or
/// binaries (an example, then the real job) restores, while another type is refused.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    // Where the path being read started in `out`: a `::` drops what came since.
    let mut path_start = 0;
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(path_start);
            continue;
        }
        out.push(c);
        if !(c.is_alphanumeric() || c == '_') {
            path_start = out.len();
        }
    }
    out
}

/// Declares a `ValueState<T>`: one value per key, with an optional default returned when
/// the key has no value yet.
#[derive(Clone)]
pub struct ValueStateDescriptor<T> {
    pub(crate) name: String,
    pub(crate) default: Option<T>,
    pub(crate) ttl: Option<StateTtlConfig>,
}

impl<T> ValueStateDescriptor<T> {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), default: None, ttl: None }
    }

    /// The value `value()` returns for a key that has none.
    pub fn with_default(mut self, default: T) -> Self {
        self.default = Some(default);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the state's values a time to live.
    pub fn with_ttl(mut self, ttl: StateTtlConfig) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// Declares a `ListState<T>` (keyed) or an operator list state.
pub struct ListStateDescriptor<T> {
    pub(crate) name: String,
    pub(crate) ttl: Option<StateTtlConfig>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for ListStateDescriptor<T> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), ttl: self.ttl, _type: PhantomData }
    }
}

impl<T> ListStateDescriptor<T> {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), ttl: None, _type: PhantomData }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the state's values a time to live.
    pub fn with_ttl(mut self, ttl: StateTtlConfig) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// Declares a `MapState<K, V>` (keyed) or a broadcast state.
pub struct MapStateDescriptor<K, V> {
    pub(crate) name: String,
    pub(crate) ttl: Option<StateTtlConfig>,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for MapStateDescriptor<K, V> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), ttl: self.ttl, _types: PhantomData }
    }
}

impl<K, V> MapStateDescriptor<K, V> {
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), ttl: None, _types: PhantomData }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the state's values a time to live.
    pub fn with_ttl(mut self, ttl: StateTtlConfig) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

/// The function a `ReducingState<T>` folds added values with.
pub type ReduceFn<T> = Arc<dyn Fn(T, T) -> T + Send + Sync>;

/// Declares a `ReducingState<T>`: `add` folds the value into the stored one with `reduce`.
pub struct ReducingStateDescriptor<T> {
    pub(crate) name: String,
    pub(crate) reduce: ReduceFn<T>,
    pub(crate) ttl: Option<StateTtlConfig>,
}

impl<T> Clone for ReducingStateDescriptor<T> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), reduce: self.reduce.clone(), ttl: self.ttl }
    }
}

impl<T> ReducingStateDescriptor<T> {
    pub fn new(name: impl Into<String>, reduce: impl Fn(T, T) -> T + Send + Sync + 'static) -> Self {
        Self { name: name.into(), reduce: Arc::new(reduce), ttl: None }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the state's values a time to live.
    pub fn with_ttl(mut self, ttl: StateTtlConfig) -> Self {
        self.ttl = Some(ttl);
        self
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
    pub(crate) ttl: Option<StateTtlConfig>,
}

impl<F> Clone for AggregatingStateDescriptor<F> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), function: self.function.clone(), ttl: self.ttl }
    }
}

impl<F: AggregateFunction> AggregatingStateDescriptor<F> {
    pub fn new(name: impl Into<String>, function: F) -> Self {
        Self { name: name.into(), function: Arc::new(function), ttl: None }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Gives the state's values a time to live.
    pub fn with_ttl(mut self, ttl: StateTtlConfig) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn type_names_lose_their_module_paths_only() {
        assert_eq!(short_type_name("u64"), "u64");
        assert_eq!(short_type_name("alloc::vec::Vec<(u64, u64)>"), "Vec<(u64, u64)>");
        assert_eq!(
            short_type_name("std::collections::hash::map::HashMap<alloc::string::String, app::orders::Order>"),
            "HashMap<String, Order>"
        );
        assert_eq!(short_type_name("(alloc::string::String, [u8; 4], &str)"), "(String, [u8; 4], &str)");
    }
}
