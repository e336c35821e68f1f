//! What a running job shows of itself (Flink's execution graph as its REST API and
//! metrics see it): the [`JobBoard`] the JobMaster keeps up to date, about once a second
//! and at every checkpoint and failure, and that a REST server or a Prometheus scrape
//! reads (`eddy_rpc::view` holds the plain data it shows).
//!
//! - [`board`]: the board, and how a job's events change it;
//! - [`checkpoint_stats`]: a completed checkpoint's size and durations;
//! - `layout`: the job's vertices and edges, from its graph and chains;
//! - `rates`: per-second rates and time shares from two samples of a subtask's counters.
//!
//! Nothing here is on the per-record path: subtasks count per batch
//! ([`crate::task::TaskCounters`]), and the board reads their counters once a second.

pub mod board;
pub mod checkpoint_stats;
mod layout;
mod rates;

pub use board::JobBoard;
pub use checkpoint_stats::CheckpointStats;

/// How often the JobMaster samples its subtasks' counters and publishes its view.
pub const VIEW_INTERVAL_MS: u64 = 1000;

/// Serves a board's `/metrics` from a task executor (the API's HTTP server; the runtime
/// has none of its own).
pub trait ServeMetrics: Send + Sync + std::fmt::Debug {
    /// Starts serving `board` on `host` (any free port), to requests that hold the
    /// cluster's `secret` as a bearer token, over TLS when the cluster has it; the address
    /// it listens at.
    fn serve(
        &self,
        board: JobBoard,
        host: &str,
        secret: &[u8],
        tls: Option<&eddy_rpc::TlsConfig>,
    ) -> Result<String, String>;
}
