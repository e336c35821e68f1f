//! Two-phase commit (Flink's `TwoPhaseCommitSinkFunction`): records go into a
//! transaction; at a checkpoint barrier the transaction is pre-committed and kept in the
//! sink's operator state; when the checkpoint completes it is committed. After a failure
//! the restored state names the pre-committed transactions, which are committed again
//! (commits must be idempotent), and everything else a failed run left is aborted.

use crate::function::{FunctionResult, RichFunction, RuntimeContext, Sink, SnapshotContext};
use eddy_state::{ListStateDescriptor, StateValue};
use eddy_types::{CheckpointId, SubtaskIndex};

const PENDING_STATE: &str = "two-phase-commit-pending";
const SEQUENCE_STATE: &str = "two-phase-commit-next-sequence";

/// What a transactional system must offer a [`TwoPhaseCommitSink`].
pub trait TransactionalSink<T>: Clone + Send + Sync + 'static {
    /// A serializable handle of a transaction (kept in checkpoints).
    type Transaction: StateValue + Sync;
    /// Opens transaction number `sequence` (unique per subtask across restarts).
    fn begin(&mut self, subtask: SubtaskIndex, sequence: u64) -> FunctionResult<Self::Transaction>;
    fn write(&mut self, transaction: &mut Self::Transaction, value: T) -> FunctionResult;
    /// Makes the transaction durable and ready to commit (at a checkpoint barrier).
    fn pre_commit(&mut self, transaction: &mut Self::Transaction) -> FunctionResult;
    /// Makes it visible. Called again after recovery: must be idempotent.
    fn commit(&mut self, transaction: Self::Transaction) -> FunctionResult;
    fn abort(&mut self, transaction: Self::Transaction) -> FunctionResult;
    /// The attempt (run) about to begin transactions: systems whose transactions have
    /// names put it in them, so that two attempts never share one.
    fn start_attempt(&mut self, _attempt: u64) {}
    /// Once every subtask of the attempt committed the transactions it restored (at the
    /// attempt's first completed checkpoint, or its end): remove whatever an earlier run
    /// left unfinished of its subtasks `s` with `s % parallelism == subtask` (after a
    /// rescale, old subtasks beyond the new parallelism are cleaned up too), never this
    /// attempt's own. Not at start: after a rescale (or any uneven split of the restored
    /// transactions) another subtask may still have to commit one of them.
    fn abort_leftovers(&mut self, subtask: SubtaskIndex, parallelism: u32) -> FunctionResult;
    /// The input ended: the transaction pre-committed next is the last one (a system that
    /// finalizes something at the end, as a partitioned file sink marks its partitions
    /// done, notes it in that transaction). Default: nothing.
    fn end_of_input(&mut self) {}
}

/// A sink that writes exactly once through a [`TransactionalSink`].
pub struct TwoPhaseCommitSink<S: TransactionalSink<T>, T> {
    system: S,
    subtask: SubtaskIndex,
    current: Option<S::Transaction>,
    /// Pre-committed transactions with the checkpoint that pre-committed them.
    pending: Vec<(u64, S::Transaction)>,
    next_sequence: u64,
    /// The parallelism to clean an earlier run's leftovers up with, until done.
    leftovers: Option<u32>,
    _type: std::marker::PhantomData<fn(T)>,
}

impl<S: TransactionalSink<T>, T> Clone for TwoPhaseCommitSink<S, T> {
    fn clone(&self) -> Self {
        Self {
            system: self.system.clone(),
            subtask: self.subtask,
            current: self.current.clone(),
            pending: self.pending.clone(),
            next_sequence: self.next_sequence,
            leftovers: self.leftovers,
            _type: std::marker::PhantomData,
        }
    }
}

impl<S: TransactionalSink<T>, T> TwoPhaseCommitSink<S, T> {
    pub fn new(system: S) -> Self {
        Self {
            system,
            subtask: SubtaskIndex(0),
            current: None,
            pending: Vec::new(),
            next_sequence: 0,
            leftovers: None,
            _type: std::marker::PhantomData,
        }
    }

