//! Name resolution and type checking: sqlparser's expressions against the columns in
//! scope, to typed [`Expr`]s, with Flink's typing rules and its messages in spirit
//! ("Column 'x' not found in any table", "Cannot apply '+' to arguments of type …").

use super::datetime;
use super::functions::{like_regex, Builtin, ScalarFunction, TimeUnit};
use super::{cast, decimal, ArithmeticOp, CompareOp, Expr, ExprKind};
use crate::error::{Location, SqlError};
use crate::types::{decimal_arithmetic, DataType, TimeAttribute, TypeKind};
use crate::value::Value;
use sqlparser::ast::{self, BinaryOperator, FunctionArg, FunctionArgExpr, FunctionArguments, Spanned, UnaryOperator};
use std::sync::Arc;

/// A column in scope: the table (or alias) it belongs to, its name and type.
#[derive(Clone, Debug)]
pub struct ScopeColumn {
    pub qualifier: Option<String>,
    pub name: String,
    pub ty: DataType,
}

/// The columns an expression can name, in the order of the input row.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub columns: Vec<ScopeColumn>,
}

impl Scope {
    pub fn new(columns: Vec<ScopeColumn>) -> Self {
        Self { columns }
    }

    /// Every column under one qualifier (a FROM item's alias).
    pub fn qualified(qualifier: Option<&str>, fields: &[crate::types::Field]) -> Self {
        Self::new(
            fields
                .iter()
                .map(|f| ScopeColumn { qualifier: qualifier.map(String::from), name: f.name.clone(), ty: f.ty.clone() })
                .collect(),
        )
    }

    /// This scope's columns then `other`'s (a join's).
    pub fn join(&self, other: &Scope) -> Scope {
        Scope::new(self.columns.iter().chain(&other.columns).cloned().collect())
    }

    fn has_qualifier(&self, qualifier: &str) -> bool {
        self.columns.iter().any(|c| c.qualifier.as_deref() == Some(qualifier))
    }

    /// The index of column `name` (under `qualifier` if given).
    pub fn resolve(&self, qualifier: Option<&str>, name: &str, location: Option<Location>) -> Result<usize, SqlError> {
        let matches: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name == name && (qualifier.is_none() || c.qualifier.as_deref() == qualifier))
            .map(|(i, _)| i)
            .collect();
        match matches.as_slice() {
            [one] => Ok(*one),
            [] => {
                let full = match qualifier {
                    Some(q) => format!("{q}.{name}"),
                    None => name.to_string(),
                };
                let similar: Vec<&str> = self
                    .columns
                    .iter()
                    .filter(|c| c.name.eq_ignore_ascii_case(name))
                    .map(|c| c.name.as_str())
                    .collect();
                let hint = match similar.first() {
                    Some(s) => format!(" (did you mean '{s}'? identifiers are case-sensitive)"),
                    None => String::new(),
                };
                Err(SqlError::validation(location, format!("Column '{full}' not found in any table{hint}")))
            }
            _ => Err(SqlError::validation(location, format!("Column '{name}' is ambiguous"))),
        }
    }
}

/// Where the binder finds user functions.
pub trait FunctionLookup {
    fn function(&self, name: &str) -> Option<Arc<dyn ScalarFunction>>;
}

/// Binds expressions against a scope. `replacements` stand for sub-expressions already
/// computed by an operator below (a group key, an aggregate's result, a window's start):
/// an expression whose text equals one is that column.
pub struct Binder<'a> {
    pub scope: &'a Scope,
    pub functions: &'a dyn FunctionLookup,
    pub replacements: &'a [(String, Expr)],
    /// The window start, end and time columns of a legacy group window, which
    /// `TUMBLE_START(…)`, `HOP_END(…)`, `SESSION_ROWTIME(…)` and kin read.
    pub window_columns: Option<[usize; 3]>,
}

pub fn location_of(expr: &ast::Expr) -> Option<Location> {
    Location::of_span(expr.span())
}

fn type_error(location: Option<Location>, op: &str, args: &[&DataType], forms: &str) -> SqlError {
    let shown: Vec<String> = args.iter().map(|t| format!("<{}>", (*t).clone().without_time_attribute())).collect();
    let call = if args.len() == 2 && !op.chars().any(char::is_alphabetic) {
        format!("{} {op} {}", shown[0], shown[1])
    } else {
        format!("{op}({})", shown.join(", "))
    };
    SqlError::validation(
        location,
        format!("Cannot apply '{op}' to arguments of type '{call}'. Supported form(s): {forms}"),
    )
}

/// The nullability of a result from its inputs'.
fn nullable_of(args: &[&Expr]) -> bool {
    args.iter().any(|a| a.ty.nullable)
}

