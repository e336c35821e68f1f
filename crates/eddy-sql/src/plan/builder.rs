//! From a query's AST to a plan: FROM items (tables, views, subqueries, window table
//! functions, joins of every type, lookup joins), WHERE, grouping (by windows, the TVF and
//! the legacy `GROUP BY TUMBLE(…)` forms, or without: a GroupAggregate), HAVING, DISTINCT,
//! the select list with its `ROW_NUMBER() OVER` (a Rank, bounded by the rules) and OVER
//! aggregates, UNION [ALL], temporal joins (`FOR SYSTEM_TIME AS OF`: a lookup join in
//! processing time, a versioned table's in event time). What eddy does not run yet (ORDER
//! BY without LIMIT, RANK) is refused here, naming it.

use super::aggregate::{self, AggregateCall};
use super::{window_fields, JoinStrategy, JoinType, Node, OverFrame, Plan, SortKey, WindowKind, WindowSpec};
use crate::catalog::{Catalog, Relation};
use crate::error::{Location, SqlError};
use crate::expr::bind::{location_of, Binder, Scope, ScopeColumn};
use crate::expr::{Expr, ExprKind};
use crate::parser::dialect::TABLE_ARGUMENT;
use crate::types::{DataType, Field};
use crate::value::Value;
use sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, FunctionArguments, SelectItem, SetExpr, Spanned, TableFactor,
};
use std::collections::BTreeMap;

/// The qualifier of a select list's `ROW_NUMBER() OVER` column: `*` leaves it out.
const OVER_QUALIFIER: &str = "$over";

/// `SELECT DISTINCT`: a grouping by every column, without aggregates (Flink's
/// `GroupAggregate(groupBy=[all], select=[all])`).
fn distinct_of(planned: Planned) -> Planned {
    let fields: Vec<Field> =
        planned.plan.fields.iter().map(|f| Field::new(f.name.clone(), f.ty.clone().without_time_attribute())).collect();
    let keys = (0..fields.len()).collect();
    let node = Node::GroupAggregate { input: Box::new(planned.plan), keys, aggregates: Vec::new() };
    let columns =
        planned.scope.columns.into_iter().map(|c| ScopeColumn { ty: c.ty.without_time_attribute(), ..c }).collect();
    Planned { plan: Plan::new(node, fields), scope: Scope::new(columns) }
}

/// The grouping's input: its keys, aggregate arguments and FILTER conditions (and a
/// window's time column) over the rows grouped.
fn pre_projection(input: Plan, pre: Vec<Expr>) -> Plan {
    let fields: Vec<Field> = pre.iter().enumerate().map(|(i, e)| Field::new(format!("$f{i}"), e.ty.clone())).collect();
    Plan::new(Node::Calc { input: Box::new(input), projection: pre, filter: None }, fields)
}

/// A plan and the names its columns go by in the enclosing query.
#[derive(Clone)]
pub struct Planned {
    pub plan: Plan,
    pub scope: Scope,
}

/// Plans queries against a catalog.
pub struct Builder<'a> {
    catalog: &'a Catalog,
    /// `WITH` queries in scope.
    ctes: BTreeMap<String, Planned>,
    /// Views being expanded (a view naming itself is an error, not a stack overflow).
    expanding: Vec<String>,
}

/// The window of an `OVER` call: written in it, or named in the query's `WINDOW w AS (…)`
/// clause (also through another name).
fn window_spec<'a>(
    call: &'a ast::Function,
    named: &'a [ast::NamedWindowDefinition],
) -> Result<&'a ast::WindowSpec, SqlError> {
    let location = span_location(&call.name);
    // A window that refines a named one (`OVER (w ORDER BY …)`) is not merged with it.
    let whole = |spec: &'a ast::WindowSpec| match &spec.window_name {
        Some(base) => Err(SqlError::unsupported(
            location,
            format!("a window that refines the named window '{}' (write the whole window)", base.value),
        )),
        None => Ok(spec),
    };
    let mut name = match &call.over {
        Some(ast::WindowType::WindowSpec(spec)) => return whole(spec),
        Some(ast::WindowType::NamedWindow(name)) => name,
        None => return Err(SqlError::unsupported(location, format!("the window of '{call}'"))),
    };
    // A name may stand for another name; as many steps as there are names (no cycles).
    for _ in 0..=named.len() {
        let Some(ast::NamedWindowDefinition(_, expr)) = named.iter().find(|d| d.0.value == name.value) else {
            return Err(SqlError::validation(location, format!("Window '{}' not found", name.value)));
        };
        match expr {
            ast::NamedWindowExpr::WindowSpec(spec) => return whole(spec),
            ast::NamedWindowExpr::NamedWindow(other) => name = other,
        }
    }
    Err(SqlError::validation(location, format!("the named window '{}' refers to itself", name.value)))
}

fn span_location(node: &impl Spanned) -> Option<Location> {
    Location::of_span(node.span())
}

impl<'a> Builder<'a> {
    pub fn new(catalog: &'a Catalog) -> Self {
        Self { catalog, ctes: BTreeMap::new(), expanding: Vec::new() }
    }

    fn binder<'s>(&'s self, scope: &'s Scope) -> Binder<'s> {
        Binder { scope, functions: self.catalog, replacements: &[], window_columns: None }
    }

    pub fn query(&mut self, query: &ast::Query) -> Result<Planned, SqlError> {
        let saved = self.ctes.clone();
        let planned = self.query_with_ctes(query);
        // The query's WITH names end with it, also when it failed.
        self.ctes = saved;
        planned
    }

