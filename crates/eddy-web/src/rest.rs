//! The REST API on Flink's paths (`rest_v1_dispatcher`), where eddy has the thing: the
//! cluster, its jobs, a job's vertices with their subtasks, back pressure and watermarks,
//! its checkpoints and exceptions, its TaskManagers; savepoints and stops as asynchronous
//! operations with a trigger id, and cancel. JSON in and out; errors as
//! `{"errors": ["…"]}` with the status that fits.

use crate::backend::{JobEntry, Snapshot};
use crate::operations::OperationStatus;
use crate::server::{require_token, App};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use axum::{Json, Router};
use eddy_rpc::messages::JobCommand;
use eddy_rpc::view::{backpressure_level, CheckpointStatus, CheckpointView, JobView, SubtaskView, VertexView};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The routes: the API and `/metrics` behind the token; the dashboard's files and
/// `/config` (which holds nothing of a job) open, so the dashboard can ask for the token.
pub(crate) fn router(app: Arc<App>, dashboard: bool) -> Router {
    let mut api = Router::new();
    if dashboard {
        api = api
            .route("/overview", get(overview))
            .route("/jobs", get(jobs))
            .route("/jobs/overview", get(jobs_overview))
            .route("/jobs/{job}", get(job).patch(cancel))
            .route("/jobs/{job}/vertices/{vertex}", get(vertex))
            .route("/jobs/{job}/vertices/{vertex}/backpressure", get(backpressure))
            .route("/jobs/{job}/vertices/{vertex}/watermarks", get(watermarks))
            .route("/jobs/{job}/checkpoints", get(checkpoints))
            .route("/jobs/{job}/checkpoints/config", get(checkpoint_config))
            .route("/jobs/{job}/exceptions", get(exceptions))
            .route("/jobs/{job}/savepoints", post(trigger_savepoint))
            .route("/jobs/{job}/savepoints/{trigger}", get(operation_status))
            .route("/jobs/{job}/stop", post(stop))
            .route("/jobs/{job}/rescaling", patch(rescale))
            .route("/jobs/{job}/rescaling/{trigger}", get(operation_status))
            .route("/taskmanagers", get(taskmanagers))
            .route_layer(axum::middleware::from_fn_with_state(app.clone(), refuse_while_standing_by));
    }
    let api = api.route("/metrics", get(crate::exposition::metrics));
    let api = api.route_layer(axum::middleware::from_fn_with_state(app.clone(), require_token));
    let mut open = Router::new();
    if dashboard {
        open = open
            .route("/", get(crate::dashboard::index))
            .route("/app.js", get(crate::dashboard::script))
            .route("/style.css", get(crate::dashboard::style))
            .route("/config", get(config));
    }
    api.merge(open).fallback(not_found).with_state(app)
}

/// While the process stands by (a JobManager that does not lead), the API answers 503
/// naming the leader instead of showing an empty cluster.
async fn refuse_while_standing_by(
    State(app): State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match app.backend.standing_by() {
        Some(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
        None => next.run(request).await,
    }
}

/// An error answer.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    ApiError(status, message.into()).into_response()
}

/// An error to answer: its status and what to say.
pub(crate) struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "errors": [self.1] }))).into_response()
    }
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such path here (the REST API is on the JobManager, or on a local job with --rest-bind)",
    )
}

async fn config(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "refresh-interval": 1000,
        "eddy-version": env!("CARGO_PKG_VERSION"),
        "credentials": app.token.is_some(),
        "role": app.role.name(),
    }))
}

