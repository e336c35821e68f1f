//! The operator state of one operator instance, and its snapshot form.

use super::broadcast::{BroadcastState, ReadOnlyBroadcastState};
use super::list::OperatorListState;
use crate::descriptor::{short_type_name, ListStateDescriptor, MapStateDescriptor};
use crate::error::{StateError, StateErrorKind};
use crate::{MapKey, StateValue};
use serde::{Deserialize, Serialize};
use std::any::{type_name, Any, TypeId};
use std::collections::HashMap;

/// How a list state is redistributed when the parallelism changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListDistribution {
    /// Concatenate all lists, cut into contiguous parts (Flink's `getListState`).
    EvenSplit,
    /// Every instance gets the whole concatenation (Flink's `getUnionListState`).
    Union,
}

/// A list state of one instance, each element serialized on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSnapshot {
    pub name: String,
    pub distribution: ListDistribution,
    /// The element type as declared (`u64`…), checked when it is declared again.
    pub element_type: String,
    pub elements: Vec<Vec<u8>>,
}

/// A broadcast state of one instance, each key and value serialized on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BroadcastSnapshot {
    pub name: String,
    /// The entry type as declared (`(K, V)`), checked when it is declared again.
    pub entry_type: String,
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// All operator state of one operator instance at a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorStateSnapshot {
    pub lists: Vec<ListSnapshot>,
    pub broadcasts: Vec<BroadcastSnapshot>,
}

/// Serialized map entries: (key bytes, value bytes).
type EncodedEntries = Vec<(Vec<u8>, Vec<u8>)>;
type EncodeList = fn(&dyn Any, &str) -> Result<Vec<Vec<u8>>, StateError>;
type EncodeMap = fn(&dyn Any, &str) -> Result<EncodedEntries, StateError>;

struct DeclaredList {
    name: String,
    distribution: ListDistribution,
    element_type: &'static str,
    element_type_id: TypeId,
    values: Box<dyn Any + Send>,
    encode: EncodeList,
}

struct DeclaredBroadcast {
    name: String,
    entry_type: &'static str,
    entry_type_id: TypeId,
    map: Box<dyn Any + Send>,
    encode: EncodeMap,
}

/// The operator state of one operator instance (Flink's `OperatorStateStore`).
#[derive(Default)]
pub struct OperatorStateStore {
    lists: Vec<DeclaredList>,
    broadcasts: Vec<DeclaredBroadcast>,
    restored: OperatorStateSnapshot,
    is_restored: bool,
}

pub(crate) fn encode_value<T: Serialize>(value: &T, state: &str) -> Result<Vec<u8>, StateError> {
    postcard::to_allocvec(value).map_err(|e| {
        StateError::from(StateErrorKind::Serialize { state: state.to_string(), message: eddy_types::chain(&e) })
    })
}

pub(crate) fn decode_value<T: serde::de::DeserializeOwned>(bytes: &[u8], state: &str) -> Result<T, StateError> {
    postcard::from_bytes(bytes).map_err(|e| {
        StateError::from(StateErrorKind::Deserialize { state: state.to_string(), message: eddy_types::chain(&e) })
    })
}

fn encode_list<T: StateValue>(values: &dyn Any, state: &str) -> Result<Vec<Vec<u8>>, StateError> {
    let values = values.downcast_ref::<Vec<T>>().expect("list state holds the type it was declared with");
    values.iter().map(|v| encode_value(v, state)).collect()
}

fn encode_map<K: MapKey, V: StateValue>(map: &dyn Any, state: &str) -> Result<EncodedEntries, StateError> {
    let map = map.downcast_ref::<HashMap<K, V>>().expect("broadcast state holds the type it was declared with");
    map.iter().map(|(k, v)| Ok((encode_value(k, state)?, encode_value(v, state)?))).collect()
}