    fn query_with_ctes(&mut self, query: &ast::Query) -> Result<Planned, SqlError> {
        let location = span_location(query);
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                let planned = self.query(&cte.query)?;
                let planned = rename(planned, Some(&cte.alias.name.value), &cte.alias.columns, location)?;
                self.ctes.insert(cte.alias.name.value.clone(), planned);
            }
        }
        let planned = self.set_expr(&query.body)?;
        self.order_and_limit(planned, query)
    }

    /// `ORDER BY … LIMIT n` of a query: the best `n` rows of the whole result, which change
    /// as rows arrive (Flink's streaming SortLimit): a Rank without partition keys or row
    /// number. A stream is not sorted without a limit, nor limited without an order.
    fn order_and_limit(&self, planned: Planned, query: &ast::Query) -> Result<Planned, SqlError> {
        let location = span_location(query);
        if query.order_by.is_none() && query.limit_clause.is_none() && query.fetch.is_none() {
            return Ok(planned);
        }
        if query.fetch.is_some() {
            return Err(SqlError::unsupported(location, "FETCH FIRST (write LIMIT n)"));
        }
        let limit = match &query.limit_clause {
            Some(ast::LimitClause::LimitOffset { limit: Some(limit), offset: None, limit_by })
                if limit_by.is_empty() =>
            {
                limit
            }
            Some(ast::LimitClause::LimitOffset { limit: None, .. }) | None => {
                return Err(SqlError::unsupported(
                    location,
                    "ORDER BY without LIMIT on a stream (Flink sorts a stream only by an ascending time attribute)",
                ))
            }
            Some(other) => return Err(SqlError::unsupported(location, format!("'{other}' (LIMIT n is supported)"))),
        };
        let n = match limit {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => n.parse::<u64>().ok(),
                _ => None,
            },
            _ => None,
        }
        .ok_or_else(|| {
            SqlError::validation(location_of(limit), format!("LIMIT takes a number of rows, not '{limit}'"))
        })?;
        let exprs = match query.order_by.as_ref().map(|o| &o.kind) {
            Some(ast::OrderByKind::Expressions(exprs)) => exprs,
            Some(ast::OrderByKind::All(_)) => return Err(SqlError::unsupported(location, "ORDER BY ALL")),
            None => {
                return Err(SqlError::unsupported(
                    location,
                    "LIMIT without ORDER BY on a stream (which rows come first is arrival order)",
                ))
            }
        };
        let binder = self.binder(&planned.scope);
        let mut order = Vec::new();
        for o in exprs {
            let column = binder.bind(&o.expr)?.as_column().ok_or_else(|| {
                SqlError::unsupported(
                    location_of(&o.expr),
                    format!("ORDER BY '{}' (a column of the result is supported)", o.expr),
                )
            })?;
            let ascending = !matches!(o.options.sort, Some(ast::OrderBySort::Desc));
            order.push(SortKey { column, ascending, nulls_first: o.options.nulls_first.unwrap_or(ascending) });
        }
        let fields = planned.plan.fields.clone();
        let node = Node::Rank {
            input: Box::new(planned.plan),
            partition_keys: Vec::new(),
            order,
            rank_end: Some(n),
            output_rank: false,
            window: None,
        };
        Ok(Planned { plan: Plan::new(node, fields), scope: planned.scope })
    }

    fn set_expr(&mut self, body: &SetExpr) -> Result<Planned, SqlError> {
        match body {
            SetExpr::Select(select) => self.select(select),
            SetExpr::Query(q) => self.query(q),
            SetExpr::SetOperation { left, op, set_quantifier, right } => {
                let location = span_location(body);
                if !matches!(op, ast::SetOperator::Union) {
                    return Err(SqlError::unsupported(location, format!("{op} (a join whose result updates)")));
                }
                let (l, r) = (self.set_expr(left)?, self.set_expr(right)?);
                let all = union(l, r, location)?;
                Ok(match set_quantifier {
                    ast::SetQuantifier::All => all,
                    // UNION is UNION ALL then DISTINCT, as Flink plans it.
                    _ => distinct_of(all),
                })
            }
            SetExpr::Values(values) => self.values(values),
            other => Err(SqlError::unsupported(span_location(other), format!("the query '{other}'"))),
        }
    }

    fn values(&mut self, values: &ast::Values) -> Result<Planned, SqlError> {
        let empty = Scope::default();
        let binder = self.binder(&empty);
        let mut rows: Vec<Vec<Expr>> = Vec::new();
        for row in &values.rows {
            rows.push(row.iter().map(|e| binder.bind(e)).collect::<Result<_, _>>()?);
        }
        let width = rows.first().map(Vec::len).unwrap_or(0);
        if let Some((i, row)) = rows.iter().enumerate().find(|(_, r)| r.len() != width) {
            return Err(SqlError::validation(
                span_location(values),
                format!("VALUES row {} has {} values, the first row {width}", i + 1, row.len()),
            ));
        }
        let mut fields = Vec::new();
        for column in 0..width {
            let types: Vec<&DataType> = rows.iter().map(|r| &r[column].ty).collect();
            let ty = crate::expr::bind::common_type(&types)
                .ok_or_else(|| SqlError::validation(None, "VALUES rows of different types"))?;
            fields.push(Field::new(format!("EXPR${column}"), ty));
        }
        let mut out = Vec::new();
        for row in rows {
            let mut values = Vec::new();
            for (e, f) in row.into_iter().zip(&fields) {
                let e = crate::expr::bind::coerce(e, &f.ty);
                values.push(e.eval(&[]).map_err(|err| SqlError::validation(None, err.0))?);
            }
            out.push(values);
        }
        let scope = Scope::qualified(None, &fields);
        Ok(Planned { plan: Plan::new(Node::Values { rows: out }, fields), scope })
    }

    fn select(&mut self, select: &ast::Select) -> Result<Planned, SqlError> {
        let location = span_location(select);
        let distinct = match &select.distinct {
            None | Some(ast::Distinct::All) => false,
            Some(ast::Distinct::Distinct) => true,
            Some(on @ ast::Distinct::On(_)) => return Err(SqlError::unsupported(location, format!("{on}"))),
        };
        if select.qualify.is_some() {
            return Err(SqlError::unsupported(location, "QUALIFY (Rank)"));
        }
        let mut planned = match select.from.as_slice() {
            [] => {
                let plan = Plan::new(Node::Values { rows: vec![vec![]] }, vec![]);
                Planned { plan, scope: Scope::default() }
            }
            [first, rest @ ..] => {
                let mut planned = self.table_with_joins(first)?;
                for item in rest {
                    let right = self.table_with_joins(item)?;
                    planned = join(planned, right, JoinType::Inner);
                }
                planned
            }
        };
        if let Some(condition) = &select.selection {
            let filter = self.binder(&planned.scope).boolean(condition)?;
            planned = filter_of(planned, filter);
        }
        let group_by: &[ast::Expr] = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
            other => return Err(SqlError::unsupported(location, format!("{other}"))),
        };
        let mut aggregate_calls: Vec<&ast::Function> = Vec::new();
        for item in &select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                collect_aggregates(e, &mut aggregate_calls);
            }
        }
        if let Some(having) = &select.having {
            collect_aggregates(having, &mut aggregate_calls);
        }
        if group_by.is_empty() && aggregate_calls.is_empty() {
            if select.having.is_some() {
                return Err(SqlError::validation(location, "HAVING needs GROUP BY or an aggregate"));
            }
            let (planned, replacements) = self.ranking(planned, &select.projection, &select.named_window)?;
            let projected = self.project(planned, &select.projection, &replacements, None, false)?;
            return Ok(if distinct { distinct_of(projected) } else { projected });
        }
        let aggregated = self.aggregate(planned, group_by, &aggregate_calls, select, location)?;
        Ok(if distinct { distinct_of(aggregated) } else { aggregated })
    }

    /// A `ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)` of the select list: a Rank node
    /// over `planned` whose last column is the row number, and the replacement that binds
    /// the call to it. (The rules bound the rank by the query's filter on it.)
    fn ranking(
        &self,
        planned: Planned,
        items: &[SelectItem],
        named: &[ast::NamedWindowDefinition],
    ) -> Result<(Planned, Vec<(String, Expr)>), SqlError> {
        let mut calls = Vec::new();
        for item in items {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                collect_over_calls(e, &mut calls);
            }
        }
        let Some(call) = calls.first() else { return Ok((planned, Vec::new())) };
        let location = span_location(&call.name);
        let name = crate::parser::object_name(&call.name).to_ascii_uppercase();
        if aggregate::is_aggregate(&name) {
            return self.over_aggregate(planned, &calls, named);
        }
        if name == "RANK" || name == "DENSE_RANK" {
            // As Flink words it: its streaming top-N ranks by ROW_NUMBER only.
            return Err(SqlError::unsupported(location, format!("{name}() on streaming table (ROW_NUMBER() is)")));
        }
        if name != "ROW_NUMBER" {
            return Err(SqlError::unsupported(location, format!("{name}() OVER")));
        }
        if calls.iter().any(|c| c.to_string() != call.to_string()) {
            return Err(SqlError::unsupported(location, "two different OVER calls in one select list"));
        }
        let spec = match window_spec(call, named)? {
            spec if spec.window_frame.is_none() => spec,
            _ => return Err(SqlError::unsupported(location, format!("the window of '{call}'"))),
        };
        let binder = self.binder(&planned.scope);
        let column = |e: &ast::Expr| -> Result<usize, SqlError> {
            binder.bind(e)?.as_column().ok_or_else(|| {
                SqlError::unsupported(location_of(e), format!("'{e}' in an OVER window (a column is supported)"))
            })
        };
        let partition_keys: Vec<usize> = spec.partition_by.iter().map(&column).collect::<Result<_, _>>()?;
        let mut order = Vec::new();
        for o in &spec.order_by {
            let ascending = !matches!(o.options.sort, Some(ast::OrderBySort::Desc));
            order.push(SortKey {
                column: column(&o.expr)?,
                ascending,
                nulls_first: o.options.nulls_first.unwrap_or(ascending),
            });
        }
        if order.is_empty() {
            return Err(SqlError::validation(location, "ROW_NUMBER() OVER needs an ORDER BY"));
        }
        let mut fields = planned.plan.fields.clone();
        let rank_ty = DataType::not_null(crate::types::TypeKind::BigInt);
        fields.push(Field::new("$rank", rank_ty.clone()));
        let rank = fields.len() - 1;
        let node = Node::Rank {
            input: Box::new(planned.plan),
            partition_keys,
            order,
            rank_end: None,
            output_rank: true,
            window: None,
        };
        let mut scope = planned.scope;
        let qualifier = Some(OVER_QUALIFIER.to_string());
        scope.columns.push(ScopeColumn { qualifier, name: "$rank".into(), ty: rank_ty.clone() });
        let replacement = (call.to_string(), Expr::column(rank, rank_ty));
        Ok((Planned { plan: Plan::new(node, fields), scope }, vec![replacement]))
    }

    /// Aggregate calls `f(…) OVER (PARTITION BY … ORDER BY time [frame])` of the select list,
    /// all over one window: an OverAggregate over `planned` and its arguments, and the
    /// replacements that bind each call to its column.
    fn over_aggregate(
        &self,
        planned: Planned,
        calls: &[&ast::Function],
        named: &[ast::NamedWindowDefinition],
    ) -> Result<(Planned, Vec<(String, Expr)>), SqlError> {
        let mut unique: Vec<&ast::Function> = Vec::new();
        for c in calls {
            if !unique.iter().any(|u| u.to_string() == c.to_string()) {
                unique.push(c);
            }
        }
        let calls = unique.as_slice();
        let location = span_location(&calls[0].name);
        let window_of = |c: &ast::Function| window_spec(c, named).cloned();
        let spec = window_of(calls[0])?;
        for c in calls {
            if window_of(c)?.to_string() != spec.to_string() {
                return Err(SqlError::unsupported(location, "OVER aggregates of different windows in one select list"));
            }
        }
        let binder = self.binder(&planned.scope);
        let column = |e: &ast::Expr| -> Result<usize, SqlError> {
            binder.bind(e)?.as_column().ok_or_else(|| {
                SqlError::unsupported(location_of(e), format!("'{e}' in an OVER window (a column is supported)"))
            })
        };
        let partition_keys: Vec<usize> = spec.partition_by.iter().map(&column).collect::<Result<_, _>>()?;
        let (time_column, time) = match spec.order_by.as_slice() {
            [o] if !matches!(o.options.sort, Some(ast::OrderBySort::Desc)) => {
                let c = column(&o.expr)?;
                match planned.plan.fields[c].ty.time_attribute() {
                    Some(t) => (c, t),
                    None => {
                        return Err(SqlError::validation(
                            location,
                            "OVER windows' ordering in stream mode must be defined on a time attribute.",
                        ))
                    }
                }
            }
            _ => {
                return Err(SqlError::validation(
                    location,
                    "OVER windows in stream mode are ordered by one time attribute, ascending",
                ))
            }
        };
        let frame = match &spec.window_frame {
            // With ORDER BY and no frame: every row up to the current one's time.
            None => OverFrame { rows: false, preceding: None },
            Some(f) => {
                if !matches!(f.end_bound, None | Some(ast::WindowFrameBound::CurrentRow)) {
                    return Err(SqlError::unsupported(location, "an OVER window that ends after the current row"));
                }
                let rows = match f.units {
                    ast::WindowFrameUnits::Rows => true,
                    ast::WindowFrameUnits::Range => false,
                    ast::WindowFrameUnits::Groups => return Err(SqlError::unsupported(location, "GROUPS frames")),
                };
                let preceding = match &f.start_bound {
                    ast::WindowFrameBound::Preceding(None) => None,
                    ast::WindowFrameBound::CurrentRow => Some(0),
                    ast::WindowFrameBound::Preceding(Some(e)) if rows => {
                        let bound = self.binder(&Scope::default()).bind(e)?;
                        match bound.kind {
                            ExprKind::Literal(Value::Int(n)) if n >= 0 => Some(n),
                            _ => return Err(SqlError::validation(location, format!("'{e}' must be a row count"))),
                        }
                    }
                    ast::WindowFrameBound::Preceding(Some(e)) => Some(self.duration(e)?),
                    ast::WindowFrameBound::Following(_) => {
                        return Err(SqlError::unsupported(location, "an OVER window that starts after the current row"))
                    }
                };
                OverFrame { rows, preceding }
            }
        };
        // The input and each call's arguments, then the aggregates.
        let width = planned.plan.fields.len();
        let mut pre: Vec<Expr> =
            planned.plan.fields.iter().enumerate().map(|(i, f)| Expr::column(i, f.ty.clone())).collect();
        let mut aggregates = Vec::new();
        for c in calls {
            let plain = ast::Function { over: None, ..(*c).clone() };
            aggregates.push(self.aggregate_call(&plain, &binder, &mut pre)?);
        }
        let mut fields: Vec<Field> = planned.plan.fields.clone();
        fields.extend((width..pre.len()).map(|i| Field::new(format!("$f{i}"), pre[i].ty.clone())));
        let pre_plan =
            Plan::new(Node::Calc { input: Box::new(planned.plan), projection: pre, filter: None }, fields.clone());
        let mut scope = planned.scope;
        for f in &fields[width..] {
            scope.columns.push(ScopeColumn {
                qualifier: Some(OVER_QUALIFIER.into()),
                name: f.name.clone(),
                ty: f.ty.clone(),
            });
        }
        let mut replacements = Vec::new();
        for (c, a) in calls.iter().zip(&aggregates) {
            replacements.push((c.to_string(), Expr::column(fields.len(), a.ty.clone())));
            scope.columns.push(ScopeColumn {
                qualifier: Some(OVER_QUALIFIER.into()),
                name: a.text.clone(),
                ty: a.ty.clone(),
            });
            fields.push(Field::new(format!("w0$o{}", fields.len()), a.ty.clone()));
        }
        let node =
            Node::OverAggregate { input: Box::new(pre_plan), partition_keys, time_column, time, frame, aggregates };
        Ok((Planned { plan: Plan::new(node, fields), scope }, replacements))
    }

    /// The select list over `planned` (its replacements and window columns bind
    /// expressions a grouping computed).
    fn project(
        &self,
        planned: Planned,
        items: &[SelectItem],
        replacements: &[(String, Expr)],
        window_columns: Option<[usize; 3]>,
        grouping: bool,
    ) -> Result<Planned, SqlError> {
        let binder = Binder { scope: &planned.scope, functions: self.catalog, replacements, window_columns };
        let mut projection = Vec::new();
        let mut names = Vec::new();
        for item in items {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    projection.push(binder.bind(e)?);
                    names.push(match e {
                        ast::Expr::Identifier(i) => i.value.clone(),
                        ast::Expr::CompoundIdentifier(parts) => {
                            parts.last().map(|p| p.value.clone()).unwrap_or_default()
                        }
                        _ => format!("EXPR${}", names.len()),
                    });
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    projection.push(binder.bind(expr)?);
                    names.push(alias.value.clone());
                }
                SelectItem::Wildcard(_) => {
                    if grouping {
                        return Err(SqlError::validation(
                            span_location(item),
                            "SELECT * is not allowed in a grouping query",
                        ));
                    }
                    // Every column the FROM clause gives (not a row number computed for
                    // the select list).
                    for (i, c) in planned.scope.columns.iter().enumerate() {
                        if c.qualifier.as_deref() == Some(OVER_QUALIFIER) {
                            continue;
                        }
                        projection.push(Expr::column(i, c.ty.clone()));
                        names.push(c.name.clone());
                    }
                }
                SelectItem::QualifiedWildcard(kind, _) => {
                    let qualifier = match kind {
                        ast::SelectItemQualifiedWildcardKind::ObjectName(n) => crate::parser::object_name(n),
                        ast::SelectItemQualifiedWildcardKind::Expr(e) => e.to_string(),
                    };
                    let before = projection.len();
                    for (i, c) in planned.scope.columns.iter().enumerate() {
                        if c.qualifier.as_deref() == Some(qualifier.as_str()) {
                            projection.push(Expr::column(i, c.ty.clone()));
                            names.push(c.name.clone());
                        }
                    }
                    if projection.len() == before {
                        return Err(SqlError::validation(
                            span_location(item),
                            format!("Unknown identifier '{qualifier}'"),
                        ));
                    }
                }
                other => return Err(SqlError::unsupported(span_location(other), format!("the select item '{other}'"))),
            }
        }
        let fields: Vec<Field> =
            projection.iter().zip(&names).map(|(e, n)| Field::new(n.clone(), e.ty.clone())).collect();
        let scope = Scope::qualified(None, &fields);
        let plan = Plan::new(Node::Calc { input: Box::new(planned.plan), projection, filter: None }, fields);
        Ok(Planned { plan, scope })
    }

    fn table_with_joins(&mut self, item: &ast::TableWithJoins) -> Result<Planned, SqlError> {
        let mut planned = self.table_factor(&item.relation)?;
        for j in &item.joins {
            let location = span_location(&j.relation);
            if let TableFactor::Table { version: Some(version), name, alias, .. } = &j.relation {
                planned = self.lookup_join(planned, j, version, name, alias.as_ref())?;
                continue;
            }
            let right = self.table_factor(&j.relation)?;
            let (constraint, join_type) = match &j.join_operator {
                ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) | ast::JoinOperator::CrossJoin(c) => {
                    (c, JoinType::Inner)
                }
                ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (c, JoinType::Left),
                ast::JoinOperator::Right(c) | ast::JoinOperator::RightOuter(c) => (c, JoinType::Right),
                ast::JoinOperator::FullOuter(c) => (c, JoinType::Full),
                other => return Err(SqlError::unsupported(location, format!("the join {other:?}"))),
            };
            if join_type != JoinType::Inner && matches!(constraint, ast::JoinConstraint::None) {
                return Err(SqlError::validation(location, "an outer join needs ON"));
            }
            let joined = join(planned, right, join_type);
            let condition = match constraint {
                ast::JoinConstraint::On(e) => Some(self.binder(&joined.scope).boolean(e)?),
                ast::JoinConstraint::None | ast::JoinConstraint::Natural => None,
                ast::JoinConstraint::Using(_) | ast::JoinConstraint::UsingAlias(..) => {
                    return Err(SqlError::unsupported(location, "JOIN … USING"))
                }
            };
            planned = match condition {
                Some(c) => with_join_condition(joined, c),
                None => joined,
            };
        }
        Ok(planned)
    }

    /// `JOIN t FOR SYSTEM_TIME AS OF l.proctime [AS a] ON l.e = a.k …`: a lookup join of
    /// `left` against the table `t`, whose equalities of a left expression and a column of
    /// `t` are the lookup keys.
    fn lookup_join(
        &mut self,
        left: Planned,
        join: &ast::Join,
        version: &ast::TableVersion,
        name: &ast::ObjectName,
        alias: Option<&ast::TableAlias>,
    ) -> Result<Planned, SqlError> {
        let location = span_location(&join.relation);
        let ast::TableVersion::ForSystemTimeAsOf(time) = version else {
            return Err(SqlError::unsupported(location, format!("the table version '{version}'")));
        };
        let (constraint, left_outer) = match &join.join_operator {
            ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) => (c, false),
            ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (c, true),
            other => {
                return Err(SqlError::validation(
                    location,
                    format!("a temporal table join is an inner or left join, not {other:?}"),
                ))
            }
        };
        let time = self.binder(&left.scope).bind(time)?;
        let mut versioned = None;
        match time.ty.time_attribute() {
            Some(crate::types::TimeAttribute::Proctime) if time.as_column().is_some() => {}
            Some(crate::types::TimeAttribute::Rowtime) if time.as_column().is_some() => {
                versioned = time.as_column();
            }
            _ => return Err(SqlError::validation(
                location,
                "Temporal table join currently only supports 'FOR SYSTEM_TIME AS OF' left table's time attribute field",
            )),
        }
        let table_name = crate::parser::object_name(name);
        let table = match self.catalog.relation(&table_name) {
            Some(Relation::Table(t)) if versioned.is_some() => {
                if t.primary_key.is_empty() {
                    return Err(SqlError::validation(
                        location,
                        "Temporal Table Join requires primary key in versioned table, but no primary key can be found.",
                    ));
                }
                if t.fields.iter().all(|f| f.ty.time_attribute() != Some(crate::types::TimeAttribute::Rowtime)) {
                    return Err(SqlError::validation(
                        location,
                        format!("Event-Time Temporal Table Join requires both primary key and row time attribute in versioned table, but no row time attribute can be found in '{table_name}'."),
                    ));
                }
                t
            }
            Some(Relation::Table(t)) if t.data_stream.is_none() => t,
            _ => {
                return Err(SqlError::validation(
                    location,
                    format!("'{table_name}' is not a table whose source answers lookups"),
                ))
            }
        };
        if versioned.is_none() {
            crate::connector::check_lookup(&table)?;
        }
        let qualifier = alias.map(|a| a.name.value.clone()).unwrap_or_else(|| {
            name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.clone()).unwrap_or(table_name.clone())
        });
        let right_scope = crate::catalog::scope_of(&qualifier, &table.fields);
        let width = left.plan.fields.len();
        let mut scope = left.scope.clone();
        scope.columns.extend(right_scope.columns);
        let condition = match constraint {
            ast::JoinConstraint::On(e) => self.binder(&scope).boolean(e)?,
            _ => return Err(SqlError::validation(location, "a temporal table join needs ON with an equality")),
        };
        let mut all = Vec::new();
        crate::plan::rules::conjuncts(condition, &mut all);
        let (mut key_expressions, mut keys, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        for c in all {
            if let ExprKind::Compare(crate::expr::CompareOp::Eq, a, b) = &c.kind {
                let right_column = |e: &Expr| e.as_column().filter(|i| *i >= width).map(|i| i - width);
                let left_only = |e: &Expr| !e.columns().is_empty() && e.columns().iter().all(|i| *i < width);
                if let (true, Some(k)) = (left_only(a), right_column(b)) {
                    key_expressions.push((**a).clone());
                    keys.push(k);
                    continue;
                }
                if let (Some(k), true) = (right_column(a), left_only(b)) {
                    key_expressions.push((**b).clone());
                    keys.push(k);
                    continue;
                }
            }
            rest.push(c);
        }
        if keys.is_empty() {
            return Err(SqlError::validation(
                location,
                "Temporal table join requires an equality condition on fields of table ".to_string() + &table_name,
            ));
        }
        let mut fields = left.plan.fields.clone();
        fields.extend(table.fields.iter().map(|f| {
            let ty = if left_outer { f.ty.clone().with_nullable(true) } else { f.ty.clone() };
            Field::new(f.name.clone(), ty)
        }));
        let condition = crate::plan::rules::and_of(rest);
        let node = match versioned {
            Some(left_time) => {
                let right = self.relation(&table_name, location)?.plan;
                let right_time = right.rowtime().expect("checked: the versioned table has a rowtime");
                // The output keeps the left side's time attribute only.
                for f in fields.iter_mut().skip(width) {
                    f.ty = f.ty.clone().without_time_attribute();
                }
                for c in scope.columns.iter_mut().skip(width) {
                    c.ty = c.ty.clone().without_time_attribute();
                }
                Node::TemporalJoin {
                    left: Box::new(left.plan),
                    right: Box::new(right),
                    key_expressions,
                    keys,
                    left_time,
                    right_time,
                    condition,
                    left_outer,
                }
            }
            None => {
                Node::LookupJoin { input: Box::new(left.plan), table, key_expressions, keys, condition, left_outer }
            }
        };
        Ok(Planned { plan: Plan::new(node, fields), scope })
    }

    fn table_factor(&mut self, factor: &TableFactor) -> Result<Planned, SqlError> {
        let location = span_location(factor);
        match factor {
            TableFactor::Table { name, alias, args: None, version: None, .. } => {
                let name_text = crate::parser::object_name(name);
                let planned = self.relation(&name_text, span_location(name))?;
                let qualifier = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_else(|| {
                    name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.clone()).unwrap_or(name_text.clone())
                });
                rename(planned, Some(&qualifier), alias.as_ref().map(|a| a.columns.as_slice()).unwrap_or(&[]), location)
            }
            TableFactor::Table { version: Some(_), .. } => {
                Err(SqlError::unsupported(location, "FOR SYSTEM_TIME AS OF (a temporal or lookup join)"))
            }
            TableFactor::Derived { subquery, alias, .. } => {
                let planned = self.query(subquery)?;
                match alias {
                    Some(a) => rename(planned, Some(&a.name.value), &a.columns, location),
                    None => Ok(planned),
                }
            }
            TableFactor::TableFunction { expr, alias } => {
                let planned = self.window_table_function(expr, location)?;
                match alias {
                    Some(a) => rename(planned, Some(&a.name.value), &a.columns, location),
                    None => Ok(planned),
                }
            }
            TableFactor::NestedJoin { table_with_joins, alias } => {
                let planned = self.table_with_joins(table_with_joins)?;
                match alias {
                    Some(a) => rename(planned, Some(&a.name.value), &a.columns, location),
                    None => Ok(planned),
                }
            }
            other => Err(SqlError::unsupported(location, format!("the FROM item '{other}'"))),
        }
    }

    /// A table, view or `WITH` query by name.
    fn relation(&mut self, name: &str, location: Option<Location>) -> Result<Planned, SqlError> {
        if let Some(planned) = self.ctes.get(name) {
            return Ok(planned.clone());
        }
        match self.catalog.relation(name) {
            Some(Relation::Table(table)) => {
                let fields = table.fields.clone();
                let scope = Scope::qualified(None, &fields);
                let node = match table.data_stream {
                    Some(index) => Node::DataStream { index },
                    None => {
                        crate::connector::check_source(&table)?;
                        Node::Scan { table }
                    }
                };
                Ok(Planned { plan: Plan::new(node, fields), scope })
            }
            Some(Relation::View(view)) => {
                if self.expanding.contains(&view.name) {
                    return Err(SqlError::validation(
                        location,
                        format!("View '{}' is defined in terms of itself", view.name),
                    ));
                }
                self.expanding.push(view.name.clone());
                let saved = std::mem::take(&mut self.ctes);
                let planned = self.query(&view.query);
                self.ctes = saved;
                self.expanding.pop();
                let planned = planned?;
                let columns: Vec<ast::TableAliasColumnDef> = view
                    .columns
                    .iter()
                    .map(|c| ast::TableAliasColumnDef { name: ast::Ident::new(c), data_type: None })
                    .collect();
                rename(planned, None, &columns, location)
            }
            None => Err(SqlError::validation(location, format!("Object '{name}' not found"))),
        }
    }

    /// `TUMBLE(TABLE t, DESCRIPTOR(c), size [, offset])`, `HOP(TABLE t, DESCRIPTOR(c),
    /// slide, size [, offset])`, `CUMULATE(TABLE t, DESCRIPTOR(c), step, size [, offset])`,
    /// `SESSION(TABLE t, DESCRIPTOR(c), gap)`.
    fn window_table_function(&mut self, expr: &ast::Expr, location: Option<Location>) -> Result<Planned, SqlError> {
        let ast::Expr::Function(function) = expr else {
            return Err(SqlError::unsupported(location, format!("the table function '{expr}'")));
        };
        let name = crate::parser::object_name(&function.name).to_ascii_uppercase();
        let args: Vec<&ast::Expr> = match &function.args {
            FunctionArguments::List(list) => list
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                    other => Err(SqlError::unsupported(location, format!("the argument '{other}' (named arguments)"))),
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let table = match args.first() {
            Some(ast::Expr::CompoundIdentifier(parts)) if parts[0].value == TABLE_ARGUMENT => {
                parts[1..].iter().map(|p| p.value.clone()).collect::<Vec<_>>().join(".")
            }
            _ => {
                return Err(SqlError::validation(
                    location,
                    format!("the first argument of {name} must be TABLE <name>"),
                ));
            }
        };
        let input = match self.ctes.get(&table) {
            Some(p) => p.clone(),
            None => {
                let planned = self.relation(&table, location)?;
                let q = table.rsplit('.').next().unwrap_or(&table).to_string();
                rename(planned, Some(&q), &[], location)?
            }
        };
        let time_column = match args.get(1) {
            Some(ast::Expr::Function(d)) if crate::parser::object_name(&d.name).eq_ignore_ascii_case("DESCRIPTOR") => {
                let column = match &d.args {
                    FunctionArguments::List(l) => match l.args.as_slice() {
                        [FunctionArg::Unnamed(FunctionArgExpr::Expr(e))] => e.clone(),
                        _ => return Err(SqlError::validation(location, "DESCRIPTOR takes one column")),
                    },
                    _ => return Err(SqlError::validation(location, "DESCRIPTOR takes one column")),
                };
                let bound = self.binder(&input.scope).bind(&column)?;
                bound.as_column().ok_or_else(|| SqlError::validation(location, "DESCRIPTOR names a column"))?
            }
            _ => {
                return Err(SqlError::validation(
                    location,
                    format!("the second argument of {name} must be DESCRIPTOR(<time attribute>)"),
                ))
            }
        };
        let time = input.plan.fields[time_column].ty.time_attribute().ok_or_else(|| {
            SqlError::validation(
                location,
                format!(
                    "The window function requires the timecol is a time attribute type, but is {}",
                    input.plan.fields[time_column].ty
                ),
            )
        })?;
        let durations: Vec<i64> = args[2..].iter().map(|e| self.duration(e)).collect::<Result<_, _>>()?;
        let kind = match (name.as_str(), durations.as_slice()) {
            ("TUMBLE", [size]) => WindowKind::Tumble { size: *size, offset: 0 },
            ("TUMBLE", [size, offset]) => WindowKind::Tumble { size: *size, offset: *offset },
            ("HOP", [slide, size]) => WindowKind::Hop { slide: *slide, size: *size, offset: 0 },
            ("HOP", [slide, size, offset]) => WindowKind::Hop { slide: *slide, size: *size, offset: *offset },
            ("CUMULATE", [step, size]) => WindowKind::Cumulate { step: *step, size: *size, offset: 0 },
            ("CUMULATE", [step, size, offset]) => WindowKind::Cumulate { step: *step, size: *size, offset: *offset },
            ("SESSION", [gap]) => WindowKind::Session { gap: *gap },
            ("TUMBLE" | "HOP" | "CUMULATE" | "SESSION", _) => {
                return Err(SqlError::validation(
                    location,
                    format!("wrong number of arguments to the window function {name}"),
                ));
            }
            _ => return Err(SqlError::unsupported(location, format!("the table function {name}"))),
        };
        check_window(&kind, location)?;
        let window = WindowSpec { kind, time_column, time };
        let mut fields = input.plan.fields.clone();
        fields.extend(window_fields(time));
        let mut scope = input.scope.clone();
        let qualifier = scope.columns.first().and_then(|c| c.qualifier.clone());
        for f in window_fields(time) {
            scope.columns.push(ScopeColumn { qualifier: qualifier.clone(), name: f.name, ty: f.ty });
        }
        let plan = Plan::new(Node::WindowTableFunction { input: Box::new(input.plan), window }, fields);
        Ok(Planned { plan, scope })
    }

    /// A constant interval in milliseconds.
    fn duration(&self, e: &ast::Expr) -> Result<i64, SqlError> {
        let empty = Scope::default();
        let bound = self.binder(&empty).bind(e)?;
        match (&bound.kind, &bound.ty.kind) {
            (ExprKind::Literal(Value::Interval(ms)), _) => Ok(*ms),
            _ => Err(SqlError::validation(
                location_of(e),
                format!("'{e}' must be an INTERVAL literal (INTERVAL '10' SECOND)"),
            )),
        }
    }

    fn aggregate(
        &mut self,
        planned: Planned,
        group_by: &[ast::Expr],
        calls: &[&ast::Function],
        select: &ast::Select,
        location: Option<Location>,
    ) -> Result<Planned, SqlError> {
        // Which window: a legacy group window call in GROUP BY, or the window columns of a
        // window table function.
        let mut window: Option<WindowSpec> = None;
        let mut legacy = false;
        let mut keys: Vec<&ast::Expr> = Vec::new();
        for e in group_by {
            if let ast::Expr::Function(f) = e {
                let name = crate::parser::object_name(&f.name).to_ascii_uppercase();
                if matches!(name.as_str(), "TUMBLE" | "HOP" | "SESSION" | "CUMULATE") {
                    if window.is_some() {
                        return Err(SqlError::validation(location_of(e), "a GROUP BY has one group window"));
                    }
                    window = Some(self.group_window(&planned, &name, f, location_of(e))?);
                    legacy = true;
                    continue;
                }
            }
            keys.push(e);
        }
        let (input, tvf_window) = if legacy {
            (planned.clone(), None)
        } else {
            match strip_window_table_function(&planned.plan) {
                Some((input, spec)) => {
                    let scope = Scope::new(planned.scope.columns[..input.fields.len()].to_vec());
                    (Planned { plan: input, scope }, Some(spec))
                }
                None => (planned.clone(), None),
            }
        };
        // With a TVF, GROUP BY names window_start and window_end; they become the window.
        let mut window_keys: Vec<(String, usize)> = Vec::new();
        if let Some(spec) = tvf_window {
            let width = input.plan.fields.len();
            let binder = self.binder(&planned.scope);
            let mut plain = Vec::new();
            for e in keys {
                let bound = binder.bind(e)?;
                match bound.as_column() {
                    Some(c) if c >= width => window_keys.push((e.to_string(), c - width)),
                    _ => plain.push(e),
                }
            }
            let named: Vec<usize> = window_keys.iter().map(|(_, i)| *i).collect();
            if !(named.contains(&0) && named.contains(&1)) {
                return Err(SqlError::validation(
                    location,
                    "a window aggregation groups by both window_start and window_end of the window table function",
                ));
            }
            keys = plain;
            window = Some(spec);
        }
        // Grouping by the window columns of a windowed input (a window aggregation over
        // another's result): the rows' own windows.
        let mut attached: Option<(usize, usize)> = None;
        if window.is_none() {
            if let Some(w) = planned.plan.window {
                let binder = self.binder(&planned.scope);
                let mut plain = Vec::new();
                let (mut start, mut end) = (None, None);
                for e in keys.iter().copied() {
                    match binder.bind(e)?.as_column() {
                        Some(c) if c == w.start => {
                            start = Some(c);
                            window_keys.push((e.to_string(), 0));
                        }
                        Some(c) if c == w.end => {
                            end = Some(c);
                            window_keys.push((e.to_string(), 1));
                        }
                        _ => plain.push(e),
                    }
                }
                if let (Some(s), Some(e)) = (start, end) {
                    keys = plain;
                    attached = Some((s, e));
                    window = Some(WindowSpec { kind: WindowKind::Attached, time_column: s, time: w.time });
                } else {
                    window_keys.clear();
                }
            }
        }
        let binder = self.binder(&input.scope);
        // The pre-projection: keys, aggregate arguments, FILTER conditions, time column.
        let mut pre: Vec<Expr> = Vec::new();
        let mut key_columns = Vec::new();
        let mut key_scope = Vec::new();
        for e in &keys {
            let bound = binder.bind(e)?;
            let column = bound.as_column();
            key_scope.push(match column {
                Some(c) => input.scope.columns[c].clone(),
                None => {
                    ScopeColumn { qualifier: None, name: format!("$key{}", key_columns.len()), ty: bound.ty.clone() }
                }
            });
            key_columns.push(pre.len());
            pre.push(bound);
        }
        let mut aggregates = Vec::new();
        for call in calls {
            aggregates.push(self.aggregate_call(call, &binder, &mut pre)?);
        }
        let mut fields: Vec<Field> =
            key_scope.iter().map(|c| Field::new(c.name.clone(), c.ty.clone().without_time_attribute())).collect();
        for (i, a) in aggregates.iter().enumerate() {
            fields.push(Field::new(format!("$agg{i}"), a.ty.clone()));
        }
        let mut scope_columns: Vec<ScopeColumn> =
            key_scope.into_iter().map(|c| ScopeColumn { ty: c.ty.without_time_attribute(), ..c }).collect();
        for (i, a) in aggregates.iter().enumerate() {
            scope_columns.push(ScopeColumn { qualifier: None, name: format!("$agg{i}"), ty: a.ty.clone() });
        }
        let window_start = fields.len();
        let plan = match window {
            Some(window) => {
                let time_column = pre.len();
                pre.push(Expr::column(window.time_column, input.plan.fields[window.time_column].ty.clone()));
                if let Some((_, end)) = attached {
                    pre.push(Expr::column(end, input.plan.fields[end].ty.clone()));
                }
                let spec = WindowSpec { time_column, ..window };
                // The output: keys, aggregates, window_start, window_end, window_time.
                fields.extend(window_fields(spec.time));
                let window_qualifier = planned.scope.columns.last().and_then(|c| c.qualifier.clone());
                for f in window_fields(spec.time) {
                    let qualifier = if legacy { Some("$window".to_string()) } else { window_qualifier.clone() };
                    scope_columns.push(ScopeColumn { qualifier, name: f.name, ty: f.ty });
                }
                let pre_plan = pre_projection(input.plan, pre);
                let node =
                    Node::WindowAggregate { input: Box::new(pre_plan), window: spec, keys: key_columns, aggregates };
                Plan::new(node, fields.clone())
            }
            None => {
                // The output: keys, aggregates.
                let pre_plan = pre_projection(input.plan, pre);
                Plan::new(
                    Node::GroupAggregate { input: Box::new(pre_plan), keys: key_columns, aggregates },
                    fields.clone(),
                )
            }
        };
        let mut replacements: Vec<(String, Expr)> = Vec::new();
        for (i, e) in keys.iter().enumerate() {
            replacements.push((e.to_string(), Expr::column(i, fields[i].ty.clone())));
        }
        for (i, call) in calls.iter().enumerate() {
            let index = keys.len() + i;
            replacements.push((call.to_string(), Expr::column(index, fields[index].ty.clone())));
        }
        for (text, which) in &window_keys {
            replacements
                .push((text.clone(), Expr::column(window_start + which, fields[window_start + which].ty.clone())));
        }
        let window_columns = legacy.then_some([window_start, window_start + 1, window_start + 2]);
        let mut planned = Planned { plan, scope: Scope::new(scope_columns) };
        if let Some(having) = &select.having {
            let binder =
                Binder { scope: &planned.scope, functions: self.catalog, replacements: &replacements, window_columns };
            let filter = binder.boolean(having)?;
            planned = filter_of(planned, filter);
        }
        self.project(planned, &select.projection, &replacements, window_columns, true)
    }

    /// `COUNT(*)`, `SUM(DISTINCT x) FILTER (WHERE c)` …: its arguments appended to the
    /// pre-projection.
    fn aggregate_call(
        &self,
        call: &ast::Function,
        binder: &Binder<'_>,
        pre: &mut Vec<Expr>,
    ) -> Result<AggregateCall, SqlError> {
        let location = span_location(&call.name);
        let name = crate::parser::object_name(&call.name).to_ascii_uppercase();
        let (args, distinct, star) = match &call.args {
            FunctionArguments::List(list) => {
                let distinct = matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
                let star = matches!(list.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)]);
                let args: Vec<&ast::Expr> = list
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                        _ => None,
                    })
                    .collect();
                (args, distinct, star)
            }
            _ => (Vec::new(), false, false),
        };
        let kind = aggregate::kind_of(&name, star || (name == "COUNT" && args.is_empty()))
            .ok_or_else(|| SqlError::unsupported(location, format!("the aggregate function {name}")))?;
        if call.over.is_some() {
            return Err(SqlError::unsupported(location, "an OVER aggregation (OverAggregate)"));
        }
        let (argument, argument_type) = match args.as_slice() {
            [] => (None, None),
            [a] => {
                let bound = binder.bind(a)?;
                let ty = bound.ty.clone();
                pre.push(bound);
                (Some(pre.len() - 1), Some(ty))
            }
            _ => return Err(SqlError::validation(location, format!("{name} takes one argument"))),
        };
        let ty = aggregate::result_type(kind, argument_type.as_ref()).map_err(|m| SqlError::validation(location, m))?;
        let filter = match &call.filter {
            Some(f) => {
                pre.push(binder.boolean(f)?);
                Some(pre.len() - 1)
            }
            None => None,
        };
        let kind =
            if kind == aggregate::AggregateKind::Count && star { aggregate::AggregateKind::CountStar } else { kind };
        Ok(AggregateCall { kind, argument, distinct, filter, argument_type, ty, text: call.to_string() })
    }

    /// `TUMBLE(ts, size)`, `HOP(ts, slide, size)`, `SESSION(ts, gap)` in GROUP BY.
    fn group_window(
        &self,
        planned: &Planned,
        name: &str,
        f: &ast::Function,
        location: Option<Location>,
    ) -> Result<WindowSpec, SqlError> {
        let args: Vec<&ast::Expr> = match &f.args {
            FunctionArguments::List(list) => list
                .args
                .iter()
                .filter_map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let Some(time) = args.first() else {
            return Err(SqlError::validation(location, format!("{name} needs a time attribute")));
        };
        let column = self.binder(&planned.scope).bind(time)?;
        let time_column = column
            .as_column()
            .ok_or_else(|| SqlError::validation(location, format!("{name} needs a time attribute column")))?;
        let attribute = column.ty.time_attribute().ok_or_else(|| {
            SqlError::validation(
                location,
                format!("Window can only be defined over a time attribute column, but {} is {}", time, column.ty),
            )
        })?;
        let durations: Vec<i64> = args[1..].iter().map(|e| self.duration(e)).collect::<Result<_, _>>()?;
        let kind = match (name, durations.as_slice()) {
            ("TUMBLE", [size]) => WindowKind::Tumble { size: *size, offset: 0 },
            ("TUMBLE", [size, offset]) => WindowKind::Tumble { size: *size, offset: *offset },
            ("HOP", [slide, size]) => WindowKind::Hop { slide: *slide, size: *size, offset: 0 },
            ("SESSION", [gap]) => WindowKind::Session { gap: *gap },
            _ => return Err(SqlError::validation(location, format!("wrong arguments to the group window {name}"))),
        };
        check_window(&kind, location)?;
        Ok(WindowSpec { kind, time_column, time: attribute })
    }
}

