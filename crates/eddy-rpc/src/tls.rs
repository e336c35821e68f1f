//! TLS for every cluster connection (`--tls-cert`, `--tls-key`, `--tls-ca`), with rustls
//! on ring. Like Flink's internal SSL, every process of a cluster uses the same
//! certificate and key, and trusts the CA (by default the certificate itself, self
//! signed): a client checks that the server's certificate names the host it connected
//! to (an IP address or a DNS name). Who may join is decided by the cluster's secret,
//! inside the TLS session; TLS keeps everything on the wire private.

use crate::error::ClusterError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// rustls's provider on ring. rustls 0.23.48 deprecates it for lacking post-quantum key
/// exchange, whose other provider (aws-lc-rs) needs a C toolchain and minutes of build;
/// the cluster's processes talk to each other only, and ring's key exchange is what they
/// all speak. Allowed here, once, so that no job crate that builds eddy sees the warning.
#[allow(deprecated)]
fn ring_provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// Where a cluster's certificate, key and CA are.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA to trust; `None`: the certificate itself.
    pub ca: Option<PathBuf>,
}

/// Both sides' TLS configuration of one process.
#[derive(Clone)]
pub struct TlsConfig {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    pub files: TlsFiles,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsConfig({})", self.files.cert.display())
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, ClusterError> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| {
            ClusterError::Config(format!(
                "cannot read the certificate file {}: {e}",
                path.display(),
                e = eddy_types::chain(&e)
            ))
        })?
        .collect();
    let certs = certs.map_err(|e| {
        ClusterError::Config(format!("{}: not a PEM certificate: {e}", path.display(), e = eddy_types::chain(&e)))
    })?;
    if certs.is_empty() {
        return Err(ClusterError::Config(format!("{} holds no certificate", path.display())));
    }
    Ok(certs)
}

impl TlsConfig {
    pub fn from_files(files: TlsFiles) -> Result<Self, ClusterError> {
        let certs = certificates(&files.cert)?;
        let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
            ClusterError::Config(format!(
                "cannot read the private key {}: {e}",
                files.key.display(),
                e = eddy_types::chain(&e)
            ))
        })?;
        let mut roots = RootCertStore::empty();
        for ca in certificates(files.ca.as_deref().unwrap_or(&files.cert))? {
            roots.add(ca).map_err(|e| {
                ClusterError::Config(format!("a CA certificate rustls refuses: {e}", e = eddy_types::chain(&e)))
            })?;
        }
        let provider = Arc::new(ring_provider());
        let bad = |e: rustls::Error| ClusterError::Config(format!("TLS configuration: {e}", e = eddy_types::chain(&e)));
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| {
                ClusterError::Config(format!(
                    "{} and {}: {e}",
                    files.cert.display(),
                    files.key.display(),
                    e = eddy_types::chain(&e)
                ))
            })?;
        Ok(Self { client: Arc::new(client), server: Arc::new(server), files })
    }

    pub(crate) fn client(&self, host: &str) -> Result<ClientConnection, String> {
        let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string())
            .map_err(|e| format!("'{host}' is no host name for TLS: {e}", e = eddy_types::chain(&e)))?;
        ClientConnection::new(self.client.clone(), name).map_err(|e| eddy_types::chain(&e))
    }

    /// The server side's configuration, for another server of the same process (its REST
    /// API) to present the same certificate.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }

    pub(crate) fn server(&self) -> Result<ServerConnection, rustls::Error> {
        ServerConnection::new(self.server.clone())
    }
}
