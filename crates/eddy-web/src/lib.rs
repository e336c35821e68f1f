//! eddy's HTTP face (Flink's web monitor): the REST API on Flink's paths, Prometheus
//! `/metrics`, and the web dashboard, served by the JobManager, by a local job when asked
//! (`--rest-bind`), and (`/metrics` only) by TaskManagers and task executors.
//!
//! - [`backend`]: what a server shows: a [`Backend`] gives a [`Snapshot`] of jobs,
//!   TaskManagers and this process, and carries out commands;
//! - [`server`]: the listener (plain or TLS, on its own thread and runtime) and the
//!   bearer-token check: the cluster's secret, a 401 logged with the peer otherwise;
//! - `rest`: the REST routes and their JSON, errors as `{"errors": [...]}`;
//! - `operations`: asynchronous savepoints and stops, with a trigger id to poll;
//! - `exposition`: the Prometheus text of a snapshot, with Prometheus's conventions;
//! - `process`: this process's memory and CPU, from `/proc`;
//! - `dashboard`: the dashboard's page, script and style, compiled into the binary.
//!
//! Depends on `eddy-rpc` (the views and commands) and the HTTP stack; the runtime never
//! sees it: the API wires a job's board into a [`Backend`].

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

pub mod backend;
mod dashboard;
mod error;
mod exposition;
mod operations;
mod process;
mod rest;
pub mod server;

pub use backend::{Answer, Backend, JobEntry, ProcessRole, Snapshot};
pub use error::WebError;
pub use server::{serve, WebOptions, WebServer};
