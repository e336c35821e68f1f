//! The order state machine of seed 004: per order (keyed), a `ValueState` holds where the
//! order is; each event moves it on. A finished order's state is cleared; an event that is
//! not valid in the current state goes to a side output.
//!
//! ```text
//! cargo run --release --example order_state_machine
//! ```

use eddy::prelude::*;
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
}

/// What happened to an order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Outcome {
    Completed(u64),
    Cancelled(u64),
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
}

impl RichFunction for StateMachine {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&ValueStateDescriptor::new("order-state"))?);
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
        let state = self.state.as_ref().ok_or("state not declared")?;
        let current = state.value()?;
        match transition(current, event.action) {
            Transition::To(next) => state.update(next)?,
            Transition::Finished => {
                state.clear()?;
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
    for step in 0..5 {
        for order in 0..orders {
            let plan: &[Action] = match order % 4 {
                0 => &[Create, Pay, Ship, Receive, Pay],
                1 => &[Create, Pay, Cancel, Ship, Cancel],
                2 => &[Create, Ship, Pay, Ship, Receive],
                _ => &[Pay, Create, Cancel, Create, Pay],
            };
            events.push(OrderEvent { order, action: plan[step] });
        }
    }
    events
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    eddy::log_to_stderr();
    let env = Env::new();
    let (outcomes, invalid) = (CollectSink::new(), CollectSink::new());
    job(&env, sample_events(8), outcomes.clone(), invalid.clone());
    env.execute("order state machine")?;
    let mut outcomes = outcomes.take();
    outcomes.sort();
    for outcome in outcomes {
        println!("{outcome:?}");
    }
    println!("{} invalid transitions reported on the side output", invalid.take().len());
    Ok(())
}
