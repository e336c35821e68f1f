//! Built-in sinks: stdout, text files, and a collecting sink for tests.

mod collect;
mod print;
mod text_file;

pub use collect::CollectSink;
pub use print::PrintSink;
pub use text_file::TextFileSink;
