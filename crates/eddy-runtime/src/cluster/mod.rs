//! The runtime's side of a cluster: what runs the job's code. The JobManager
//! (`eddy-jobmanager`) and the TaskManager (`eddy-taskmanager`) never need it; they and
//! this module talk over the wire of `eddy-rpc` (handshake, TLS, frames, ids, service
//! messages), re-exported here.
//!
//! - [`executor_link`]: the task executor ⇄ JobMaster messages (control messages to
//!   subtasks, their reports and exits);
//! - [`task_executor`]: the process a TaskManager starts per attempt: rebuilds the graph,
//!   checks it against the JobMaster's, runs its slots' subtasks, and reports;
//! - [`fingerprint`]: the graph as one line per operator, compared across processes.
//!
//! The data plane between task executors is [`crate::network`]; the job's side
//! (submitting to the JobManager, coordinating the task executors) is the JobMaster's, in
//! `eddy-jobmaster`.

pub mod executor_link;
pub mod fingerprint;
pub mod task_executor;

pub use eddy_rpc::messages::{JobCommand, JobSummary};
pub use eddy_rpc::{
    auth, frame, AttemptId, ClusterError, Connection, ExecutorIndex, Heartbeats, JobId, JobState, PeerRole, Reader,
    Secret, Security, Stream, TaskManagerId, TlsConfig, TlsFiles,
};
