//! Which row kinds each node emits (Flink's changelog mode inference), derived bottom-up
//! once every rule ran: sources insert; a Calc, a union and an inner regular join pass on
//! what their inputs emit; an aggregation without a window updates its rows (and deletes
//! them, where its input retracts). A node that takes only inserts (a window aggregation,
//! an interval or window join) over an updating input is refused here in Flink's words,
//! naming the node the changes come from; sinks are checked against the result by
//! [`check_sink`].

use super::explain::describe;
use super::{ChangelogMode, JoinStrategy, JoinType, Node, Plan};
use crate::error::SqlError;
use crate::types::TimeAttribute;

/// The plan with every node's changelog mode, or the node that cannot take its input's.
pub fn derive(plan: Plan) -> Result<Plan, SqlError> {
    let Plan { node, fields, .. } = plan;
    let mut error = None;
    let node = node.map_inputs(|input| match derive(input) {
        Ok(p) => p,
        Err(e) => {
            error.get_or_insert(e);
            Plan::new(Node::Values { rows: Vec::new() }, Vec::new())
        }
    });
    if let Some(e) = error {
        return Err(e);
    }
    let mode = match &node {
        Node::Scan { table } if crate::connector::emits_updates(table) => ChangelogMode::RETRACT,
        Node::Scan { .. } | Node::Values { .. } | Node::DataStream { .. } => ChangelogMode::INSERT_ONLY,
        Node::Calc { input, .. } | Node::LookupJoin { input, .. } => input.changelog,
        Node::WindowTableFunction { input, .. } => {
            inserts_only(input, "StreamPhysicalWindowTableFunction")?;
            ChangelogMode::INSERT_ONLY
        }
        Node::WindowAggregate { input, .. } => {
            inserts_only(input, "StreamPhysicalWindowAggregate")?;
            ChangelogMode::INSERT_ONLY
        }
        Node::Join { join_type, left, right, strategy, .. } => match strategy {
            // A padded row is retracted when its first match comes.
            JoinStrategy::Regular if *join_type != JoinType::Inner => ChangelogMode::RETRACT,
            JoinStrategy::Regular => left.changelog.union(right.changelog),
            JoinStrategy::Interval { .. } => {
                inserts_only(left, "StreamPhysicalIntervalJoin")?;
                inserts_only(right, "StreamPhysicalIntervalJoin")?;
                ChangelogMode::INSERT_ONLY
            }
            JoinStrategy::Window { .. } => {
                inserts_only(left, "StreamPhysicalWindowJoin")?;
                inserts_only(right, "StreamPhysicalWindowJoin")?;
                ChangelogMode::INSERT_ONLY
            }
        },
        Node::Union { inputs } => inputs.iter().fold(ChangelogMode::INSERT_ONLY, |m, i| m.union(i.changelog)),
        Node::TemporalJoin { left, .. } => {
            inserts_only(left, "StreamPhysicalTemporalJoin")?;
            ChangelogMode::INSERT_ONLY
        }
        Node::OverAggregate { input, .. } => {
            inserts_only(input, "StreamPhysicalOverAggregate")?;
            ChangelogMode::INSERT_ONLY
        }
        Node::Rank { input, window: Some(_), .. } => {
            inserts_only(input, "StreamPhysicalWindowRank")?;
            ChangelogMode::INSERT_ONLY
        }
        Node::Rank { input, rank_end, .. } => {
            if rank_end.is_none() {
                return Err(SqlError::unsupported(
                    None,
                    "ROW_NUMBER() OVER without a filter on it (a top-N needs WHERE rownum <= N)",
                ));
            }
            // Over updates, a row taken back must be named: `-U` before each `+U`.
            if input.changelog.updates && !input.changelog.update_before {
                from_inserts_only(input, "a ROW_NUMBER top-N")?;
            }
            ChangelogMode::RETRACT
        }
        Node::Deduplicate { input, keep_last, time, .. } => {
            from_inserts_only(input, "a deduplication")?;
            if !keep_last && *time == TimeAttribute::Proctime {
                // The first row of a key by arrival is never replaced.
                ChangelogMode::INSERT_ONLY
            } else {
                ChangelogMode::UPDATES
            }
        }
        Node::GroupAggregate { input, .. } => {
            if input.changelog.is_insert_only() {
                ChangelogMode::UPDATES
            } else {
                ChangelogMode::RETRACT
            }
        }
    };
    Ok(Plan::with(node, fields, mode))
}

/// Whether a node introduces changes of its own (rather than passing on its inputs').
fn makes_changes(plan: &Plan) -> bool {
    match &plan.node {
        Node::Scan { table } => crate::connector::emits_updates(table),
        Node::Rank { window, .. } => window.is_none(),
        Node::GroupAggregate { .. } | Node::Deduplicate { .. } => true,
        Node::Join { join_type, strategy: JoinStrategy::Regular, .. } => *join_type != JoinType::Inner,
        _ => false,
    }
}

/// The node an updating plan's changes come from: the first below that makes them.
pub fn origin(plan: &Plan) -> &Plan {
    if makes_changes(plan) {
        return plan;
    }
    match plan.inputs().into_iter().find(|i| !i.changelog.is_insert_only()) {
        Some(input) => origin(input),
        None => plan,
    }
}

/// `consumer` takes only inserts: an updating `input` is refused, in Flink's words.
fn inserts_only(input: &Plan, consumer: &str) -> Result<(), SqlError> {
    if input.changelog.is_insert_only() {
        return Ok(());
    }
    Err(SqlError::ConsumesUpdates {
        consumer: consumer.to_string(),
        changes: input.changelog.changes_text(),
        producer: describe(origin(input)),
    })
}

/// What eddy does not run yet over an updating input (Flink does).
fn from_inserts_only(input: &Plan, what: &str) -> Result<(), SqlError> {
    if input.changelog.is_insert_only() {
        return Ok(());
    }
    Err(SqlError::unsupported(
        None,
        format!("{what} over an updating input (the changes of {})", describe(origin(input))),
    ))
}

/// A sink that takes only inserts (`accepts_updates` false) refuses an updating result.
pub fn check_sink(plan: &Plan, sink: &str, accepts_updates: bool) -> Result<(), SqlError> {
    if accepts_updates {
        return Ok(());
    }
    inserts_only(plan, &format!("Table sink '{sink}'"))
}