impl Binder<'_> {
    pub fn bind(&self, e: &ast::Expr) -> Result<Expr, SqlError> {
        if !self.replacements.is_empty() {
            let text = e.to_string();
            if let Some((_, replacement)) = self.replacements.iter().find(|(t, _)| *t == text) {
                return Ok(replacement.clone());
            }
        }
        let location = location_of(e);
        use ast::Expr as A;
        match e {
            A::Identifier(ident) => {
                let index = self.scope.resolve(None, &ident.value, Location::of_span(ident.span))?;
                Ok(Expr::column(index, self.scope.columns[index].ty.clone()))
            }
            A::CompoundIdentifier(parts) => self.compound(parts, location),
            A::CompoundFieldAccess { root, access_chain } => {
                let mut base = self.bind(root)?;
                for access in access_chain {
                    match access {
                        ast::AccessExpr::Dot(A::Identifier(field)) => {
                            base = field_access(base, &field.value, location)?
                        }
                        other => return Err(SqlError::unsupported(location, format!("the access '{other}'"))),
                    }
                }
                Ok(base)
            }
            A::Nested(inner) => self.bind(inner),
            A::Value(v) => literal(&v.value, location),
            A::TypedString(t) => {
                let target =
                    crate::parser::types_from_ast(&t.data_type).map_err(|m| SqlError::validation(location, m))?;
                let text = match &t.value.value {
                    ast::Value::SingleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                };
                let value = cast::cast(Value::string(&text), &DataType::string(), &target)
                    .map_err(|err| SqlError::validation(location, err.0))?;
                Ok(Expr::literal(value, target.with_nullable(false)))
            }
            A::Interval(interval) => interval_literal(interval, location),
            A::IsNull(x) => {
                Ok(Expr::new(ExprKind::IsNull(Box::new(self.bind(x)?)), DataType::not_null(TypeKind::Boolean)))
            }
            A::IsNotNull(x) => {
                Ok(Expr::new(ExprKind::IsNotNull(Box::new(self.bind(x)?)), DataType::not_null(TypeKind::Boolean)))
            }
            A::IsTrue(x) | A::IsFalse(x) | A::IsNotTrue(x) | A::IsNotFalse(x) => {
                let value = matches!(e, A::IsTrue(_) | A::IsNotTrue(_));
                let negated = matches!(e, A::IsNotTrue(_) | A::IsNotFalse(_));
                let arg = self.boolean(x)?;
                Ok(Expr::new(
                    ExprKind::Call(Builtin::IsBoolean(value, negated), vec![arg]),
                    DataType::not_null(TypeKind::Boolean),
                ))
            }
            A::UnaryOp { op, expr } => {
                let x = self.bind(expr)?;
                match op {
                    UnaryOperator::Not => {
                        let x = self.check_boolean(x, location, "NOT")?;
                        let ty = DataType::new(TypeKind::Boolean).with_nullable(x.ty.nullable);
                        Ok(Expr::new(ExprKind::Not(Box::new(x)), ty))
                    }
                    UnaryOperator::Minus => {
                        if !(x.ty.is_numeric() || x.ty.is_interval()) {
                            return Err(type_error(location, "-", &[&x.ty], "'-<NUMERIC>'"));
                        }
                        // A negative literal stays a literal.
                        if let ExprKind::Literal(v) = &x.kind {
                            let negated = match v {
                                Value::Int(i) => Some(Value::Int(-i)),
                                Value::Float(f) => Some(Value::Float(-f)),
                                Value::Decimal(u, s) => Some(Value::Decimal(-u, *s)),
                                Value::Interval(ms) => Some(Value::Interval(-ms)),
                                _ => None,
                            };
                            if let Some(v) = negated {
                                return Ok(Expr::literal(v, x.ty));
                            }
                        }
                        let ty = x.ty.clone().without_time_attribute();
                        Ok(Expr::new(ExprKind::Negate(Box::new(x)), ty))
                    }
                    UnaryOperator::Plus => Ok(x),
                    other => Err(SqlError::unsupported(location, format!("the operator '{other}'"))),
                }
            }
            A::BinaryOp { left, op, right } => self.binary(left, op, right, location),
            A::Between { expr, negated, low, high } => {
                let x = self.bind(expr)?;
                let lo = self.compare(CompareOp::GtEq, x.clone(), self.bind(low)?, location)?;
                let hi = self.compare(CompareOp::LtEq, x, self.bind(high)?, location)?;
                let nullable = lo.ty.nullable || hi.ty.nullable;
                let both =
                    Expr::new(ExprKind::And(vec![lo, hi]), DataType::new(TypeKind::Boolean).with_nullable(nullable));
                Ok(if *negated { not(both) } else { both })
            }
            A::In { expr, target: ast::InTarget::List(list), negated, .. } => {
                let x = self.bind(expr)?;
                let mut items = Vec::with_capacity(list.len());
                for item in list {
                    let item = self.bind(item)?;
                    let (a, b) = self.comparable(x.clone(), item, "IN", location)?;
                    let _ = a;
                    items.push(b);
                }
                let nullable = x.ty.nullable || items.iter().any(|i| i.ty.nullable);
                let e = Expr::new(
                    ExprKind::In(Box::new(x), items),
                    DataType::new(TypeKind::Boolean).with_nullable(nullable),
                );
                Ok(if *negated { not(e) } else { e })
            }
            A::Like { negated, expr, pattern, escape_char, any: false } => {
                let x = self.bind(expr)?;
                if !x.ty.is_string() {
                    return Err(type_error(location, "LIKE", &[&x.ty], "'<CHARACTER> LIKE <CHARACTER>'"));
                }
                let pattern = match self.bind(pattern)?.kind {
                    ExprKind::Literal(Value::String(s)) => s,
                    _ => return Err(SqlError::unsupported(location, "LIKE with a pattern that is not a literal")),
                };
                let escape = match escape_char.as_deref() {
                    Some(ast::Expr::Value(v)) => match &v.value {
                        ast::Value::SingleQuotedString(s) => s.chars().next(),
                        _ => None,
                    },
                    _ => Some('\\'),
                };
                let regex = like_regex(&pattern, escape).map_err(|m| SqlError::validation(location, m))?;
                let ty = DataType::new(TypeKind::Boolean).with_nullable(x.ty.nullable);
                let e = Expr::new(ExprKind::Call(Builtin::Like(Arc::new(regex)), vec![x]), ty);
                Ok(if *negated { not(e) } else { e })
            }
            A::Case { operand, conditions, else_result, .. } => {
                let operand = operand.as_deref().map(|o| self.bind(o)).transpose()?;
                let mut whens = Vec::with_capacity(conditions.len());
                for when in conditions {
                    let condition = match &operand {
                        Some(o) => self.compare(CompareOp::Eq, o.clone(), self.bind(&when.condition)?, location)?,
                        None => self.boolean(&when.condition)?,
                    };
                    whens.push((condition, self.bind(&when.result)?));
                }
                let otherwise = match else_result {
                    Some(e) => self.bind(e)?,
                    None => Expr::literal(Value::Null, DataType::new(TypeKind::Null)),
                };
                let mut types: Vec<&DataType> = whens.iter().map(|(_, v)| &v.ty).collect();
                types.push(&otherwise.ty);
                let ty = common_type(&types).ok_or_else(|| {
                    let shown: Vec<String> = types.iter().map(|t| t.to_string()).collect();
                    SqlError::validation(
                        location,
                        format!("Illegal mixing of types in CASE or COALESCE statement: {}", shown.join(", ")),
                    )
                })?;
                let whens = whens.into_iter().map(|(c, v)| (c, coerce(v, &ty))).collect();
                Ok(Expr::new(ExprKind::Case(whens, Box::new(coerce(otherwise, &ty))), ty))
            }
            A::Cast { expr, data_type, kind, .. } => {
                let x = self.bind(expr)?;
                let mut target =
                    crate::parser::types_from_ast(data_type).map_err(|m| SqlError::validation(location, m))?;
                target.nullable = x.ty.nullable || matches!(kind, ast::CastKind::TryCast | ast::CastKind::SafeCast);
                if matches!(kind, ast::CastKind::TryCast | ast::CastKind::SafeCast) {
                    return Err(SqlError::unsupported(location, "TRY_CAST"));
                }
                Ok(Expr::new(ExprKind::Cast(Box::new(x)), target))
            }
            A::Extract { field, expr, .. } => {
                let x = self.bind(expr)?;
                let unit =
                    time_unit(field).ok_or_else(|| SqlError::unsupported(location, format!("EXTRACT of {field}")))?;
                if !super::functions::is_temporal(&x.ty) {
                    return Err(type_error(location, "EXTRACT", &[&x.ty], "'EXTRACT(<unit> FROM <DATETIME>)'"));
                }
                let ty = DataType::new(TypeKind::BigInt).with_nullable(x.ty.nullable);
                Ok(Expr::new(ExprKind::Call(Builtin::Extract(unit), vec![x]), ty))
            }
            A::Floor { expr, field } | A::Ceil { expr, field } => {
                let ceil = matches!(e, A::Ceil { .. });
                let x = self.bind(expr)?;
                match field {
                    ast::CeilFloorKind::DateTimeField(f) if !matches!(f, ast::DateTimeField::NoDateTime) => {
                        let unit =
                            time_unit(f).ok_or_else(|| SqlError::unsupported(location, format!("FLOOR to {f}")))?;
                        let ty = x.ty.clone().without_time_attribute();
                        Ok(Expr::new(ExprKind::Call(Builtin::FloorTime(unit, ceil), vec![x]), ty))
                    }
                    _ => self.function_of(if ceil { "CEIL" } else { "FLOOR" }, vec![x], location),
                }
            }
            A::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![self.bind(expr)?];
                args.push(match substring_from {
                    Some(f) => self.bind(f)?,
                    None => Expr::literal(Value::Int(1), DataType::not_null(TypeKind::Int)),
                });
                if let Some(f) = substring_for {
                    args.push(self.bind(f)?);
                }
                self.function_of("SUBSTRING", args, location)
            }
            A::Trim { trim_where, trim_what, expr, trim_characters } => {
                let (leading, trailing) = match trim_where {
                    Some(ast::TrimWhereField::Leading) => (true, false),
                    Some(ast::TrimWhereField::Trailing) => (false, true),
                    _ => (true, true),
                };
                let mut args = vec![self.bind(expr)?];
                if let Some(what) = trim_what {
                    args.push(self.bind(what)?);
                } else if let Some(chars) = trim_characters.as_ref().and_then(|c| c.first()) {
                    args.push(self.bind(chars)?);
                }
                let ty = DataType::string().with_nullable(nullable_of(&args.iter().collect::<Vec<_>>()));
                Ok(Expr::new(ExprKind::Call(Builtin::Trim(leading, trailing), args), ty))
            }
            A::Position { expr, r#in } => {
                let args = vec![self.bind(expr)?, self.bind(r#in)?];
                self.function_of("POSITION", args, location)
            }
            A::Function(function) => self.function(function, location),
            A::Array(array) => {
                let elements: Vec<Expr> = array.elem.iter().map(|x| self.bind(x)).collect::<Result<_, _>>()?;
                let types: Vec<&DataType> = elements.iter().map(|x| &x.ty).collect();
                let element = common_type(&types)
                    .ok_or_else(|| SqlError::validation(location, "ARRAY elements of different types"))?;
                let elements = elements.into_iter().map(|x| coerce(x, &element)).collect();
                Ok(Expr::new(
                    ExprKind::Call(Builtin::Array, elements),
                    DataType::not_null(TypeKind::Array(Box::new(element))),
                ))
            }
            other => Err(SqlError::unsupported(location, format!("the expression '{other}'"))),
        }
    }

    /// A condition: the expression must be BOOLEAN.
    pub fn boolean(&self, e: &ast::Expr) -> Result<Expr, SqlError> {
        let x = self.bind(e)?;
        self.check_boolean(x, location_of(e), "a condition")
    }

    fn check_boolean(&self, x: Expr, location: Option<Location>, what: &str) -> Result<Expr, SqlError> {
        match x.ty.kind {
            TypeKind::Boolean | TypeKind::Null => Ok(x),
            _ => Err(SqlError::validation(location, format!("{what} must be of type BOOLEAN, not {}", x.ty))),
        }
    }

    fn compound(&self, parts: &[ast::Ident], location: Option<Location>) -> Result<Expr, SqlError> {
        let names: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
        if names[0] == crate::parser::dialect::TABLE_ARGUMENT {
            return Err(SqlError::validation(location, "TABLE t is an argument of a window table function only"));
        }
        let (mut expr, rest) = if names.len() >= 2 && self.scope.has_qualifier(names[0]) {
            let index = self.scope.resolve(Some(names[0]), names[1], Location::of_span(parts[1].span))?;
            (Expr::column(index, self.scope.columns[index].ty.clone()), &names[2..])
        } else {
            let index = self.scope.resolve(None, names[0], location).map_err(|err| {
                if names.len() >= 2 {
                    SqlError::validation(location, format!("Column '{}' not found in any table", names.join(".")))
                } else {
                    err
                }
            })?;
            (Expr::column(index, self.scope.columns[index].ty.clone()), &names[1..])
        };
        for field in rest {
            expr = field_access(expr, field, location)?;
        }
        Ok(expr)
    }

    fn binary(
        &self,
        left: &ast::Expr,
        op: &BinaryOperator,
        right: &ast::Expr,
        location: Option<Location>,
    ) -> Result<Expr, SqlError> {
        match op {
            BinaryOperator::And | BinaryOperator::Or => {
                let (a, b) = (self.boolean(left)?, self.boolean(right)?);
                let ty = DataType::new(TypeKind::Boolean).with_nullable(a.ty.nullable || b.ty.nullable);
                // Flattened, so that a filter's conjuncts can be split for pushdown.
                let mut items = Vec::new();
                let and = matches!(op, BinaryOperator::And);
                for x in [a, b] {
                    match x.kind {
                        ExprKind::And(inner) if and => items.extend(inner),
                        ExprKind::Or(inner) if !and => items.extend(inner),
                        kind => items.push(Expr::new(kind, x.ty)),
                    }
                }
                Ok(Expr::new(if and { ExprKind::And(items) } else { ExprKind::Or(items) }, ty))
            }
            BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq => {
                let op = match op {
                    BinaryOperator::Eq => CompareOp::Eq,
                    BinaryOperator::NotEq => CompareOp::NotEq,
                    BinaryOperator::Lt => CompareOp::Lt,
                    BinaryOperator::LtEq => CompareOp::LtEq,
                    BinaryOperator::Gt => CompareOp::Gt,
                    _ => CompareOp::GtEq,
                };
                self.compare(op, self.bind(left)?, self.bind(right)?, location)
            }
            BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo => {
                let op = match op {
                    BinaryOperator::Plus => ArithmeticOp::Add,
                    BinaryOperator::Minus => ArithmeticOp::Subtract,
                    BinaryOperator::Multiply => ArithmeticOp::Multiply,
                    BinaryOperator::Divide => ArithmeticOp::Divide,
                    _ => ArithmeticOp::Modulo,
                };
                arithmetic(op, self.bind(left)?, self.bind(right)?, location)
            }
            BinaryOperator::StringConcat => {
                let args = vec![self.bind(left)?, self.bind(right)?];
                for a in &args {
                    if !a.ty.is_string() && a.ty.kind != TypeKind::Null {
                        return Err(type_error(location, "||", &[&args[0].ty, &args[1].ty], "'<STRING> || <STRING>'"));
                    }
                }
                let ty = DataType::string().with_nullable(nullable_of(&[&args[0], &args[1]]));
                Ok(Expr::new(ExprKind::Call(Builtin::Concat, args), ty))
            }
            other => Err(SqlError::unsupported(location, format!("the operator '{other}'"))),
        }
    }

    /// Both sides of a comparison in one comparable family (a string literal compared with
    /// a date or timestamp is read as one, as Flink's implicit casts do).
    fn comparable(&self, a: Expr, b: Expr, op: &str, location: Option<Location>) -> Result<(Expr, Expr), SqlError> {
        let (fa, fb) = (a.ty.kind.family(), b.ty.kind.family());
        if fa == fb || fa == "NULL" || fb == "NULL" {
            return Ok((a, b));
        }
        let literal_to = |lit: &Expr, to: &Expr| -> Option<Expr> {
            matches!(lit.kind, ExprKind::Literal(Value::String(_)))
                .then(|| coerce(lit.clone(), &to.ty.clone().without_time_attribute()))
        };
        if matches!(fb, "DATE" | "TIMESTAMP" | "TIMESTAMP_LTZ" | "TIME" | "NUMERIC") {
            if let Some(a2) = literal_to(&a, &b) {
                return Ok((a2, b));
            }
        }
        if matches!(fa, "DATE" | "TIMESTAMP" | "TIMESTAMP_LTZ" | "TIME" | "NUMERIC") {
            if let Some(b2) = literal_to(&b, &a) {
                return Ok((a, b2));
            }
        }
        if (fa == "TIMESTAMP" && fb == "TIMESTAMP_LTZ") || (fa == "TIMESTAMP_LTZ" && fb == "TIMESTAMP") {
            return Ok((a, b));
        }
        Err(type_error(location, op, &[&a.ty, &b.ty], "'<COMPARABLE_TYPE> <op> <COMPARABLE_TYPE>'"))
    }

    fn compare(&self, op: CompareOp, a: Expr, b: Expr, location: Option<Location>) -> Result<Expr, SqlError> {
        let (a, b) = self.comparable(a, b, op.symbol(), location)?;
        let ty = DataType::new(TypeKind::Boolean).with_nullable(a.ty.nullable || b.ty.nullable);
        Ok(Expr::new(ExprKind::Compare(op, Box::new(a), Box::new(b)), ty))
    }

    fn args_of(&self, function: &ast::Function) -> Result<(Vec<Expr>, bool, Option<Location>), SqlError> {
        let location = Location::of_span(function.name.span());
        let mut args = Vec::new();
        let mut distinct = false;
        if let FunctionArguments::List(list) = &function.args {
            distinct = matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
            for arg in &list.args {
                match arg {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(self.bind(e)?),
                    FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => {}
                    other => return Err(SqlError::unsupported(location, format!("the function argument '{other}'"))),
                }
            }
        }
        Ok((args, distinct, location))
    }

    fn function(&self, function: &ast::Function, location: Option<Location>) -> Result<Expr, SqlError> {
        let name = crate::parser::object_name(&function.name);
        let upper = name.to_ascii_uppercase();
        if crate::plan::aggregate::is_aggregate(&upper) {
            return Err(SqlError::validation(
                location,
                format!(
                    "Aggregate function {upper} is not allowed here (only in SELECT or HAVING of a grouping query)"
                ),
            ));
        }
        if let Some(columns) = self.window_columns {
            let property = ["TUMBLE_", "HOP_", "SESSION_", "CUMULATE_"].iter().find_map(|p| upper.strip_prefix(p));
            let index = match property {
                Some("START") => Some(columns[0]),
                Some("END") => Some(columns[1]),
                Some("ROWTIME") | Some("PROCTIME") => Some(columns[2]),
                _ => None,
            };
            if let Some(i) = index {
                let ty = self.scope.columns[i].ty.clone();
                // `*_END` and `*_START` are plain timestamps; `*_ROWTIME` stays a time attribute.
                return Ok(Expr::column(i, ty));
            }
        }
        if function.over.is_some() {
            return Err(SqlError::unsupported(location, "an OVER aggregation or ranking (OverAggregate / Rank)"));
        }
        let (args, _, _) = self.args_of(function)?;
        if let Some(udf) = self.functions.function(&name) {
            let types: Vec<DataType> = args.iter().map(|a| a.ty.clone()).collect();
            let ty = udf.result_type(&types).map_err(|m| SqlError::validation(location, format!("{name}: {m}")))?;
            return Ok(Expr::new(ExprKind::Udf(udf, args), ty));
        }
        self.function_of(&upper, args, location)
    }

    /// A built-in function by its upper-case name over bound arguments.
    pub fn function_of(&self, name: &str, args: Vec<Expr>, location: Option<Location>) -> Result<Expr, SqlError> {
        let types: Vec<&DataType> = args.iter().map(|a| &a.ty).collect();
        let arity = |range: std::ops::RangeInclusive<usize>| -> Result<(), SqlError> {
            if range.contains(&args.len()) {
                Ok(())
            } else {
                Err(SqlError::validation(
                    location,
                    format!(
                        "Invalid number of arguments to function '{name}'. Was expecting {} to {} arguments",
                        range.start(),
                        range.end()
                    ),
                ))
            }
        };
        let nullable = args.iter().any(|a| a.ty.nullable);
        let string = || DataType::string().with_nullable(nullable);
        let want_strings = |positions: &[usize], form: &str| -> Result<(), SqlError> {
            for &p in positions {
                if let Some(t) = types.get(p) {
                    if !t.is_string() && t.kind != TypeKind::Null {
                        return Err(type_error(location, name, &types, form));
                    }
                }
            }
            Ok(())
        };
        let literal_string = |i: usize| match args.get(i).map(|a| &a.kind) {
            Some(ExprKind::Literal(Value::String(s))) => Some(s.to_string()),
            _ => None,
        };
        let regex = |i: usize| -> Result<Option<Arc<regex::Regex>>, SqlError> {
            literal_string(i)
                .map(|p| {
                    regex::Regex::new(&p)
                        .map(Arc::new)
                        .map_err(|e| SqlError::validation(location, format!("invalid regular expression '{p}': {e}")))
                })
                .transpose()
        };
        let call = |f: Builtin, args: Vec<Expr>, ty: DataType| Ok(Expr::new(ExprKind::Call(f, args), ty));
        match name {
            "LOWER" | "UPPER" | "INITCAP" | "REVERSE" => {
                arity(1..=1)?;
                want_strings(&[0], &format!("'{name}(<CHARACTER>)'"))?;
                let f = match name {
                    "LOWER" => Builtin::Lower,
                    "UPPER" => Builtin::Upper,
                    "INITCAP" => Builtin::Initcap,
                    _ => Builtin::Reverse,
                };
                call(f, args, string())
            }
            "SUBSTRING" | "SUBSTR" => {
                arity(2..=3)?;
                want_strings(&[0], "'SUBSTRING(<CHARACTER> FROM <INTEGER> [FOR <INTEGER>])'")?;
                call(Builtin::Substring, args, string())
            }
            "CHAR_LENGTH" | "CHARACTER_LENGTH" => {
                arity(1..=1)?;
                want_strings(&[0], "'CHAR_LENGTH(<CHARACTER>)'")?;
                call(Builtin::CharLength, args, DataType::new(TypeKind::Int).with_nullable(nullable))
            }
            "LTRIM" | "RTRIM" => {
                arity(1..=1)?;
                call(Builtin::Trim(name == "LTRIM", name == "RTRIM"), args, string())
            }
            "CONCAT" => {
                arity(1..=usize::MAX)?;
                call(Builtin::Concat, args, string())
            }
            "CONCAT_WS" => {
                arity(2..=usize::MAX)?;
                let ty = DataType::string().with_nullable(args[0].ty.nullable);
                call(Builtin::ConcatWs, args, ty)
            }
            "REPLACE" => {
                arity(3..=3)?;
                want_strings(&[0, 1, 2], "'REPLACE(<CHARACTER>, <CHARACTER>, <CHARACTER>)'")?;
                call(Builtin::Replace, args, string())
            }
            "REGEXP_EXTRACT" => {
                arity(2..=3)?;
                want_strings(&[0, 1], "'REGEXP_EXTRACT(<CHARACTER>, <CHARACTER>[, <INTEGER>])'")?;
                let compiled = regex(1)?;
                // NULL when the pattern does not match, whatever the inputs.
                call(Builtin::RegexpExtract(compiled), args, DataType::string())
            }
            "REGEXP_REPLACE" => {
                arity(3..=3)?;
                want_strings(&[0, 1, 2], "'REGEXP_REPLACE(<CHARACTER>, <CHARACTER>, <CHARACTER>)'")?;
                let compiled = regex(1)?;
                call(Builtin::RegexpReplace(compiled), args, string())
            }
            "REGEXP" => {
                arity(2..=2)?;
                let compiled = regex(1)?;
                call(Builtin::Regexp(compiled), args, DataType::new(TypeKind::Boolean).with_nullable(nullable))
            }
            "SPLIT_INDEX" => {
                arity(3..=3)?;
                want_strings(&[0, 1], "'SPLIT_INDEX(<CHARACTER>, <CHARACTER>, <INTEGER>)'")?;
                call(Builtin::SplitIndex, args, DataType::string())
            }
            "POSITION" | "LOCATE" => {
                arity(2..=2)?;
                call(Builtin::Position, args, DataType::new(TypeKind::Int).with_nullable(nullable))
            }
            "LPAD" | "RPAD" => {
                arity(3..=3)?;
                call(if name == "LPAD" { Builtin::Lpad } else { Builtin::Rpad }, args, DataType::string())
            }
            "REPEAT" => {
                arity(2..=2)?;
                call(Builtin::Repeat, args, string())
            }
            "COALESCE" | "IFNULL" => {
                arity(1..=usize::MAX)?;
                let ty = common_type(&types).ok_or_else(|| {
                    SqlError::validation(location, "Illegal mixing of types in CASE or COALESCE statement".to_string())
                })?;
                let ty = ty.with_nullable(args.iter().all(|a| a.ty.nullable));
                let args = args.into_iter().map(|a| coerce(a, &ty)).collect();
                call(Builtin::Coalesce, args, ty)
            }
            "NULLIF" => {
                arity(2..=2)?;
                let ty = args[0].ty.clone().with_nullable(true);
                call(Builtin::NullIf, args, ty)
            }
            "IF" => {
                arity(3..=3)?;
                let ty = common_type(&types[1..])
                    .ok_or_else(|| type_error(location, "IF", &types, "'IF(<BOOLEAN>, <T>, <T>)'"))?;
                let mut args = args;
                let otherwise = coerce(args.pop().expect("3 arguments"), &ty);
                let then = coerce(args.pop().expect("3 arguments"), &ty);
                call(Builtin::If, vec![args.pop().expect("3 arguments"), then, otherwise], ty)
            }
            "MOD" => {
                arity(2..=2)?;
                let mut args = args;
                let b = args.pop().expect("2 arguments");
                let a = args.pop().expect("2 arguments");
                arithmetic(ArithmeticOp::Modulo, a, b, location)
            }
            "ABS" => {
                arity(1..=1)?;
                let ty = super::functions::same_numeric(&args[0].ty);
                call(Builtin::Abs, args, ty)
            }
            "FLOOR" | "CEIL" | "CEILING" => {
                arity(1..=1)?;
                let ty = match args[0].ty.kind {
                    TypeKind::Decimal { precision, scale } => {
                        DataType::decimal((precision - scale + (scale > 0) as u8).clamp(1, 38), 0)
                            .with_nullable(nullable)
                    }
                    _ => super::functions::same_numeric(&args[0].ty),
                };
                call(if name == "FLOOR" { Builtin::Floor } else { Builtin::Ceil }, args, ty)
            }
            "ROUND" => {
                arity(1..=2)?;
                let places = match args.get(1).map(|a| &a.kind) {
                    Some(ExprKind::Literal(Value::Int(i))) => *i,
                    _ => 0,
                };
                let ty = match args[0].ty.kind {
                    TypeKind::Decimal { precision, scale } => {
                        let s = places.clamp(0, scale as i64) as u8;
                        DataType::decimal((precision - scale + s + 1).min(38), s).with_nullable(nullable)
                    }
                    _ => super::functions::same_numeric(&args[0].ty),
                };
                call(Builtin::Round, args, ty)
            }
            "POWER" | "SQRT" | "LN" | "LOG10" | "EXP" => {
                arity(if name == "POWER" { 2..=2 } else { 1..=1 })?;
                for t in &types {
                    if !t.is_numeric() {
                        return Err(type_error(location, name, &types, &format!("'{name}(<NUMERIC>)'")));
                    }
                }
                let f = match name {
                    "POWER" => Builtin::Power,
                    "SQRT" => Builtin::Sqrt,
                    "LN" => Builtin::Ln,
                    "LOG10" => Builtin::Log10,
                    _ => Builtin::Exp,
                };
                call(f, args, DataType::double().with_nullable(nullable))
            }
            "YEAR" | "QUARTER" | "MONTH" | "WEEK" | "DAYOFMONTH" | "DAYOFWEEK" | "DAYOFYEAR" | "HOUR" | "MINUTE"
            | "SECOND" => {
                arity(1..=1)?;
                if !super::functions::is_temporal(&args[0].ty) {
                    return Err(type_error(location, name, &types, &format!("'{name}(<DATETIME>)'")));
                }
                let unit = match name {
                    "YEAR" => TimeUnit::Year,
                    "QUARTER" => TimeUnit::Quarter,
                    "MONTH" => TimeUnit::Month,
                    "WEEK" => TimeUnit::Week,
                    "DAYOFMONTH" => TimeUnit::Day,
                    "DAYOFWEEK" => TimeUnit::DayOfWeek,
                    "DAYOFYEAR" => TimeUnit::DayOfYear,
                    "HOUR" => TimeUnit::Hour,
                    "MINUTE" => TimeUnit::Minute,
                    _ => TimeUnit::Second,
                };
                call(Builtin::Extract(unit), args, DataType::new(TypeKind::BigInt).with_nullable(nullable))
            }
            "DATE_FORMAT" => {
                arity(2..=2)?;
                if !(args[0].ty.is_timestamp() || args[0].ty.is_string()) {
                    return Err(type_error(location, name, &types, "'DATE_FORMAT(<TIMESTAMP>, <CHARACTER>)'"));
                }
                let compiled = literal_string(1)
                    .map(|p| datetime::compile_pattern(&p).map(Arc::new).map_err(|m| SqlError::validation(location, m)))
                    .transpose()?;
                call(Builtin::DateFormat(compiled), args, string())
            }
            "TO_TIMESTAMP" => {
                arity(1..=2)?;
                want_strings(&[0, 1], "'TO_TIMESTAMP(<CHARACTER>[, <CHARACTER>])'")?;
                let compiled = literal_string(1)
                    .map(|p| datetime::compile_pattern(&p).map(Arc::new).map_err(|m| SqlError::validation(location, m)))
                    .transpose()?;
                call(Builtin::ToTimestamp(compiled), args, DataType::timestamp(3))
            }
            "TO_DATE" => {
                arity(1..=1)?;
                call(Builtin::ToDate, args, DataType::new(TypeKind::Date))
            }
            "UNIX_TIMESTAMP" => {
                arity(0..=1)?;
                call(Builtin::UnixTimestamp, args, DataType::new(TypeKind::BigInt).with_nullable(nullable))
            }
            "FROM_UNIXTIME" => {
                arity(1..=1)?;
                call(Builtin::FromUnixtime, args, string())
            }
            "PROCTIME" => {
                arity(0..=0)?;
                let ty = DataType::not_null(TypeKind::TimestampLtz {
                    precision: 3,
                    attribute: Some(TimeAttribute::Proctime),
                });
                call(Builtin::Now, args, ty)
            }
            "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIMESTAMP" | "CURRENT_ROW_TIMESTAMP" => {
                arity(0..=0)?;
                let ty = if name == "LOCALTIMESTAMP" {
                    DataType::not_null(TypeKind::Timestamp { precision: 3, attribute: None })
                } else {
                    DataType::not_null(TypeKind::TimestampLtz { precision: 3, attribute: None })
                };
                call(Builtin::Now, args, ty)
            }
            "TIMESTAMPDIFF" => Err(SqlError::unsupported(location, "TIMESTAMPDIFF")),
            "ROW" => {
                let fields = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| crate::types::Field::new(format!("EXPR${i}"), a.ty.clone()))
                    .collect();
                call(Builtin::Row, args, DataType::not_null(TypeKind::Row(fields)))
            }
            "HASH_CODE" => {
                arity(1..=1)?;
                call(Builtin::Hash, args, DataType::new(TypeKind::Int).with_nullable(nullable))
            }
            _ => Err(SqlError::validation(
                location,
                format!(
                    "No match found for function signature {name}({})",
                    types.iter().map(|t| format!("<{t}>")).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

fn not(e: Expr) -> Expr {
    let ty = e.ty.clone();
    Expr::new(ExprKind::Not(Box::new(e)), ty)
}

/// `row.field`.
fn field_access(base: Expr, field: &str, location: Option<Location>) -> Result<Expr, SqlError> {
    let TypeKind::Row(fields) = &base.ty.kind else {
        return Err(SqlError::validation(
            location,
            format!("'{field}' is not a field: the value is of type {}", base.ty),
        ));
    };
    let Some(index) = fields.iter().position(|f| f.name == field) else {
        return Err(SqlError::validation(location, format!("Unknown field '{field}' of {}", base.ty)));
    };
    let ty = fields[index].ty.clone().with_nullable(fields[index].ty.nullable || base.ty.nullable);
    Ok(Expr::new(ExprKind::Field(Box::new(base), index), ty))
}

/// A literal's value and type, as Flink types them: `1` INT, `1.5` DECIMAL(2, 1),
/// `1e3` DOUBLE, `'abc'` CHAR(3), all NOT NULL.
fn literal(v: &ast::Value, location: Option<Location>) -> Result<Expr, SqlError> {
    Ok(match v {
        ast::Value::Number(text, _) => {
            if text.contains(['e', 'E']) {
                let f: f64 = text.parse().map_err(|_| SqlError::validation(location, format!("bad number {text}")))?;
                Expr::literal(Value::Float(f), DataType::not_null(TypeKind::Double))
            } else if text.contains('.') {
                let (unscaled, scale) =
                    decimal::parse(text).ok_or_else(|| SqlError::validation(location, format!("bad number {text}")))?;
                let digits = unscaled.unsigned_abs().to_string().len() as u8;
                let precision = digits.max(scale).max(1);
                Expr::literal(
                    Value::Decimal(unscaled, scale),
                    DataType::not_null(TypeKind::Decimal { precision, scale }),
                )
            } else if let Ok(i) = text.parse::<i32>() {
                Expr::literal(Value::Int(i as i64), DataType::not_null(TypeKind::Int))
            } else if let Ok(i) = text.parse::<i64>() {
                Expr::literal(Value::Int(i), DataType::not_null(TypeKind::BigInt))
            } else {
                let (unscaled, _) = decimal::parse(text)
                    .ok_or_else(|| SqlError::validation(location, format!("the number {text} is too large")))?;
                let precision = unscaled.unsigned_abs().to_string().len() as u8;
                Expr::literal(
                    Value::Decimal(unscaled, 0),
                    DataType::not_null(TypeKind::Decimal { precision, scale: 0 }),
                )
            }
        }
        ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => {
            Expr::literal(Value::string(s), DataType::not_null(TypeKind::Char(s.chars().count().max(1) as u32)))
        }
        ast::Value::Boolean(b) => Expr::literal(Value::Boolean(*b), DataType::not_null(TypeKind::Boolean)),
        ast::Value::Null => Expr::literal(Value::Null, DataType::new(TypeKind::Null)),
        other => return Err(SqlError::unsupported(location, format!("the literal {other}"))),
    })
}

/// `INTERVAL '4' SECOND`, `INTERVAL '10' MINUTE`, `INTERVAL '1' DAY`, `INTERVAL '2' MONTH`,
/// `INTERVAL '1:30' MINUTE TO SECOND`.
fn interval_literal(interval: &ast::Interval, location: Option<Location>) -> Result<Expr, SqlError> {
    let text = match interval.value.as_ref() {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            other => other.to_string(),
        },
        other => return Err(SqlError::unsupported(location, format!("the interval value {other}"))),
    };
    let bad = || SqlError::validation(location, format!("Illegal interval literal format '{text}'"));
    let (negative, body) = match text.trim().strip_prefix('-') {
        Some(rest) => (true, rest.trim().to_string()),
        None => (false, text.trim().to_string()),
    };
    let field = interval.leading_field.clone().unwrap_or(ast::DateTimeField::Second);
    let unit_ms = |f: &ast::DateTimeField| -> Option<i64> {
        Some(match f {
            ast::DateTimeField::Day | ast::DateTimeField::Days => datetime::MILLIS_PER_DAY,
            ast::DateTimeField::Hour | ast::DateTimeField::Hours => 3_600_000,
            ast::DateTimeField::Minute | ast::DateTimeField::Minutes => 60_000,
            ast::DateTimeField::Second | ast::DateTimeField::Seconds => 1000,
            _ => return None,
        })
    };
    let months = |f: &ast::DateTimeField| -> Option<i32> {
        Some(match f {
            ast::DateTimeField::Year | ast::DateTimeField::Years => 12,
            ast::DateTimeField::Month | ast::DateTimeField::Months => 1,
            _ => return None,
        })
    };
    if let Some(m) = months(&field) {
        let value = if interval.last_field.is_some() {
            let (y, mo) = body.split_once('-').ok_or_else(bad)?;
            y.trim()
                .parse::<i32>()
                .map_err(|_| bad())?
                .checked_mul(12)
                .and_then(|m| m.checked_add(mo.trim().parse::<i32>().ok()?))
                .ok_or_else(bad)?
        } else {
            body.parse::<i32>().map_err(|_| bad())?.checked_mul(m).ok_or_else(bad)?
        };
        let value = if negative { -value } else { value };
        return Ok(Expr::literal(Value::Months(value), DataType::not_null(TypeKind::IntervalYearMonth)));
    }
    let leading = unit_ms(&field).ok_or_else(bad)?;
    let millis = if interval.last_field.is_some() {
        // `d HH:mm:ss.fff` read from the leading unit down.
        let mut total = 0i64;
        let mut unit = leading;
        for (i, part) in body.split([' ', ':']).enumerate() {
            let part_ms = if part.contains('.') {
                let (u, s) = decimal::parse(part).ok_or_else(bad)?;
                millis_of(u, s, unit).ok_or_else(bad)?
            } else {
                part.parse::<i64>().map_err(|_| bad())?.checked_mul(unit).ok_or_else(bad)?
            };
            total = total.checked_add(part_ms).ok_or_else(bad)?;
            unit = match (i, unit) {
                (_, u) if u == datetime::MILLIS_PER_DAY => 3_600_000,
                (_, 3_600_000) => 60_000,
                _ => 1000,
            };
        }
        total
    } else {
        let (u, s) = decimal::parse(&body).ok_or_else(bad)?;
        millis_of(u, s, leading).ok_or_else(bad)?
    };
    let millis = if negative { -millis } else { millis };
    Ok(Expr::literal(Value::Interval(millis), DataType::not_null(TypeKind::IntervalDayTime)))
}

/// `unscaled × 10^-scale` units of `unit_ms` milliseconds, if it fits.
fn millis_of(unscaled: i128, scale: u8, unit_ms: i64) -> Option<i64> {
    let ms = decimal::rescale(unscaled.checked_mul(unit_ms as i128)?, scale, 0)?;
    i64::try_from(ms).ok()
}

fn time_unit(field: &ast::DateTimeField) -> Option<TimeUnit> {
    use ast::DateTimeField as F;
    Some(match field {
        F::Year | F::Years => TimeUnit::Year,
        F::Quarter => TimeUnit::Quarter,
        F::Month | F::Months => TimeUnit::Month,
        F::Week(_) | F::Weeks => TimeUnit::Week,
        F::Day | F::Days => TimeUnit::Day,
        F::DayOfWeek | F::Dow => TimeUnit::DayOfWeek,
        F::DayOfYear | F::Doy => TimeUnit::DayOfYear,
        F::Hour | F::Hours => TimeUnit::Hour,
        F::Minute | F::Minutes => TimeUnit::Minute,
        F::Second | F::Seconds => TimeUnit::Second,
        F::Millisecond | F::Milliseconds => TimeUnit::Millisecond,
        F::Epoch => TimeUnit::Epoch,
        _ => return None,
    })
}

/// `a op b` with Flink's result type: integers widen to the wider, any DOUBLE makes a
/// DOUBLE, DECIMALs follow Flink's precision rules, timestamps move by intervals.
pub fn arithmetic(op: ArithmeticOp, a: Expr, b: Expr, location: Option<Location>) -> Result<Expr, SqlError> {
    use TypeKind as K;
    let symbol = if op == ArithmeticOp::Modulo { "MOD".to_string() } else { op.symbol().to_string() };
    let nullable = a.ty.nullable || b.ty.nullable;
    let fail =
        || type_error(location, &symbol, &[&a.ty, &b.ty], "'<NUMERIC> op <NUMERIC>', '<DATETIME> +/- <INTERVAL>'");
    let kind = match (&a.ty.kind, &b.ty.kind) {
        (x, y) if x.is_integer() && y.is_integer() => {
            if op == ArithmeticOp::Modulo {
                y.clone()
            } else {
                let rank = |k: &K| match k {
                    K::TinyInt => 0,
                    K::SmallInt => 1,
                    K::Int => 2,
                    _ => 3,
                };
                if rank(x) >= rank(y) {
                    x.clone()
                } else {
                    y.clone()
                }
            }
        }
        (K::Double, y) | (y, K::Double) if b.ty.is_numeric() && a.ty.is_numeric() => {
            let _ = y;
            K::Double
        }
        (K::Float, _) | (_, K::Float) if a.ty.is_numeric() && b.ty.is_numeric() => K::Float,
        _ if a.ty.decimal_shape().is_some() && b.ty.decimal_shape().is_some() => {
            let (precision, scale) = decimal_arithmetic(
                op.symbol(),
                a.ty.decimal_shape().expect("checked"),
                b.ty.decimal_shape().expect("checked"),
            );
            K::Decimal { precision, scale }
        }
        (K::Timestamp { precision, .. }, K::IntervalDayTime | K::IntervalYearMonth)
            if matches!(op, ArithmeticOp::Add | ArithmeticOp::Subtract) =>
        {
            K::Timestamp { precision: *precision, attribute: None }
        }
        (K::IntervalDayTime | K::IntervalYearMonth, K::Timestamp { precision, .. }) if op == ArithmeticOp::Add => {
            K::Timestamp { precision: *precision, attribute: None }
        }
        (K::TimestampLtz { precision, .. }, K::IntervalDayTime | K::IntervalYearMonth)
            if matches!(op, ArithmeticOp::Add | ArithmeticOp::Subtract) =>
        {
            K::TimestampLtz { precision: *precision, attribute: None }
        }
        (K::Date, K::IntervalDayTime) if matches!(op, ArithmeticOp::Add | ArithmeticOp::Subtract) => K::Date,
        (K::IntervalDayTime, K::IntervalDayTime) if matches!(op, ArithmeticOp::Add | ArithmeticOp::Subtract) => {
            K::IntervalDayTime
        }
        (K::IntervalDayTime, y) if y.is_integer() && matches!(op, ArithmeticOp::Multiply | ArithmeticOp::Divide) => {
            K::IntervalDayTime
        }
        (x, K::IntervalDayTime) if x.is_integer() && op == ArithmeticOp::Multiply => K::IntervalDayTime,
        (K::Null, _) | (_, K::Null) => K::Null,
        _ => return Err(fail()),
    };
    // Constant operands fold now (`0.908 * 1000000` in a filter is computed once).
    let ty = DataType::new(kind).with_nullable(nullable);
    let e = Expr::new(ExprKind::Arithmetic(op, Box::new(a), Box::new(b)), ty);
    Ok(fold(e))
}

/// Evaluates an expression without columns now.
fn fold(e: Expr) -> Expr {
    if e.columns().is_empty() && e.is_deterministic() && !matches!(e.kind, ExprKind::Literal(_)) {
        if let Ok(v) = e.eval(&[]) {
            return Expr::literal(v, e.ty);
        }
    }
    e
}

/// The type several values meet in (CASE branches, COALESCE arguments): the wider number,
/// the longer string (CHARs of different lengths meet in a VARCHAR, as Flink does), NULL
/// joins anything.
pub fn common_type(types: &[&DataType]) -> Option<DataType> {
    use TypeKind as K;
    let mut result: Option<DataType> = None;
    let nullable = types.iter().any(|t| t.nullable || t.kind == K::Null);
    for t in types {
        if t.kind == K::Null {
            continue;
        }
        let t = (*t).clone().without_time_attribute();
        result = Some(match result {
            None => t,
            Some(r) => {
                let kind = match (&r.kind, &t.kind) {
                    (a, b) if a == b => a.clone(),
                    (K::Char(a) | K::Varchar(a), K::Char(b) | K::Varchar(b)) => K::Varchar(*a.max(b)),
                    (a, b) if a.is_integer() && b.is_integer() => {
                        let rank = |k: &K| match k {
                            K::TinyInt => 0,
                            K::SmallInt => 1,
                            K::Int => 2,
                            _ => 3,
                        };
                        if rank(a) >= rank(b) {
                            a.clone()
                        } else {
                            b.clone()
                        }
                    }
                    (K::Double, _) | (_, K::Double) if r.is_numeric() && t.is_numeric() => K::Double,
                    (K::Float, _) | (_, K::Float) if r.is_numeric() && t.is_numeric() => K::Float,
                    _ if r.decimal_shape().is_some() && t.decimal_shape().is_some() => {
                        let (p1, s1) = r.decimal_shape().expect("checked");
                        let (p2, s2) = t.decimal_shape().expect("checked");
                        let scale = s1.max(s2);
                        let precision = ((p1 - s1).max(p2 - s2) + scale).min(38);
                        K::Decimal { precision, scale }
                    }
                    (K::Timestamp { precision: a, .. }, K::Timestamp { precision: b, .. }) => {
                        K::Timestamp { precision: *a.max(b), attribute: None }
                    }
                    _ => return None,
                };
                DataType::new(kind)
            }
        });
    }
    Some(result.unwrap_or(DataType::new(K::Null)).with_nullable(nullable))
}

/// The expression as `ty` (a cast where the value's form changes; literals cast now).
pub fn coerce(e: Expr, ty: &DataType) -> Expr {
    if e.ty.clone().without_time_attribute().with_nullable(ty.nullable) == *ty {
        return Expr { ty: ty.clone(), ..e };
    }
    let same_form = match (&e.ty.kind, &ty.kind) {
        (a, b) if a.is_integer() && b.is_integer() => true,
        (TypeKind::Varchar(_) | TypeKind::Char(_), TypeKind::Varchar(_)) => true,
        (TypeKind::Null, _) => true,
        (TypeKind::Timestamp { .. }, TypeKind::Timestamp { .. }) => true,
        _ => false,
    };
    if same_form {
        return Expr { ty: ty.clone(), ..e };
    }
    fold(Expr::new(ExprKind::Cast(Box::new(e)), ty.clone()))
}
