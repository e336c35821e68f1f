//! The service messages: one enum per kind of connection to the JobManager, each with
//! both directions, so that a peer can only be sent what its connection carries. A
//! connection's kind is fixed by the role its peer named in the secret's handshake
//! ([`crate::auth::PeerRole`]).
//!
//! - [`task_manager`]: TaskManager ⇄ JobManager (registration, deployments, executor exits);
//! - [`job_master`]: a job's JobMaster ⇄ JobManager (submission, slots, the CLI's commands
//!   relayed, TaskManagers lost, the job's state);
//! - [`cli`]: the CLI ⇄ JobManager (listing jobs, commands and their answers).
//!
//! The task executor ⇄ JobMaster connection carries runtime types (control messages,
//! reports, state handles): its enum is the runtime's (`eddy_runtime::cluster::executor_link`).

pub mod cli;
pub mod job_master;
pub mod task_manager;

pub use cli::{Answer, CliMessage, JobCommand, JobSummary};
pub use job_master::JobMasterMessage;
pub use task_manager::TaskManagerMessage;
