//! eddy's cluster wire: what the JobManager, the TaskManagers, a job's JobMaster, its task
//! executors and the CLI need to talk to each other, without the runtime.
//!
//! - [`auth`]: the cluster's secret and the HMAC handshake every connection starts with,
//!   which also names the peer's role;
//! - [`stream`] and [`tls`]: connections in plain TCP or TLS (rustls); [`security`] opens
//!   and accepts them, TLS first, then the handshake;
//! - [`frame`]: length-prefixed postcard frames, and a [`Connection`] any thread writes to
//!   with a [`Reader`] for one thread;
//! - [`heartbeat`]: the heartbeat settings and the thread that sends them;
//! - [`ha`]: high availability on etcd: leader election, the job store, finding the leader;
//! - [`ids`] and [`job_state`]: newtypes for the cluster's ids, and a job's state;
//! - [`messages`]: one enum per kind of connection to the JobManager;
//! - [`slots`]: an attempt's slots, and which task executor runs which subtask;
//! - [`target`]: where a job's binary submits its job;
//! - [`launch`]: how a TaskManager starts a task executor;
//! - [`view`]: what a running job shows of itself (REST, dashboard, `/metrics`);
//! - [`error`]: the crate's one error type.
//!
//! Depends on rustls (on ring), serde, postcard, and serde_json with base64 for etcd
//! only: the JobManager and TaskManager crates build on it without compiling the runtime.
//! The runtime adds the data plane and
//! the task executor ⇄ JobMaster messages on the same streams and frames.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod auth;
pub mod error;
pub mod frame;
pub mod ha;
pub mod heartbeat;
pub mod ids;
pub mod job_state;
pub mod launch;
pub mod messages;
pub mod security;
pub mod slots;
pub mod stream;
pub mod target;
pub mod tls;
pub mod view;

pub use auth::{PeerRole, Secret};
pub use error::ClusterError;
// An error printed with its causes, for the crates on `eddy-rpc` alone.
pub use eddy_types::{chain, Cause};
pub use frame::{Connection, Reader};
pub use heartbeat::{start_heartbeats, Heartbeats};
pub use ids::{AttemptId, ExecutorIndex, JobId, TaskManagerId};
pub use job_state::JobState;
pub use security::Security;
pub use stream::Stream;
pub use target::{ClusterTarget, SLOT_TIMEOUT_MS_DEFAULT};
pub use tls::{TlsConfig, TlsFiles};
