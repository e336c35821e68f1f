//! `AggregatingState<IN, OUT>`: inputs folded into a hidden accumulator.

use super::{declare, with_table, StateId};
use crate::descriptor::{AggregateFunction, AggregatingStateDescriptor, StateKind};
use crate::error::StateError;
use crate::StateValue;
use std::sync::Arc;

/// The accumulator type stays inside; the handle only shows IN and OUT, as in Flink.
trait Aggregation<In, Out>: Send + Sync {
    fn get(&self, id: StateId, name: &str) -> Result<Option<Out>, StateError>;
    fn add(&self, id: StateId, name: &str, value: In) -> Result<(), StateError>;
    fn clear(&self, id: StateId, name: &str) -> Result<(), StateError>;
}

struct WithFunction<F>(Arc<F>);

impl<F> Aggregation<F::In, F::Out> for WithFunction<F>
where
    F: AggregateFunction,
    F::Acc: StateValue,
{
    fn get(&self, id: StateId, name: &str) -> Result<Option<F::Out>, StateError> {
        with_table::<F::Acc, _>(id, name, |key, table| Ok(table.get(key)?.map(|acc| self.0.get_result(acc))))
    }

    fn add(&self, id: StateId, name: &str, value: F::In) -> Result<(), StateError> {
        with_table::<F::Acc, _>(id, name, |key, table| {
            table.replace_with(key, |stored| self.0.add(value, stored.unwrap_or_else(|| self.0.create_accumulator())))
        })
    }

    fn clear(&self, id: StateId, name: &str) -> Result<(), StateError> {
        with_table::<F::Acc, _>(id, name, |key, table| table.remove(key).map(|_| ()))
    }
}

/// Folds inputs per key with an [`AggregateFunction`] (Flink's `AggregatingState`).
pub struct AggregatingState<In, Out> {
    id: StateId,
    name: Arc<str>,
    aggregation: Arc<dyn Aggregation<In, Out>>,
}

impl<In, Out> Clone for AggregatingState<In, Out> {
    fn clone(&self) -> Self {
        Self { id: self.id, name: self.name.clone(), aggregation: self.aggregation.clone() }
    }
}

impl<In: 'static, Out: 'static> AggregatingState<In, Out> {
    pub fn declare<F>(descriptor: &AggregatingStateDescriptor<F>) -> Result<Self, StateError>
    where
        F: AggregateFunction<In = In, Out = Out>,
        F::Acc: StateValue,
    {
        let (id, name) = declare::<F::Acc>(&descriptor.name, StateKind::Aggregating, descriptor.ttl)?;
        Ok(Self { id, name, aggregation: Arc::new(WithFunction(descriptor.function.clone())) })
    }

    /// The result for the current key's accumulator, `None` before the first `add`.
    pub fn get(&self) -> Result<Option<Out>, StateError> {
        self.aggregation.get(self.id, &self.name)
    }

    pub fn add(&self, value: In) -> Result<(), StateError> {
        self.aggregation.add(self.id, &self.name, value)
    }

    pub fn clear(&self) -> Result<(), StateError> {
        self.aggregation.clear(self.id, &self.name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
