//! The mailbox loop of a subtask, one [`TaskDriver::step`] at a time: take a control
//! message if there is one, else one batch of input (or, for a source, produce one batch),
//! then check the failure slot. A test can drive a task by calling `step` itself.

use super::context::TaskShared;
use super::mailbox::{Control, MailboxReceiver};
use crate::channel::{BatchReceiver, Envelope, StreamMessage, FLUSH_INTERVAL_MS};
use crate::error::TaskError;
use crate::output::Output;
use crossbeam_channel::{never, select, Receiver, TryRecvError};
use std::rc::Rc;
use std::time::Duration;

/// How long a subtask with nothing to do blocks before it looks at the cancel flag again.
const IDLE_WAIT_MS: u64 = 50;
/// How often an idle subtask yields its core before it blocks on its input.
const SPIN_YIELDS_MAX: usize = 8;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepResult {
    Continue,
    /// All input ended and the chain finished.
    Finished,
}

/// A subtask's loop, as the executor sees it.
pub trait TaskDriver {
    fn open(&mut self) -> Result<(), TaskError>;
    fn step(&mut self) -> Result<StepResult, TaskError>;
    fn close(&mut self);
}

/// Flushes partial batches at least every [`FLUSH_INTERVAL_MS`] while input keeps coming.
struct FlushTimer {
    last_ms: u64,
}

impl FlushTimer {
    fn new(shared: &TaskShared) -> Self {
        Self { last_ms: shared.clock().now_ms() }
    }

    fn due(&mut self, shared: &TaskShared) -> bool {
        let now_ms = shared.clock().now_ms();
        if now_ms.saturating_sub(self.last_ms) >= FLUSH_INTERVAL_MS {
            self.last_ms = now_ms;
            true
        } else {
            false
        }
    }
}

fn take_control(mailbox: &MailboxReceiver, shared: &TaskShared) -> Result<(), TaskError> {
    match mailbox.try_recv() {
        Ok(Control::Cancel) => Err(TaskError::Cancelled),
        Err(TryRecvError::Empty) if !shared.is_cancelled() => Ok(()),
        // The executor is gone or cancelled the job.
        _ => Err(TaskError::Cancelled),
    }
}

/// Counts end-of-input markers of one input gate.
struct Gate<T> {
    receiver: Receiver<Envelope<T>>,
    ends_expected: usize,
    ends_seen: usize,
}

impl<T> Gate<T> {
    fn ended(&self) -> bool {
        self.ends_seen >= self.ends_expected
    }
}

/// Drives a chain whose head has one input (one gate, possibly fed by several edges).
pub struct OneInputDriver<T> {
    gate: Gate<T>,
    head: Box<dyn Output<T>>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
}

impl<T> OneInputDriver<T> {
    pub fn new(
        receiver: BatchReceiver<T>,
        ends_expected: usize,
        head: Box<dyn Output<T>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
    ) -> Self {
        Self {
            gate: Gate { receiver, ends_expected, ends_seen: 0 },
            head,
            mailbox,
            flush: FlushTimer::new(&shared),
            shared,
        }
    }

    fn handle(&mut self, envelope: Envelope<T>) -> Result<StepResult, TaskError> {
        match envelope.message {
            StreamMessage::Records(batch) => {
                for record in batch {
                    self.head.collect(record);
                }
                self.shared.check()?;
                if self.flush.due(&self.shared) {
                    self.head.flush()?;
                }
                Ok(StepResult::Continue)
            }
            StreamMessage::EndOfInput => {
                self.gate.ends_seen += 1;
                if self.gate.ended() {
                    self.head.end_input()?;
                    self.shared.check()?;
                    Ok(StepResult::Finished)
                } else {
                    Ok(StepResult::Continue)
                }
            }
        }
    }
}

