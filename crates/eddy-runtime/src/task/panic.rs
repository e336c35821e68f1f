//! Turning a panic in a user function into a task failure with a clear message, instead of
//! a backtrace on stderr: subtask threads mark themselves, and the panic hook records the
//! message and location for them instead of printing.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Installs (once per process) a panic hook that keeps quiet on subtask threads and passes
/// every other panic to the hook that was there before.
pub fn install_panic_capture() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_TASK.with(Cell::get) {
                let message = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    (*s).to_string()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else {
                    "panic with a non-string payload".to_string()
                };
                let located = match info.location() {
                    Some(l) => format!("panicked at {}:{}:{}: {message}", l.file(), l.line(), l.column()),
                    None => format!("panicked: {message}"),
                };
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(located));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f` on a subtask thread; a panic comes back as `Err(message with location)`.
pub fn catch_task_panic<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    IN_TASK.with(|t| t.set(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    IN_TASK.with(|t| t.set(false));
    result.map_err(|_| LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| "panicked".to_string()))
}