async fn overview(State(app): State<Arc<App>>) -> Json<Value> {
    let snapshot = app.backend.snapshot();
    let cluster = snapshot.cluster.clone().unwrap_or_default();
    let running = snapshot.jobs.iter().filter(|j| !j.state.is_terminal()).count();
    Json(json!({
        "taskmanagers": cluster.taskmanagers,
        "slots-total": cluster.slots_total,
        "slots-available": cluster.slots_available,
        "jobs-running": if snapshot.cluster.is_some() { cluster.jobs_running as usize } else { running },
        "jobs-finished": cluster.jobs_finished,
        "jobs-cancelled": cluster.jobs_cancelled,
        "jobs-failed": cluster.jobs_failed,
        "role": snapshot.role.name(),
        "eddy-version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn jobs(State(app): State<Arc<App>>) -> Json<Value> {
    let jobs: Vec<Value> =
        app.backend.snapshot().jobs.iter().map(|j| json!({ "id": j.id, "status": j.state.name() })).collect();
    Json(json!({ "jobs": jobs }))
}

async fn jobs_overview(State(app): State<Arc<App>>) -> Json<Value> {
    let jobs: Vec<Value> = app.backend.snapshot().jobs.iter().map(job_summary).collect();
    Json(json!({ "jobs": jobs }))
}

fn job_summary(job: &JobEntry) -> Value {
    let view = job.view.as_ref();
    json!({
        "jid": job.id,
        "name": job.name,
        "state": job.state.name(),
        "parallelism": job.parallelism,
        "start-time": view.map_or(0, |v| v.start_time_ms),
        "duration": job.uptime_ms,
        "restarts": view.map_or(0, |v| v.restarts),
        "checkpoints-completed": view.map_or(0, |v| v.checkpoints.completed),
        "source-records-per-second": view.map_or(0.0, source_rate),
    })
}

/// Records per second out of the job's sources (vertices no edge leads to).
fn source_rate(view: &JobView) -> f64 {
    let sources = view.vertices.iter().filter(|v| !view.edges.iter().any(|e| e.target == v.id));
    sources.map(|v| sum(v, |s| s.records_out_per_second)).sum()
}

/// The job the path names, with its view; else the error to answer.
fn find(snapshot: &Snapshot, job: &str) -> Result<(JobEntry, JobView), ApiError> {
    let Some(entry) = snapshot.jobs.iter().find(|j| j.id == job) else {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no job '{job}' (GET /jobs lists them)")));
    };
    let Some(view) = entry.view.clone() else {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("job {job} has not shown itself yet; try again in a second"),
        ));
    };
    Ok((entry.clone(), view))
}

fn find_vertex<'a>(view: &'a JobView, vertex: &str) -> Result<&'a VertexView, ApiError> {
    view.vertices
        .iter()
        .find(|v| v.id.to_string() == vertex)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("job '{}' has no vertex '{vertex}'", view.name)))
}

fn sum(vertex: &VertexView, f: impl Fn(&SubtaskView) -> f64) -> f64 {
    vertex.subtasks.iter().map(f).sum()
}

fn max(vertex: &VertexView, f: impl Fn(&SubtaskView) -> f64) -> f64 {
    vertex.subtasks.iter().map(f).fold(0.0, f64::max)
}

/// The lowest input watermark over a vertex's subtasks (Flink's low watermark), if every
/// subtask has one.
fn low_watermark(vertex: &VertexView) -> Option<i64> {
    vertex.subtasks.iter().map(|s| s.counters.input_watermark).collect::<Option<Vec<_>>>()?.into_iter().min()
}

fn vertex_summary(vertex: &VertexView, state: &str) -> Value {
    let total = |f: fn(&SubtaskView) -> u64| vertex.subtasks.iter().map(f).sum::<u64>();
    json!({
        "id": vertex.id.to_string(),
        "name": vertex.name,
        "parallelism": vertex.parallelism,
        "status": state,
        "operators": vertex.operators,
        "metrics": {
            "read-records": total(|s| s.counters.records_in),
            "write-records": total(|s| s.counters.records_out),
            "read-bytes": total(|s| s.counters.bytes_in),
            "write-bytes": total(|s| s.counters.bytes_out),
            "records-in-per-second": sum(vertex, |s| s.records_in_per_second),
            "records-out-per-second": sum(vertex, |s| s.records_out_per_second),
            "busy-ms-per-second": max(vertex, |s| s.busy_ms_per_second),
            "backpressured-ms-per-second": max(vertex, |s| s.backpressured_ms_per_second),
            "idle-ms-per-second": max(vertex, |s| s.idle_ms_per_second),
        },
        "backpressure-level": backpressure_level(max(vertex, |s| s.backpressured_ms_per_second) / 1000.0),
        "low-watermark": low_watermark(vertex),
        "state-bytes": vertex.state_bytes,
    })
}

