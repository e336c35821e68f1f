//! Built-in sinks: stdout, text files, an exactly-once file sink on two-phase commit,
//! and a collecting sink for tests.

mod collect;
mod exactly_once_file;
mod print;
mod text_file;
mod two_phase;

pub use collect::CollectSink;
pub use exactly_once_file::{ExactlyOnceFileSink, FileTransactions, PartFile};
pub use print::PrintSink;
pub use text_file::TextFileSink;
pub use two_phase::{TransactionalSink, TwoPhaseCommitSink};
