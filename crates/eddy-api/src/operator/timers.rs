//! The timer service of a keyed operator (Flink's `InternalTimerService`): event-time and
//! processing-time timers per key and namespace, kept in the keyed backend's two timer
//! queues ([`eddy_state::keyed::TimerQueue`]), so that they are checkpointed, restored and
//! rescaled by key group with the rest of the keyed state. Event-time timers fire when the
//! operator's watermark passes them; processing-time timers when the task's processing
//! clock does, which the operator asks the task to tell it about.

use eddy_runtime::task::TaskShared;
use eddy_state::keyed::{
    declare_timers, last_timer_time, next_timer_time, pop_due_timer, with_timers, StateId, Timer, EVENT_TIME_TIMERS,
    PROCESSING_TIME_TIMERS,
};
use eddy_state::StateError;
use eddy_types::Watermark;
use std::cell::Cell;
use std::rc::Rc;

/// Which clock a timer follows (Flink's `TimeDomain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeDomain {
    EventTime,
    ProcessingTime,
}

impl TimeDomain {
    fn queue(self) -> &'static str {
        match self {
            TimeDomain::EventTime => EVENT_TIME_TIMERS,
            TimeDomain::ProcessingTime => PROCESSING_TIME_TIMERS,
        }
    }
}

/// A keyed operator instance's timers and event time.
pub(crate) struct InternalTimers {
    event: StateId,
    processing: StateId,
    watermark: Cell<Watermark>,
    shared: Rc<TaskShared>,
}

impl InternalTimers {
    /// Declares the two queues on the installed backend (restored ones come back with
    /// their timers) and asks for the first processing-time timer.
    pub(crate) fn declare(shared: Rc<TaskShared>) -> Result<Self, StateError> {
        let timers = Self {
            event: declare_timers(EVENT_TIME_TIMERS)?,
            processing: declare_timers(PROCESSING_TIME_TIMERS)?,
            watermark: Cell::new(Watermark::MIN),
            shared,
        };
        timers.request_next_processing_time()?;
        Ok(timers)
    }

    fn id(&self, domain: TimeDomain) -> StateId {
        match domain {
            TimeDomain::EventTime => self.event,
            TimeDomain::ProcessingTime => self.processing,
        }
    }

    /// A timer for the current key (and namespace) at `time`.
    pub(crate) fn register(&self, domain: TimeDomain, time: i64) -> Result<(), StateError> {
        with_timers(self.id(domain), domain.queue(), |key, queue| queue.register(key, time))?;
        if domain == TimeDomain::ProcessingTime {
            self.shared.request_processing_time(time);
        }
        Ok(())
    }

    pub(crate) fn delete(&self, domain: TimeDomain, time: i64) -> Result<(), StateError> {
        with_timers(self.id(domain), domain.queue(), |key, queue| queue.delete(key, time)).map(|_| ())
    }

    /// The earliest timer due at `limit`, with its key and namespace made current.
    pub(crate) fn pop_due(&self, domain: TimeDomain, limit: i64) -> Result<Option<Timer>, StateError> {
        pop_due_timer(self.id(domain), domain.queue(), limit)
    }

    /// Asks the task to call back when the earliest processing-time timer is due.
    pub(crate) fn request_next_processing_time(&self) -> Result<(), StateError> {
        if let Some(time) = next_timer_time(self.processing, PROCESSING_TIME_TIMERS)? {
            self.shared.request_processing_time(time);
        }
        Ok(())
    }

    /// Asks the task to call back when processing time reaches `time` (for what fires
    /// outside the timer queues).
    pub(crate) fn request_processing_time(&self, time: i64) {
        self.shared.request_processing_time(time);
    }

    /// The latest time of a timer in `domain` (restored ones, at open).
    pub(crate) fn last_time(&self, domain: TimeDomain) -> Result<Option<i64>, StateError> {
        last_timer_time(self.id(domain), domain.queue())
    }

    pub(crate) fn watermark(&self) -> Watermark {
        self.watermark.get()
    }

    pub(crate) fn set_watermark(&self, watermark: Watermark) {
        self.watermark.set(watermark);
    }

    pub(crate) fn processing_time(&self) -> i64 {
        self.shared.processing_time()
    }
}

/// What a keyed function registers timers with (Flink's `TimerService`), for the current
/// key. A timer fires once per key and time however often it is registered.
pub struct TimerService<'a> {
    pub(crate) timers: &'a InternalTimers,
}

impl TimerService<'_> {
    /// The task's processing time, epoch ms.
    pub fn current_processing_time(&self) -> i64 {
        self.timers.processing_time()
    }

    /// The operator's event time: its input's watermark (`i64::MIN` before the first).
    pub fn current_watermark(&self) -> i64 {
        self.timers.watermark().0
    }

    /// Calls `on_timer` once the watermark reaches `time`.
    pub fn register_event_time_timer(&mut self, time: i64) -> Result<(), StateError> {
        self.timers.register(TimeDomain::EventTime, time)
    }

    /// Calls `on_timer` once processing time reaches `time`.
    pub fn register_processing_time_timer(&mut self, time: i64) -> Result<(), StateError> {
        self.timers.register(TimeDomain::ProcessingTime, time)
    }

    pub fn delete_event_time_timer(&mut self, time: i64) -> Result<(), StateError> {
        self.timers.delete(TimeDomain::EventTime, time)
    }

    pub fn delete_processing_time_timer(&mut self, time: i64) -> Result<(), StateError> {
        self.timers.delete(TimeDomain::ProcessingTime, time)
    }
}
