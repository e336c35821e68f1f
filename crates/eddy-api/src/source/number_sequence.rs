//! Flink's FLIP-27 `NumberSequenceSource`: the numbers `from..=to` as splits that a split
//! enumerator with the JobMaster hands to readers that ask for one (pull, as Flink's file
//! source), so that a fast reader takes more of the work than a slow one.
//!
//! The enumerator's state is the splits not handed out yet; a reader's is the splits it
//! holds (even-split list state, so a restore at another parallelism spreads them). A
//! split handed out after a checkpoint's trigger is in neither snapshot, and is in the
//! enumerator's after a restore of it (see [`eddy_runtime::coordination`]).

use crate::function::{FunctionResult, RichFunction, RuntimeContext, SnapshotContext, SourceFunction, SourceStep};
use eddy_runtime::coordination::{CoordinatorContext, CoordinatorProvider, OperatorCoordinator, OperatorEventGateway};
use eddy_runtime::Collector;
use eddy_state::ListStateDescriptor;
use eddy_types::CheckpointId;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

const SPLITS_STATE: &str = "number-sequence-splits";
/// Splits per reader at the first start: enough that readers of unequal speed share.
const SPLITS_PER_READER: u64 = 4;

/// An inclusive range `[next, last]` of numbers still to emit.
type Split = (u64, u64);

/// Reader → enumerator: "give me a split". Enumerator → reader: a split, or none (no more).
#[derive(Debug, Serialize, Deserialize)]
enum Event {
    Request,
    Assign(Option<Split>),
}

fn encode(event: &Event) -> Vec<u8> {
    postcard::to_allocvec(event).expect("a sequence event always encodes")
}

fn decode(bytes: &[u8]) -> Result<Event, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("an unreadable number sequence event: {e}"))
}

/// The numbers `from..=to`, read in parallel from splits (see the module's overview).
#[derive(Clone, Debug)]
pub struct NumberSequenceSource {
    from: u64,
    to: u64,
    splits: VecDeque<Split>,
    gateway: Option<OperatorEventGateway>,
    requested: bool,
    no_more_splits: bool,
}

impl NumberSequenceSource {
    pub fn new(from: u64, to: u64) -> Self {
        Self { from, to, splits: VecDeque::new(), gateway: None, requested: false, no_more_splits: false }
    }

    fn descriptor() -> ListStateDescriptor<Split> {
        ListStateDescriptor::new(SPLITS_STATE)
    }

    fn request(&mut self) -> FunctionResult {
        if !self.requested {
            let gateway =
                self.gateway.as_ref().ok_or("the number sequence source runs without its split enumerator")?;
            gateway.send(encode(&Event::Request));
            self.requested = true;
        }
        Ok(())
    }
}

impl RichFunction for NumberSequenceSource {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.splits = ctx.operator_state().list_state(&Self::descriptor())?.get().into();
        self.gateway = ctx.operator_event_gateway();
        (self.requested, self.no_more_splits) = (false, false);
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&Self::descriptor())?.update(self.splits.iter().copied().collect());
        Ok(())
    }
}

impl SourceFunction<u64> for NumberSequenceSource {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, u64>) -> FunctionResult<SourceStep> {
        let Some(split) = self.splits.front_mut() else {
            if self.no_more_splits {
                return Ok(SourceStep::Finished);
            }
            self.request()?;
            return Ok(SourceStep::Idle);
        };
        let (next, last) = *split;
        let end = last.min(next.saturating_add(max_records as u64 - 1));
        for i in next..=end {
            out.collect(i);
        }
        if end == last {
            self.splits.pop_front();
        } else {
            split.0 = end + 1;
        }
        Ok(SourceStep::More)
    }

    fn coordinator(&self) -> Option<CoordinatorProvider> {
        let (from, to) = (self.from, self.to);
        Some(Arc::new(move || Box::new(SequenceEnumerator { from, to, remaining: VecDeque::new() })))
    }

    fn handle_operator_event(&mut self, event: &[u8]) -> FunctionResult {
        match decode(event)? {
            Event::Assign(Some(split)) => self.splits.push_back(split),
            Event::Assign(None) => self.no_more_splits = true,
            Event::Request => return Err("a number sequence reader got a request meant for its enumerator".into()),
        }
        self.requested = false;
        Ok(())
    }
}

/// The enumerator: the splits not handed out yet.
struct SequenceEnumerator {
    from: u64,
    to: u64,
    remaining: VecDeque<Split>,
}

impl OperatorCoordinator for SequenceEnumerator {
    fn start(&mut self, restored: Option<&[u8]>, ctx: &mut CoordinatorContext<'_>) -> Result<(), String> {
        self.remaining = match restored {
            Some(bytes) => postcard::from_bytes::<Vec<Split>>(bytes)
                .map_err(|e| format!("cannot read the number sequence enumerator's state: {e}"))?
                .into(),
            None if self.from > self.to => VecDeque::new(),
            None => {
                // Ranges of about equal length; the first `count mod n` one longer.
                let count = u128::from(self.to - self.from) + 1;
                let n = (u128::from(ctx.parallelism()) * u128::from(SPLITS_PER_READER)).min(count);
                let (base, longer) = (count / n, count % n);
                (0..n)
                    .map(|i| {
                        let start = i * base + i.min(longer);
                        let len = base + u128::from(i < longer);
                        (self.from + start as u64, self.from + (start + len - 1) as u64)
                    })
                    .collect()
            }
        };
        Ok(())
    }

    fn handle_event(&mut self, subtask: u32, event: &[u8], ctx: &mut CoordinatorContext<'_>) -> Result<(), String> {
        match decode(event)? {
            Event::Request => ctx.send_event(subtask, encode(&Event::Assign(self.remaining.pop_front()))),
            Event::Assign(_) => {
                return Err(format!("the number sequence enumerator got a split from reader {subtask}"))
            }
        }
        Ok(())
    }

    fn checkpoint(&mut self, _checkpoint: CheckpointId) -> Result<Vec<u8>, String> {
        postcard::to_allocvec(&self.remaining.iter().copied().collect::<Vec<_>>())
            .map_err(|e| format!("cannot encode the number sequence enumerator's state: {e}"))
    }
}
