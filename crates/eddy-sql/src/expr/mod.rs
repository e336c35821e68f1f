//! Typed expressions over a row (what the binder makes of SQL expressions) and their
//! evaluation. Every node knows its type; evaluation follows SQL's three-valued logic
//! (NULL in, NULL out, unless the function says otherwise).

pub mod bind;
pub mod cast;
pub mod datetime;
pub mod decimal;
pub mod functions;

use crate::types::{DataType, TypeKind};
use crate::value::Value;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

pub use functions::{Builtin, ScalarFunction};

/// A typed expression.
#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: DataType,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    /// The input row's field.
    Column(usize),
    Literal(Value),
    /// A field of a ROW value.
    Field(Box<Expr>, usize),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Compare(CompareOp, Box<Expr>, Box<Expr>),
    Arithmetic(ArithmeticOp, Box<Expr>, Box<Expr>),
    Negate(Box<Expr>),
    IsNull(Box<Expr>),
    IsNotNull(Box<Expr>),
    /// `CASE WHEN c THEN v … ELSE e END` (a `CASE x WHEN …` is bound to comparisons).
    Case(Vec<(Expr, Expr)>, Box<Expr>),
    /// To `ty`.
    Cast(Box<Expr>),
    In(Box<Expr>, Vec<Expr>),
    Call(Builtin, Vec<Expr>),
    Udf(Arc<dyn ScalarFunction>, Vec<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithmeticOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

impl CompareOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CompareOp::Eq => "=",
            CompareOp::NotEq => "<>",
            CompareOp::Lt => "<",
            CompareOp::LtEq => "<=",
            CompareOp::Gt => ">",
            CompareOp::GtEq => ">=",
        }
    }
    fn holds(self, ordering: Ordering) -> bool {
        match self {
            CompareOp::Eq => ordering == Ordering::Equal,
            CompareOp::NotEq => ordering != Ordering::Equal,
            CompareOp::Lt => ordering == Ordering::Less,
            CompareOp::LtEq => ordering != Ordering::Greater,
            CompareOp::Gt => ordering == Ordering::Greater,
            CompareOp::GtEq => ordering != Ordering::Less,
        }
    }
    /// The operator with its operands swapped (`a < b` is `b > a`).
    pub fn flipped(self) -> Self {
        match self {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::LtEq => CompareOp::GtEq,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::GtEq => CompareOp::LtEq,
            other => other,
        }
    }
}

impl ArithmeticOp {
    pub fn symbol(self) -> char {
        match self {
            ArithmeticOp::Add => '+',
            ArithmeticOp::Subtract => '-',
            ArithmeticOp::Multiply => '*',
            ArithmeticOp::Divide => '/',
            ArithmeticOp::Modulo => '%',
        }
    }
}

/// A run-time error of an expression (Flink fails the job on these too: a division by
/// zero, a value out of its type's range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub type EvalResult = Result<Value, EvalError>;

static NULL: Value = Value::Null;

impl Expr {
    pub fn new(kind: ExprKind, ty: DataType) -> Self {
        Self { kind, ty }
    }
    pub fn column(index: usize, ty: DataType) -> Self {
        Self::new(ExprKind::Column(index), ty)
    }
    pub fn literal(value: Value, ty: DataType) -> Self {
        Self::new(ExprKind::Literal(value), ty)
    }

    /// The column this expression is, if it is one.
    pub fn as_column(&self) -> Option<usize> {
        match self.kind {
            ExprKind::Column(i) => Some(i),
            _ => None,
        }
    }

    /// Calls `f` on every column index the expression reads.
    pub fn visit_columns(&self, f: &mut dyn FnMut(usize)) {
        match self.kind {
            ExprKind::Column(i) => f(i),
            _ => self.visit_children(&mut |e| e.visit_columns(f)),
        }
    }

    /// Calls `f` on each operand of the expression (not deeper).
    pub fn visit_children(&self, f: &mut dyn FnMut(&Expr)) {
        use ExprKind::*;
        match &self.kind {
            Column(_) | Literal(_) => {}
            Field(e, _) | Not(e) | Negate(e) | IsNull(e) | IsNotNull(e) | Cast(e) => f(e),
            And(es) | Or(es) | Call(_, es) | Udf(_, es) => es.iter().for_each(f),
            Compare(_, a, b) | Arithmetic(_, a, b) => {
                f(a);
                f(b);
            }
            Case(whens, otherwise) => {
                for (c, v) in whens {
                    f(c);
                    f(v);
                }
                f(otherwise);
            }
            In(e, list) => {
                f(e);
                list.iter().for_each(f);
            }
        }
    }

