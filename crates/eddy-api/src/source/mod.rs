//! Built-in sources. Each keeps its position in operator state, so that a restored job
//! resumes where the checkpoint was taken.

mod collection;
mod sequence;
mod socket;
mod text_file;

pub use collection::CollectionSource;
pub use sequence::SequenceSource;
pub use socket::SocketTextSource;
pub use text_file::TextFileSource;
