//! Where the requests of async I/O run: one tokio runtime per process, started on first
//! use and shared by every async operator, with one worker thread per core (at most 8),
//! named "eddy-async-io". A request is a future, not a thread, so thousands can be in
//! flight; user code may use tokio's I/O and timers (an HTTP client, a database driver)
//! inside it.

use std::future::Future;
use std::sync::OnceLock;

static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

fn start() -> Result<tokio::runtime::Runtime, String> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("eddy-async-io")
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async I/O runtime: {e}", e = eddy_types::chain(&e)))
}

/// Runs `future` on the async I/O runtime; the handle aborts it.
pub(crate) fn spawn(future: impl Future<Output = ()> + Send + 'static) -> Result<tokio::task::AbortHandle, String> {
    let runtime = RUNTIME.get_or_init(start).as_ref().map_err(Clone::clone)?;
    Ok(runtime.spawn(future).abort_handle())
}
