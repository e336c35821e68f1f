//! Built-in sources. Each keeps its position in operator state, so that a restored job
//! resumes where the checkpoint was taken.

mod collection;
mod generator;
mod number_sequence;
mod sequence;
mod socket;
mod text_file;

pub use collection::CollectionSource;
pub use generator::DataGeneratorSource;
pub use number_sequence::NumberSequenceSource;
pub use sequence::SequenceSource;
pub use socket::SocketTextSource;
pub use text_file::TextFileSource;
