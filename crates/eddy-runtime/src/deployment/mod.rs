//! Deploying an attempt in one process: the part that the local executor, the simulator
//! and a cluster's task executor share, with no coordination in it.
//!
//! - [`wiring`]: the channels between subtasks (in-process queues, and the network ends
//!   of a task executor's), and the chain each subtask builds on its own thread;
//! - [`restore`]: which old task states each new operator instance reads;
//! - [`subtasks`]: this process's subtasks built from their wiring, and started.

pub mod restore;
pub mod subtasks;
pub mod wiring;
