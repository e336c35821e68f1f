//! eddy as a cluster: a JobManager, TaskManagers with slots, and the job's own binary
//! (application mode: Rust cannot ship closures, so every process runs the same code and
//! rebuilds the graph from the job's arguments).
//!
//! - [`auth`]: the cluster's secret and the handshake every connection starts with;
//! - [`stream`] and [`tls`]: connections in plain TCP or TLS (rustls), and [`Security`],
//!   which opens and accepts them;
//! - [`frame`] and [`messages`]: control messages, length-prefixed postcard;
//! - [`data`]: the data plane between task executors, with credit-based flow control;
//! - [`taskmanager`]: the TaskManager service: registers its slots, heartbeats, and
//!   starts one task executor per attempt of a job deployed to it;
//! - [`task_executor`]: such a process: rebuilds the graph, checks it against the
//!   JobMaster's, runs its slots' subtasks, and reports;
//! - [`job_client`]: the job's binary side: submits the job to the JobManager and
//!   coordinates it (its JobMaster: checkpoints, restarts, commands from the CLI), using
//!   the local executor's coordinator with remote subtasks;
//! - [`fingerprint`]: the graph as one line per operator, compared across processes.
//!
//! The JobManager itself (slots, TaskManagers, jobs, the CLI's commands) is the
//! `eddy-jobmanager` crate: it never needs the job's code.

pub mod auth;
pub mod data;
pub mod fingerprint;
pub mod frame;
pub mod job_client;
pub mod messages;
pub mod stream;
pub mod task_executor;
pub mod taskmanager;
pub mod tls;

pub use auth::{PeerRole, Secret};
pub use frame::{Connection, Reader};
pub use messages::{JobCommand, JobId, JobSummary, Message};
pub use stream::Stream;
pub use tls::{TlsConfig, TlsFiles};

use crate::error::ClusterError;
use std::path::PathBuf;
use std::time::Duration;

/// How often cluster processes tell each other they are alive, and how long a silent
/// peer stays a member. Flink's defaults are 10 s / 50 s; eddy's heartbeats are sent by
/// a thread of their own that runs no user code and never waits for a task (and there is
/// no garbage collector to pause it), so a live process is never late by seconds, and a
/// killed one is usually seen at once anyway: its sockets close.
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

/// What every connection of a cluster needs: the cluster's secret, and TLS when it is on.
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

    /// The secret file and TLS flags of `args` (`--secret-file`, `--tls-cert`,
    /// `--tls-key`, `--tls-ca`).
    pub fn from_args(args: &[String]) -> Result<Option<Self>, ClusterError> {
        let Some(secret_file) = flag_value(args, "--secret-file")? else { return Ok(None) };
        let secret = Secret::from_file(&PathBuf::from(secret_file))?;
        Ok(Some(Self { secret, tls: TlsConfig::from_args(args)? }))
    }
}

/// Where a job's binary submits its job (`--jobmanager HOST:PORT --secret-file FILE`).
#[derive(Debug, Clone)]
pub struct ClusterTarget {
    pub jobmanager: String,
    pub security: Security,
    /// The arguments the binary was started with, which every TaskManager runs it with.
    pub args: Vec<String>,
    /// How long the job waits for enough slots before it fails.
    pub slot_timeout_ms: u64,
    pub heartbeats: Heartbeats,
}

/// How long a job waits for slots by default (Flink's `slot.request.timeout` is 5 min;
/// a job on a small cluster usually learns sooner that nobody will come).
pub const SLOT_TIMEOUT_MS_DEFAULT: u64 = 60_000;

impl ClusterTarget {
    /// The cluster named by this process's arguments, if any: `--jobmanager HOST:PORT`
    /// (or `=`), with `--secret-file FILE` and optionally `--slot-timeout-ms N`.
    pub fn from_process_args() -> Result<Option<Self>, ClusterError> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Self::from_args(args)
    }

    pub fn from_args(args: Vec<String>) -> Result<Option<Self>, ClusterError> {
        let Some(jobmanager) = flag_value(&args, "--jobmanager")? else { return Ok(None) };
        let Some(security) = Security::from_args(&args)? else {
            return Err(ClusterError::Config(
                "--jobmanager needs --secret-file FILE: the cluster refuses jobs without its secret".into(),
            ));
        };
        let slot_timeout_ms = match flag_value(&args, "--slot-timeout-ms")? {
            None => SLOT_TIMEOUT_MS_DEFAULT,
            Some(v) => v
                .parse()
                .map_err(|_| ClusterError::Config(format!("--slot-timeout-ms {v}: not a number of milliseconds")))?,
        };
        Ok(Some(Self { jobmanager, security, args, slot_timeout_ms, heartbeats: Heartbeats::default() }))
    }
}

/// The value of `--name VALUE` or `--name=VALUE` in `args`.
pub fn flag_value(args: &[String], name: &str) -> Result<Option<String>, ClusterError> {
    for (i, arg) in args.iter().enumerate() {
        if arg == name {
            return match args.get(i + 1) {
                Some(value) => Ok(Some(value.clone())),
                None => Err(ClusterError::Config(format!("{name} needs a value"))),
            };
        }
        if let Some(value) = arg.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
            return Ok(Some(value.to_string()));
        }
    }
    Ok(None)
}

/// Starts a thread that sends a heartbeat on `connection` every interval until a send
/// fails (the connection is gone) or `stop` is set.
pub fn start_heartbeats(
    connection: Connection,
    heartbeats: Heartbeats,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let _ = std::thread::Builder::new().name("eddy-heartbeat".into()).spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if connection.send(&Message::Heartbeat).is_err() {
                return;
            }
            std::thread::sleep(heartbeats.interval());
        }
    });
}
