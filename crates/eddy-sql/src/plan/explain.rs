//! A plan as text, in the shape of Flink's `EXPLAIN` (`+- ` under each node): the operator
//! names the dashboard shows too, and each node's changelog mode.

use super::aggregate::AggregateCall;
use super::{JoinStrategy, Node, Plan};
use crate::expr::explain::ExprText;
use crate::expr::Expr;
use std::fmt::Write;

/// The operator's one-line description, as its job vertex is named.
pub fn describe(plan: &Plan) -> String {
    let input_names = |p: &Plan| p.names();
    match &plan.node {
        Node::Scan { table } => format!(
            "TableSourceScan(table=[[default_catalog, default_database, {}]], fields=[{}])",
            table.name,
            table.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
        ),
        Node::Values { rows } => format!("Values(tuples=[{} rows])", rows.len()),
        Node::DataStream { index } => format!("DataStreamScan(stream=[{index}])"),
        Node::Calc { input, projection, filter } => {
            let names = input_names(input);
            let mut out = String::from("Calc(select=[");
            for (i, (e, f)) in projection.iter().zip(&plan.fields).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let text = ExprText { expr: e, names: &names }.to_string();
                if text == f.name {
                    out.push_str(&text);
                } else {
                    write!(out, "{text} AS {}", f.name).expect("writing to a String");
                }
            }
            out.push(']');
            if let Some(f) = filter {
                write!(out, ", where=[{}]", ExprText { expr: f, names: &names }).expect("writing to a String");
            }
            out.push(')');
            out
        }
        Node::WindowTableFunction { input, window } => {
            format!("WindowTableFunction(window=[{}])", window.describe(&input_names(input)))
        }
        Node::WindowAggregate { input, window, keys, aggregates } => {
            let names = input_names(input);
            let keys: Vec<&str> = keys.iter().map(|k| names[*k].as_str()).collect();
            format!(
                "WindowAggregate(groupBy=[{}], window=[{}], select=[{}])",
                keys.join(", "),
                window.describe(&names),
                aggregate_list(aggregates, &names)
            )
        }
        Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy } => {
            let mut names = input_names(left);
            names.extend(input_names(right));
            let width = left.fields.len();
            let mut parts: Vec<String> = left_keys
                .iter()
                .zip(right_keys)
                .map(|(l, r)| format!("=({}, {})", names[*l], names[width + r]))
                .collect();
            if let Some(c) = condition {
                parts.push(ExprText { expr: c, names: &names }.to_string());
            }
            let condition = match parts.len() {
                0 => "true".to_string(),
                1 => parts.remove(0),
                _ => format!("AND({})", parts.join(", ")),
            };
            let kind = match strategy {
                JoinStrategy::Regular => "Join",
                JoinStrategy::Interval { .. } => "IntervalJoin",
                JoinStrategy::Window { .. } => "WindowJoin",
            };
            format!("{kind}(joinType=[{}], where=[{condition}])", join_type.name())
        }
        Node::Union { .. } => "Union(all=[true])".to_string(),
        Node::Rank { input, partition_keys, order, rank_end, window, .. } => {
            let names = input_names(input);
            let end = rank_end.map(|e| e.to_string()).unwrap_or_else(|| "unbounded".into());
            let kind = match window {
                Some(w) => format!("WindowRank(window=[{}, {}], ", names[w.start], names[w.end]),
                None if input.changelog.is_insert_only() => "Rank(strategy=[AppendFastStrategy], ".to_string(),
                None => "Rank(strategy=[RetractStrategy], ".to_string(),
            };
            format!(
                "{kind}rankType=[ROW_NUMBER], rankRange=[rankStart=1, rankEnd={end}], partitionBy=[{}], orderBy=[{}])",
                column_list(partition_keys, &names),
                order
                    .iter()
                    .map(|k| format!("{} {}", names[k.column], if k.ascending { "ASC" } else { "DESC" }))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Node::TemporalJoin { left, right, key_expressions, keys, left_time, right_time, left_outer, .. } => {
            let names = input_names(left);
            let right_names = input_names(right);
            let on: Vec<String> = keys
                .iter()
                .zip(key_expressions)
                .map(|(k, e)| format!("=({}, {})", ExprText { expr: e, names: &names }, right_names[*k]))
                .collect();
            format!(
                "TemporalJoin(joinType=[{}], where=[AND({}, __TEMPORAL_JOIN_CONDITION({}, {}))])",
                if *left_outer { "LeftOuterJoin" } else { "InnerJoin" },
                on.join(", "),
                names[*left_time],
                right_names[*right_time]
            )
        }
        Node::OverAggregate { input, partition_keys, time_column, frame, aggregates, .. } => {
            let names = input_names(input);
            let bound = match frame.preceding {
                None => "UNBOUNDED PRECEDING".to_string(),
                Some(0) => "CURRENT ROW".to_string(),
                Some(n) if frame.rows => format!("{n} PRECEDING"),
                Some(ms) => format!("{ms} ms PRECEDING"),
            };
            format!(
                "OverAggregate(partitionBy=[{}], orderBy=[{} ASC], window=[{} BETWEEN {bound} AND CURRENT ROW], select=[{}])",
                column_list(partition_keys, &names),
                names[*time_column],
                // "RANG", as Flink's plans print a RANGE frame.
                if frame.rows { "ROWS" } else { "RANG" },
                aggregate_list(aggregates, &names)
            )
        }
        Node::LookupJoin { input, table, key_expressions, keys, condition, left_outer } => {
            let names = input_names(input);
            let lookup: Vec<String> = keys
                .iter()
                .zip(key_expressions)
                .map(|(k, e)| format!("{}={}", table.fields[*k].name, ExprText { expr: e, names: &names }))
                .collect();
            let mut all = names.clone();
            all.extend(table.fields.iter().map(|f| f.name.clone()));
            let mut out = format!(
                "LookupJoin(table=[default_catalog.default_database.{}], joinType=[{}], lookup=[{}]",
                table.name,
                if *left_outer { "LeftOuterJoin" } else { "InnerJoin" },
                lookup.join(", ")
            );
            if let Some(c) = condition {
                write!(out, ", where=[{}]", ExprText { expr: c, names: &all }).expect("writing to a String");
            }
            out.push(')');
            out
        }
        Node::Deduplicate { input, keys, keep_last, time, .. } => format!(
            "Deduplicate(keep=[{}], key=[{}], order=[{}])",
            if *keep_last { "LastRow" } else { "FirstRow" },
            column_list(keys, &input_names(input)),
            match time {
                crate::types::TimeAttribute::Rowtime => "ROWTIME",
                crate::types::TimeAttribute::Proctime => "PROCTIME",
            }
        ),
        Node::GroupAggregate { input, keys, aggregates } => {
            let names = input_names(input);
            let keys: Vec<&str> = keys.iter().map(|k| names[*k].as_str()).collect();
            let mut select = keys.join(", ");
            if !aggregates.is_empty() {
                if !select.is_empty() {
                    select.push_str(", ");
                }
                select.push_str(&aggregate_list(aggregates, &names));
            }
            format!("GroupAggregate(groupBy=[{}], select=[{select}])", keys.join(", "))
        }
    }
}

