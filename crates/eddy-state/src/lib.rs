//! eddy's managed state: what a job remembers between records.
//!
//! - **Keyed state** ([`keyed`]): `ValueState`, `ListState`, `MapState`, `ReducingState`
//!   and `AggregatingState`, declared by descriptors ([`descriptor`]) and scoped to the
//!   current key. They live in a [`keyed::KeyedStateBackend`], organised by key group so
//!   that a snapshot or a rescale can take a range of key groups. This crate holds the heap
//!   backend; RocksDB comes in its own crate behind the same trait.
//! - **Operator state** ([`operator`]): even-split and union list state and broadcast
//!   state, held per operator instance, and the functions that redistribute them when the
//!   parallelism changes.
//!
//! Functions keep their state handles in `Option`s filled in `open()`; [`DeclaredState`]
//! reads one, naming the state when it was not declared. Each keyed snapshot records
//! every state's declared type, so a restore refuses a state declared again as another
//! type, naming both. `conformance` is the one suite every backend passes (a test
//! harness, with the `testing` feature only: backends' tests turn it on).
//!
//! Depends only on `eddy-types`. Values are kept as Rust values on the heap and serialized
//! (serde + postcard) only when a snapshot is taken.

#[cfg(feature = "testing")]
pub mod conformance;
mod declared;
pub mod descriptor;
pub mod error;
pub mod keyed;
pub mod operator;

pub use declared::DeclaredState;
pub use descriptor::{
    AggregateFunction, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor,
    StateKind, StateTtlConfig, TtlUpdateType, ValueStateDescriptor,
};
pub use error::{StateError, StateErrorKind};
pub use keyed::{
    AggregatingState, BackendInstance, HeapStateBackend, KeyedBackendFactory, KeyedStateBackend, KeyedStateSnapshot,
    ListState, MapState, ReducingState, TableKeyedStateBackend, ValueState,
};
pub use operator::{
    BroadcastState, OperatorListState, OperatorStateSnapshot, OperatorStateStore, ReadOnlyBroadcastState,
};

/// What a state value must be: cloneable, serializable, and sendable to and readable from
/// the thread that writes a snapshot (a heap snapshot shares key groups with the task).
pub trait StateValue: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static {}
impl<T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static> StateValue for T {}

/// What a MapState key must be, in addition to a value.
pub trait MapKey: StateValue + Eq + std::hash::Hash {}
impl<T: StateValue + Eq + std::hash::Hash> MapKey for T {}
