//! A subtask: the chain it runs, the state it shares between its operators, and the
//! mailbox loop that drives it.

mod alignment;
mod async_work;
mod checkpointing;
mod context;
mod driver;
mod gate;
pub mod in_flight;
mod mailbox;
mod metrics;
mod panic;
mod runner;
mod unaligned;
mod watermarks;

pub use alignment::{Alignment, BarrierAligner, UnalignedPolicy};
pub use async_work::{AsyncJob, AsyncWork, AsyncWorkers, QueuedWork};
pub use context::{DeclineCause, OperatorInfo, TaskCheckpointing, TaskReport, TaskShared};
pub use driver::{
    OneInputDriver, SourceDriver, SourceOperator, SourceStatus, StepResult, TaskDriver, TwoInputDriver,
    TwoInputOperator,
};
pub use gate::{InputChannel, InputGate, Overtook, ReadAhead};
pub use mailbox::{mailbox, Control, MailboxReceiver, MailboxSender, Mailboxes, FINAL_CHECKPOINT};
pub use metrics::TaskCounters;
pub use panic::{catch_task_panic, install_panic_capture};
pub use runner::Task;
pub use unaligned::IN_FLIGHT_BYTES;
pub use watermarks::WatermarkValve;