fn check_window(kind: &WindowKind, location: Option<Location>) -> Result<(), SqlError> {
    let bad = |m: &str| Err(SqlError::validation(location, m.to_string()));
    match kind {
        WindowKind::Tumble { size, .. } if *size <= 0 => bad("a TUMBLE window's size must be positive"),
        WindowKind::Hop { slide, size, .. } if *slide <= 0 || *size <= 0 => {
            bad("a HOP window's slide and size must be positive")
        }
        WindowKind::Hop { slide, size, .. } if size % slide != 0 => {
            bad("a HOP window's size must be an integral multiple of its slide")
        }
        WindowKind::Cumulate { step, size, .. } if *step <= 0 || *size <= 0 || size % step != 0 => {
            bad("a CUMULATE window's max size must be an integral multiple of its step")
        }
        WindowKind::Session { gap } if *gap <= 0 => bad("a SESSION window's gap must be positive"),
        _ => Ok(()),
    }
}

/// The plan under a window table function (through filters that do not read the window
/// columns) and its window.
fn strip_window_table_function(plan: &Plan) -> Option<(Plan, WindowSpec)> {
    match &plan.node {
        Node::WindowTableFunction { input, window } => Some(((**input).clone(), window.clone())),
        Node::Calc { input, projection, filter } if is_identity(projection, input.fields.len()) => {
            let (below, window) = strip_window_table_function(input)?;
            let width = below.fields.len();
            let filter = filter.clone()?;
            if filter.columns().iter().any(|c| *c >= width) {
                return None;
            }
            let fields = below.fields.clone();
            Some((
                Plan::new(
                    Node::Calc { input: Box::new(below), projection: identity(&fields), filter: Some(filter) },
                    fields,
                ),
                window,
            ))
        }
        _ => None,
    }
}

