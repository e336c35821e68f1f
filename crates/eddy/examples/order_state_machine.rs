//! The order state machine of seed 004: per order (keyed), a `ValueState` holds where the
//! order is; each event moves it on. A finished order's state is cleared; an event that is
//! not valid in the current state goes to a side output. With a payment timeout
//! ([`StateMachine::with_payment_timeout`], on a stream with event timestamps), a created
//! order sets an event-time timer; if it is still unpaid when the timer fires it is
//! reported as [`Outcome::Unpaid`] and forgotten (payment deleted the timer).
//!
//! ```text
//! cargo run --release --example order_state_machine
//! ```

use eddy::prelude::*;
use eddy::time::WatermarkStrategy;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OrderState {
    AwaitingPayment,
    Paid,
    Shipping,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    Create,
    Pay,
    Ship,
    Receive,
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OrderEvent {
    pub order: u64,
    pub action: Action,
    /// Event time, ms.
    pub timestamp: i64,
}

/// What happened to an order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Outcome {
    Completed(u64),
    Cancelled(u64),
    /// Created and not paid within the payment timeout.
    Unpaid(u64),
}

/// Where an action takes an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    To(OrderState),
    /// Received or cancelled: the order is done and its state cleared.
    Finished,
    /// Not allowed in the current state.
    Invalid,
}

pub fn transition(state: Option<OrderState>, action: Action) -> Transition {
    use Action::*;
    use OrderState::*;
    match (state, action) {
        (None, Create) => Transition::To(AwaitingPayment),
        (Some(AwaitingPayment), Pay) => Transition::To(Paid),
        (Some(Paid), Ship) => Transition::To(Shipping),
        (Some(Shipping), Receive) | (Some(_), Cancel) => Transition::Finished,
        _ => Transition::Invalid,
    }
}

pub fn invalid_tag() -> OutputTag<OrderEvent> {
    OutputTag::new("invalid-transitions")
}

#[derive(Clone, Default)]
pub struct StateMachine {
    state: Option<ValueState<OrderState>>,
    /// When the unpaid order's timer fires (without a timeout: none).
    deadline: Option<ValueState<i64>>,
    payment_timeout_ms: Option<i64>,
}

impl StateMachine {
    /// Reports orders not paid within `timeout_ms` of event time after their creation.
    pub fn with_payment_timeout(timeout_ms: i64) -> Self {
        Self { payment_timeout_ms: Some(timeout_ms), ..Self::default() }
    }
}