async fn job(State(app): State<Arc<App>>, Path(job): Path<String>) -> Result<Response, ApiError> {
    let (entry, view) = find(&app.backend.snapshot(), &job)?;
    let state = entry.state.name();
    let vertices: Vec<Value> = view.vertices.iter().map(|v| vertex_summary(v, state)).collect();
    let nodes: Vec<Value> = view
        .vertices
        .iter()
        .map(|v| {
            let inputs: Vec<Value> = view
                .edges
                .iter()
                .filter(|e| e.target == v.id)
                .map(|e| json!({ "id": e.source.to_string(), "ship_strategy": e.ship_strategy }))
                .collect();
            json!({ "id": v.id.to_string(), "description": v.name, "parallelism": v.parallelism, "inputs": inputs })
        })
        .collect();
    Ok(Json(json!({
        "jid": entry.id,
        "name": entry.name,
        "state": state,
        "start-time": view.start_time_ms,
        "duration": view.duration_ms,
        "now": now_ms(),
        "parallelism": entry.parallelism,
        "max-parallelism": view.max_parallelism,
        "attempt": view.attempt,
        "restarts": view.restarts,
        "vertices": vertices,
        "plan": { "jid": entry.id, "name": entry.name, "nodes": nodes },
        "coordinators": view.coordinator_status,
        "gauges": view.gauges,
        "task-executors": view.task_executors,
    }))
    .into_response())
}

fn subtask_json(subtask: &SubtaskView, state: &str) -> Value {
    json!({
        "subtask": subtask.index,
        "status": state,
        "taskmanager-id": subtask.task_manager,
        "metrics": {
            "read-records": subtask.counters.records_in,
            "write-records": subtask.counters.records_out,
            "read-bytes": subtask.counters.bytes_in,
            "write-bytes": subtask.counters.bytes_out,
        },
        "records-in-per-second": subtask.records_in_per_second,
        "records-out-per-second": subtask.records_out_per_second,
        "busy-ms-per-second": subtask.busy_ms_per_second,
        "backpressured-ms-per-second": subtask.backpressured_ms_per_second,
        "idle-ms-per-second": subtask.idle_ms_per_second,
        "backpressure-level": subtask.backpressure_level(),
        "checkpoint-alignment-ms": subtask.counters.alignment_us as f64 / 1000.0,
        "input-watermark": subtask.counters.input_watermark,
        "output-watermark": subtask.counters.output_watermark,
    })
}

