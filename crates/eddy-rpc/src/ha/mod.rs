//! High availability on etcd (Flink's ZooKeeper and Kubernetes HA services are the model):
//! several JobManagers, one leader at a time, and what a new leader needs to go on.
//!
//! - leader election: each JobManager campaigns by creating the leader key with a lease
//!   of its own ([`HaServices::campaign`]); the one that creates it leads while it keeps
//!   the lease alive ([`Leadership`]); when its process dies the lease expires
//!   ([`LEASE_TTL_S`]) and the key goes, and the next campaigner takes it;
//! - the job store: every job that has not ended, with what it takes to run it again (its
//!   name, arguments, job directory, attempt numbers), under `jobs/<id>` ([`JobRecord`]),
//!   written only by the JobManager whose lease holds the leader key (an etcd transaction);
//! - leader retrieval: TaskManagers, jobs and the CLI take `--ha etcd://HOST:PORT` in place
//!   of `--jobmanager` and read the leader's address from the leader key
//!   ([`locate_jobmanager`]), again whenever they lose it.
//!
//! Keys live under `eddy/<cluster id>/` (`etcd://HOST:PORT[,HOST:PORT…][/CLUSTER-ID]`,
//! cluster id `default`; Flink's `high-availability.cluster-id`), so several clusters
//! share one etcd.

pub mod etcd;
mod leadership;

pub use etcd::{Etcd, LeaseId};
pub use leadership::Leadership;

use crate::error::ClusterError;
use crate::ids::JobId;
use crate::job_state::JobState;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The scheme of a high-availability address, where a JobManager's would be.
pub const HA_SCHEME: &str = "etcd://";
/// The leader's lease, in seconds: how long after a leader's death a new one can take
/// over at the latest. etcd's own floor is about 1.5 s with its default election timeout.
pub const LEASE_TTL_S: u64 = 2;
/// How often a JobManager that does not lead tries to, and a client looks for a leader.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Whether `address` names a high-availability setup rather than one JobManager.
pub fn is_ha(address: &str) -> bool {
    address.starts_with(HA_SCHEME)
}

/// The services of one cluster in etcd.
#[derive(Debug, Clone)]
pub struct HaServices {
    etcd: Etcd,
    prefix: String,
    url: String,
}

/// A job as the store keeps it, for a new leader to take it on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: JobId,
    pub name: String,
    pub args: Vec<String>,
    pub parallelism: u32,
    /// Where its checkpoints go (`None`: in its JobMaster's memory).
    pub job_dir: Option<String>,
    pub slot_timeout_ms: u64,
    pub next_attempt: u32,
    /// Each operator's parallelism as it last ran (a rescale changes it).
    #[serde(default)]
    pub operator_parallelism: Vec<u32>,
    /// Its JobMaster's generation (fencing: see `Resume`).
    #[serde(default)]
    pub generation: u32,
    pub state: JobState,
    /// What it holds alone (see `Submit`).
    #[serde(default)]
    pub exclusive_resources: Vec<String>,
    /// Its binary's name (see `Submit`); empty in records written before it was kept.
    #[serde(default)]
    pub binary: String,
    /// Submitted detached and its first JobMaster not started yet: a new leader has a
    /// TaskManager start it.
    #[serde(default)]
    pub detached: bool,
}