    /// The columns read, sorted, once each.
    pub fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.visit_columns(&mut |i| out.push(i));
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The same expression with every column index mapped through `f`.
    pub fn map_columns(&self, f: &dyn Fn(usize) -> usize) -> Expr {
        use ExprKind::*;
        let b = |e: &Expr| Box::new(e.map_columns(f));
        let kind = match &self.kind {
            Column(i) => Column(f(*i)),
            Literal(v) => Literal(v.clone()),
            Field(e, i) => Field(b(e), *i),
            Not(e) => Not(b(e)),
            Negate(e) => Negate(b(e)),
            IsNull(e) => IsNull(b(e)),
            IsNotNull(e) => IsNotNull(b(e)),
            Cast(e) => Cast(b(e)),
            And(es) => And(es.iter().map(|e| e.map_columns(f)).collect()),
            Or(es) => Or(es.iter().map(|e| e.map_columns(f)).collect()),
            Call(func, es) => Call(func.clone(), es.iter().map(|e| e.map_columns(f)).collect()),
            Udf(func, es) => Udf(func.clone(), es.iter().map(|e| e.map_columns(f)).collect()),
            Compare(op, x, y) => Compare(*op, b(x), b(y)),
            Arithmetic(op, x, y) => Arithmetic(*op, b(x), b(y)),
            Case(whens, otherwise) => {
                Case(whens.iter().map(|(c, v)| (c.map_columns(f), v.map_columns(f))).collect(), b(otherwise))
            }
            In(e, list) => In(b(e), list.iter().map(|x| x.map_columns(f)).collect()),
        };
        Expr::new(kind, self.ty.clone())
    }

    /// Whether the expression's value depends on more than its inputs (PROCTIME()).
    pub fn is_deterministic(&self) -> bool {
        let mut deterministic = true;
        self.visit(&mut |e| {
            if let ExprKind::Call(func, _) = &e.kind {
                deterministic &= func.is_deterministic();
            }
        });
        deterministic
    }

    fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        self.visit_children(&mut |e| e.visit(f));
    }

    /// The value without copying it, when the expression reads it from the row or is a
    /// literal (a column, a field of a ROW column): most operands of comparisons and
    /// arithmetic are.
    #[inline]
    pub fn value_ref<'r>(&'r self, row: &'r [Value]) -> Option<&'r Value> {
        match &self.kind {
            ExprKind::Column(i) => row.get(*i),
            ExprKind::Literal(v) => Some(v),
            ExprKind::Field(e, i) => match e.value_ref(row)? {
                Value::Row(fields) => fields.get(*i),
                _ => Some(&NULL),
            },
            _ => None,
        }
    }

    /// The value, borrowed where it can be (see [`Expr::value_ref`]).
    #[inline]
    pub fn eval_cow<'r>(&'r self, row: &'r [Value]) -> Result<std::borrow::Cow<'r, Value>, EvalError> {
        match self.value_ref(row) {
            Some(v) => Ok(std::borrow::Cow::Borrowed(v)),
            None => self.eval(row).map(std::borrow::Cow::Owned),
        }
    }

    /// The value of the expression over `row`.
    pub fn eval(&self, row: &[Value]) -> EvalResult {
        use ExprKind::*;
        match &self.kind {
            Column(i) => Ok(row[*i].clone()),
            Literal(v) => Ok(v.clone()),
            Field(e, i) => Ok(match e.eval_cow(row)?.as_ref() {
                Value::Row(fields) => fields[*i].clone(),
                _ => Value::Null,
            }),
            Not(e) => Ok(match e.eval(row)? {
                Value::Boolean(b) => Value::Boolean(!b),
                _ => Value::Null,
            }),
            And(_) | Or(_) => Ok(self.truth(row)?.map_or(Value::Null, Value::Boolean)),
            Compare(op, a, b) => {
                let (a, b) = (a.eval_cow(row)?, b.eval_cow(row)?);
                if a.is_null() || b.is_null() {
                    return Ok(Value::Null);
                }
                Ok(Value::Boolean(op.holds(compare_values(&a, &b))))
            }
            Arithmetic(op, a, b) => {
                let (x, y) = (a.eval_cow(row)?, b.eval_cow(row)?);
                if x.is_null() || y.is_null() {
                    return Ok(Value::Null);
                }
                arithmetic(*op, &x, &y, &self.ty)
            }
            Negate(e) => Ok(match e.eval(row)? {
                Value::Int(i) => {
                    Value::Int(i.checked_neg().ok_or_else(|| EvalError("integer overflow in negation".into()))?)
                }
                Value::Float(f) => Value::Float(-f),
                Value::Decimal(u, s) => Value::Decimal(-u, s),
                Value::Interval(ms) => Value::Interval(-ms),
                _ => Value::Null,
            }),
            IsNull(e) => Ok(Value::Boolean(e.eval_cow(row)?.is_null())),
            IsNotNull(e) => Ok(Value::Boolean(!e.eval_cow(row)?.is_null())),
            Case(whens, otherwise) => {
                for (condition, value) in whens {
                    if condition.eval_condition(row)? {
                        return value.eval(row);
                    }
                }
                otherwise.eval(row)
            }
            Cast(e) => cast::cast(e.eval(row)?, &e.ty, &self.ty),
            In(e, list) => {
                let v = e.eval_cow(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut unknown = false;
                for item in list {
                    let x = item.eval_cow(row)?;
                    if x.is_null() {
                        unknown = true;
                    } else if compare_values(&v, &x) == Ordering::Equal {
                        return Ok(Value::Boolean(true));
                    }
                }
                Ok(if unknown { Value::Null } else { Value::Boolean(false) })
            }
            Call(func, args) => with_arguments(args, row, |values| func.call(values, &self.ty, args)),
            Udf(func, args) => with_arguments(args, row, |values| func.eval(values).map_err(EvalError)),
        }
    }

    /// Evaluates a condition: true only if the value is TRUE (NULL filters out).
    /// Comparisons, AND and OR answer without making a BOOLEAN value: a filter's work
    /// per row.
    pub fn eval_condition(&self, row: &[Value]) -> Result<bool, EvalError> {
        Ok(self.truth(row)? == Some(true))
    }

    /// A condition's value in SQL's three-valued logic: `None` is UNKNOWN (NULL). AND
    /// stops at the first FALSE and OR at the first TRUE, as Flink's do: an operand after
    /// an UNKNOWN is still evaluated (and may fail the job).
    fn truth(&self, row: &[Value]) -> Result<Option<bool>, EvalError> {
        match &self.kind {
            ExprKind::Compare(op, a, b) => {
                let (a, b) = (a.eval_cow(row)?, b.eval_cow(row)?);
                Ok((!a.is_null() && !b.is_null()).then(|| op.holds(compare_values(&a, &b))))
            }
            ExprKind::And(es) => connective(es, row, false),
            ExprKind::Or(es) => connective(es, row, true),
            _ => Ok(self.eval_cow(row)?.as_bool()),
        }
    }
}

