//! One JobManager's leadership: won by creating the leader key under a lease of its own,
//! kept by keeping that lease alive, lost when a keep-alive finds it expired or etcd
//! stays out of reach for a lease's time.

use super::etcd::{Etcd, LeaseId};
use super::{LEASE_TTL_S, POLL_INTERVAL};
use crate::error::ClusterError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A JobManager leading; dropping it gives the leadership up (its lease revoked).
pub struct Leadership {
    etcd: Etcd,
    lease: LeaseId,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Leadership(lease {})", self.lease)
    }
}

impl Leadership {
    /// The lease the leadership is held under (the job store's writes are conditioned on
    /// it: [`super::HaServices::put_job`]).
    pub fn lease(&self) -> LeaseId {
        self.lease
    }

    /// Campaigns until the leader key holds `address`; then keeps the lease alive on a
    /// thread of its own, calling `lost` if it cannot.
    pub(super) fn campaign(
        etcd: Etcd,
        key: String,
        address: &str,
        lost: Box<dyn FnOnce(String) + Send>,
    ) -> Result<Leadership, ClusterError> {
        let mut lease = None;
        let mut told = false;
        let lease = loop {
            // etcd out of reach for a while is waited out (logged once), not fatal: a
            // standby that gave up would leave the cluster without one.
            let tried = (|| -> Result<Option<LeaseId>, ClusterError> {
                let current = match lease {
                    Some(id) if etcd.keep_alive(id)? > 0 => id,
                    _ => etcd.grant(LEASE_TTL_S)?,
                };
                lease = Some(current);
                if etcd.create(&key, address.as_bytes(), current)? {
                    return Ok(Some(current));
                }
                if !told {
                    told = true;
                    let leader = etcd.get(&key)?.map(|v| String::from_utf8_lossy(&v).into_owned());
                    tracing::info!(leader = leader.as_deref().unwrap_or("?"), "another JobManager leads; standing by");
                }
                Ok(None)
            })();
            match tried {
                Ok(Some(won)) => break won,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %eddy_types::chain(&e), "cannot campaign through etcd now; trying again")
                }
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (keeper, stopped) = (etcd.clone(), stop.clone());
        std::thread::Builder::new()
            .name("eddy-leadership".into())
            .spawn(move || {
                // Whatever ends the keeping (a panic too) ends the leadership.
                let why = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| keep(&keeper, lease, &stopped)))
                    .unwrap_or_else(|_| Some("the thread keeping the lease failed".into()));
                if let Some(why) = why {
                    lost(why);
                }
            })
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}", e = eddy_types::chain(&e))))?;
        Ok(Leadership { etcd, lease, stop })
    }
}

/// Keeps `lease` alive three times per TTL; the leadership is lost when the lease is
/// found expired, or when no keep-alive went through for a whole TTL (another JobManager
/// may lead by then).
/// Returns why the leadership was lost, or `None` once given up.
fn keep(etcd: &Etcd, lease: LeaseId, stop: &AtomicBool) -> Option<String> {
    let ttl = Duration::from_secs(LEASE_TTL_S);
    // From when the last keep-alive that went through was sent: the lease runs from then.
    let mut last_kept = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(ttl / 3);
        let sent = Instant::now();
        match etcd.keep_alive(lease) {
            Ok(0) => return Some("the leader's lease expired".into()),
            Ok(_) => last_kept = sent,
            Err(e) if last_kept.elapsed() >= ttl * 2 / 3 => {
                return Some(format!(
                    "etcd kept no keep-alive for {} ms: {e}",
                    last_kept.elapsed().as_millis(),
                    e = eddy_types::chain(&e)
                ))
            }
            Err(e) => {
                tracing::warn!(error = %eddy_types::chain(&e), "a keep-alive of the leader's lease failed; trying again")
            }
        }
    }
    None
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.etcd.revoke(self.lease);
    }
}