impl HaServices {
    /// The services an `etcd://HOST:PORT[,HOST:PORT…][/CLUSTER-ID]` address names.
    pub fn parse(url: &str) -> Result<Self, ClusterError> {
        let bad = |why: &str| ClusterError::Config(format!("high-availability address '{url}': {why}"));
        let rest = url.strip_prefix(HA_SCHEME).ok_or_else(|| bad("it must start with etcd://"))?;
        let (hosts, cluster) = rest.split_once('/').unwrap_or((rest, "default"));
        let cluster = if cluster.is_empty() { "default" } else { cluster };
        if !cluster.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(bad("the cluster id may hold letters, digits, '-' and '_' only"));
        }
        let endpoints: Vec<String> = hosts.split(',').filter(|h| !h.is_empty()).map(String::from).collect();
        if endpoints.is_empty() || endpoints.iter().any(|e| !e.contains(':')) {
            return Err(bad("name etcd's client endpoints as HOST:PORT, separated by commas"));
        }
        Ok(Self { etcd: Etcd::new(endpoints), prefix: format!("eddy/{cluster}/"), url: url.to_string() })
    }

    /// The address these services were named by.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn leader_key(&self) -> String {
        format!("{}leader", self.prefix)
    }

    /// Where the leader's REST API is: held by the leader's lease, gone with it.
    fn rest_key(&self) -> String {
        format!("{}leader-rest", self.prefix)
    }

    fn job_key(&self, job: JobId) -> String {
        format!("{}jobs/{:020}", self.prefix, job.0)
    }

    /// The leading JobManager's address, if one leads.
    pub fn leader(&self) -> Result<Option<String>, ClusterError> {
        Ok(self.etcd.get(&self.leader_key())?.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Names `url` as the leader's REST API for as long as `lease` (the leader's) holds,
    /// so that a JobManager standing by can send its REST clients there.
    pub fn publish_rest_url(&self, url: &str, lease: LeaseId) -> Result<(), ClusterError> {
        self.etcd.put(&self.rest_key(), url.as_bytes(), Some(lease))
    }

    /// The leader's REST API, if a leader serves one.
    pub fn leader_rest_url(&self) -> Result<Option<String>, ClusterError> {
        Ok(self.etcd.get(&self.rest_key())?.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Campaigns until this JobManager, reachable at `address`, leads; `lost` is called
    /// (from another thread) if it ever stops leading.
    pub fn campaign(&self, address: &str, lost: Box<dyn FnOnce(String) + Send>) -> Result<Leadership, ClusterError> {
        Leadership::campaign(self.etcd.clone(), self.leader_key(), address, lost)
    }

    /// Every job in the store that reads as one (one that does not is logged and left).
    pub fn jobs(&self) -> Result<Vec<JobRecord>, ClusterError> {
        let prefix = format!("{}jobs/", self.prefix);
        let records = self.etcd.get_prefix(&prefix)?.into_iter().filter_map(|(key, value)| {
            serde_json::from_slice(&value)
                .inspect_err(
                    |e| tracing::error!(key, error = %e, "a job store record that does not read as a job; left"),
                )
                .ok()
        });
        Ok(records.collect())
    }

    /// Writes `record` as the leader holding `lease`: nothing is written once another
    /// JobManager leads (a leader paused past its lease, say), and the refusal says so.
    pub fn put_job(&self, record: &JobRecord, lease: LeaseId) -> Result<(), ClusterError> {
        let value = serde_json::to_vec(record)
            .map_err(|e| ClusterError::Protocol(format!("a job record: {e}", e = eddy_types::chain(&e))))?;
        self.write_as_leader(&self.job_key(record.id), Some(&value), lease)
    }

    /// Removes job `job` from the store as the leader holding `lease` (see [`Self::put_job`]).
    pub fn remove_job(&self, job: JobId, lease: LeaseId) -> Result<(), ClusterError> {
        self.write_as_leader(&self.job_key(job), None, lease)
    }

    fn write_as_leader(&self, key: &str, value: Option<&[u8]>, lease: LeaseId) -> Result<(), ClusterError> {
        if self.etcd.write_if_held(key, value, &self.leader_key(), lease)? {
            return Ok(());
        }
        Err(ClusterError::Refused(format!(
            "this JobManager no longer leads (its lease {lease} does not hold the leader key): the job store is its \
             successor's"
        )))
    }
}

/// Where the JobManager is: `address` itself, or, for a high-availability address, the
/// leader's, waiting up to `wait` for one to lead.
pub fn locate_jobmanager(address: &str, wait: Duration) -> Result<String, ClusterError> {
    if !is_ha(address) {
        return Ok(address.to_string());
    }
    let services = HaServices::parse(address)?;
    let deadline = Instant::now() + wait;
    loop {
        let error = match services.leader() {
            Ok(Some(leader)) => return Ok(leader),
            Ok(None) => "no JobManager leads".to_string(),
            Err(e) => eddy_types::chain(&e),
        };
        if Instant::now() >= deadline {
            return Err(ClusterError::Config(format!(
                "found no leading JobManager through {address} within {} ms: {error}",
                wait.as_millis()
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ha_address_names_its_endpoints_and_cluster() {
        let ha = HaServices::parse("etcd://127.0.0.1:2379,10.0.0.2:2379/prod-1").unwrap();
        assert_eq!(ha.etcd.endpoints(), ["127.0.0.1:2379", "10.0.0.2:2379"]);
        assert_eq!(ha.leader_key(), "eddy/prod-1/leader");
        assert_eq!(ha.job_key(JobId(7)), "eddy/prod-1/jobs/00000000000000000007");
        assert_eq!(HaServices::parse("etcd://h:1").unwrap().prefix, "eddy/default/");
        for bad in ["zk://h:1", "etcd://", "etcd://host", "etcd://h:1/a b"] {
            assert!(HaServices::parse(bad).is_err(), "{bad}");
        }
    }
}
