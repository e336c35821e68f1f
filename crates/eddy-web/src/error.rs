//! The crate's one error type.

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(
        "cannot listen for HTTP on {address} (another process serving there? give --rest-bind another HOST:PORT, or \
        port 0 for any free one)"
    )]
    Bind { address: String, source: std::io::Error },
    #[error(
        "{address} is not a loopback address and the cluster has no TLS: its secret would cross the network in \
        clear (turn TLS on with --tls-cert/--tls-key, or bind 127.0.0.1)"
    )]
    Insecure { address: String },
    #[error("cannot start the HTTP server's thread: {0}")]
    Thread(std::io::Error),
}
