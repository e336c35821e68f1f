//! Rewrites of a plan that keep its result: filters pushed towards the sources (and into
//! joins, where their equalities become the join's keys), projections merged, and the
//! strategy of each join chosen (an interval join when the condition bounds both sides'
//! event times, else a regular join).

use super::builder::{identity, is_identity};
use super::{JoinStrategy, JoinType, Node, Plan};
use crate::expr::{ArithmeticOp, CompareOp, Expr, ExprKind};
use crate::types::{DataType, TypeKind};
use crate::value::Value;

/// Every rule, to a fixed point of the cheap ones.
pub fn optimize(plan: Plan) -> Plan {
    let plan = push_filters(plan);
    let plan = choose_join_strategies(plan);
    let plan = merge_calcs(plan);
    bound_ranks(plan)
}

/// An integer constant (through casts of it).
fn constant_int(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Literal(Value::Int(i)) => Some(*i),
        ExprKind::Cast(inner) => constant_int(inner),
        _ => None,
    }
}

/// The last rank `conjunct` keeps of column `rank` (`rank <= n`, `rank < n`, `rank = 1`).
fn rank_end_of(conjunct: &Expr, rank: usize) -> Option<u64> {
    let ExprKind::Compare(op, a, b) = &conjunct.kind else { return None };
    let (op, n) = match (a.as_column(), b.as_column()) {
        (Some(c), _) if c == rank => (*op, constant_int(b)?),
        (_, Some(c)) if c == rank => (
            // `n <= rank` is `rank >= n`: the operands swap, so does the comparison.
            match op {
                CompareOp::GtEq => CompareOp::LtEq,
                CompareOp::Gt => CompareOp::Lt,
                CompareOp::LtEq => CompareOp::GtEq,
                CompareOp::Lt => CompareOp::Gt,
                other => *other,
            },
            constant_int(a)?,
        ),
        _ => return None,
    };
    let end = match op {
        CompareOp::LtEq => n,
        CompareOp::Lt => n - 1,
        CompareOp::Eq if n == 1 => 1,
        _ => return None,
    };
    Some(end.max(0) as u64)
}

/// A filter on a Rank's row number becomes the Rank's bound (Flink's top-N); a rank
/// nothing reads is not output, and a first row by a time attribute is a Deduplicate.
fn bound_ranks(plan: Plan) -> Plan {
    let Plan { node, fields, changelog, .. } = plan;
    let node = node.map_inputs(bound_ranks);
    let Node::Calc { input, projection, filter: Some(filter) } = node else {
        return Plan::with(node, fields, changelog);
    };
    let Node::Rank { rank_end: None, .. } = &input.node else {
        return Plan::with(Node::Calc { input, projection, filter: Some(filter) }, fields, changelog);
    };
    let rank = input.fields.len() - 1;
    let mut all = Vec::new();
    conjuncts(filter, &mut all);
    let mut end = None;
    let mut rest = Vec::new();
    for c in all {
        match rank_end_of(&c, rank) {
            Some(e) => end = Some(end.map_or(e, |x: u64| x.min(e))),
            None => rest.push(c),
        }
    }
    let filter = and_of(rest);
    let Node::Rank { input: below, partition_keys, order, output_rank, .. } = input.node else {
        unreachable!("matched as a Rank above")
    };
    let reads_rank = projection.iter().chain(filter.iter()).any(|e| e.columns().contains(&rank));
    let mut rank_fields = input.fields;
    let output_rank = output_rank && (reads_rank || end.is_none());
    if !output_rank {
        rank_fields.pop();
    }
    let time = order.first().and_then(|k| below.fields[k.column].ty.time_attribute());
    // Partitioned by the input's window: ranked once per window, when it ends.
    let window = below.window.filter(|w| partition_keys.contains(&w.start) && partition_keys.contains(&w.end));
    let rank_node = match (end, output_rank, order.as_slice(), time) {
        _ if window.is_some() => Node::Rank { input: below, partition_keys, order, rank_end: end, output_rank, window },
        (Some(1), false, [key], Some(time)) => Node::Deduplicate {
            input: below,
            keys: partition_keys,
            keep_last: !key.ascending,
            time_column: key.column,
            time,
        },
        _ => Node::Rank { input: below, partition_keys, order, rank_end: end, output_rank, window: None },
    };
    let rank_plan = Plan::with(rank_node, rank_fields, input.changelog);
    Plan::with(Node::Calc { input: Box::new(rank_plan), projection, filter }, fields, changelog)
}