pub fn identity(fields: &[Field]) -> Vec<Expr> {
    fields.iter().enumerate().map(|(i, f)| Expr::column(i, f.ty.clone())).collect()
}

pub fn is_identity(projection: &[Expr], width: usize) -> bool {
    projection.len() == width && projection.iter().enumerate().all(|(i, e)| e.as_column() == Some(i))
}

/// `planned` filtered by `filter`.
fn filter_of(planned: Planned, filter: Expr) -> Planned {
    let fields = planned.plan.fields.clone();
    let projection = identity(&fields);
    Planned {
        plan: Plan::new(Node::Calc { input: Box::new(planned.plan), projection, filter: Some(filter) }, fields),
        scope: planned.scope,
    }
}

/// The inner join of two inputs (its condition added by the caller or pushed down from
/// WHERE by the rules).
fn join(left: Planned, right: Planned, join_type: JoinType) -> Planned {
    // A regular join's output has no time attributes (Flink materializes them); the rules
    // keep them where an interval or window join knows its time. A side whose rows the
    // join may pad is nullable.
    let width = left.plan.fields.len();
    let output_type = |i: usize, ty: &DataType| {
        let padded = if i < width { join_type.keeps_right() } else { join_type.keeps_left() };
        let ty = ty.clone().without_time_attribute();
        if padded {
            ty.with_nullable(true)
        } else {
            ty
        }
    };
    let fields: Vec<Field> = left
        .plan
        .fields
        .iter()
        .chain(&right.plan.fields)
        .enumerate()
        .map(|(i, f)| Field::new(f.name.clone(), output_type(i, &f.ty)))
        .collect();
    let scope = left.scope.join(&right.scope);
    let columns =
        scope.columns.into_iter().enumerate().map(|(i, c)| ScopeColumn { ty: output_type(i, &c.ty), ..c }).collect();
    let node = Node::Join {
        join_type,
        left: Box::new(left.plan),
        right: Box::new(right.plan),
        left_keys: Vec::new(),
        right_keys: Vec::new(),
        condition: None,
        strategy: JoinStrategy::Regular,
    };
    Planned { plan: Plan::new(node, fields), scope: Scope::new(columns) }
}

