//! Holds writes to one RocksDB instance while its checkpoint is being made off the task
//! thread.
//!
//! A RocksDB checkpoint flushes the memtables and hard-links the files: everything
//! written before it is in, everything after it is not. Made on the task thread, the
//! flush is the task standing still (100 ms and more per checkpoint with large write
//! buffers). Made on a thread of its own, it would take in whatever the task writes
//! meanwhile, so the gate closes at the barrier and opens when the checkpoint exists:
//! writes wait, reads go on. The heap cache in front of RocksDB keeps its changes dirty
//! meanwhile instead of writing them (`RawTable::writes_wait`), so a task on the
//! write-back cache rarely waits at all.
//!
//! What the cache writes back at the barrier itself is *held*: copies of the changed
//! values go to the thread that makes the checkpoint, which sorts, serializes and writes
//! them first, so that none of that is the task's time either. The cache counts them as
//! written; if writing them fails, the gate is *failed*: every later access to the
//! instance fails, so that the task restores from a checkpoint rather than go on without
//! them.

use eddy_state::keyed::HeldWrite;
use eddy_state::{StateError, StateErrorKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

#[derive(Clone, Default)]
pub(crate) struct WriteGate(Arc<Gate>);

#[derive(Default)]
struct Gate {
    /// Read on every write without the lock; changed only under it.
    closed: AtomicBool,
    lock: Mutex<()>,
    opened: Condvar,
    /// Writes handed over between a barrier and its checkpoint's thread.
    held: Mutex<Option<Vec<Held>>>,
    /// Time writes spent waiting for an open gate, µs, since last taken.
    waited_micros: AtomicU64,
    /// Read on every access; set once, with `failure`.
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
}

/// A cache's changes, held for the table with id `table_id`.
pub(crate) struct Held {
    pub(crate) table_id: u16,
    pub(crate) write: HeldWrite,
}

impl WriteGate {
    /// Closes the gate, once the checkpoint before has opened it (else that one's guard
    /// would open it under this one); the returned guard opens it when dropped (after the
    /// checkpoint exists, or when making it failed or panicked).
    pub(crate) fn close(&self) -> OpenOnDrop {
        let mut lock = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        while self.is_closed() {
            lock = self.0.opened.wait(lock).unwrap_or_else(|p| p.into_inner());
        }
        self.0.closed.store(true, Ordering::SeqCst);
        OpenOnDrop(self.clone())
    }

    /// Closes the gate and holds what is handed over from now on ([`WriteGate::hold`]).
    pub(crate) fn close_holding(&self) -> OpenOnDrop {
        let guard = self.close();
        *self.0.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
        guard
    }

    /// What was handed over since [`WriteGate::close_holding`]; nothing is held after.
    pub(crate) fn take_held(&self) -> Vec<Held> {
        self.0.held.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default()
    }

    /// Whether writes are held now.
    pub(crate) fn holds(&self) -> bool {
        self.0.held.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Holds `write` if writes are held; gives it back otherwise.
    pub(crate) fn hold(&self, write: Held) -> Option<Held> {
        match self.0.held.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(held) => {
                held.push(write);
                None
            }
            None => Some(write),
        }
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.0.closed.load(Ordering::SeqCst)
    }

    /// Waits until the gate is open (before a write).
    #[inline]
    pub(crate) fn wait_open(&self) {
        if !self.is_closed() {
            return;
        }
        let started = std::time::Instant::now();
        let mut lock = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        while self.is_closed() {
            lock = self.0.opened.wait(lock).unwrap_or_else(|p| p.into_inner());
        }
        self.0.waited_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// How long writes waited for the gate since the last call, µs.
    pub(crate) fn take_waited_micros(&self) -> u64 {
        self.0.waited_micros.swap(0, Ordering::Relaxed)
    }

    /// Held writes were lost: from now on every access fails with `message`.
    pub(crate) fn fail(&self, message: String) {
        self.0.failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(message);
        self.0.failed.store(true, Ordering::SeqCst);
    }

    /// Fails if held writes were lost (before every access).
    #[inline]
    pub(crate) fn check(&self) -> Result<(), StateError> {
        if !self.0.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let failure = self.0.failure.lock().unwrap_or_else(|p| p.into_inner());
        Err(StateError::from(StateErrorKind::Backend(format!(
            "RocksDB lacks changes that were handed to a checkpoint which then failed: {}; the task must \
             restore from a checkpoint",
            failure.as_deref().unwrap_or("unknown")
        ))))
    }
}

/// Opens its gate when dropped.
pub(crate) struct OpenOnDrop(WriteGate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        let gate = &self.0 .0;
        let _lock = gate.lock.lock().unwrap_or_else(|p| p.into_inner());
        gate.closed.store(false, Ordering::SeqCst);
        gate.opened.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_write_waits_until_the_guard_is_dropped() {
        let gate = WriteGate::default();
        gate.wait_open();
        let guard = gate.close();
        assert!(gate.is_closed());
        let opener = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(guard);
        });
        let started = Instant::now();
        gate.wait_open();
        assert!(started.elapsed() >= Duration::from_millis(40), "the write waited for the checkpoint");
        assert!(gate.take_waited_micros() >= 40_000, "and the wait is counted");
        assert_eq!(gate.take_waited_micros(), 0, "once");
        assert!(!gate.is_closed());
        opener.join().unwrap();
    }

    #[test]
    fn a_second_checkpoint_closes_the_gate_only_after_the_first_opened_it() {
        let gate = WriteGate::default();
        let first = gate.close();
        let second_gate = gate.clone();
        let second = std::thread::spawn(move || {
            let guard = second_gate.close();
            assert!(second_gate.is_closed(), "closed by the second checkpoint");
            guard
        });
        std::thread::sleep(Duration::from_millis(30));
        drop(first);
        let guard = second.join().unwrap();
        assert!(gate.is_closed(), "the first guard did not open the second checkpoint's gate");
        drop(guard);
        assert!(!gate.is_closed());
    }

    #[test]
    fn a_failed_gate_fails_every_access_and_names_the_cause() {
        let gate = WriteGate::default();
        assert!(gate.check().is_ok());
        gate.fail("disk full".into());
        let message = gate.check().unwrap_err().to_string();
        assert!(message.contains("disk full") && message.contains("restore"), "{message}");
    }
}