pub fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e.kind {
        ExprKind::And(items) => items.into_iter().for_each(|i| conjuncts(i, out)),
        kind => out.push(Expr::new(kind, e.ty)),
    }
}

pub fn and_of(mut items: Vec<Expr>) -> Option<Expr> {
    match items.len() {
        0 => None,
        1 => items.pop(),
        _ => {
            let nullable = items.iter().any(|i| i.ty.nullable);
            Some(Expr::new(ExprKind::And(items), DataType::new(TypeKind::Boolean).with_nullable(nullable)))
        }
    }
}

fn with_filter(input: Plan, filter: Option<Expr>) -> Plan {
    let Some(filter) = filter else { return input };
    // Onto a filter-only Calc below, or a new one.
    if let Node::Calc { input: below, projection, filter: existing } = &input.node {
        if is_identity(projection, below.fields.len()) {
            let mut all = Vec::new();
            if let Some(e) = existing.clone() {
                conjuncts(e, &mut all);
            }
            conjuncts(filter, &mut all);
            let fields = input.fields.clone();
            return Plan::new(
                Node::Calc { input: below.clone(), projection: projection.clone(), filter: and_of(all) },
                fields,
            );
        }
    }
    let fields = input.fields.clone();
    let projection = identity(&fields);
    Plan::new(Node::Calc { input: Box::new(input), projection, filter: Some(filter) }, fields)
}

/// Moves filter conjuncts down: into the side of a join they read only, into the join's
/// condition when they read both, below window table functions and unions.
fn push_filters(plan: Plan) -> Plan {
    let Plan { node, fields, changelog, .. } = plan;
    let node = match node {
        Node::Calc { input, projection, filter: Some(filter) } if filter.is_deterministic() => {
            let input = *input;
            match input.node {
                Node::Join { join_type, left, right, mut left_keys, mut right_keys, condition, strategy } => {
                    let width = left.fields.len();
                    let mut all = Vec::new();
                    conjuncts(filter, &mut all);
                    let (mut to_left, mut to_right, mut on) = (Vec::new(), Vec::new(), Vec::new());
                    if let Some(c) = condition {
                        conjuncts(c, &mut on);
                    }
                    // Below an outer join only into the side whose rows it keeps, and
                    // never into its condition (a WHERE drops padded rows, an ON keeps them).
                    let mut above = Vec::new();
                    for c in all {
                        let columns = c.columns();
                        if !columns.is_empty() && columns.iter().all(|i| *i < width) && !join_type.keeps_right() {
                            to_left.push(c);
                        } else if !columns.is_empty() && columns.iter().all(|i| *i >= width) && !join_type.keeps_left()
                        {
                            to_right.push(c.map_columns(&|i| i - width));
                        } else if join_type == JoinType::Inner {
                            on.push(c);
                        } else {
                            above.push(c);
                        }
                    }
                    let left = push_filters(with_filter(*left, and_of(to_left)));
                    let right = push_filters(with_filter(*right, and_of(to_right)));
                    let condition = extract_keys(on, width, &left, &right, &mut left_keys, &mut right_keys);
                    let join = Plan::with(
                        Node::Join {
                            join_type,
                            left: Box::new(left),
                            right: Box::new(right),
                            left_keys,
                            right_keys,
                            condition,
                            strategy,
                        },
                        input.fields,
                        input.changelog,
                    );
                    Node::Calc { input: Box::new(join), projection, filter: and_of(above) }
                }
                Node::Union { inputs } => {
                    let inputs =
                        inputs.into_iter().map(|i| push_filters(with_filter(i, Some(filter.clone())))).collect();
                    let union = Plan::with(Node::Union { inputs }, input.fields, input.changelog);
                    Node::Calc { input: Box::new(union), projection, filter: None }
                }
                Node::WindowTableFunction { input: below, window }
                    if filter.columns().iter().all(|c| *c < below.fields.len()) =>
                {
                    let below = push_filters(with_filter(*below, Some(filter)));
                    let tvf = Plan::with(
                        Node::WindowTableFunction { input: Box::new(below), window },
                        input.fields,
                        input.changelog,
                    );
                    Node::Calc { input: Box::new(tvf), projection, filter: None }
                }
                Node::Calc { input: below, projection: inner, filter: inner_filter }
                    if inner.iter().all(Expr::is_deterministic) =>
                {
                    // filter(project(x)) = project'(filter'(x)): the outer filter read
                    // through the inner projection.
                    let mut all = Vec::new();
                    if let Some(f) = inner_filter {
                        conjuncts(f, &mut all);
                    }
                    conjuncts(substitute(&filter, &inner), &mut all);
                    let below = push_filters(with_filter(*below, and_of(all)));
                    let outer = projection.iter().map(|e| substitute(e, &inner)).collect();
                    Node::Calc { input: Box::new(below), projection: outer, filter: None }
                }
                other => {
                    let input = Plan::with(other, input.fields, input.changelog);
                    Node::Calc { input: Box::new(push_children(input)), projection, filter: Some(filter) }
                }
            }
        }
        Node::Join { join_type, left, right, mut left_keys, mut right_keys, condition, strategy } => {
            let width = left.fields.len();
            let left = push_filters(*left);
            let right = push_filters(*right);
            let mut on = Vec::new();
            if let Some(c) = condition {
                conjuncts(c, &mut on);
            }
            // Conditions of one side move into that side, unless the join keeps that
            // side's rows without a match (the condition decides only whether they match).
            let (mut to_left, mut to_right, mut rest) = (Vec::new(), Vec::new(), Vec::new());
            for c in on {
                let columns = c.columns();
                let pushable = c.is_deterministic() && !columns.is_empty();
                if pushable && columns.iter().all(|i| *i < width) && !join_type.keeps_left() {
                    to_left.push(c);
                } else if pushable && columns.iter().all(|i| *i >= width) && !join_type.keeps_right() {
                    to_right.push(c.map_columns(&|i| i - width));
                } else {
                    rest.push(c);
                }
            }
            let left = push_filters(with_filter(left, and_of(to_left)));
            let right = push_filters(with_filter(right, and_of(to_right)));
            let condition = extract_keys(rest, width, &left, &right, &mut left_keys, &mut right_keys);
            let (left, right) = (Box::new(left), Box::new(right));
            Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy }
        }
        other => return push_children(Plan::with(other, fields, changelog)),
    };
    Plan::with(node, fields, changelog)
}