/// AND (`decisive` FALSE) or OR (`decisive` TRUE) of `operands` in three-valued logic:
/// the decisive value stops it; otherwise UNKNOWN if any operand was, else the other value.
fn connective(operands: &[Expr], row: &[Value], decisive: bool) -> Result<Option<bool>, EvalError> {
    let mut unknown = false;
    for e in operands {
        match e.truth(row)? {
            Some(b) if b == decisive => return Ok(Some(decisive)),
            Some(_) => {}
            None => unknown = true,
        }
    }
    Ok((!unknown).then_some(!decisive))
}

/// Calls `f` with the values of `args` over `row`: up to four on the stack (most calls
/// take one to three), more in a vector.
#[inline]
fn with_arguments(args: &[Expr], row: &[Value], f: impl FnOnce(&[Value]) -> EvalResult) -> EvalResult {
    const ON_STACK: usize = 4;
    if args.len() <= ON_STACK {
        let mut values: [Value; ON_STACK] = [Value::Null, Value::Null, Value::Null, Value::Null];
        for (slot, a) in values.iter_mut().zip(args) {
            *slot = a.eval(row)?;
        }
        return f(&values[..args.len()]);
    }
    let values = args.iter().map(|a| a.eval(row)).collect::<Result<Vec<_>, _>>()?;
    f(&values)
}

/// The order of two non-NULL values of comparable types (numbers of any kind compare by
/// value).
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => x.cmp(y),
        (Int(x), Decimal(u, s)) => decimal::compare(*x as i128, 0, *u, *s),
        (Decimal(u, s), Int(y)) => decimal::compare(*u, *s, *y as i128, 0),
        (Int(x), Float(y)) => (*x as f64).total_cmp(y),
        (Float(x), Int(y)) => x.total_cmp(&(*y as f64)),
        (Decimal(u, s), Float(y)) => decimal::to_f64(*u, *s).total_cmp(y),
        (Float(x), Decimal(u, s)) => x.total_cmp(&decimal::to_f64(*u, *s)),
        _ => a.compare(b).unwrap_or(Ordering::Equal),
    }
}

