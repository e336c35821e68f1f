//! Flink's FLIP-27 `NumberSequenceSource`: the numbers `from..=to` as splits (index
//! ranges) that a split enumerator with the JobMaster hands to readers that ask for one
//! (pull, as Flink's file source), so that a fast reader takes more of the work than a
//! slow one. [`super::DataGeneratorSource`] reads its indexes the same way.
//!
//! The enumerator's state is the ranges not handed out yet; a reader's is the ranges it
//! holds (even-split list state, so a restore at another parallelism spreads them). A
//! range handed out after a checkpoint's trigger is in neither snapshot, and is in the
//! enumerator's after a restore of it (see [`eddy_runtime::coordination`]).

use super::SequenceSource;
use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::coordination::{
    CoordinatorContext, CoordinatorError, CoordinatorProvider, CoordinatorRestore, CoordinatorResult,
    OperatorCoordinator, OperatorEventGateway,
};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;
use eddy_types::{CheckpointId, SubtaskIndex};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

const SPLITS_STATE: &str = "number-sequence-splits";
/// Ranges per reader at the first start: enough that readers of unequal speed share.
const SPLITS_PER_READER: u32 = 4;

/// An inclusive range `[next, last]` of indexes still to emit.
type Split = (u64, u64);

/// Reader → enumerator: "give me a range". Enumerator → reader: a range, or none (no more).
#[derive(Debug, Serialize, Deserialize)]
enum Event {
    Request,
    Assign(Option<Split>),
}

fn encode(event: &Event) -> Vec<u8> {
    postcard::to_allocvec(event).expect("a range event always encodes")
}

fn decode(bytes: &[u8]) -> Result<Event, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("an unreadable range split event: {e}", e = eddy_types::chain(&e)))
}

/// What a reader emits next.
pub(crate) enum Next {
    /// The indexes `[next, last]`, taken from its ranges.
    Range(u64, u64),
    /// It asked the enumerator for a range and waits.
    Idle,
    /// No range left and none will come.
    Finished,
}

/// The reader side of a range-split source: the ranges it holds, in the even-split list
/// state `state`, and asking the enumerator for the next when it runs out.
#[derive(Clone, Debug)]
pub(crate) struct RangeReader {
    state: &'static str,
    splits: VecDeque<Split>,
    gateway: Option<OperatorEventGateway>,
    requested: bool,
    no_more_splits: bool,
}

impl RangeReader {
    pub(crate) fn new(state: &'static str) -> Self {
        Self { state, splits: VecDeque::new(), gateway: None, requested: false, no_more_splits: false }
    }

    pub(crate) fn initialize(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.splits = ctx.operator_state().list_state(&ListStateDescriptor::<Split>::new(self.state))?.get().into();
        self.gateway = ctx.operator_event_gateway();
        (self.requested, self.no_more_splits) = (false, false);
        Ok(())
    }

    pub(crate) fn snapshot(&self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        let mut state = ctx.operator_state().list_state(&ListStateDescriptor::<Split>::new(self.state))?;
        state.update(self.splits.iter().copied().collect());
        Ok(())
    }

    /// Up to `max` (at least 1) indexes to emit now; they count as emitted.
    pub(crate) fn take(&mut self, max: u64) -> FunctionResult<Next> {
        let Some(split) = self.splits.front_mut() else {
            if self.no_more_splits {
                return Ok(Next::Finished);
            }
            if !self.requested {
                let gateway = self.gateway.as_ref().ok_or("a range split source runs without its split enumerator")?;
                gateway.send(encode(&Event::Request));
                self.requested = true;
            }
            return Ok(Next::Idle);
        };
        let ((next, end), used_up) = SequenceSource::take_front(split, max);
        if used_up {
            self.splits.pop_front();
        }
        Ok(Next::Range(next, end))
    }

