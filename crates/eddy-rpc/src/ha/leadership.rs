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
        loop {
            let current = match lease {
                Some(id) if etcd.keep_alive(id)? > 0 => id,
                _ => etcd.grant(LEASE_TTL_S)?,
            };
            lease = Some(current);
            if etcd.create(&key, address.as_bytes(), current)? {
                break;
            }
            if !told {
                told = true;
                let leader = etcd.get(&key)?.map(|v| String::from_utf8_lossy(&v).into_owned());
                tracing::info!(leader = leader.as_deref().unwrap_or("?"), "another JobManager leads; standing by");
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        let lease = lease.unwrap_or_default();
        let stop = Arc::new(AtomicBool::new(false));
        let (keeper, stopped) = (etcd.clone(), stop.clone());
        std::thread::Builder::new()
            .name("eddy-leadership".into())
            .spawn(move || keep(&keeper, lease, &stopped, lost))
            .map_err(|e| ClusterError::Config(format!("cannot start a thread: {e}")))?;
        Ok(Leadership { etcd, lease, stop })
    }
}

/// Keeps `lease` alive three times per TTL; the leadership is lost when the lease is
/// found expired, or when no keep-alive went through for a whole TTL (another JobManager
/// may lead by then).
fn keep(etcd: &Etcd, lease: LeaseId, stop: &AtomicBool, lost: Box<dyn FnOnce(String) + Send>) {
    let ttl = Duration::from_secs(LEASE_TTL_S);
    let mut last_kept = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(ttl / 3);
        match etcd.keep_alive(lease) {
            Ok(0) => return lost("the leader's lease expired".into()),
            Ok(_) => last_kept = Instant::now(),
            Err(e) if last_kept.elapsed() >= ttl => {
                return lost(format!("etcd kept no keep-alive for {} s: {e}", LEASE_TTL_S))
            }
            Err(e) => tracing::warn!(error = %e, "a keep-alive of the leader's lease failed; trying again"),
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.etcd.revoke(self.lease);
    }
}