/// `x op y` of non-NULL values, giving a value of type `ty`.
fn arithmetic(op: ArithmeticOp, x: &Value, y: &Value, ty: &DataType) -> EvalResult {
    use Value::*;
    let overflow = || EvalError(format!("overflow in {} of {x} and {y} ({ty})", op.symbol()));
    match &ty.kind {
        TypeKind::TinyInt | TypeKind::SmallInt | TypeKind::Int | TypeKind::BigInt => {
            let (Int(a), Int(b)) = (x, y) else { return Ok(Null) };
            let r = match op {
                ArithmeticOp::Add => a.checked_add(*b),
                ArithmeticOp::Subtract => a.checked_sub(*b),
                ArithmeticOp::Multiply => a.checked_mul(*b),
                ArithmeticOp::Divide | ArithmeticOp::Modulo if *b == 0 => {
                    return Err(EvalError("division by zero".into()));
                }
                ArithmeticOp::Divide => a.checked_div(*b),
                ArithmeticOp::Modulo => a.checked_rem(*b),
            }
            .ok_or_else(overflow)?;
            Ok(Int(wrap_integer(r, &ty.kind)))
        }
        TypeKind::Float | TypeKind::Double => {
            let (a, b) = (to_f64(x), to_f64(y));
            let r = match op {
                ArithmeticOp::Add => a + b,
                ArithmeticOp::Subtract => a - b,
                ArithmeticOp::Multiply => a * b,
                ArithmeticOp::Divide => a / b,
                ArithmeticOp::Modulo => a % b,
            };
            Ok(Float(if ty.kind == TypeKind::Float { r as f32 as f64 } else { r }))
        }
        TypeKind::Decimal { precision, scale } => {
            let (a, sa) = as_decimal(x);
            let (b, sb) = as_decimal(y);
            let r = match op {
                ArithmeticOp::Add => decimal::add(a, sa, b, sb, *scale),
                ArithmeticOp::Subtract => decimal::subtract(a, sa, b, sb, *scale),
                ArithmeticOp::Multiply => decimal::multiply(a, sa, b, sb, *scale),
                ArithmeticOp::Divide if b == 0 => return Err(EvalError("division by zero".into())),
                ArithmeticOp::Divide => decimal::divide(a, sa, b, sb, *scale),
                ArithmeticOp::Modulo => decimal::modulo(a, sa, b, sb, *scale),
            };
            // A result beyond the type's precision is NULL in Flink.
            Ok(match r {
                Some(u) if decimal::fits(u, *precision) => Decimal(u, *scale),
                _ => Null,
            })
        }
        TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. } => match (x, y, op) {
            (Timestamp(ms, ns), Interval(d), ArithmeticOp::Add)
            | (Interval(d), Timestamp(ms, ns), ArithmeticOp::Add) => {
                Ok(Timestamp(ms.checked_add(*d).ok_or_else(overflow)?, *ns))
            }
            (Timestamp(ms, ns), Interval(d), ArithmeticOp::Subtract) => {
                Ok(Timestamp(ms.checked_sub(*d).ok_or_else(overflow)?, *ns))
            }
            (Timestamp(ms, ns), Months(m), ArithmeticOp::Add | ArithmeticOp::Subtract) => {
                let m = if op == ArithmeticOp::Add { *m } else { -*m };
                Ok(Timestamp(functions::add_months(*ms, m), *ns))
            }
            _ => Ok(Null),
        },
        TypeKind::Date => match (x, y, op) {
            (Date(d), Interval(ms), ArithmeticOp::Add) => Ok(Date(
                d.checked_add(i32::try_from(ms / datetime::MILLIS_PER_DAY).map_err(|_| overflow())?)
                    .ok_or_else(overflow)?,
            )),
            (Date(d), Interval(ms), ArithmeticOp::Subtract) => Ok(Date(
                d.checked_sub(i32::try_from(ms / datetime::MILLIS_PER_DAY).map_err(|_| overflow())?)
                    .ok_or_else(overflow)?,
            )),
            _ => Ok(Null),
        },
        TypeKind::IntervalDayTime => match (x, y, op) {
            (Interval(a), Interval(b), ArithmeticOp::Add) => Ok(Interval(a.checked_add(*b).ok_or_else(overflow)?)),
            (Interval(a), Interval(b), ArithmeticOp::Subtract) => Ok(Interval(a.checked_sub(*b).ok_or_else(overflow)?)),
            (Interval(a), Int(b), ArithmeticOp::Multiply) | (Int(b), Interval(a), ArithmeticOp::Multiply) => {
                Ok(Interval(a.checked_mul(*b).ok_or_else(overflow)?))
            }
            (Interval(a), Int(b), ArithmeticOp::Divide) if *b != 0 => Ok(Interval(a / b)),
            _ => Ok(Null),
        },
        _ => Ok(Null),
    }
}

