//! Where the requests of async I/O run: one tokio runtime per process, on a thread of its
//! own ("eddy-async-io"), shared by every async operator. A request is a future, not a
//! thread, so thousands can be in flight; user code may use tokio's I/O and timers (an
//! HTTP client, a database driver) inside it.

use std::future::Future;
use std::sync::OnceLock;

static RUNTIME: OnceLock<Result<tokio::runtime::Handle, String>> = OnceLock::new();

fn start() -> Result<tokio::runtime::Handle, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async I/O runtime: {e}"))?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("eddy-async-io".to_string())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(|e| format!("starting the async I/O thread: {e}"))?;
    Ok(handle)
}

/// Runs `future` on the async I/O runtime, started on first use.
pub(crate) fn spawn(future: impl Future<Output = ()> + Send + 'static) -> Result<(), String> {
    let handle = RUNTIME.get_or_init(start).as_ref().map_err(Clone::clone)?;
    handle.spawn(future);
    Ok(())
}