fn with_join_condition(mut joined: Planned, condition: Expr) -> Planned {
    if let Node::Join { condition: c, .. } = &mut joined.plan.node {
        *c = Some(condition);
    }
    joined
}

fn union(left: Planned, right: Planned, location: Option<Location>) -> Result<Planned, SqlError> {
    if left.plan.fields.len() != right.plan.fields.len() {
        return Err(SqlError::validation(location, "Column count mismatch in UNION ALL"));
    }
    let mut fields = Vec::new();
    for (l, r) in left.plan.fields.iter().zip(&right.plan.fields) {
        let ty = crate::expr::bind::common_type(&[&l.ty, &r.ty]).ok_or_else(|| {
            SqlError::validation(
                location,
                format!("Type mismatch in column '{}' of UNION ALL: {} and {}", l.name, l.ty, r.ty),
            )
        })?;
        fields.push(Field::new(l.name.clone(), ty));
    }
    let cast_to = |p: Plan| -> Plan {
        let projection: Vec<Expr> = p
            .fields
            .iter()
            .enumerate()
            .zip(&fields)
            .map(|((i, f), target)| crate::expr::bind::coerce(Expr::column(i, f.ty.clone()), &target.ty))
            .collect();
        Plan::new(Node::Calc { input: Box::new(p), projection, filter: None }, fields.clone())
    };
    let inputs = vec![cast_to(left.plan), cast_to(right.plan)];
    let scope = Scope::qualified(None, &fields);
    Ok(Planned { plan: Plan::new(Node::Union { inputs }, fields), scope })
}