impl OperatorStateStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that hands out the restored state on declaration.
    pub fn restored_from(snapshot: OperatorStateSnapshot) -> Self {
        Self { restored: snapshot, is_restored: true, ..Self::default() }
    }

    /// Whether this instance starts from a snapshot (Flink's `isRestored`).
    pub fn is_restored(&self) -> bool {
        self.is_restored
    }

    /// Even-split list state (Flink's `getListState`).
    pub fn list_state<T: StateValue>(
        &mut self,
        descriptor: &ListStateDescriptor<T>,
    ) -> Result<OperatorListState<'_, T>, StateError> {
        self.declare_list(descriptor, ListDistribution::EvenSplit)
    }

    /// Union list state (Flink's `getUnionListState`).
    pub fn union_list_state<T: StateValue>(
        &mut self,
        descriptor: &ListStateDescriptor<T>,
    ) -> Result<OperatorListState<'_, T>, StateError> {
        self.declare_list(descriptor, ListDistribution::Union)
    }

    fn declare_list<T: StateValue>(
        &mut self,
        descriptor: &ListStateDescriptor<T>,
        distribution: ListDistribution,
    ) -> Result<OperatorListState<'_, T>, StateError> {
        let name = descriptor.name.as_str();
        let index = match self.lists.iter().position(|l| l.name == name) {
            Some(index) => {
                let list = &self.lists[index];
                if list.element_type_id != TypeId::of::<T>() || list.distribution != distribution {
                    return Err(StateError::from(StateErrorKind::IncompatibleDeclaration {
                        name: name.to_string(),
                        first: format!("{:?} ListState<{}>", list.distribution, list.element_type),
                        second: format!("{:?} ListState<{}>", distribution, type_name::<T>()),
                    }));
                }
                index
            }
            None => {
                let mut values: Vec<T> = Vec::new();
                if let Some(pos) = self.restored.lists.iter().position(|l| l.name == name) {
                    let restored = &self.restored.lists[pos];
                    let declared = short_type_name(type_name::<T>());
                    // Unknown in a snapshot of format 1: nothing to check.
                    if !restored.element_type.is_empty() && restored.element_type != declared {
                        return Err(StateError::from(StateErrorKind::RestoredTypeChanged {
                            name: name.to_string(),
                            restored: format!("{:?} ListState<{}>", restored.distribution, restored.element_type),
                            declared: format!("{distribution:?} ListState<{declared}>"),
                        }));
                    }
                    let restored = self.restored.lists.swap_remove(pos);
                    values = restored.elements.iter().map(|e| decode_value(e, name)).collect::<Result<_, _>>()?;
                }
                self.lists.push(DeclaredList {
                    name: name.to_string(),
                    distribution,
                    element_type: type_name::<T>(),
                    element_type_id: TypeId::of::<T>(),
                    values: Box::new(values),
                    encode: encode_list::<T>,
                });
                self.lists.len() - 1
            }
        };
        let values = self.lists[index].values.downcast_mut::<Vec<T>>().expect("type checked above");
        Ok(OperatorListState::new(values))
    }

    /// Broadcast state, writable (in `process_broadcast_element`).
    pub fn broadcast_state<K: MapKey, V: StateValue>(
        &mut self,
        descriptor: &MapStateDescriptor<K, V>,
    ) -> Result<BroadcastState<'_, K, V>, StateError> {
        let index = self.declare_broadcast(descriptor)?;
        let map = self.broadcasts[index].map.downcast_mut::<HashMap<K, V>>().expect("type checked");
        Ok(BroadcastState::new(map))
    }

    /// Broadcast state, read-only (in `process_element`, where writing would make the
    /// instances diverge).
    pub fn read_only_broadcast_state<K: MapKey, V: StateValue>(
        &mut self,
        descriptor: &MapStateDescriptor<K, V>,
    ) -> Result<ReadOnlyBroadcastState<'_, K, V>, StateError> {
        let index = self.declare_broadcast(descriptor)?;
        let map = self.broadcasts[index].map.downcast_ref::<HashMap<K, V>>().expect("type checked");
        Ok(ReadOnlyBroadcastState::new(map))
    }

    fn declare_broadcast<K: MapKey, V: StateValue>(
        &mut self,
        descriptor: &MapStateDescriptor<K, V>,
    ) -> Result<usize, StateError> {
        let name = descriptor.name.as_str();
        if let Some(index) = self.broadcasts.iter().position(|b| b.name == name) {
            let declared = &self.broadcasts[index];
            if declared.entry_type_id != TypeId::of::<(K, V)>() {
                return Err(StateError::from(StateErrorKind::IncompatibleDeclaration {
                    name: name.to_string(),
                    first: format!("BroadcastState<{}>", declared.entry_type),
                    second: format!("BroadcastState<{}>", type_name::<(K, V)>()),
                }));
            }
            return Ok(index);
        }
        let mut map: HashMap<K, V> = HashMap::new();
        if let Some(pos) = self.restored.broadcasts.iter().position(|b| b.name == name) {
            let restored = &self.restored.broadcasts[pos];
            let declared = short_type_name(type_name::<(K, V)>());
            if !restored.entry_type.is_empty() && restored.entry_type != declared {
                return Err(StateError::from(StateErrorKind::RestoredTypeChanged {
                    name: name.to_string(),
                    restored: format!("BroadcastState<{}>", restored.entry_type),
                    declared: format!("BroadcastState<{declared}>"),
                }));
            }
            let restored = self.restored.broadcasts.swap_remove(pos);
            for (k, v) in &restored.entries {
                map.insert(decode_value(k, name)?, decode_value(v, name)?);
            }
        }
        self.broadcasts.push(DeclaredBroadcast {
            name: name.to_string(),
            entry_type: type_name::<(K, V)>(),
            entry_type_id: TypeId::of::<(K, V)>(),
            map: Box::new(map),
            encode: encode_map::<K, V>,
        });
        Ok(self.broadcasts.len() - 1)
    }

    /// Serializes every declared state; restored state never declared again is carried
    /// over unchanged, so that it is not lost by a job that reads it lazily.
    pub fn snapshot(&self) -> Result<OperatorStateSnapshot, StateError> {
        let mut snapshot = self.restored.clone();
        for list in &self.lists {
            snapshot.lists.push(ListSnapshot {
                name: list.name.clone(),
                distribution: list.distribution,
                element_type: short_type_name(list.element_type),
                elements: (list.encode)(list.values.as_ref(), &list.name)?,
            });
        }
        for broadcast in &self.broadcasts {
            snapshot.broadcasts.push(BroadcastSnapshot {
                name: broadcast.name.clone(),
                entry_type: short_type_name(broadcast.entry_type),
                entries: (broadcast.encode)(broadcast.map.as_ref(), &broadcast.name)?,
            });
        }
        Ok(snapshot)
    }
}
