//! The crate's one error type.

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("cannot listen for HTTP on {address}: {source}")]
    Bind { address: String, source: std::io::Error },
    #[error("cannot start the HTTP server's thread: {0}")]
    Thread(std::io::Error),
}
