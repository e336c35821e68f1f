//! The mailbox: control messages for a subtask, taken between batches.

use crossbeam_channel::{bounded, Receiver, Sender};

/// Control messages a subtask's loop takes between batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Stop as soon as possible; the job is failing or cancelled.
    Cancel,
}

pub type MailboxSender = Sender<Control>;
pub type MailboxReceiver = Receiver<Control>;

/// Messages a mailbox holds before the sender waits.
pub const MAILBOX_MESSAGES_MAX: usize = 64;

pub fn mailbox() -> (MailboxSender, MailboxReceiver) {
    bounded(MAILBOX_MESSAGES_MAX)
}
