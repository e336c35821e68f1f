//! Heartbeats: how often cluster processes tell each other they are alive, and how long a
//! silent peer stays a member.

use crate::error::ClusterError;
use crate::frame::Connection;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Flink's defaults are 10 s / 50 s; eddy's heartbeats are sent by a thread of their own
/// that runs no user code and never waits for a task (and there is no garbage collector
/// to pause it), so a live process is never late by seconds, and a killed one is usually
/// seen at once anyway: its sockets close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeats {
    pub interval_ms: u64,
    pub timeout_ms: u64,
}

impl Default for Heartbeats {
    fn default() -> Self {
        Self { interval_ms: 500, timeout_ms: 5_000 }
    }
}

impl Heartbeats {
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// Checks the pair: a timeout must leave room for a few missed heartbeats.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if self.interval_ms == 0 || self.timeout_ms < self.interval_ms.saturating_mul(2) {
            return Err(ClusterError::Config(format!(
                "heartbeat timeout {} ms must be at least twice the interval {} ms (and the interval above 0)",
                self.timeout_ms, self.interval_ms
            )));
        }
        Ok(())
    }
}

/// Starts a thread that sends `heartbeat` (the connection's own heartbeat message) on
/// `connection` every interval until a send fails (the connection is gone) or `stop` is
/// set.
pub fn start_heartbeats<M: Serialize + Send + 'static>(
    connection: Connection,
    heartbeats: Heartbeats,
    stop: Arc<AtomicBool>,
    heartbeat: M,
) {
    let _ = std::thread::Builder::new().name("eddy-heartbeat".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if connection.send(&heartbeat).is_err() {
                return;
            }
            std::thread::sleep(heartbeats.interval());
        }
    });
}
