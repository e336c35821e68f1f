//! The mailbox: control messages for a subtask, taken between batches.

use crate::channel::{CheckpointBarrier, CheckpointEvent};
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use eddy_checkpoint::CheckpointId;
use std::collections::VecDeque;

/// Control messages a subtask's loop takes between batches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Control {
    /// Stop as soon as possible; the job is failing or cancelled.
    Cancel,
    /// Sources only: snapshot and emit this barrier.
    TriggerCheckpoint(CheckpointBarrier),
    /// A checkpoint completed everywhere, or was aborted.
    Checkpoint(CheckpointEvent),
    /// Every task finished and the job's final checkpoint completed: commit and exit.
    JobFinished,
    /// An event from the coordinator of the task's head operator (a source's split
    /// enumerator), in order with the checkpoint triggers.
    OperatorEvent(Vec<u8>),
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

/// The coordinator's side of every task's mailbox. It never waits for room: a message
/// that does not fit waits in that task's outbox, in order, and goes with the next post or
/// flush. A stuck task's full mailbox so never stalls the coordinator's timeouts and
/// failure handling; the outbox grows by a few messages per checkpoint meanwhile.
pub struct Mailboxes {
    senders: Vec<MailboxSender>,
    outboxes: Vec<VecDeque<Control>>,
}

impl Mailboxes {
    pub fn new(senders: Vec<MailboxSender>) -> Self {
        let outboxes = senders.iter().map(|_| VecDeque::new()).collect();
        Self { senders, outboxes }
    }

    /// Sends `control` to task `task` after what waits for it already.
    pub fn post(&mut self, task: usize, control: Control) {
        self.outboxes[task].push_back(control);
        self.flush_task(task);
    }

    /// Sends `control` to every task.
    pub fn broadcast(&mut self, control: &Control) {
        for task in 0..self.senders.len() {
            self.post(task, control.clone());
        }
    }

    /// Sends what waits, as far as the mailboxes have room.
    pub fn flush(&mut self) {
        for task in 0..self.senders.len() {
            self.flush_task(task);
        }
    }

    /// Whether every message posted is in its task's mailbox.
    pub fn all_delivered(&self) -> bool {
        self.outboxes.iter().all(VecDeque::is_empty)
    }

    /// Asks every task to stop, where there is room: tasks watch the cancel flag as well.
    pub fn cancel_all(&mut self) {
        for sender in &self.senders {
            let _ = sender.try_send(Control::Cancel);
        }
    }

    fn flush_task(&mut self, task: usize) {
        let outbox = &mut self.outboxes[task];
        while let Some(control) = outbox.pop_front() {
            match self.senders[task].try_send(control) {
                Ok(()) => {}
                Err(TrySendError::Full(control)) => {
                    outbox.push_front(control);
                    return;
                }
                // The task has exited: nothing it could still be told matters.
                Err(TrySendError::Disconnected(_)) => {
                    outbox.clear();
                    return;
                }
            }
        }
    }
}