impl RichFunction for StateMachine {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&ValueStateDescriptor::new("order-state"))?);
        self.deadline = Some(ctx.get_state(&ValueStateDescriptor::new("payment-deadline"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, OrderEvent, Outcome> for StateMachine {
    fn process_element(
        &mut self,
        event: OrderEvent,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, Outcome>,
    ) -> FunctionResult {
        let state = self.state.declared("order-state")?;
        let deadline = self.deadline.declared("payment-deadline")?;
        let current = state.value()?;
        match transition(current, event.action) {
            Transition::To(next) => {
                state.update(next)?;
                if let Some(timeout) = self.payment_timeout_ms {
                    if next == OrderState::AwaitingPayment {
                        let at = ctx.timestamp().ok_or("a payment timeout needs event timestamps")? + timeout;
                        ctx.timer_service().register_event_time_timer(at)?;
                        deadline.update(at)?;
                    } else if let Some(at) = deadline.value()? {
                        ctx.timer_service().delete_event_time_timer(at)?;
                        deadline.clear()?;
                    }
                }
            }
            Transition::Finished => {
                state.clear()?;
                if let Some(at) = deadline.value()? {
                    ctx.timer_service().delete_event_time_timer(at)?;
                    deadline.clear()?;
                }
                out.collect(if event.action == Action::Cancel {
                    Outcome::Cancelled(*ctx.current_key())
                } else {
                    Outcome::Completed(*ctx.current_key())
                });
            }
            Transition::Invalid => ctx.output(&invalid_tag(), event),
        }
        Ok(())
    }

    /// The payment deadline passed (payment or cancellation would have deleted the timer).
    fn on_timer(
        &mut self,
        _timestamp: i64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, Outcome>,
    ) -> FunctionResult {
        let state = self.state.declared("order-state")?;
        if state.value()? == Some(OrderState::AwaitingPayment) {
            state.clear()?;
            self.deadline.declared("payment-deadline")?.clear()?;
            out.collect(Outcome::Unpaid(*ctx.current_key()));
        }
        Ok(())
    }
}

/// The state machine with a payment timeout on a stream whose watermark follows every
/// event (its largest timestamp so far − 1): outcomes go to `outcomes` as text lines.
pub fn job_with_timeout(env: &Env, events: Vec<OrderEvent>, timeout_ms: i64, outcomes: impl Sink<String>) {
    env.from_collection(events)
        .uid("orders")
        .map(|e| {
            // Slow enough for a savepoint to land mid-run.
            std::thread::sleep(std::time::Duration::from_micros(100));
            e
        })
        .uid("slow")
        .set_parallelism(1)
        // Beside the source, so that watermarks follow the events' order.
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_generator(|| EveryEvent(i64::MIN))
                .with_timestamp_assigner(|e: &OrderEvent| e.timestamp),
        )
        .uid("timestamps")
        .set_parallelism(1)
        .key_by(|e: &OrderEvent| e.order)
        .process(StateMachine::with_payment_timeout(timeout_ms))
        .name("order state machine")
        .uid("order-state-machine")
        .map(|outcome| format!("{outcome:?}"))
        .uid("format")
        .add_sink(outcomes)
        .uid("outcomes");
}

/// A watermark after every event: its largest timestamp so far − 1.
pub struct EveryEvent(i64);

impl eddy::time::WatermarkGenerator<OrderEvent> for EveryEvent {
    fn on_event(&mut self, _: &OrderEvent, timestamp: i64, output: &mut eddy::time::WatermarkOutput) {
        self.0 = self.0.max(timestamp);
        output.emit_watermark(self.0 - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut eddy::time::WatermarkOutput) {}
}

pub fn job(env: &Env, events: Vec<OrderEvent>, outcomes: CollectSink<Outcome>, invalid: CollectSink<OrderEvent>) {
    let processed = env
        .from_collection(events)
        .key_by(|e: &OrderEvent| e.order)
        .process(StateMachine::default())
        .name("order state machine")
        .uid("order-state-machine");
    processed.side_output(&invalid_tag()).add_sink(invalid).name("invalid transitions");
    processed.add_sink(outcomes).name("outcomes");
}

/// A deterministic mix of valid lifecycles and stray events.
pub fn sample_events(orders: u64) -> Vec<OrderEvent> {
    use Action::*;
    let mut events = Vec::new();
    for step in 0..5u64 {
        for order in 0..orders {
            let plan: &[Action] = match order % 4 {
                0 => &[Create, Pay, Ship, Receive, Pay],
                1 => &[Create, Pay, Cancel, Ship, Cancel],
                2 => &[Create, Ship, Pay, Ship, Receive],
                _ => &[Pay, Create, Cancel, Create, Pay],
            };
            let timestamp = (step * orders + order) as i64;
            events.push(OrderEvent { order, action: plan[step as usize], timestamp });
        }
    }
    events
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `<example> jobmanager …`, `taskmanager …`, `list` …: a cluster role.
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    // `--jobmanager HOST:PORT --secret-file FILE`: submit the job to a cluster.
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    let (outcomes, invalid) = (CollectSink::new(), CollectSink::new());
    job(&env, sample_events(8), outcomes.clone(), invalid.clone());
    let result = env.execute("order state machine")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut outcomes = outcomes.take();
    outcomes.sort();
    for outcome in outcomes {
        println!("{outcome:?}");
    }
    println!("{} invalid transitions reported on the side output", invalid.take().len());
    Ok(())
}
