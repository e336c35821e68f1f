//! A subtask's life around its driver: open, steps until its input ended, the final
//! snapshot, waiting for the job's end (two-phase-commit sinks commit only then), close.
//! [`Task::step`] never waits for input (only for room in a full output queue, which
//! simulation's unbounded queues never are), so one thread can drive many tasks (the
//! simulator) and a task's own thread decides how to wait ([`Task::run_on_thread`]).

use super::checkpointing::snapshot_and_acknowledge;
use super::driver::{StepResult, TaskDriver, IDLE_WAIT_MS};
use super::mailbox::{Control, FINAL_CHECKPOINT};
use crate::channel::{CheckpointBarrier, CheckpointEvent};
use crate::error::TaskError;
use crossbeam_channel::TryRecvError;
use eddy_checkpoint::SnapshotKind;
use std::time::Duration;

/// How often an idle task on its own thread yields its core before it blocks: a producer
/// just filling its next batch is usually about to send, and a yield costs less than a
/// sleep and a wake-up per batch.
const SPIN_YIELDS_MAX: u32 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Input ended and the final state is reported: waiting for the job to finish.
    AwaitingJobEnd,
    Done,
}

/// One subtask: its driver and where it is in its life.
pub struct Task {
    driver: Box<dyn TaskDriver>,
    phase: Phase,
}

impl Task {
    pub fn new(driver: Box<dyn TaskDriver>) -> Self {
        Self { driver, phase: Phase::Running }
    }

    /// Opens the task's operators (restoring their state), and says so to the JobMaster.
    pub fn open(&mut self) -> Result<(), TaskError> {
        self.driver.open()?;
        let (_, _, shared) = self.driver.parts();
        shared.running();
        Ok(())
    }

    /// One step; never waits for input. `Finished` once the task is done for good.
    pub fn step(&mut self) -> Result<StepResult, TaskError> {
        match self.phase {
            Phase::Running => match self.driver.step()? {
                StepResult::Finished => {
                    self.phase = if self.final_snapshot()? { Phase::AwaitingJobEnd } else { Phase::Done };
                    Ok(if self.phase == Phase::Done { StepResult::Finished } else { StepResult::Continue })
                }
                other => Ok(other),
            },
            Phase::AwaitingJobEnd => {
                if self.poll_job_end()? {
                    self.phase = Phase::Done;
                    return Ok(StepResult::Finished);
                }
                let (_, _, shared) = self.driver.parts();
                Ok(StepResult::Idle { until_ms: shared.clock().now_ms() + IDLE_WAIT_MS })
            }
            Phase::Done => Ok(StepResult::Finished),
        }
    }

    /// Blocks until the task may have something to do, or `timeout` passed.
    pub fn wait(&mut self, timeout: Duration) {
        match self.phase {
            Phase::Running => self.driver.wait_for_input(timeout),
            Phase::AwaitingJobEnd => {
                let (_, mailbox, _) = self.driver.parts();
                let mut select = crossbeam_channel::Select::new();
                select.recv(mailbox);
                let _ = select.ready_timeout(timeout);
            }
            Phase::Done => {}
        }
    }

    pub fn close(&mut self) {
        self.driver.close();
    }

    /// Drives the task on the calling thread until it is done: open, steps (yielding,
    /// then blocking while idle), close.
    pub fn run_on_thread(&mut self) -> Result<(), TaskError> {
        let result = (|| {
            self.open()?;
            let mut idle_steps = 0;
            loop {
                match self.step()? {
                    StepResult::Continue => idle_steps = 0,
                    StepResult::Finished => return Ok(()),
                    StepResult::Idle { until_ms } => {
                        idle_steps += 1;
                        if idle_steps <= SPIN_YIELDS_MAX {
                            std::thread::yield_now();
                        } else {
                            let (_, _, shared) = self.driver.parts();
                            let wait_ms = until_ms.saturating_sub(shared.clock().now_ms()).clamp(1, IDLE_WAIT_MS);
                            let counters = shared.counters();
                            let since = std::time::Instant::now();
                            self.wait(Duration::from_millis(wait_ms));
                            counters.add_idle(since.elapsed());
                        }
                    }
                }
            }
        })();
        self.close();
        result
    }

    /// The end of the input: two-phase-commit sinks pre-commit their last transaction
    /// under [`FINAL_CHECKPOINT`], committed when the job finished; the coordinator hears
    /// the task finished and asks it for its state for each later checkpoint. False when
    /// no coordinator listens (a task tested alone): then it is committed at once.
    fn final_snapshot(&mut self) -> Result<bool, TaskError> {
        let (head, _, shared) = self.driver.parts();
        let mut snapshots = Vec::new();
        head.snapshot(&CheckpointBarrier { id: FINAL_CHECKPOINT, kind: SnapshotKind::Checkpoint }, &mut snapshots)?;
        shared.check()?;
        if !shared.has_coordinator() {
            head.notify_checkpoint(CheckpointEvent::Completed(FINAL_CHECKPOINT))?;
            shared.check()?;
            return Ok(false);
        }
        shared.finished();
        Ok(true)
    }

    /// Takes what the mailbox holds after the final snapshot; true once the job finished
    /// and the final state is committed.
    fn poll_job_end(&mut self) -> Result<bool, TaskError> {
        let (head, mailbox, shared) = self.driver.parts();
        loop {
            match mailbox.try_recv() {
                Ok(Control::JobFinished) => {
                    head.notify_checkpoint(CheckpointEvent::Completed(FINAL_CHECKPOINT))?;
                    shared.check()?;
                    return Ok(true);
                }
                Ok(Control::Checkpoint(event)) => {
                    shared.checkpoint_event(event);
                    head.notify_checkpoint(event)?;
                    shared.check()?;
                }
                // No barrier reaches a finished task: it is asked directly.
                Ok(Control::TriggerCheckpoint(barrier)) if !shared.has_snapshotted(barrier.id) => {
                    snapshot_and_acknowledge(head, shared, &barrier)?;
                }
                Ok(Control::TriggerCheckpoint(_)) => {}
                // A source may finish only once its coordinator said nothing more comes: a
                // split sent now would be lost, so the attempt fails and restores instead.
                Ok(Control::OperatorEvent(_)) => {
                    return Err(TaskError::Internal(
                        "an event from its coordinator reached a source that had finished; a source must not \
                         finish before its coordinator says no more splits come"
                            .into(),
                    ))
                }
                Ok(Control::Cancel) | Err(TryRecvError::Disconnected) => return Err(TaskError::Cancelled),
                Err(TryRecvError::Empty) if shared.is_cancelled() => return Err(TaskError::Cancelled),
                Err(TryRecvError::Empty) => return Ok(false),
            }
        }
    }
}
