//! A subtask: the chain it runs, the state it shares between its operators, and the
//! mailbox loop that drives it.

mod context;
mod driver;
mod mailbox;
mod panic;

pub use context::{OperatorInfo, TaskShared};
pub use driver::{
    OneInputDriver, SourceDriver, SourceOperator, SourceStatus, StepResult, TaskDriver, TwoInputDriver,
    TwoInputOperator,
};
pub use mailbox::{mailbox, Control, MailboxReceiver, MailboxSender};
pub use panic::{catch_task_panic, install_panic_capture};
