//! `/metrics`: a snapshot in the Prometheus (OpenMetrics) text format, written with the
//! Prometheus client library. Prometheus's conventions: snake_case names under `eddy_`,
//! counters ending in `_total`, base units (seconds, bytes, ratios 0–1), and labels for
//! the job, vertex, subtask and TaskManager; no label per key, partition labels only from
//! a Kafka source's coordinator. The README maps Flink's metric names to these.

use crate::backend::{JobEntry, ProcessRole, Snapshot};
use crate::server::App;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

type Labels = Vec<(String, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
type CounterFamily = Family<Labels, Counter<f64, AtomicU64>>;

/// The families of one scrape, registered as they are first used.
struct Families {
    registry: Registry,
    gauges: HashMap<String, GaugeFamily>,
    counters: HashMap<String, CounterFamily>,
}

impl Families {
    fn new() -> Self {
        Families { registry: Registry::default(), gauges: HashMap::new(), counters: HashMap::new() }
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &Labels, value: f64) {
        let family = self.gauges.entry(name.to_string()).or_insert_with(|| {
            let family = GaugeFamily::default();
            self.registry.register(name, help, family.clone());
            family
        });
        family.get_or_create(labels).set(value);
    }

    /// A counter's value (the encoder adds `_total` to `name`).
    fn counter(&mut self, name: &str, help: &str, labels: &Labels, value: f64) {
        let family = self.counters.entry(name.to_string()).or_insert_with(|| {
            let family = CounterFamily::default();
            self.registry.register(name, help, family.clone());
            family
        });
        family.get_or_create(labels).inc_by(value);
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The text of `snapshot`.
pub(crate) fn exposition(snapshot: &Snapshot) -> String {
    let mut f = Families::new();
    let role = labels(&[("role", snapshot.role.name())]);
    if let Some(bytes) = crate::process::resident_bytes() {
        f.gauge("process_resident_memory_bytes", "Resident memory of this process", &role, bytes as f64);
    }
    if let Some(seconds) = crate::process::cpu_seconds() {
        f.counter("process_cpu_seconds", "CPU time this process used, user and system", &role, seconds);
    }
    if let Some(cluster) = &snapshot.cluster {
        let none = Labels::new();
        f.gauge("eddy_jobmanager_task_managers", "TaskManagers registered", &none, cluster.taskmanagers.into());
        f.gauge("eddy_jobmanager_task_slots", "Task slots of every TaskManager", &none, cluster.slots_total.into());
        f.gauge("eddy_jobmanager_task_slots_available", "Task slots free", &none, cluster.slots_available.into());
        for (state, count) in [
            ("running", cluster.jobs_running),
            ("finished", cluster.jobs_finished),
            ("cancelled", cluster.jobs_cancelled),
            ("failed", cluster.jobs_failed),
        ] {
            f.gauge("eddy_jobmanager_jobs", "Jobs by state", &labels(&[("state", state)]), count.into());
        }
    }
    if let (ProcessRole::TaskManager, Some(slots)) = (snapshot.role, snapshot.slots) {
        f.gauge("eddy_taskmanager_task_slots", "Task slots this TaskManager offers", &Labels::new(), slots.into());
    }
    for job in &snapshot.jobs {
        job_metrics(&mut f, job);
    }
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &f.registry);
    text
}

fn job_metrics(f: &mut Families, job: &JobEntry) {
    let Some(view) = &job.view else { return };
    let job_labels = labels(&[("job_id", &job.id), ("job_name", &job.name)]);
    let running = u8::from(!job.state.is_terminal());
    f.gauge("eddy_job_running", "1 while the job runs", &job_labels, running.into());
    f.gauge("eddy_job_uptime_seconds", "How long the job has run", &job_labels, view.duration_ms as f64 / 1000.0);
    f.counter("eddy_job_restarts", "Restarts of the job", &job_labels, view.restarts.into());
    let c = &view.checkpoints;
    f.counter(
        "eddy_job_checkpoints_completed",
        "Checkpoints and savepoints completed",
        &job_labels,
        c.completed as f64,
    );
    f.counter("eddy_job_checkpoints_failed", "Checkpoints and savepoints that failed", &job_labels, c.failed as f64);
    f.gauge(
        "eddy_job_checkpoints_in_progress",
        "Checkpoints triggered and not complete",
        &job_labels,
        c.in_progress as f64,
    );
    if let Some(last) = c.latest_completed() {
        let seconds = |ms: u64| ms as f64 / 1000.0;
        f.gauge(
            "eddy_job_last_checkpoint_duration_seconds",
            "Trigger to stored metadata, last checkpoint",
            &job_labels,
            seconds(last.duration_ms),
        );
        f.gauge(
            "eddy_job_last_checkpoint_sync_duration_seconds",
            "Longest synchronous part of a subtask, last checkpoint",
            &job_labels,
            seconds(last.sync_ms),
        );
        f.gauge(
            "eddy_job_last_checkpoint_async_duration_seconds",
            "Longest asynchronous part of a subtask, last checkpoint",
            &job_labels,
            seconds(last.async_ms),
        );
        f.gauge(
            "eddy_job_last_checkpoint_size_bytes",
            "Full size of the last checkpoint",
            &job_labels,
            last.bytes as f64,
        );
        f.gauge(
            "eddy_job_last_checkpoint_incremental_size_bytes",
            "Bytes written for the last checkpoint",
            &job_labels,
            last.incremental_bytes as f64,
        );
    }
    for gauge in &view.gauges {
        let mut labels = job_labels.clone();
        labels.extend(gauge.labels.iter().cloned());
        f.gauge(&format!("eddy_{}", gauge.name), &gauge.help, &labels, gauge.value);
    }
    if job.state.is_terminal() {
        // An ended job keeps its job-level series; its subtasks' go, so that the series
        // of a long-lived cluster do not grow with every job it ever ran.
        return;
    }
    for vertex in &view.vertices {
        let vertex_labels: Labels = job_labels
            .iter()
            .cloned()
            .chain([
                ("vertex_id".to_string(), vertex.id.to_string()),
                ("uid".to_string(), vertex.uid.clone()),
                ("vertex".to_string(), without_paths(&vertex.name)),
            ])
            .collect();
        f.gauge(
            "eddy_vertex_state_size_bytes",
            "The vertex's state in the last checkpoint",
            &vertex_labels,
            vertex.state_bytes as f64,
        );
        for s in &vertex.subtasks {
            let mut l = vertex_labels.clone();
            l.push(("subtask".into(), s.index.to_string()));
            l.push(("task_manager".into(), s.task_manager.to_string()));
            let c = &s.counters;
            f.counter("eddy_task_records_in", "Records the subtask took in", &l, c.records_in as f64);
            f.counter("eddy_task_records_out", "Records the subtask sent on", &l, c.records_out as f64);
            f.counter("eddy_task_bytes_in", "Bytes the subtask read from network channels", &l, c.bytes_in as f64);
            f.counter("eddy_task_bytes_out", "Bytes the subtask wrote to network channels", &l, c.bytes_out as f64);
            f.counter("eddy_task_busy_seconds", "Time the subtask processed", &l, c.busy_ms as f64 / 1000.0);
            f.counter(
                "eddy_task_backpressured_seconds",
                "Time the subtask waited for room downstream",
                &l,
                c.backpressured_ms as f64 / 1000.0,
            );
            f.counter("eddy_task_idle_seconds", "Time the subtask waited for input", &l, c.idle_ms as f64 / 1000.0);
            f.gauge(
                "eddy_task_records_in_per_second",
                "Records in per second, over the last 10 s",
                &l,
                s.records_in_per_second,
            );
            f.gauge(
                "eddy_task_records_out_per_second",
                "Records out per second, over the last 10 s",
                &l,
                s.records_out_per_second,
            );
            f.gauge(
                "eddy_task_busy_ratio",
                "Share of the last second spent processing",
                &l,
                s.busy_ms_per_second / 1000.0,
            );
            f.gauge(
                "eddy_task_backpressured_ratio",
                "Share of the last second waiting for room downstream",
                &l,
                s.backpressured_ms_per_second / 1000.0,
            );
            f.gauge(
                "eddy_task_idle_ratio",
                "Share of the last second waiting for input",
                &l,
                s.idle_ms_per_second / 1000.0,
            );
            f.counter(
                "eddy_task_late_records_dropped",
                "Records its window operators dropped as late (Flink's numLateRecordsDropped)",
                &l,
                c.late_records_dropped as f64,
            );
            f.gauge(
                "eddy_task_checkpoint_alignment_seconds",
                "How long the subtask's last barrier alignment took",
                &l,
                c.alignment_us as f64 / 1e6,
            );
            if let Some(w) = c.input_watermark {
                f.gauge(
                    "eddy_task_input_watermark_seconds",
                    "The subtask's input watermark (event time)",
                    &l,
                    w as f64 / 1000.0,
                );
            }
            if let Some(w) = c.output_watermark {
                f.gauge(
                    "eddy_task_output_watermark_seconds",
                    "The last watermark the subtask sent on (event time)",
                    &l,
                    w as f64 / 1000.0,
                );
            }
        }
    }
}

/// A vertex's name as a label: each word that is a path (a source's file, say) left out,
/// so that the label is the same wherever the job reads from, and short.
fn without_paths(name: &str) -> String {
    name.split(" -> ")
        .map(|operator| {
            let words: Vec<&str> = operator.split(' ').filter(|word| !is_path(word)).collect();
            words.join(" ")
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// Whether a word of an operator's name is a file's path or a URL (`/in/x.csv`,
/// `data/x.csv`, `s3://b/k`), not a name such as `Timestamps/Watermarks`.
fn is_path(word: &str) -> bool {
    let word = word.trim_matches(|c: char| matches!(c, '(' | ')' | '[' | ']' | ',' | '\'' | '"'));
    let last = word.rsplit(['/', '\\']).next().unwrap_or(word);
    word.starts_with(['/', '~', '.'])
        || word.contains('\\')
        || word.contains("://")
        || (word.contains('/') && last.contains('.'))
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Response {
    let text = exposition(&app.backend.snapshot());
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::without_paths;

    #[test]
    fn a_vertex_label_leaves_out_the_paths_in_its_operators_names() {
        assert_eq!(
            without_paths("Text File Source /tmp/in/requests.csv -> Map -> Timestamps/Watermarks"),
            "Text File Source -> Map -> Timestamps/Watermarks"
        );
        assert_eq!(without_paths("Source (data/in.csv) -> Sink s3://bucket/out"), "Source -> Sink");
        assert_eq!(without_paths("join -> count"), "join -> count");
    }
}
