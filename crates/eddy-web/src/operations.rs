//! Asynchronous operations (Flink's savepoint and stop triggers): a trigger id answered
//! at once, its status polled until the job answered.

use crate::backend::Answer;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Where an operation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OperationStatus {
    InProgress,
    /// The job's answer: `savepoint=<location>`, or why it failed.
    Completed(Result<String, String>),
}

/// The operations of one server, by (job, trigger id).
#[derive(Default, Clone)]
pub(crate) struct Operations {
    inner: Arc<Mutex<OperationTable>>,
}

#[derive(Default)]
struct OperationTable {
    next: u64,
    status: HashMap<(String, String), OperationStatus>,
    /// Completed operations whose outcome nobody has read yet.
    unread: std::collections::HashSet<(String, String)>,
}

/// Operations kept for polling; beyond, the oldest whose outcome was read go.
const KEPT_MAX: usize = 1000;

impl OperationTable {
    fn forget_old(&mut self) {
        if self.status.len() < KEPT_MAX {
            return;
        }
        let read: Vec<(String, String)> = self
            .status
            .iter()
            .filter(|(key, status)| matches!(status, OperationStatus::Completed(_)) && !self.unread.contains(*key))
            .map(|(key, _)| key.clone())
            .collect();
        for key in read {
            self.status.remove(&key);
        }
    }
}

impl Operations {
    /// A new operation of `job`: its trigger id, and what records the job's answer.
    pub(crate) fn start(&self, job: &str) -> (String, Answer) {
        let mut table = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        table.forget_old();
        table.next += 1;
        // Distinct per server and not guessable from the count alone (not a secret).
        let trigger = format!("{:016x}", table.next.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ std::process::id() as u64);
        let key = (job.to_string(), trigger.clone());
        table.status.insert(key.clone(), OperationStatus::InProgress);
        let inner = self.inner.clone();
        let answer: Answer = Box::new(move |reply| {
            let mut table = inner.lock().unwrap_or_else(|e| e.into_inner());
            table.unread.insert(key.clone());
            table.status.insert(key, OperationStatus::Completed(reply));
        });
        (trigger, answer)
    }

    pub(crate) fn status(&self, job: &str, trigger: &str) -> Option<OperationStatus> {
        let mut table = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let key = (job.to_string(), trigger.to_string());
        let status = table.status.get(&key).cloned();
        if matches!(status, Some(OperationStatus::Completed(_))) {
            table.unread.remove(&key);
        }
        status
    }

    /// Whether an operation completed and nobody has read its outcome yet.
    pub(crate) fn unread(&self) -> bool {
        !self.inner.lock().unwrap_or_else(|e| e.into_inner()).unread.is_empty()
    }
}