/// The planned query's columns under a new qualifier and, if given, new names.
fn rename(
    planned: Planned,
    qualifier: Option<&str>,
    columns: &[ast::TableAliasColumnDef],
    location: Option<Location>,
) -> Result<Planned, SqlError> {
    if !columns.is_empty() && columns.len() != planned.scope.columns.len() {
        return Err(SqlError::validation(
            location,
            format!(
                "List of column aliases must have same degree as table; the table has {} columns",
                planned.scope.columns.len()
            ),
        ));
    }
    let mut scope = planned.scope;
    for (i, c) in scope.columns.iter_mut().enumerate() {
        if let Some(q) = qualifier {
            c.qualifier = Some(q.to_string());
        }
        if let Some(alias) = columns.get(i) {
            c.name = alias.name.value.clone();
        }
    }
    let mut plan = planned.plan;
    if !columns.is_empty() {
        for (f, c) in plan.fields.iter_mut().zip(&scope.columns) {
            f.name = c.name.clone();
        }
    }
    Ok(Planned { plan, scope })
}

/// The aggregate calls in an expression (not looking into them).
/// The `f(…) OVER (…)` calls of an expression.
fn collect_over_calls<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Function>) {
    match e {
        ast::Expr::Function(f) if f.over.is_some() => out.push(f),
        ast::Expr::BinaryOp { left, right, .. } => {
            collect_over_calls(left, out);
            collect_over_calls(right, out);
        }
        ast::Expr::UnaryOp { expr, .. } | ast::Expr::Nested(expr) | ast::Expr::Cast { expr, .. } => {
            collect_over_calls(expr, out)
        }
        _ => {}
    }
}