fn column_list(columns: &[usize], names: &[String]) -> String {
    columns.iter().map(|c| names[*c].as_str()).collect::<Vec<_>>().join(", ")
}

fn aggregate_list(aggregates: &[AggregateCall], names: &[String]) -> String {
    aggregates
        .iter()
        .map(|a| {
            let argument = a.argument.map(|i| names[i].clone()).unwrap_or_else(|| "*".into());
            let distinct = if a.distinct { "DISTINCT " } else { "" };
            let function = format!("{:?}", a.kind).to_uppercase().replace("COUNTSTAR", "COUNT");
            format!("{function}({distinct}{argument})")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The whole tree, one node a line, with its changelog mode.
pub fn explain(plan: &Plan, sink: Option<&str>) -> String {
    let mut out = String::new();
    let mut depth = 0;
    if let Some(sink) = sink {
        writeln!(out, "{sink}, changelogMode=[NONE]").expect("writing to a String");
        depth = 1;
    }
    tree(plan, depth, &mut out);
    out
}

fn tree(plan: &Plan, depth: usize, out: &mut String) {
    if depth > 0 {
        out.push_str(&"   ".repeat(depth - 1));
        out.push_str("+- ");
    }
    writeln!(out, "{}, changelogMode={}", describe(plan), plan.changelog.short()).expect("writing to a String");
    for input in plan.inputs() {
        tree(input, depth + 1, out);
    }
}

/// An expression with its input's names (for sink descriptions).
pub fn expression(e: &Expr, names: &[String]) -> String {
    ExprText { expr: e, names }.to_string()
}
