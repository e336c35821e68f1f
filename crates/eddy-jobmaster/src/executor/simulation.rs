//! Deterministic simulation: the whole job on one thread, as a seeded scheduler decides.
//!
//! Every subtask is built on the calling thread, and each turn the scheduler picks one
//! participant at random, from the seed: a task takes one [`Task::step`] (which never
//! blocks), the coordinator takes its reports and looks at the time, or the oldest
//! asynchronous part of a task's snapshot is written. The clock is a [`ManualClock`] that
//! the scheduler moves on, by chance or when everyone is idle. Channels are unbounded here: a producer waiting for
//! room would wait for a step that this same thread would have to take.
//!
//! Faults come from the same seed: task failures, storage writes that fail or leave a
//! file cut short, metadata writes that fail, and reads that fail when the job restores.
//! A run with the same seed takes the same steps, triggers the same checkpoints, meets
//! the same faults, and so leaves the same trace ([`JobResult::trace`]).
//!
//! The heap backend only: RocksDB's own threads do not follow the scheduler.

use crate::jobmaster::coordinator::AttemptCoordinator;
use crate::jobmaster::JobResult;
use crossbeam_channel::Receiver;
use eddy_checkpoint::metadata::{CheckpointMetadata, StateHandle, TaskStateEntry};
use eddy_checkpoint::storage::{CheckpointStorage, CompletedCheckpoint};
use eddy_checkpoint::{CheckpointError, CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_runtime::deployment::subtasks::PendingTask;
use eddy_runtime::deployment::wiring::{build_task, guarded};
use eddy_runtime::error::TaskError;
use eddy_runtime::task::{QueuedWork, StepResult, Task, TaskReport, TaskShared};
use eddy_state::keyed::{install_backend, take_backend, KeyedStateBackend};
use eddy_types::{Cause, Clock, ManualClock, RunSeed};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// On average one fault per this many scheduler turns, until the run's faults are spent.
const TURNS_PER_FAULT: u64 = 80;

/// A small seeded generator (splitmix64): the scheduler's only source of chance.
struct SimRng(u64);

impl SimRng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the bias is negligible for the small n used here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A storage fault waiting for the operation it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StorageFault {
    /// The next task state write fails.
    WriteFails(u32),
    /// The next task state write leaves a file cut in half behind, and fails.
    WriteTorn(u32),
    /// The next metadata write (completing a checkpoint) fails.
    CommitFails(u32),
}

/// Faults armed in the storage, shared with [`FaultyStorage`].
#[derive(Debug, Default)]
struct ArmedFaults {
    write: Option<StorageFault>,
    /// The next read of a completed checkpoint fails (fault number).
    read: Option<u32>,
    /// Every read of a task's own state fails during the next restore (fault number, and
    /// whether a read failed yet: the restore after that one reads again).
    task_read: Option<(u32, bool)>,
}

/// The run's scheduler state, over all attempts.
struct SimState {
    rng: SimRng,
    faults_left: u32,
    faults_injected: u32,
}

/// Runs attempts of a job on one thread (see the module's documentation).
pub(super) struct Simulator {
    clock: ManualClock,
    state: RefCell<SimState>,
    armed: Arc<Mutex<ArmedFaults>>,
}

impl Simulator {
    pub(super) fn new(seed: RunSeed, faults: u32, clock: ManualClock) -> Self {
        let rng = SimRng(seed.derive(b"schedule").0);
        Self {
            clock,
            state: RefCell::new(SimState { rng, faults_left: faults, faults_injected: 0 }),
            armed: Arc::new(Mutex::new(ArmedFaults::default())),
        }
    }

    /// `storage` with this simulation's storage faults.
    pub(super) fn storage(&self, storage: Arc<dyn CheckpointStorage>) -> Arc<dyn CheckpointStorage> {
        Arc::new(FaultyStorage { inner: storage, armed: self.armed.clone() })
    }

    /// Builds every subtask here and steps them, and the coordinator, until all exited.
    pub(super) fn run_attempt(
        &self,
        run: &mut AttemptCoordinator<'_>,
        pending: Vec<PendingTask>,
        async_work: &QueuedWork,
        reports: &Receiver<TaskReport>,
        result: &mut JobResult,
    ) {
        let mut tasks: Vec<Option<SimTask>> = Vec::with_capacity(pending.len());
        let mut exited = 0;
        for (setup, context) in pending {
            let index = context.checkpointing.task;
            let opened = build_task(run.graph, run.plan, setup, context).and_then(|(task, shared)| {
                let mut task = SimTask { task, shared, backend: None };
                match task.run(|task, shared| guarded(shared, || task.open())) {
                    Ok(()) => Ok(task),
                    Err(e) => Err(task.close(Err(e)).unwrap_err()),
                }
            });
            match opened {
                Ok(task) => tasks.push(Some(task)),
                Err(e) => {
                    tasks.push(None);
                    exited += 1;
                    run.task_exited(index, Err(e));
                }
            }
        }
        // Every task, the coordinator, and the asynchronous part of snapshots.
        let participants = tasks.len() as u64 + 2;
        let (coordinator, writer) = (tasks.len(), tasks.len() + 1);
        let mut idle_turns = 0;
        while exited < tasks.len() {
            let (pick, tick) = {
                let mut state = self.state.borrow_mut();
                if let Some(failed) = self.maybe_inject(&mut state, &tasks, run) {
                    if let Some(task) = tasks[failed].take() {
                        let (n, operator) = (state.faults_injected, run.task_name(failed));
                        let error = TaskError::Operator { operator, message: format!("simulated fault {n}") };
                        let outcome = task.close(Err(error));
                        exited += 1;
                        run.task_exited(failed, outcome);
                    }
                }
                (state.rng.below(participants) as usize, state.rng.below(3))
            };
            if pick == coordinator {
                run.poll(reports, result);
                idle_turns += 1;
            } else if pick == writer {
                if async_work.run_next() {
                    idle_turns = 0;
                } else {
                    idle_turns += 1;
                }
            } else if let Some(task) = tasks[pick].as_mut() {
                match task.run(|task, shared| guarded(shared, || task.step())) {
                    Ok(StepResult::Continue) => idle_turns = 0,
                    Ok(StepResult::Idle { .. }) => idle_turns += 1,
                    Ok(StepResult::Finished) => {
                        let task = tasks[pick].take().expect("stepped");
                        let checked = task.shared.check();
                        let shared = task.shared.clone();
                        let outcome = task.close(checked);
                        if outcome.is_ok() {
                            shared.publish_accumulators();
                        }
                        exited += 1;
                        run.task_exited(pick, outcome);
                    }
                    Err(e) => {
                        let outcome = tasks[pick].take().expect("stepped").close(Err(e));
                        exited += 1;
                        run.task_exited(pick, outcome);
                    }
                }
            }
            // A turn takes 0 to 2 ms, and time surely passes once everyone waited a while.
            self.clock.advance_ms(tick);
            if idle_turns > 4 * participants {
                self.clock.advance_ms(1);
                idle_turns = 0;
            }
        }
    }

    /// Maybe injects the next fault; returns the task to fail, if it is a task failure.
    fn maybe_inject(
        &self,
        state: &mut SimState,
        tasks: &[Option<SimTask>],
        run: &mut AttemptCoordinator<'_>,
    ) -> Option<usize> {
        if state.faults_left == 0 || state.rng.below(TURNS_PER_FAULT) != 0 {
            return None;
        }
        let live: Vec<usize> = (0..tasks.len()).filter(|i| tasks[*i].is_some()).collect();
        if live.is_empty() {
            return None;
        }
        state.faults_left -= 1;
        state.faults_injected += 1;
        let n = state.faults_injected;
        let mut armed = self.armed.lock().expect("only this thread locks it");
        let storage_fault = match state.rng.below(10) {
            4 | 5 => Some(StorageFault::WriteFails(n)),
            6 => Some(StorageFault::WriteTorn(n)),
            7 => Some(StorageFault::CommitFails(n)),
            _ => None,
        };
        // A storage fault while another waits, like any other draw, fails a task instead.
        if let (Some(fault), None) = (storage_fault, armed.write) {
            armed.write = Some(fault);
            run.note(|| format!("fault {n} at {} ms: {fault:?} armed", self.clock.now_ms()));
            return None;
        }
        let victim = live[state.rng.below(live.len() as u64) as usize];
        // A third of the failures also fail the restore that follows: the coordinator's
        // read of the checkpoint, or a task's read of its own state.
        let then = match state.rng.below(6) {
            0 if armed.read.is_none() => {
                armed.read = Some(n);
                ", then the restore's first read"
            }
            1 if armed.task_read.is_none() => {
                armed.task_read = Some((n, false));
                ", then the tasks' reads of their state in the next restore"
            }
            _ => "",
        };
        run.note(|| format!("fault {n} at {} ms fails task {victim}{then}", self.clock.now_ms()));
        Some(victim)
    }
}

/// A subtask under simulation, with its keyed backend while another task has the thread.
struct SimTask {
    task: Task,
    shared: Rc<TaskShared>,
    /// A keyed operator finds its backend in a thread-local slot (one per thread, so the
    /// hot path needs no lookup); tasks sharing the thread take turns in it.
    backend: Option<Box<dyn KeyedStateBackend>>,
}

impl SimTask {
    /// Runs `f` with this task's backend in the thread's slot.
    fn run<R>(&mut self, f: impl FnOnce(&mut Task, &TaskShared) -> R) -> R {
        if let Some(backend) = self.backend.take() {
            install_backend(backend).expect("the slot is empty between tasks' turns");
        }
        let result = f(&mut self.task, &self.shared);
        self.backend = take_backend();
        result
    }

    /// Closes a task that ended with `outcome`; a panic while closing fails it if nothing
    /// did.
    fn close(mut self, outcome: Result<(), TaskError>) -> Result<(), TaskError> {
        let closed = self.run(|task, shared| {
            guarded(shared, || {
                task.close();
                Ok(())
            })
        });
        outcome.and(closed)
    }
}

/// Checkpoint storage that fails where the simulator armed it to.
struct FaultyStorage {
    inner: Arc<dyn CheckpointStorage>,
    armed: Arc<Mutex<ArmedFaults>>,
}

fn simulated(path: &str, n: u32, what: &str) -> CheckpointError {
    CheckpointError::Io { path: path.to_string(), source: Cause::message(format!("simulated fault {n}: {what}")) }
}

impl FaultyStorage {
    fn take_write(&self, hits: impl Fn(StorageFault) -> bool) -> Option<StorageFault> {
        let mut armed = self.armed.lock().expect("no panics while locked");
        armed.write.take_if(|fault| hits(*fault))
    }
}

impl CheckpointStorage for FaultyStorage {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn write_task_state(
        &self,
        id: CheckpointId,
        kind: SnapshotKind,
        file_stem: &str,
        framed: Vec<u8>,
    ) -> Result<StateHandle, CheckpointError> {
        match self.take_write(|f| matches!(f, StorageFault::WriteFails(_) | StorageFault::WriteTorn(_))) {
            Some(StorageFault::WriteFails(n)) => Err(simulated(file_stem, n, "the write failed")),
            Some(StorageFault::WriteTorn(n)) => {
                // What a crash halfway through the write leaves: part of the file.
                let half = framed[..framed.len() / 2].to_vec();
                let _ = self.inner.write_task_state(id, kind, file_stem, half);
                Err(simulated(file_stem, n, "the write stopped halfway"))
            }
            _ => self.inner.write_task_state(id, kind, file_stem, framed),
        }
    }

    fn commit(&self, metadata: &CheckpointMetadata) -> Result<String, CheckpointError> {
        match self.take_write(|f| matches!(f, StorageFault::CommitFails(_))) {
            Some(StorageFault::CommitFails(n)) => Err(simulated("_metadata", n, "the metadata write failed")),
            _ => self.inner.commit(metadata),
        }
    }

    fn discard(&self, id: CheckpointId, kind: SnapshotKind) -> Result<(), CheckpointError> {
        self.inner.discard(id, kind)
    }

    fn completed(&self) -> Result<Vec<String>, CheckpointError> {
        self.inner.completed()
    }

    fn load(&self, location: &str) -> Result<CompletedCheckpoint, CheckpointError> {
        if let Some(n) = self.armed.lock().expect("no panics while locked").read.take() {
            return Err(simulated(location, n, "the read failed"));
        }
        self.inner.load(location)
    }

    fn verify(&self, location: &str) -> Result<CheckpointMetadata, CheckpointError> {
        let mut armed = self.armed.lock().expect("no panics while locked");
        // A new restore begins: the one whose task reads failed is over.
        armed.task_read.take_if(|(_, hit)| *hit);
        if let Some(n) = armed.read.take() {
            return Err(simulated(location, n, "the read failed"));
        }
        drop(armed);
        self.inner.verify(location)
    }

    fn load_task_state(
        &self,
        location: &str,
        entry: &TaskStateEntry,
    ) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
        if let Some((n, hit)) = self.armed.lock().expect("no panics while locked").task_read.as_mut() {
            *hit = true;
            return Err(simulated(location, *n, "a task's read of its state failed"));
        }
        self.inner.load_task_state(location, entry)
    }

    fn upload_file(&self, relative: &str, source: &Path) -> Result<(u64, u32), CheckpointError> {
        self.inner.upload_file(relative, source)
    }

    fn download_file(&self, relative: &str, target: &Path, bytes: u64, crc32: u32) -> Result<(), CheckpointError> {
        self.inner.download_file(relative, target, bytes, crc32)
    }

    fn delete_file(&self, relative: &str) -> Result<(), CheckpointError> {
        self.inner.delete_file(relative)
    }
}
