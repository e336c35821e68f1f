//! A rule filter with broadcast state: rules (`name → max amount`) are broadcast to every
//! subtask and kept in broadcast state; payments are checked against all rules seen so far
//! and reported when they break one.
//!
//! ```text
//! cargo run --release --example broadcast_rules
//! ```

use eddy::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Payment {
    pub id: u64,
    pub amount: u64,
}

/// `(rule name, limit)`.
pub type Rule = (String, u64);

pub fn rules_descriptor() -> MapStateDescriptor<String, u64> {
    MapStateDescriptor::new("rules")
}

/// Emits `(payment id, rule name)` for every rule a payment breaks.
#[derive(Clone, Default)]
pub struct RuleFilter;

impl RichFunction for RuleFilter {}

impl BroadcastProcessFunction<Payment, Rule, (u64, String)> for RuleFilter {
    fn process_element(
        &mut self,
        payment: Payment,
        ctx: &mut ReadOnlyContext<'_>,
        out: &mut Collector<'_, (u64, String)>,
    ) -> FunctionResult {
        let rules = ctx.broadcast_state(&rules_descriptor())?;
        for (name, limit) in rules.entries() {
            if payment.amount > *limit {
                out.collect((payment.id, name.clone()));
            }
        }
        Ok(())
    }

    fn process_broadcast_element(
        &mut self,
        (name, limit): Rule,
        ctx: &mut BroadcastContext<'_>,
        _out: &mut Collector<'_, (u64, String)>,
    ) -> FunctionResult {
        ctx.broadcast_state(&rules_descriptor())?.put(name, limit);
        Ok(())
    }

    /// The rules here are a finished list: load them all before checking payments.
    fn broadcast_first(&self) -> bool {
        true
    }
}

/// Rules (a finished list, read first), then payments.
pub fn job(env: &Env, rules: Vec<Rule>, payments: Vec<Payment>, sink: CollectSink<(u64, String)>) {
    let rules = env.from_collection(rules).name("rules");
    let payments = env.from_collection(payments).name("payments").rebalance();
    payments.connect_broadcast(&rules).process(RuleFilter).name("rule filter").add_sink(sink);
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `<example> jobmanager …`, `taskmanager …`, `list` …: a cluster role.
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    // `--jobmanager HOST:PORT --secret-file FILE`: submit the job to a cluster.
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    let sink = CollectSink::new();
    let payments = (0..10).map(|id| Payment { id, amount: id * 100 }).collect();
    job(&env, vec![("large".into(), 500), ("huge".into(), 800)], payments, sink.clone());
    let result = env.execute("broadcast rules")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    let mut alerts = sink.take();
    alerts.sort();
    for (id, rule) in alerts {
        println!("payment {id} breaks rule '{rule}'");
    }
    Ok(())
}