fn push_children(plan: Plan) -> Plan {
    let Plan { node, fields, changelog, .. } = plan;
    match node {
        Node::Join { .. } => push_filters(Plan::with(node, fields, changelog)),
        other => Plan::with(other.map_inputs(push_filters), fields, changelog),
    }
}

/// Takes the `left.x = right.y` conjuncts (of types whose values compare as their bytes)
/// as join keys; the rest stays the join's condition.
fn extract_keys(
    on: Vec<Expr>,
    width: usize,
    left: &Plan,
    right: &Plan,
    left_keys: &mut Vec<usize>,
    right_keys: &mut Vec<usize>,
) -> Option<Expr> {
    let mut rest = Vec::new();
    for c in on {
        if let ExprKind::Compare(CompareOp::Eq, a, b) = &c.kind {
            if let (Some(x), Some(y)) = (a.as_column(), b.as_column()) {
                let (l, r) = if x < width && y >= width {
                    (x, y - width)
                } else if y < width && x >= width {
                    (y, x - width)
                } else {
                    (usize::MAX, 0)
                };
                if l != usize::MAX && same_key_form(&left.fields[l].ty, &right.fields[r].ty) {
                    left_keys.push(l);
                    right_keys.push(r);
                    continue;
                }
            }
        }
        rest.push(c);
    }
    and_of(rest)
}

/// Whether equal values of the two types encode to equal key bytes.
fn same_key_form(a: &DataType, b: &DataType) -> bool {
    use TypeKind as K;
    match (&a.kind, &b.kind) {
        (x, y) if x.is_integer() && y.is_integer() => true,
        (K::Char(_) | K::Varchar(_), K::Char(_) | K::Varchar(_)) => true,
        (K::Decimal { scale: s1, .. }, K::Decimal { scale: s2, .. }) => s1 == s2,
        (K::Timestamp { .. }, K::Timestamp { .. }) | (K::TimestampLtz { .. }, K::TimestampLtz { .. }) => true,
        (x, y) => x == y,
    }
}