/// Integer arithmetic wraps to the column's width as Java's does.
fn wrap_integer(v: i64, kind: &TypeKind) -> i64 {
    match kind {
        TypeKind::TinyInt => v as i8 as i64,
        TypeKind::SmallInt => v as i16 as i64,
        TypeKind::Int => v as i32 as i64,
        _ => v,
    }
}

pub fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Decimal(u, s) => decimal::to_f64(*u, *s),
        _ => f64::NAN,
    }
}

fn as_decimal(v: &Value) -> (i128, u8) {
    match v {
        Value::Int(i) => (*i as i128, 0),
        Value::Decimal(u, s) => (*u, *s),
        Value::Float(f) => decimal::from_f64(*f, 9).map(|u| (u, 9)).unwrap_or((0, 0)),
        _ => (0, 0),
    }
}

impl fmt::Display for Expr {
    /// As Flink's plans print expressions: `$3`-style columns are given names by the plan.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", explain::ExprText { expr: self, names: &[] })
    }
}

pub mod explain {
    //! Expressions as text, with the input's column names.
    use super::*;

    pub struct ExprText<'a> {
        pub expr: &'a Expr,
        pub names: &'a [String],
    }

    impl<'a> fmt::Display for ExprText<'a> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            use ExprKind::*;
            let names = self.names;
            let sub = |e: &'a Expr| ExprText { expr: e, names };
            match &self.expr.kind {
                Column(i) => match self.names.get(*i) {
                    Some(name) => write!(f, "{name}"),
                    None => write!(f, "${i}"),
                },
                Literal(Value::String(s)) => write!(f, "'{s}'"),
                Literal(v) => write!(f, "{v}"),
                Field(e, i) => match &e.ty.kind {
                    TypeKind::Row(fields) => write!(f, "{}.{}", sub(e), fields[*i].name),
                    _ => write!(f, "{}.${i}", sub(e)),
                },
                Not(e) => write!(f, "NOT({})", sub(e)),
                And(es) => list(f, "AND", es, self.names),
                Or(es) => list(f, "OR", es, self.names),
                Compare(op, a, b) => write!(f, "{}({}, {})", compare_name(*op), sub(a), sub(b)),
                Arithmetic(op, a, b) => write!(f, "{}({}, {})", arithmetic_name(*op), sub(a), sub(b)),
                Negate(e) => write!(f, "-({})", sub(e)),
                IsNull(e) => write!(f, "IS NULL({})", sub(e)),
                IsNotNull(e) => write!(f, "IS NOT NULL({})", sub(e)),
                Case(whens, otherwise) => {
                    write!(f, "CASE(")?;
                    for (c, v) in whens {
                        write!(f, "{}, {}, ", sub(c), sub(v))?;
                    }
                    write!(f, "{})", sub(otherwise))
                }
                Cast(e) => write!(f, "CAST({} AS {})", sub(e), self.expr.ty),
                In(e, items) => {
                    write!(f, "SEARCH({}, Sarg[", sub(e))?;
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            write!(f, ", ")?;
                        }
                        write!(f, "{}", sub(item))?;
                    }
                    write!(f, "])")
                }
                Call(func, args) => list(f, &func.name(), args, self.names),
                Udf(func, args) => list(f, func.name(), args, self.names),
            }
        }
    }

    fn list(f: &mut fmt::Formatter<'_>, op: &str, es: &[Expr], names: &[String]) -> fmt::Result {
        write!(f, "{op}(")?;
        for (i, e) in es.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{}", ExprText { expr: e, names })?;
        }
        write!(f, ")")
    }

    fn compare_name(op: CompareOp) -> &'static str {
        match op {
            CompareOp::Eq => "=",
            CompareOp::NotEq => "<>",
            CompareOp::Lt => "<",
            CompareOp::LtEq => "<=",
            CompareOp::Gt => ">",
            CompareOp::GtEq => ">=",
        }
    }

    fn arithmetic_name(op: ArithmeticOp) -> &'static str {
        match op {
            ArithmeticOp::Add => "+",
            ArithmeticOp::Subtract => "-",
            ArithmeticOp::Multiply => "*",
            ArithmeticOp::Divide => "/",
            ArithmeticOp::Modulo => "MOD",
        }
    }
}
