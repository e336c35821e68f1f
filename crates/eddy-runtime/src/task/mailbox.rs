//! The mailbox: control messages for a subtask, taken between batches.

use crate::channel::{CheckpointBarrier, CheckpointEvent};
use crossbeam_channel::{bounded, Receiver, Sender};
use eddy_checkpoint::CheckpointId;

/// Control messages a subtask's loop takes between batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Stop as soon as possible; the job is failing or cancelled.
    Cancel,
    /// Sources only: snapshot and emit this barrier.
    TriggerCheckpoint(CheckpointBarrier),
    /// A checkpoint completed everywhere, or was aborted.
    Checkpoint(CheckpointEvent),
    /// Every task finished and the job's final checkpoint completed: commit and exit.
    JobFinished,
}

/// The id under which a finished task's final state is snapshotted; two-phase-commit
/// sinks commit it only when the job finished.
pub const FINAL_CHECKPOINT: CheckpointId = CheckpointId(u64::MAX);

pub type MailboxSender = Sender<Control>;
pub type MailboxReceiver = Receiver<Control>;

/// Messages a mailbox holds before the sender waits.
pub const MAILBOX_MESSAGES_MAX: usize = 64;

pub fn mailbox() -> (MailboxSender, MailboxReceiver) {
    bounded(MAILBOX_MESSAGES_MAX)
}