/// `e` with each column `i` replaced by `projection[i]`.
pub fn substitute(e: &Expr, projection: &[Expr]) -> Expr {
    replace_columns(e.clone(), projection)
}

fn replace_columns(e: Expr, projection: &[Expr]) -> Expr {
    use ExprKind::*;
    let r = |x: Box<Expr>| Box::new(replace_columns(*x, projection));
    let kind = match e.kind {
        Column(i) => return projection[i].clone(),
        Literal(v) => Literal(v),
        Field(x, i) => Field(r(x), i),
        Not(x) => Not(r(x)),
        Negate(x) => Negate(r(x)),
        IsNull(x) => IsNull(r(x)),
        IsNotNull(x) => IsNotNull(r(x)),
        Cast(x) => Cast(r(x)),
        And(xs) => And(xs.into_iter().map(|x| replace_columns(x, projection)).collect()),
        Or(xs) => Or(xs.into_iter().map(|x| replace_columns(x, projection)).collect()),
        Call(f, xs) => Call(f, xs.into_iter().map(|x| replace_columns(x, projection)).collect()),
        Udf(f, xs) => Udf(f, xs.into_iter().map(|x| replace_columns(x, projection)).collect()),
        Compare(op, a, b) => Compare(op, r(a), r(b)),
        Arithmetic(op, a, b) => Arithmetic(op, r(a), r(b)),
        Case(whens, otherwise) => Case(
            whens.into_iter().map(|(c, v)| (replace_columns(c, projection), replace_columns(v, projection))).collect(),
            r(otherwise),
        ),
        In(x, list) => In(r(x), list.into_iter().map(|i| replace_columns(i, projection)).collect()),
    };
    Expr::new(kind, e.ty)
}

/// Calc over Calc becomes one Calc (the outer reading the inner's expressions), unless
/// the inner one computes something non-deterministic or expensive the outer reads twice.
fn merge_calcs(plan: Plan) -> Plan {
    let Plan { node, fields, changelog, .. } = plan;
    let node = match node {
        Node::Calc { input, projection, filter } => {
            let input = merge_calcs(*input);
            match input.node {
                Node::Calc { input: below, projection: inner, filter: inner_filter }
                    if inner.iter().all(Expr::is_deterministic) && filter.is_none() =>
                {
                    let projection = projection.iter().map(|e| substitute(e, &inner)).collect();
                    Node::Calc { input: below, projection, filter: inner_filter }
                }
                other => {
                    Node::Calc { input: Box::new(Plan::with(other, input.fields, input.changelog)), projection, filter }
                }
            }
        }
        other => other.map_inputs(merge_calcs),
    };
    Plan::with(node, fields, changelog)
}

/// Picks an interval join where the condition bounds one side's event time by the
/// other's (`l.t BETWEEN r.t - a AND r.t + b`), both inputs carrying their rowtime (also
/// for outer joins, whose output then only appends).
fn choose_join_strategies(plan: Plan) -> Plan {
    let Plan { node, mut fields, changelog, .. } = plan;
    let node = match node {
        Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy: JoinStrategy::Regular } => {
            let left = choose_join_strategies(*left);
            let right = choose_join_strategies(*right);
            let width = left.fields.len();
            let strategy = match (left.rowtime(), right.rowtime(), &condition) {
                (Some(lt), Some(rt), Some(c)) => interval_bounds(c, lt, width + rt)
                    .map(|(lower, upper)| JoinStrategy::Interval { left_time: lt, right_time: rt, lower, upper })
                    .unwrap_or(JoinStrategy::Regular),
                _ => JoinStrategy::Regular,
            };
            // Both sides windowed and joined on both window columns: a window join.
            let strategy = match (strategy, left.window, right.window) {
                (JoinStrategy::Regular, Some(lw), Some(rw))
                    if join_type == JoinType::Inner
                        && lw.time == rw.time
                        && left_keys.iter().zip(&right_keys).any(|(l, r)| *l == lw.start && *r == rw.start)
                        && left_keys.iter().zip(&right_keys).any(|(l, r)| *l == lw.end && *r == rw.end) =>
                {
                    JoinStrategy::Window { left_end: lw.end, right_end: rw.end }
                }
                (other, _, _) => other,
            };
            if let (JoinStrategy::Interval { left_time, .. }, JoinType::Inner) = (&strategy, join_type) {
                // The output keeps the left side's rowtime as its time attribute.
                fields[*left_time].ty = left.fields[*left_time].ty.clone();
            }
            let (left, right) = (Box::new(left), Box::new(right));
            Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy }
        }
        other => other.map_inputs(choose_join_strategies),
    };
    Plan::with(node, fields, changelog)
}

