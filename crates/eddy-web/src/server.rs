//! The listener: plain HTTP or TLS (the cluster's certificate), on a thread of its own
//! with a one-thread runtime, so that no request ever runs on a task or coordinator
//! thread; and the bearer-token check every API request passes.

use crate::backend::Backend;
use crate::error::WebError;
use crate::operations::Operations;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls::ServerConfig;

/// How a server runs.
#[derive(Clone, Default)]
pub struct WebOptions {
    /// `HOST:PORT` (port 0: any free one).
    pub bind: String,
    /// The token a request must carry as `Authorization: Bearer <token>` (the cluster's
    /// secret); `None`: no credentials asked (a local job on loopback).
    pub token: Option<Vec<u8>>,
    /// TLS with this configuration (the cluster's).
    pub tls: Option<Arc<ServerConfig>>,
    /// Serve the dashboard at `/` and the REST API (else `/metrics` only).
    pub dashboard: bool,
}

impl std::fmt::Debug for WebOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebOptions")
            .field("bind", &self.bind)
            .field("token", &self.token.as_ref().map(|_| "<secret>"))
            .field("tls", &self.tls.is_some())
            .field("dashboard", &self.dashboard)
            .finish()
    }
}

/// A running server.
#[derive(Clone)]
pub struct WebServer {
    pub address: SocketAddr,
    pub tls: bool,
    operations: Operations,
}

impl std::fmt::Debug for WebServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebServer({})", self.url())
    }
}

impl WebServer {
    /// Waits, up to `limit`, until the outcome of every operation asked through this
    /// server was read: a job stopped with a savepoint through REST ends its process only
    /// once its caller learnt where the savepoint is (or gave up asking).
    pub fn linger(&self, limit: std::time::Duration) {
        let deadline = std::time::Instant::now() + limit;
        while self.operations.unread() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The server's base URL.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.address)
    }
}

/// What every request handler reads.
pub(crate) struct App {
    pub(crate) backend: Arc<dyn Backend>,
    /// What kind of process serves (read without a snapshot).
    pub(crate) role: crate::backend::ProcessRole,
    pub(crate) token: Option<Vec<u8>>,
    pub(crate) operations: Operations,
}

/// Which peer a request came from (for the log of refused ones).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// How long a client may take to send a request's head, or to finish a TLS handshake.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more wait to be accepted.
const CONNECTIONS_MAX: usize = 256;

/// Starts serving `backend` as `options` say; returns once it listens.
pub fn serve(options: WebOptions, backend: Arc<dyn Backend>) -> Result<WebServer, WebError> {
    let bind_error = |source| WebError::Bind { address: options.bind.clone(), source };
    let listener = std::net::TcpListener::bind(&options.bind).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let address = listener.local_addr().map_err(bind_error)?;
    if options.token.is_some() && options.tls.is_none() && !address.ip().is_loopback() {
        // The token is the cluster's secret: it never crosses a network in clear.
        return Err(WebError::Insecure { address: options.bind.clone() });
    }
    let operations = Operations::default();
    let role = backend.snapshot().role;
    let app = Arc::new(App { backend, role, token: options.token.clone(), operations: operations.clone() });
    let router = crate::rest::router(app, options.dashboard);
    let tls = options.tls.clone();
    let server = WebServer { address, tls: tls.is_some(), operations };
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().map_err(WebError::Thread)?;
    std::thread::Builder::new()
        .name("eddy-http".into())
        .spawn(move || runtime.block_on(accept(listener, router, tls)))
        .map_err(WebError::Thread)?;
    tracing::info!(
        address = %server.url(),
        dashboard = options.dashboard,
        credentials = options.token.is_some(),
        "HTTP server listening"
    );
    Ok(server)
}

/// Accepts connections for ever, each served on a task of its own.
async fn accept(listener: std::net::TcpListener, router: axum::Router, tls: Option<Arc<ServerConfig>>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => return tracing::error!(error = %eddy_rpc::chain(&e), "the HTTP listener cannot run"),
    };
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %eddy_rpc::chain(&e), "cannot accept an HTTP connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let router = router.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(Peer(peer));
                tower::ServiceExt::oneshot(router.clone(), request)
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT);
            let served = match acceptor {
                None => http.serve_connection(TokioIo::new(socket), service).await,
                Some(acceptor) => match tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(socket)).await {
                    Ok(Ok(stream)) => http.serve_connection(TokioIo::new(stream), service).await,
                    Ok(Err(e)) => {
                        return tracing::warn!(peer = %peer, error = %eddy_rpc::chain(&e), "HTTP client failed the TLS handshake")
                    }
                    Err(_) => {
                        return tracing::warn!(peer = %peer, "HTTP client did not finish the TLS handshake in time")
                    }
                },
            };
            if let Err(e) = served {
                tracing::debug!(peer = %peer, error = %eddy_rpc::chain(&e), "HTTP connection ended with an error");
            }
        });
    }
}

/// Lets a request through only with the token, when one is asked: else 401, logged
/// with the peer.
pub(crate) async fn require_token(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Some(token) = &app.token else {
        // No credentials (a local job on loopback): only for a client that named a loopback
        // host, so that a web page elsewhere cannot reach it by rebinding its own name.
        if !loopback_host(&request) {
            let error = "this server answers requests for a loopback host (127.0.0.1, [::1], localhost) only";
            let body = serde_json::json!({ "errors": [error] });
            return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
        }
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if given.is_some_and(|given| same_bytes(given.as_bytes(), token)) {
        return next.run(request).await;
    }
    let peer = request.extensions().get::<Peer>().map_or_else(|| "?".to_string(), |p| p.0.to_string());
    tracing::warn!(peer = %peer, path = %request.uri().path(), presented = given.is_some(), "HTTP request refused: no \
        valid credentials");
    let error = "this server needs the cluster's secret: `Authorization: Bearer <the secret file's contents>`";
    let body = serde_json::json!({ "errors": [error] });
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], axum::Json(body)).into_response()
}

/// Whether the request's `Host` names a loopback address or `localhost`.
fn loopback_host(request: &Request) -> bool {
    let Some(host) = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compares in time that does not depend on where the bytes differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
