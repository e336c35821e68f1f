//! The sink that folds a workload's checksum over what it receives: a sum of per-record
//! terms, kept in operator state and published only when the job finished (the final
//! checkpoint), so that the checksum survives failures and restores like any
//! exactly-once output. It is published as the job's counter [`CHECKSUM`], which the
//! job's result sums over every subtask, in this process or on a cluster's TaskManagers.

use eddy::prelude::*;

/// The counter (accumulator) the checksum is published as.
pub const CHECKSUM: &str = "checksum";

/// The checksum a finished job published.
pub fn checksum_of_job(result: &JobResult) -> u64 {
    result.accumulators.get(CHECKSUM).copied().unwrap_or(0)
}

/// Sums `term` (a record's part of the checksum; a function item, so that the call is
/// inlined) over what it receives.
pub struct ChecksumSink<T, F> {
    term: F,
    /// The counter it publishes into.
    name: &'static str,
    local: u64,
    counter: Option<LongCounter>,
    _type: std::marker::PhantomData<fn(&T)>,
}

impl<T, F: Clone> Clone for ChecksumSink<T, F> {
    fn clone(&self) -> Self {
        Self {
            term: self.term.clone(),
            name: self.name,
            local: self.local,
            counter: self.counter.clone(),
            _type: std::marker::PhantomData,
        }
    }
}

impl<T, F: Fn(&T) -> Result<u64, String>> ChecksumSink<T, F> {
    /// Adds `term` of every record into the job's [`CHECKSUM`] counter when the job
    /// finished.
    pub fn new(term: F) -> Self {
        Self::named(CHECKSUM, term)
    }

    /// Adds `term` of every record into the job's counter `name` (a count of records,
    /// exactly once, with a term of 1).
    pub fn named(name: &'static str, term: F) -> Self {
        Self { term, name, local: 0, counter: None, _type: std::marker::PhantomData }
    }
}

const CHECKSUM_STATE: &str = "checksum";

impl<T, F> RichFunction for ChecksumSink<T, F> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let state = ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new(CHECKSUM_STATE))?;
        self.local = state.as_slice().iter().fold(0u64, |a, b| a.wrapping_add(*b));
        self.counter = Some(ctx.long_counter(self.name));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new(CHECKSUM_STATE))?.update(vec![self.local]);
        Ok(())
    }

    fn notify_job_finished(&mut self) -> FunctionResult {
        if let Some(counter) = &self.counter {
            counter.add(self.local);
        }
        Ok(())
    }
}

impl<T: 'static, F: Fn(&T) -> Result<u64, String> + Clone + Send + Sync + 'static> Sink<T> for ChecksumSink<T, F> {
    #[inline]
    fn invoke(&mut self, record: T) -> FunctionResult {
        self.local = self.local.wrapping_add((self.term)(&record)?);
        Ok(())
    }
}