fn collect_aggregates<'e>(e: &'e ast::Expr, out: &mut Vec<&'e ast::Function>) {
    use ast::Expr as A;
    match e {
        A::Function(f) => {
            let name = crate::parser::object_name(&f.name).to_ascii_uppercase();
            if aggregate::is_aggregate(&name) && f.over.is_none() {
                if !out.iter().any(|g| g.to_string() == f.to_string()) {
                    out.push(f);
                }
                return;
            }
            if let FunctionArguments::List(list) = &f.args {
                for a in &list.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                        collect_aggregates(x, out);
                    }
                }
            }
        }
        A::BinaryOp { left, right, .. } => {
            collect_aggregates(left, out);
            collect_aggregates(right, out);
        }
        A::UnaryOp { expr, .. }
        | A::Nested(expr)
        | A::Cast { expr, .. }
        | A::IsNull(expr)
        | A::IsNotNull(expr)
        | A::IsTrue(expr)
        | A::IsFalse(expr)
        | A::IsNotTrue(expr)
        | A::IsNotFalse(expr)
        | A::Extract { expr, .. }
        | A::Floor { expr, .. }
        | A::Ceil { expr, .. } => collect_aggregates(expr, out),
        A::Between { expr, low, high, .. } => {
            collect_aggregates(expr, out);
            collect_aggregates(low, out);
            collect_aggregates(high, out);
        }
        A::In { expr, target: ast::InTarget::List(list), .. } => {
            collect_aggregates(expr, out);
            list.iter().for_each(|x| collect_aggregates(x, out));
        }
        A::Case { operand, conditions, else_result, .. } => {
            if let Some(o) = operand {
                collect_aggregates(o, out);
            }
            for c in conditions {
                collect_aggregates(&c.condition, out);
                collect_aggregates(&c.result, out);
            }
            if let Some(e) = else_result {
                collect_aggregates(e, out);
            }
        }
        _ => {}
    }
}
