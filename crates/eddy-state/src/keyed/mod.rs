//! Keyed state: the five state kinds, the backend trait they are stored behind, and the
//! backend that keeps them in tables on the heap, over a raw store or not.
//!
//! A subtask of a keyed operator owns one backend for the key groups it is assigned. The
//! runtime *installs* it on the subtask's thread ([`install_backend`]) and sets the current
//! key before each record; the state handles ([`ValueState`] and friends) are small,
//! `Send + Sync` ids that find the installed backend through a thread-local. That keeps
//! Flink's `count.value()` style without `Rc` in user structs, and makes a handle used
//! outside a keyed context an error rather than undefined behaviour.
//!
//! Where the values are:
//! - [`HeapTable`]: per key group, a hash table of Rust values — all of them (heap
//!   backend), or a write-back cache of the hot ones over a [`RawTable`] (RocksDB);
//!   [`TableKeyedStateBackend`] holds one per declared state.
//! - [`MapEntriesTable`]: a MapState in a raw store, one entry per user key.
//! - [`TimerQueue`]: a keyed operator's timers, on the heap on every backend.
//! - [`RawStore`] / [`RawTable`]: the byte store below (implemented by
//!   `eddy-state-rocksdb`), laid out so that a key group is a range scan.
//!
//! Snapshots come in two forms: canonical ([`KeyedStateSnapshot::states`], key group by
//! key group, the same bytes whatever the backend; `canonical.rs`) and native
//! ([`NativeSnapshot`], a backend's own files, for incremental checkpoints). What a
//! snapshot still has to do off the task thread is [`SharedWork`], done once for every
//! copy of the snapshot.

mod aggregating;
mod backend;
mod canonical;
mod cow;
mod factory;
mod heap_chain;
mod heap_group;
mod heap_table;
mod list;
mod map;
mod map_entries;
mod native;
mod raw;
mod reducing;
mod shared_work;
mod table_backend;
mod timers;
mod value;

pub use aggregating::AggregatingState;
pub use backend::{
    install_backend, take_backend, with_backend, CurrentKey, DeferredKeyGroups, DeferredState, InlineKey,
    KeyedStateBackend, KeyedStateEntries, KeyedStateSnapshot, KeyedTable, NamespaceForm, StateId, StateType, TableSpec,
};
pub use canonical::canonical_key_group;
pub use factory::{BackendInstance, HeapStateBackend, KeyedBackendFactory};
pub use heap_chain::{read_heap_chains, HeapChain, HEAP_BACKEND};
pub use heap_table::HeapTable;
pub use list::ListState;
pub use map::MapState;
pub use map_entries::MapEntriesTable;
pub use native::{
    remove_orphans, LocalFiles, NativeFile, NativeFiles, NativeSnapshot, NativeTable, ReadCanonicalFn, Unstored,
    OWNER_FILE,
};
pub use raw::{concat_encoded_lists, HeldWrite, RawLayout, RawStore, RawTable};
pub use reducing::ReducingState;
pub use shared_work::{SharedWork, Work};
pub use table_backend::TableKeyedStateBackend;
pub use timers::{
    declare_timers, last_timer_time, next_timer_time, pop_due_timer, with_timers, Timer, TimerQueue, EVENT_TIME_TIMERS,
    PROCESSING_TIME_TIMERS,
};
pub use value::ValueState;

use crate::descriptor::{StateKind, StateMeta, StateTtlConfig};
use crate::error::{StateError, StateErrorKind};
use crate::StateValue;
use std::sync::Arc;

/// Registers a state whose per-key value is an `S` on the installed backend, or finds the
/// one registered before under the same name. Shared by all five handle kinds.
fn declare<S: StateValue>(
    name: &str,
    kind: StateKind,
    ttl: Option<StateTtlConfig>,
) -> Result<(StateId, Arc<str>), StateError> {
    let mut meta = StateMeta::of::<S>(name, kind);
    meta.ttl = ttl;
    with_backend(name, |backend| {
        let id = backend.register(meta, &mut |spec: TableSpec| Box::new(HeapTable::<S>::from_spec(name, spec, ttl)))?;
        Ok((id, Arc::from(name)))
    })
}

/// Runs `f` on the current key and the typed table of state `id`. Shared by all handles.
fn with_table<S: StateValue, R>(
    id: StateId,
    name: &str,
    f: impl FnOnce(&CurrentKey, &mut HeapTable<S>) -> Result<R, StateError>,
) -> Result<R, StateError> {
    with_backend(name, |backend| {
        let (key, table) = backend.current_key_and_table(id, name)?;
        let table = table
            .as_any_mut()
            .downcast_mut::<HeapTable<S>>()
            .ok_or_else(|| StateError::from(StateErrorKind::ForeignHandle { state: name.to_string() }))?;
        f(key, table)
    })
}
