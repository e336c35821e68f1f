//! Autoscaling by load (the Flink Kubernetes Operator's autoscaler is the model): about
//! once a second, from the job's measured busy time, eddy works out the parallelism each
//! vertex needs to run at the target utilization, and rescales the job when every
//! sample of a window agrees (bounds keep it between a minimum and a maximum, a cool-down
//! after each rescale lets the new attempt's figures settle: it never flaps).
//!
//! A vertex's need: at parallelism `p` with its subtasks busy a fraction `b` of the time,
//! it needs `p · b / u` subtasks to run at target utilization `u` (scaling down, only as
//! far as `p · b / (u - boundary)`, so that the smaller job is not pushed back up);
//! when the sources are backpressured a fraction `s` of the time they would emit up to
//! `1 / (1 - s)` as much (at most twice: demand past that shows in the next window). The
//! job takes the largest need over its vertices but the sources (whose busy time is their
//! own pacing), since one parallelism serves the operators that follow the default.
//! Every decision is logged with its reason and shown in `eddy status`.

use eddy_rpc::view::JobView;
use eddy_runtime::graph::{Autoscaling, StreamGraph};
use std::collections::VecDeque;

/// The autoscaler of one job, over its attempts.
#[derive(Debug)]
pub(crate) struct Autoscaler {
    settings: Autoscaling,
    /// (when, the parallelism wanted, why) of the samples in the window.
    samples: VecDeque<(u64, u32, String)>,
    /// When the last rescale was asked for.
    cooling_since: Option<u64>,
    /// (when, from) of the scale-ups remembered: the job is not scaled back down to the
    /// lowest parallelism it had to leave for more, for [`Autoscaling::cooldown_ms`] × 20
    /// (the model of a vertex's cost is linear, the truth not always).
    scaled_up_from: VecDeque<(u64, u32)>,
    /// The last decision, for `eddy status`.
    pub(crate) last_decision: Option<String>,
}

impl Autoscaler {
    pub(crate) fn new(settings: Autoscaling) -> Self {
        Self {
            settings,
            samples: VecDeque::new(),
            cooling_since: None,
            scaled_up_from: VecDeque::new(),
            last_decision: None,
        }
    }

    /// A new sample of the job running `graph`, shown as `view` at `now_ms`: the
    /// parallelism to rescale to, with why, when the window agrees on one.
    pub(crate) fn observe(&mut self, graph: &StreamGraph, view: &JobView, now_ms: u64) -> Option<(u32, String)> {
        let current = graph.slots_needed();
        if self.cooling_since.is_some_and(|since| now_ms.saturating_sub(since) < self.settings.cooldown_ms) {
            self.samples.clear();
            return None;
        }
        let (wanted, why) = self.wanted(graph, view)?;
        self.samples.push_back((now_ms, wanted, why));
        while self.samples.front().is_some_and(|(at, _, _)| now_ms.saturating_sub(*at) > self.settings.window_ms) {
            self.samples.pop_front();
        }
        let covered = self
            .samples
            .front()
            .is_some_and(|(at, _, _)| now_ms.saturating_sub(*at) + 1_000 >= self.settings.window_ms);
        if !covered {
            return None;
        }
        let all = |f: &dyn Fn(u32) -> bool| self.samples.iter().all(|(_, w, _)| f(*w));
        let memory = self.settings.cooldown_ms.saturating_mul(20);
        while self.scaled_up_from.front().is_some_and(|(at, _)| now_ms.saturating_sub(*at) > memory) {
            self.scaled_up_from.pop_front();
        }
        let target = if all(&|w| w > current) {
            let target = self.samples.iter().map(|(_, w, _)| *w).min()?;
            self.scaled_up_from.push_back((now_ms, current));
            target
        } else if all(&|w| w < current) {
            // Not back to the lowest parallelism the job had to scale up from lately.
            let floor = self.scaled_up_from.iter().map(|(_, from)| from + 1).min().unwrap_or(0);
            let target = self.samples.iter().map(|(_, w, _)| *w).max()?.max(floor);
            if target >= current {
                return None;
            }
            target
        } else {
            return None;
        };
        let why = self.samples.back().map(|(_, _, why)| why.clone()).unwrap_or_default();
        let decision = format!(
            "{current} -> {target}: {why} (every sample of {} s agrees)",
            self.settings.window_ms as f64 / 1000.0
        );
        self.last_decision = Some(decision.clone());
        Some((target, decision))
    }

    /// A rescale was asked for at `now_ms`: no decision until the cool-down passed.
    pub(crate) fn rescaled(&mut self, now_ms: u64) {
        self.cooling_since = Some(now_ms);
        self.samples.clear();
    }

    /// The parallelism the job needs now, with why; `None` while nothing was measured.
    fn wanted(&self, graph: &StreamGraph, view: &JobView) -> Option<(u32, String)> {
        let mean = |subtasks: &[eddy_rpc::view::SubtaskView], f: &dyn Fn(&eddy_rpc::view::SubtaskView) -> f64| {
            subtasks.iter().map(f).sum::<f64>() / subtasks.len().max(1) as f64
        };
        let is_source = |id: u32| graph.nodes.get(id as usize).is_some_and(|n| n.input_count() == 0);
        let sources_backpressured = view
            .vertices
            .iter()
            .filter(|v| is_source(v.id) && !v.subtasks.is_empty())
            .map(|v| mean(&v.subtasks, &|s| s.backpressured_ms_per_second / 1000.0))
            .fold(0.0f64, f64::max)
            .clamp(0.0, 0.5);
        let demand = 1.0 / (1.0 - sources_backpressured);
        let u = self.settings.target_utilization;
        let mut needed: Option<(u32, String)> = None;
        for vertex in view.vertices.iter().filter(|v| !is_source(v.id) && !v.subtasks.is_empty()) {
            let busy = mean(&vertex.subtasks, &|s| s.busy_ms_per_second / 1000.0).clamp(0.0, 1.0);
            let p = vertex.subtasks.len() as f64;
            let settled = (busy - u).abs() <= self.settings.utilization_boundary && sources_backpressured < 0.1;
            // Up to run at the target; down only as far as keeps the subtasks below the
            // band's lower edge, so that the smaller job is not pushed straight back up
            // (by the backlog of the pause, or by records costing more at fewer subtasks).
            let work = p * busy * demand;
            let up = (work / u).ceil().max(1.0) as u32;
            let down = (work / (u - self.settings.utilization_boundary).max(0.05)).ceil().max(1.0) as u32;
            let current = vertex.subtasks.len() as u32;
            let need = if settled {
                current
            } else if up > current {
                up
            } else {
                down.min(current)
            };
            if needed.as_ref().is_none_or(|(n, _)| need > *n) {
                let why = format!(
                    "'{}' busy {:.0}% at parallelism {}, sources backpressured {:.0}%: it needs {need} at {:.0}% \
                        utilization",
                    vertex.name,
                    busy * 100.0,
                    vertex.subtasks.len(),
                    sources_backpressured * 100.0,
                    u * 100.0
                );
                needed = Some((need, why));
            }
        }
        let (need, why) = needed?;
        let bounded = need.clamp(self.settings.min_parallelism, self.settings.max_parallelism);
        let bounded = bounded.min(graph.max_parallelism.get());
        Some((bounded, why))
    }
}
