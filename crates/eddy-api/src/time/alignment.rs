//! Watermark alignment (Flink's `withWatermarkAlignment`, FLIP-182): sources in one
//! alignment group do not run further ahead in event time than the group's slowest
//! source plus a maximum drift. Each member reports its watermark every update interval
//! and learns the group's minimum; a source ahead of minimum + drift pauses (its task
//! stops asking the source for records, still taking checkpoints) until the others catch
//! up. Idle or finished members hold nobody back.
//!
//! The group lives in this process, per run of the job: a cluster will need the
//! JobManager to combine the members of other processes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// An alignment group's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatermarkAlignment {
    pub group: String,
    pub max_drift_ms: i64,
    pub update_interval_ms: u64,
}

impl WatermarkAlignment {
    pub fn new(group: &str, max_drift: Duration, update_interval: Duration) -> Self {
        Self {
            group: group.to_string(),
            max_drift_ms: max_drift.as_millis() as i64,
            update_interval_ms: (update_interval.as_millis() as u64).max(1),
        }
    }
}

/// The members' watermarks of one group in one run (`None`: idle or finished).
#[derive(Debug, Default)]
struct Group {
    members: HashMap<String, Option<i64>>,
}

type Groups = Mutex<HashMap<(u64, String), Arc<Mutex<Group>>>>;

fn groups() -> &'static Groups {
    static GROUPS: OnceLock<Groups> = OnceLock::new();
    GROUPS.get_or_init(Groups::default)
}

/// One source subtask's membership of its group.
#[derive(Debug)]
pub(crate) struct AlignmentMember {
    group: Arc<Mutex<Group>>,
    member: String,
    max_drift_ms: i64,
}

impl AlignmentMember {
    /// Joins `alignment.group` of run `run` as `member` (operator uid and subtask).
    pub(crate) fn join(alignment: &WatermarkAlignment, run: u64, member: String) -> Self {
        let mut all = groups().lock().unwrap_or_else(|e| e.into_inner());
        let group = all.entry((run, alignment.group.clone())).or_default().clone();
        group.lock().unwrap_or_else(|e| e.into_inner()).members.insert(member.clone(), Some(i64::MIN));
        Self { group, member, max_drift_ms: alignment.max_drift_ms }
    }

    /// Reports this member's watermark (`None`: idle or finished); whether it must pause,
    /// being more than the maximum drift ahead of the group's slowest active member.
    pub(crate) fn report(&self, watermark: Option<i64>) -> bool {
        let mut group = self.group.lock().unwrap_or_else(|e| e.into_inner());
        group.members.insert(self.member.clone(), watermark);
        let slowest = group.members.values().flatten().min().copied();
        match (watermark, slowest) {
            (Some(own), Some(slowest)) => own > slowest.saturating_add(self.max_drift_ms),
            _ => false,
        }
    }
}

impl Drop for AlignmentMember {
    /// A member that is gone (finished, failed, cancelled) holds nobody back.
    fn drop(&mut self) {
        self.group.lock().unwrap_or_else(|e| e.into_inner()).members.insert(self.member.clone(), None);
    }
}
