//! What every connection of a cluster needs: the cluster's secret, and TLS when it is on.

use crate::auth::{self, PeerRole, Secret};
use crate::error::ClusterError;
use crate::stream::Stream;
use crate::tls::TlsConfig;

/// The cluster's secret and, when on, its TLS configuration: every process holds the
/// same.
#[derive(Debug, Clone)]
pub struct Security {
    pub secret: Secret,
    pub tls: Option<TlsConfig>,
}

impl Security {
    /// Opens a connection to `address` as `role`: TLS first when on, then the secret's
    /// handshake.
    pub fn connect(&self, address: &str, role: PeerRole, context: &str) -> Result<Stream, ClusterError> {
        let stream = Stream::connect(address, self.tls.as_ref(), context)?;
        auth::authenticate_client(&stream, &self.secret, role)?;
        Ok(stream)
    }

    /// The accepting side of [`Security::connect`]: the peer's role once it is in.
    pub fn accept(&self, socket: std::net::TcpStream) -> Result<(Stream, PeerRole), ClusterError> {
        let stream = Stream::accept(socket, self.tls.as_ref())?;
        let role = auth::authenticate_server(&stream, &self.secret)?;
        Ok((stream, role))
    }
}