impl<T> TaskDriver for OneInputDriver<T> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.head.open()?;
        self.shared.check()?;
        if self.gate.ended() {
            self.head.end_input()?;
        }
        Ok(())
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        if self.gate.ended() {
            return Ok(StepResult::Finished);
        }
        take_control(&self.mailbox, &self.shared)?;
        match self.gate.receiver.try_recv() {
            Ok(envelope) => self.handle(envelope),
            Err(TryRecvError::Disconnected) => Err(TaskError::Cancelled),
            Err(TryRecvError::Empty) => {
                // Nothing waiting: send partial batches on before blocking, for latency.
                self.head.flush()?;
                self.shared.check()?;
                // A producer that is just filling its next batch is usually about to send:
                // yielding a few times first saves a sleep and a wake-up per batch.
                for _ in 0..SPIN_YIELDS_MAX {
                    std::thread::yield_now();
                    if let Ok(envelope) = self.gate.receiver.try_recv() {
                        return self.handle(envelope);
                    }
                }
                select! {
                    recv(self.gate.receiver) -> envelope => match envelope {
                        Ok(envelope) => self.handle(envelope),
                        Err(_) => Err(TaskError::Cancelled),
                    },
                    recv(self.mailbox) -> _ => Err(TaskError::Cancelled),
                    default(Duration::from_millis(IDLE_WAIT_MS)) => Ok(StepResult::Continue),
                }
            }
        }
    }

    fn close(&mut self) {
        self.head.close();
    }
}

/// The head of a chain with two inputs (`connect`): records of either side.
pub trait TwoInputOperator<A, B> {
    fn process1(&mut self, record: A);
    fn process2(&mut self, record: B);
    fn open(&mut self) -> Result<(), TaskError>;
    fn flush(&mut self) -> Result<(), TaskError>;
    /// Both inputs have ended.
    fn end_input(&mut self) -> Result<(), TaskError>;
    fn close(&mut self);
}

/// Drives a two-input chain head, taking batches from whichever input has one.
pub struct TwoInputDriver<A, B> {
    first: Gate<A>,
    second: Gate<B>,
    head: Box<dyn TwoInputOperator<A, B>>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
    never_first: Receiver<Envelope<A>>,
    never_second: Receiver<Envelope<B>>,
    /// Read input 2 to its end before any of input 1 (Flink's `InputSelectable`).
    second_first: bool,
}

enum Either<A, B> {
    First(Envelope<A>),
    Second(Envelope<B>),
}

impl<A, B> TwoInputDriver<A, B> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        first: BatchReceiver<A>,
        first_ends: usize,
        second: BatchReceiver<B>,
        second_ends: usize,
        head: Box<dyn TwoInputOperator<A, B>>,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
        second_first: bool,
    ) -> Self {
        Self {
            second_first,
            first: Gate { receiver: first, ends_expected: first_ends, ends_seen: 0 },
            second: Gate { receiver: second, ends_expected: second_ends, ends_seen: 0 },
            head,
            mailbox,
            flush: FlushTimer::new(&shared),
            shared,
            never_first: never(),
            never_second: never(),
        }
    }

    fn handle(&mut self, next: Either<A, B>) -> Result<StepResult, TaskError> {
        let message_was_end = match next {
            Either::First(envelope) => match envelope.message {
                StreamMessage::Records(batch) => {
                    batch.into_iter().for_each(|r| self.head.process1(r));
                    false
                }
                StreamMessage::EndOfInput => {
                    self.first.ends_seen += 1;
                    true
                }
            },
            Either::Second(envelope) => match envelope.message {
                StreamMessage::Records(batch) => {
                    batch.into_iter().for_each(|r| self.head.process2(r));
                    false
                }
                StreamMessage::EndOfInput => {
                    self.second.ends_seen += 1;
                    true
                }
            },
        };
        self.shared.check()?;
        if message_was_end && self.first.ended() && self.second.ended() {
            self.head.end_input()?;
            self.shared.check()?;
            return Ok(StepResult::Finished);
        }
        if self.flush.due(&self.shared) {
            self.head.flush()?;
        }
        Ok(StepResult::Continue)
    }
}