    /// An event from the enumerator.
    pub(crate) fn on_event(&mut self, event: &[u8]) -> FunctionResult {
        match decode(event)? {
            Event::Assign(Some(split)) => self.splits.push_back(split),
            Event::Assign(None) => self.no_more_splits = true,
            Event::Request => return Err("a range split reader got a request meant for its enumerator".into()),
        }
        self.requested = false;
        Ok(())
    }
}

/// The enumerator of the indexes `from..=to` (none if `from > to`).
pub(crate) fn range_enumerator(from: u64, to: u64) -> CoordinatorProvider {
    Arc::new(move || Box::new(RangeEnumerator { from, to, remaining: VecDeque::new() }))
}

/// The enumerator: the ranges not handed out yet.
struct RangeEnumerator {
    from: u64,
    to: u64,
    remaining: VecDeque<Split>,
}

impl OperatorCoordinator for RangeEnumerator {
    fn start(&mut self, restored: CoordinatorRestore<'_>, ctx: &mut CoordinatorContext<'_>) -> CoordinatorResult {
        self.remaining = match restored {
            CoordinatorRestore::State(bytes) => postcard::from_bytes::<Vec<Split>>(bytes)
                .map_err(|e| {
                    CoordinatorError::permanent(format!(
                        "cannot read the range enumerator's state: {e}",
                        e = eddy_types::chain(&e)
                    ))
                })?
                .into(),
            // Before enumerators were checkpointed, the readers' state held every range.
            CoordinatorRestore::WithoutState => VecDeque::new(),
            // Ranges of about equal length, as `from_sequence` cuts them, several per reader.
            CoordinatorRestore::Fresh => {
                let n = ctx.parallelism().saturating_mul(SPLITS_PER_READER);
                (0..n).filter_map(|i| SequenceSource::split(self.from, self.to, i, n)).collect()
            }
        };
        Ok(())
    }

    fn handle_event(
        &mut self,
        subtask: SubtaskIndex,
        event: &[u8],
        ctx: &mut CoordinatorContext<'_>,
    ) -> CoordinatorResult {
        match decode(event).map_err(CoordinatorError::permanent)? {
            Event::Request => ctx.send_event(subtask, encode(&Event::Assign(self.remaining.pop_front()))),
            Event::Assign(_) => {
                let message = format!("the range enumerator got a range from reader {}", subtask.0);
                return Err(CoordinatorError::permanent(message));
            }
        }
        Ok(())
    }

    fn checkpoint(&mut self, _checkpoint: CheckpointId) -> CoordinatorResult<Vec<u8>> {
        postcard::to_allocvec(&self.remaining.iter().copied().collect::<Vec<_>>()).map_err(|e| {
            CoordinatorError::permanent(format!(
                "cannot encode the range enumerator's state: {e}",
                e = eddy_types::chain(&e)
            ))
        })
    }
}

/// The numbers `from..=to`, read in parallel from ranges (see the module's overview).
#[derive(Clone, Debug)]
pub struct NumberSequenceSource {
    from: u64,
    to: u64,
    reader: RangeReader,
}

impl NumberSequenceSource {
    pub fn new(from: u64, to: u64) -> Self {
        Self { from, to, reader: RangeReader::new(SPLITS_STATE) }
    }
}

impl RichFunction for NumberSequenceSource {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.reader.initialize(ctx)
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        self.reader.snapshot(ctx)
    }
}

impl SourceFunction<u64> for NumberSequenceSource {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, u64>) -> FunctionResult<SourceStep> {
        Ok(match self.reader.take(max_records as u64)? {
            Next::Range(next, last) => {
                for i in next..=last {
                    out.collect(i);
                }
                SourceStep::More
            }
            Next::Idle => SourceStep::Idle,
            Next::Finished => SourceStep::Finished,
        })
    }

    fn coordinator(&self) -> Option<CoordinatorProvider> {
        Some(range_enumerator(self.from, self.to))
    }

    fn handle_operator_event(&mut self, event: &[u8]) -> FunctionResult {
        self.reader.on_event(event)
    }
}
