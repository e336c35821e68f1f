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
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
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
    pub(crate) token: Option<Vec<u8>>,
    pub(crate) operations: Operations,
}

/// Which peer a request came from (for the log of refused ones).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// Starts serving `backend` as `options` say; returns once it listens.
pub fn serve(options: WebOptions, backend: Arc<dyn Backend>) -> Result<WebServer, WebError> {
    let bind_error = |source| WebError::Bind { address: options.bind.clone(), source };
    let listener = std::net::TcpListener::bind(&options.bind).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let address = listener.local_addr().map_err(bind_error)?;
    let operations = Operations::default();
    let app = Arc::new(App { backend, token: options.token.clone(), operations: operations.clone() });
    let router = crate::rest::router(app, options.dashboard);
    let tls = options.tls.clone();
    let server = WebServer { address, tls: tls.is_some(), operations };
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().map_err(WebError::Thread)?;
    std::thread::Builder::new()
        .name("eddy-http".into())
        .spawn(move || runtime.block_on(accept(listener, router, tls)))
        .map_err(WebError::Thread)?;
    tracing::info!(address = %server.url(), dashboard = options.dashboard, credentials = options.token.is_some(), "HTTP server listening");
    Ok(server)
}

/// Accepts connections for ever, each served on a task of its own.
async fn accept(listener: std::net::TcpListener, router: axum::Router, tls: Option<Arc<ServerConfig>>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => return tracing::error!(error = %e, "the HTTP listener cannot run"),
    };
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept an HTTP connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let router = router.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(Peer(peer));
                tower::ServiceExt::oneshot(router.clone(), request)
            });
            let http = hyper::server::conn::http1::Builder::new();
            let served = match acceptor {
                None => http.serve_connection(TokioIo::new(socket), service).await,
                Some(acceptor) => match acceptor.accept(socket).await {
                    Ok(stream) => http.serve_connection(TokioIo::new(stream), service).await,
                    Err(e) => return tracing::warn!(peer = %peer, error = %e, "HTTP client failed the TLS handshake"),
                },
            };
            if let Err(e) = served {
                tracing::debug!(peer = %peer, error = %e, "HTTP connection ended with an error");
            }
        });
    }
}

/// Lets a request through only with the token, when one is asked: else 401, logged
/// with the peer.
pub(crate) async fn require_token(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Some(token) = &app.token else { return next.run(request).await };
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
    tracing::warn!(peer = %peer, path = %request.uri().path(), presented = given.is_some(), "HTTP request refused: no valid credentials");
    let body = serde_json::json!({ "errors": ["this server needs the cluster's secret: `Authorization: Bearer <the secret file's contents>`"] });
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], axum::Json(body)).into_response()
}

/// Compares in time that does not depend on where the bytes differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