async fn vertex(
    State(app): State<Arc<App>>,
    Path((job, vertex)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (entry, view) = find(&app.backend.snapshot(), &job)?;
    let vertex = find_vertex(&view, &vertex)?;
    let state = entry.state.name();
    let subtasks: Vec<Value> = vertex.subtasks.iter().map(|s| subtask_json(s, state)).collect();
    let mut body = vertex_summary(vertex, state);
    body["now"] = json!(now_ms());
    body["subtasks"] = json!(subtasks);
    Ok(Json(body).into_response())
}

async fn backpressure(
    State(app): State<Arc<App>>,
    Path((job, vertex)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (_, view) = find(&app.backend.snapshot(), &job)?;
    let vertex = find_vertex(&view, &vertex)?;
    let subtasks: Vec<Value> = vertex
        .subtasks
        .iter()
        .map(|s| {
            json!({
                "subtask": s.index,
                "backpressure-level": s.backpressure_level(),
                "ratio": s.backpressured_ms_per_second / 1000.0,
                "busyRatio": s.busy_ms_per_second / 1000.0,
                "idleRatio": s.idle_ms_per_second / 1000.0,
            })
        })
        .collect();
    Ok(Json(json!({
        "status": "ok",
        "backpressure-level": backpressure_level(max(vertex, |s| s.backpressured_ms_per_second) / 1000.0),
        "end-timestamp": now_ms(),
        "subtasks": subtasks,
    }))
    .into_response())
}

async fn watermarks(
    State(app): State<Arc<App>>,
    Path((job, vertex)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let (_, view) = find(&app.backend.snapshot(), &job)?;
    let vertex = find_vertex(&view, &vertex)?;
    // Flink's shape: one entry per subtask and metric, present once there is a watermark.
    let mut entries = Vec::new();
    for s in &vertex.subtasks {
        if let Some(w) = s.counters.input_watermark {
            entries.push(json!({ "id": format!("{}.currentInputWatermark", s.index), "value": w.to_string() }));
        }
        if let Some(w) = s.counters.output_watermark {
            entries.push(json!({ "id": format!("{}.currentOutputWatermark", s.index), "value": w.to_string() }));
        }
    }
    Ok(Json(Value::Array(entries)).into_response())
}

fn checkpoint_json(c: &CheckpointView) -> Value {
    json!({
        "id": c.id,
        "status": match c.status {
            CheckpointStatus::InProgress => "IN_PROGRESS",
            CheckpointStatus::Completed => "COMPLETED",
            CheckpointStatus::Failed => "FAILED",
        },
        "is_savepoint": c.savepoint,
        "trigger_timestamp": c.trigger_time_ms,
        "end_to_end_duration": c.duration_ms,
        "sync_duration": c.sync_ms,
        "async_duration": c.async_ms,
        "checkpointed_size": c.incremental_bytes,
        "state_size": c.bytes,
        "external_path": c.location,
        "failure_message": c.failure,
    })
}

async fn checkpoints(State(app): State<Arc<App>>, Path(job): Path<String>) -> Result<Response, ApiError> {
    let (_, view) = find(&app.backend.snapshot(), &job)?;
    let c = &view.checkpoints;
    let completed: Vec<&CheckpointView> =
        c.history.iter().filter(|x| x.status == CheckpointStatus::Completed && !x.savepoint).collect();
    let stats = |f: fn(&CheckpointView) -> u64| {
        let values: Vec<u64> = completed.iter().map(|x| f(x)).collect();
        let avg = if values.is_empty() { 0 } else { values.iter().sum::<u64>() / values.len() as u64 };
        let (min, max) = (values.iter().min().copied().unwrap_or(0), values.iter().max().copied().unwrap_or(0));
        json!({ "min": min, "avg": avg, "max": max })
    };
    let history: Vec<Value> = c.history.iter().rev().map(checkpoint_json).collect();
    Ok(Json(json!({
        "counts": {
            "restored": u64::from(c.restored_from.is_some()),
            "total": c.triggered,
            "in_progress": c.in_progress,
            "completed": c.completed,
            "failed": c.failed,
        },
        "summary": {
            "end_to_end_duration": stats(|x| x.duration_ms),
            "sync_duration": stats(|x| x.sync_ms),
            "async_duration": stats(|x| x.async_ms),
            "state_size": stats(|x| x.bytes),
            "checkpointed_size": stats(|x| x.incremental_bytes),
        },
        "latest": {
            "completed": c.latest_completed().map(checkpoint_json),
            "savepoint": c.latest_savepoint().map(checkpoint_json),
            "failed": c.latest_failed().map(checkpoint_json),
            "restored": c.restored_from.as_ref().map(|path| json!({ "external_path": path })),
        },
        "history": history,
    }))
    .into_response())
}

async fn checkpoint_config(State(app): State<Arc<App>>, Path(job): Path<String>) -> Result<Response, ApiError> {
    let (_, view) = find(&app.backend.snapshot(), &job)?;
    let c = &view.checkpoints.config;
    Ok(Json(json!({
        "mode": c.mode.to_lowercase().replace('_', " "),
        "interval": c.interval_ms,
        "timeout": c.timeout_ms,
        "min_pause": c.min_pause_ms,
        "max_concurrent": c.max_concurrent,
        "retained": c.retained,
        "checkpoint_storage": c.storage,
        "unaligned_checkpoints": false,
    }))
    .into_response())
}

async fn exceptions(State(app): State<Arc<App>>, Path(job): Path<String>) -> Result<Response, ApiError> {
    let (_, view) = find(&app.backend.snapshot(), &job)?;
    let entries: Vec<Value> = view
        .exceptions
        .iter()
        .rev()
        .map(|e| {
            json!({
                "exceptionName": e.message.split(':').next().unwrap_or(""),
                "stacktrace": e.message,
                "timestamp": e.time_ms,
                "attempt": e.attempt,
                "restarted": e.restarted,
            })
        })
        .collect();
    let last = view.exceptions.last();
    Ok(Json(json!({
        "root-exception": last.map(|e| e.message.clone()),
        "timestamp": last.map(|e| e.time_ms),
        "restarts": view.restarts,
        "exceptionHistory": { "entries": entries, "truncated": false },
    }))
    .into_response())
}

async fn taskmanagers(State(app): State<Arc<App>>) -> Json<Value> {
    let snapshot = app.backend.snapshot();
    // What runs where, from the running jobs' views.
    let running: Vec<&JobEntry> = snapshot.jobs.iter().filter(|j| !j.state.is_terminal()).collect();
    let tms: Vec<Value> = snapshot
        .task_managers
        .iter()
        .map(|tm| {
            let mut jobs = Vec::new();
            let mut subtasks = 0;
            for job in &running {
                let Some(view) = &job.view else { continue };
                let here = view.vertices.iter().flat_map(|v| &v.subtasks).filter(|s| s.task_manager == tm.id).count();
                if here > 0 {
                    jobs.push(json!({ "jid": job.id, "name": job.name, "subtasks": here }));
                    subtasks += here;
                }
            }
            json!({
                "jobs": jobs,
                "subtasks": subtasks,
                "id": tm.id.to_string(),
                "host": tm.host,
                "pid": tm.pid,
                "slotsNumber": tm.slots_total,
                "freeSlots": tm.slots_free,
                "registered": tm.registered_ms,
                "metrics-address": tm.metrics_address,
            })
        })
        .collect();
    Json(json!({ "taskmanagers": tms }))
}

/// Body of a savepoint trigger (Flink's `SavepointTriggerRequestBody`).
#[derive(Debug, serde::Deserialize)]
struct SavepointRequest {
    #[serde(rename = "target-directory")]
    target_directory: Option<String>,
    #[serde(rename = "cancel-job", default)]
    cancel_job: bool,
}

/// Body of a stop (Flink's `StopWithSavepointRequestBody`).
#[derive(Debug, serde::Deserialize)]
struct StopRequest {
    #[serde(rename = "targetDirectory")]
    target_directory: Option<String>,
    #[serde(default)]
    drain: bool,
}

async fn trigger_savepoint(
    State(app): State<Arc<App>>,
    Path(job): Path<String>,
    body: Option<Json<SavepointRequest>>,
) -> Response {
    let Some(Json(body)) = body else {
        return error(StatusCode::BAD_REQUEST, "the body must be JSON: {\"target-directory\": \"/path\"}");
    };
    let Some(dir) = body.target_directory else {
        return error(StatusCode::BAD_REQUEST, "no target-directory: eddy has no default savepoint directory");
    };
    let command = if body.cancel_job { JobCommand::Stop { savepoint_dir: dir } } else { JobCommand::Savepoint { dir } };
    start_operation(&app, &job, command)
}

async fn stop(State(app): State<Arc<App>>, Path(job): Path<String>, body: Option<Json<StopRequest>>) -> Response {
    let Some(Json(body)) = body else {
        return error(StatusCode::BAD_REQUEST, "the body must be JSON: {\"targetDirectory\": \"/path\"}");
    };
    if body.drain {
        return error(
            StatusCode::BAD_REQUEST,
            "drain is not supported: eddy's stop keeps the job's windows and timers in the savepoint",
        );
    }
    let Some(dir) = body.target_directory else {
        return error(StatusCode::BAD_REQUEST, "no targetDirectory: eddy has no default savepoint directory");
    };
    start_operation(&app, &job, JobCommand::Stop { savepoint_dir: dir })
}

/// `PATCH /jobs/:id/rescaling?parallelism=N` (Flink's rescaling endpoint): the job goes
/// to parallelism N from a checkpoint taken for it; poll the trigger id for the outcome.
async fn rescale(
    State(app): State<Arc<App>>,
    Path(job): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(parallelism) = query.get("parallelism").and_then(|p| p.parse::<u32>().ok()).filter(|p| *p > 0) else {
        return error(StatusCode::BAD_REQUEST, "PATCH /jobs/:id/rescaling takes ?parallelism=N (N at least 1)");
    };
    start_operation(&app, &job, JobCommand::Rescale { parallelism })
}

/// A savepoint, stop or rescale, asked of the job; answered with the trigger id to poll.
fn start_operation(app: &App, job: &str, command: JobCommand) -> Response {
    if let JobCommand::Savepoint { dir } | JobCommand::Stop { savepoint_dir: dir } = &command {
        if !std::path::Path::new(dir).is_absolute() && !dir.contains("://") {
            return error(
                StatusCode::BAD_REQUEST,
                format!("the savepoint directory '{dir}' must be absolute (the job's processes may run elsewhere)"),
            );
        }
    }
    if let Err(e) = find(&app.backend.snapshot(), job) {
        return e.into_response();
    }
    let (trigger, answer) = app.operations.start(job);
    match app.backend.command(job, command, answer) {
        Ok(()) => (StatusCode::ACCEPTED, Json(json!({ "request-id": trigger }))).into_response(),
        Err(message) => error(StatusCode::CONFLICT, message),
    }
}

async fn operation_status(State(app): State<Arc<App>>, Path((job, trigger)): Path<(String, String)>) -> Response {
    match app.operations.status(&job, &trigger) {
        None => error(StatusCode::NOT_FOUND, format!("no operation '{trigger}' of job '{job}'")),
        Some(OperationStatus::InProgress) => Json(json!({ "status": { "id": "IN_PROGRESS" } })).into_response(),
        Some(OperationStatus::Completed(Ok(answer))) => match answer.strip_prefix("savepoint=") {
            Some(location) => {
                Json(json!({ "status": { "id": "COMPLETED" }, "operation": { "location": location } })).into_response()
            }
            // A rescale: what it did.
            None => {
                Json(json!({ "status": { "id": "COMPLETED" }, "operation": { "message": answer } })).into_response()
            }
        },
        Some(OperationStatus::Completed(Err(why))) => Json(json!({
            "status": { "id": "COMPLETED" },
            "operation": { "failure-cause": { "class": "eddy", "stack-trace": why } },
        }))
        .into_response(),
    }
}

/// `PATCH /jobs/:id?mode=cancel`.
async fn cancel(
    State(app): State<Arc<App>>,
    Path(job): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if query.get("mode").map(String::as_str) != Some("cancel") {
        return error(StatusCode::BAD_REQUEST, "PATCH /jobs/:id takes ?mode=cancel");
    }
    if let Err(e) = find(&app.backend.snapshot(), &job) {
        return e.into_response();
    }
    // Nothing to poll: the job's state says when it is cancelled.
    match app.backend.command(&job, JobCommand::Cancel, Box::new(|_| {})) {
        Ok(()) => (StatusCode::ACCEPTED, Json(json!({}))).into_response(),
        Err(message) => error(StatusCode::CONFLICT, message),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The header a JSON answer carries (for the dashboard's files too).
pub(crate) const NO_CACHE: (header::HeaderName, &str) = (header::CACHE_CONTROL, "no-cache");