    fn begin_next(&mut self) -> FunctionResult {
        let transaction = self.system.begin(self.subtask, self.next_sequence)?;
        self.next_sequence += 1;
        self.current = Some(transaction);
        Ok(())
    }

    /// Commits the pending transactions of checkpoints up to number `last` (one that
    /// completed: every subtask committed what it restored by then), then removes what
    /// an earlier run left, once.
    fn commit_up_to(&mut self, last: u64) -> FunctionResult {
        let (done, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(id, _)| *id <= last);
        self.pending = waiting;
        for (_, transaction) in done {
            self.system.commit(transaction)?;
        }
        if let Some(parallelism) = self.leftovers.take() {
            self.system.abort_leftovers(self.subtask, parallelism)?;
        }
        Ok(())
    }

    fn pending_descriptor() -> ListStateDescriptor<(u64, S::Transaction)> {
        ListStateDescriptor::new(PENDING_STATE)
    }
}

impl<S: TransactionalSink<T>, T> RichFunction for TwoPhaseCommitSink<S, T> {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.subtask = ctx.index_of_this_subtask();
        self.system.start_attempt(ctx.attempt_id());
        let parallelism = ctx.number_of_parallel_subtasks();
        let store = ctx.operator_state();
        // Pending transactions are even-split: after a rescale some subtask commits each.
        let restored: Vec<(u64, S::Transaction)> = store.list_state(&Self::pending_descriptor())?.get();
        // Sequence counters are union state: every subtask continues past all of them, so
        // no new transaction reuses an old one's number.
        let sequences = store.union_list_state(&ListStateDescriptor::<u64>::new(SEQUENCE_STATE))?.get();
        self.next_sequence = sequences.into_iter().max().unwrap_or(0);
        // Restored transactions were pre-committed before the checkpoint completed: commit.
        for (_, transaction) in restored {
            self.system.commit(transaction)?;
        }
        // Removed once a checkpoint completes: only then has every subtask committed its
        // share of the restored transactions (a leftover here may be another's to commit).
        self.leftovers = Some(parallelism);
        self.begin_next()
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        if ctx.checkpoint_id().is_none() {
            self.system.end_of_input();
        }
        if let Some(mut transaction) = self.current.take() {
            self.system.pre_commit(&mut transaction)?;
            // Stored by checkpoint number; the end-of-input snapshot's transaction after
            // every number, as it commits when the job finished.
            self.pending.push((ctx.checkpoint_id().map_or(u64::MAX, |c| c.0), transaction));
        }
        // The end-of-input snapshot of a finished task opens nothing new.
        if ctx.checkpoint_id().is_some() {
            self.begin_next()?;
        }
        let store = ctx.operator_state();
        store.list_state(&Self::pending_descriptor())?.update(self.pending.clone());
        store.union_list_state(&ListStateDescriptor::<u64>::new(SEQUENCE_STATE))?.update(vec![self.next_sequence]);
        Ok(())
    }

    fn notify_checkpoint_complete(&mut self, checkpoint: CheckpointId) -> FunctionResult {
        self.commit_up_to(checkpoint.0)
    }

    fn notify_job_finished(&mut self) -> FunctionResult {
        self.commit_up_to(u64::MAX)
    }

    fn close(&mut self) -> FunctionResult {
        match self.current.take() {
            Some(transaction) => self.system.abort(transaction),
            None => Ok(()),
        }
    }
}

impl<S: TransactionalSink<T>, T: 'static> Sink<T> for TwoPhaseCommitSink<S, T> {
    fn invoke(&mut self, value: T) -> FunctionResult {
        let transaction = self.current.as_mut().ok_or("two-phase-commit sink has no open transaction")?;
        self.system.write(transaction, value)
    }
}