/// `column + constant` as `(column, constant ms)`.
fn time_plus(e: &Expr) -> Option<(usize, i64)> {
    match &e.kind {
        ExprKind::Column(i) => Some((*i, 0)),
        // A cast that keeps milliseconds (to TIMESTAMP(3) or finer) keeps the bound.
        ExprKind::Cast(x)
            if matches!(
                e.ty.kind,
                TypeKind::Timestamp { precision: 3.., .. } | TypeKind::TimestampLtz { precision: 3.., .. }
            ) =>
        {
            time_plus(x)
        }
        ExprKind::Arithmetic(op, a, b) => {
            let (c, base) = time_plus(a)?;
            let ExprKind::Literal(Value::Interval(ms)) = b.kind else { return None };
            match op {
                ArithmeticOp::Add => Some((c, base + ms)),
                ArithmeticOp::Subtract => Some((c, base - ms)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The bounds `lower <= l.t - r.t <= upper` the condition's conjuncts set, if both are.
fn interval_bounds(condition: &Expr, left_time: usize, right_time: usize) -> Option<(i64, i64)> {
    let mut all = Vec::new();
    conjuncts(condition.clone(), &mut all);
    let (mut lower, mut upper) = (None::<i64>, None::<i64>);
    for c in &all {
        let ExprKind::Compare(op, a, b) = &c.kind else { continue };
        let (Some((ca, da)), Some((cb, db))) = (time_plus(a), time_plus(b)) else { continue };
        // Normalise to `l.t + x  op  r.t + y`, i.e. `l.t - r.t  op  y - x`.
        let (op, bound) = if ca == left_time && cb == right_time {
            (*op, db - da)
        } else if ca == right_time && cb == left_time {
            (op.flipped(), da - db)
        } else {
            continue;
        };
        match op {
            CompareOp::GtEq => lower = Some(lower.map_or(bound, |l| l.max(bound))),
            CompareOp::Gt => lower = Some(lower.map_or(bound + 1, |l| l.max(bound + 1))),
            CompareOp::LtEq => upper = Some(upper.map_or(bound, |u| u.min(bound))),
            CompareOp::Lt => upper = Some(upper.map_or(bound - 1, |u| u.min(bound - 1))),
            CompareOp::Eq => {
                lower = Some(bound);
                upper = Some(bound);
            }
            CompareOp::NotEq => {}
        }
    }
    Some((lower?, upper?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(op: CompareOp, a: Expr, b: Expr) -> Expr {
        Expr::new(ExprKind::Compare(op, Box::new(a), Box::new(b)), DataType::new(TypeKind::Boolean))
    }

    #[test]
    fn a_bound_on_the_row_number_reads_the_same_from_either_side() {
        let rank = || Expr::column(3, DataType::bigint());
        let n = |v: i64| Expr::literal(Value::Int(v), DataType::int());
        assert_eq!(rank_end_of(&compare(CompareOp::LtEq, rank(), n(3)), 3), Some(3));
        assert_eq!(rank_end_of(&compare(CompareOp::Lt, rank(), n(3)), 3), Some(2));
        assert_eq!(rank_end_of(&compare(CompareOp::GtEq, n(3), rank()), 3), Some(3));
        assert_eq!(rank_end_of(&compare(CompareOp::Gt, n(3), rank()), 3), Some(2));
        assert_eq!(rank_end_of(&compare(CompareOp::Eq, n(1), rank()), 3), Some(1));
        // `3 <= rn` and `1 < rn` bound the rank from below: not a top-N.
        assert_eq!(rank_end_of(&compare(CompareOp::LtEq, n(3), rank()), 3), None);
        assert_eq!(rank_end_of(&compare(CompareOp::Lt, n(1), rank()), 3), None);
        assert_eq!(rank_end_of(&compare(CompareOp::GtEq, rank(), n(3)), 3), None);
    }
}
