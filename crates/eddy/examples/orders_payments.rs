//! Orders joined with their payments within 15 minutes, in event time: an interval join
//! (`a.key_by(..).interval_join(&b.key_by(..)).between(0, 15 min)`). Each side's records
//! wait in keyed state only as long as a partner can still come: the state stays bounded
//! however long the job runs, unlike a join that keeps every order forever.
//!
//! ```text
//! cargo run --release --example orders_payments
//! ```

use eddy::join::{join_function, JoinContext};
use eddy::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long after its order a payment still counts.
pub const PAY_WITHIN_MS: i64 = 15 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub id: u64,
    pub customer: String,
    pub placed_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payment {
    pub order: u64,
    pub amount_cents: u64,
    pub paid_ms: i64,
}

/// `n` orders a minute apart; orders whose id is a multiple of 7 are never paid, the
/// others after `(id * 37) % 25` minutes, so some come too late. Payments arrive in the
/// order they are paid.
pub fn orders_and_payments(n: u64) -> (Vec<Order>, Vec<Payment>) {
    let minute = 60_000;
    let orders: Vec<Order> = (0..n)
        .map(|id| Order { id, customer: format!("customer-{}", id % 13), placed_ms: id as i64 * minute })
        .collect();
    let mut payments: Vec<Payment> = orders
        .iter()
        .filter(|o| o.id % 7 != 0)
        .map(|o| Payment {
            order: o.id,
            amount_cents: 100 + o.id * 3,
            paid_ms: o.placed_ms + ((o.id * 37) % 25) as i64 * minute,
        })
        .collect();
    payments.sort_by_key(|p| p.paid_ms);
    (orders, payments)
}

/// `(order id, customer, minutes to pay)` for every order paid within 15 minutes.
pub fn job(env: &Env, orders: Vec<Order>, payments: Vec<Payment>, sink: CollectSink<(u64, String, i64)>) {
    // Both inputs are in event-time order here; a minute of disorder would be allowed.
    let orders = env.from_collection(orders).name("orders").assign_timestamps_and_watermarks(
        WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_secs(60))
            .with_timestamp_assigner(|o: &Order| o.placed_ms),
    );
    let payments = env.from_collection(payments).name("payments").assign_timestamps_and_watermarks(
        WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_secs(60))
            .with_timestamp_assigner(|p: &Payment| p.paid_ms),
    );
    orders
        .key_by(|o: &Order| o.id)
        .interval_join(&payments.key_by(|p: &Payment| p.order))
        .between(0, PAY_WITHIN_MS)
        .process(join_function(
            |order: &Order,
             _: &Payment,
             ctx: &mut JoinContext<'_, '_, u64>,
             out: &mut Collector<'_, (u64, String, i64)>| {
                let minutes = (ctx.right_timestamp() - ctx.left_timestamp()) / 60_000;
                out.collect((order.id, order.customer.clone(), minutes));
            },
        ))
        .name("paid in time")
        .uid("paid-in-time")
        .add_sink(sink);
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    let (orders, payments) = orders_and_payments(10_000);
    let sink = CollectSink::new();
    job(&env, orders, payments, sink.clone());
    let result = env.execute("orders and payments")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let paid = sink.take();
    let average = paid.iter().map(|(_, _, m)| *m).sum::<i64>() as f64 / paid.len().max(1) as f64;
    println!("{} of 10000 orders paid within 15 minutes, after {average:.1} minutes on average", paid.len());
    Ok(())
}