impl<A, B> TaskDriver for TwoInputDriver<A, B> {
    fn open(&mut self) -> Result<(), TaskError> {
        self.head.open()?;
        self.shared.check()
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        if self.first.ended() && self.second.ended() {
            return Ok(StepResult::Finished);
        }
        take_control(&self.mailbox, &self.shared)?;
        let hold_first = self.first.ended() || (self.second_first && !self.second.ended());
        let first = if hold_first { &self.never_first } else { &self.first.receiver };
        let second = if self.second.ended() { &self.never_second } else { &self.second.receiver };
        let try_both = || {
            select! {
                recv(first) -> m => Some(m.map(Either::First)),
                recv(second) -> m => Some(m.map(Either::Second)),
                default => None,
            }
        };
        let next = match try_both() {
            Some(next) => next,
            None => {
                self.head.flush()?;
                self.shared.check()?;
                // As in the one-input loop: yield a little before sleeping.
                if let Some(next) = (0..SPIN_YIELDS_MAX).find_map(|_| {
                    std::thread::yield_now();
                    try_both()
                }) {
                    return match next {
                        Ok(next) => self.handle(next),
                        Err(_) => Err(TaskError::Cancelled),
                    };
                }
                select! {
                    recv(first) -> m => m.map(Either::First),
                    recv(second) -> m => m.map(Either::Second),
                    recv(self.mailbox) -> _ => return Err(TaskError::Cancelled),
                    default(Duration::from_millis(IDLE_WAIT_MS)) => return Ok(StepResult::Continue),
                }
            }
        };
        match next {
            Ok(next) => self.handle(next),
            Err(_) => Err(TaskError::Cancelled),
        }
    }

    fn close(&mut self) {
        self.head.close();
    }
}

/// What a source's [`SourceOperator::emit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStatus {
    /// Emitted records; call again.
    More,
    /// Nothing available right now (it waited a little); call again.
    Idle,
    /// The source is exhausted.
    Finished,
}

/// The head of a source chain: produces records into its chain.
pub trait SourceOperator {
    fn open(&mut self) -> Result<(), TaskError>;
    /// Emits up to one batch of records; errors go into the task's failure slot.
    fn emit(&mut self) -> SourceStatus;
    fn flush(&mut self) -> Result<(), TaskError>;
    fn end_input(&mut self) -> Result<(), TaskError>;
    fn close(&mut self);
}

/// Drives a source chain.
pub struct SourceDriver {
    source: Box<dyn SourceOperator>,
    mailbox: MailboxReceiver,
    shared: Rc<TaskShared>,
    flush: FlushTimer,
}

impl SourceDriver {
    pub fn new(source: Box<dyn SourceOperator>, mailbox: MailboxReceiver, shared: Rc<TaskShared>) -> Self {
        Self { source, mailbox, flush: FlushTimer::new(&shared), shared }
    }
}

impl TaskDriver for SourceDriver {
    fn open(&mut self) -> Result<(), TaskError> {
        self.source.open()?;
        self.shared.check()
    }

    fn step(&mut self) -> Result<StepResult, TaskError> {
        take_control(&self.mailbox, &self.shared)?;
        let status = self.source.emit();
        self.shared.check()?;
        match status {
            SourceStatus::More => {
                if self.flush.due(&self.shared) {
                    self.source.flush()?;
                }
                Ok(StepResult::Continue)
            }
            SourceStatus::Idle => {
                self.source.flush()?;
                Ok(StepResult::Continue)
            }
            SourceStatus::Finished => {
                self.source.end_input()?;
                self.shared.check()?;
                Ok(StepResult::Finished)
            }
        }
    }

    fn close(&mut self) {
        self.source.close();
    }
}
