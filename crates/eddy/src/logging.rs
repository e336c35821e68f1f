//! What a running job says as it goes (job start and end, every checkpoint, failures and
//! restarts with their causes) is logged through `tracing`; this writes it to stderr.

use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// The environment variable with the log filter: a level (`info`, `debug`) or per-target
/// levels as `tracing` writes them (`warn,eddy_runtime=debug`). Default: `info`.
pub const LOG_FILTER_VAR: &str = "EDDY_LOG";

/// Sends eddy's logs to stderr, filtered by [`LOG_FILTER_VAR`]. Does nothing if the program
/// installed a `tracing` subscriber already (a job embedded in a larger program keeps its
/// own).
pub fn log_to_stderr() {
    let filter = match std::env::var(LOG_FILTER_VAR) {
        Ok(text) => text.parse::<Targets>().unwrap_or_else(|e| {
            eprintln!("{LOG_FILTER_VAR}={text} is not a log filter ({e}); logging at info", e = eddy_types::chain(&e));
            Targets::new().with_default(tracing::Level::INFO)
        }),
        Err(_) => Targets::new().with_default(tracing::Level::INFO),
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_target(false).with_ansi(ansi);
    let _ = tracing_subscriber::registry().with(layer.with_filter(filter)).try_init();
}
