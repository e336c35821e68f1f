//! Calc (projection and filter), a table's computed columns, and the watermarks its
//! `WATERMARK FOR` clause defines.

use crate::catalog::{CatalogTable, TableColumn};
use crate::expr::{ArithmeticOp, Expr, ExprKind};
use crate::row::Row;
use crate::types::TypeKind;
use crate::value::Value;
use eddy_api::time::{WatermarkGenerator, WatermarkOutput, WatermarkStrategy};
use eddy_api::{Context, DataStream, FunctionResult, ProcessFunction, RichFunction};
use eddy_runtime::Collector;
use std::sync::Arc;

/// Projection and filter of rows: the filter (if any) is TRUE, then the projection.
///
/// What each output column needs is worked out once, when the function is made: a column
/// or a field of a ROW column read only once moves out of the input row (no copy, no
/// reference count touched, where the row is not shared), and a projection that keeps
/// every input column in place and adds computed ones extends the input row instead of
/// building another (a table's computed columns, `SELECT *, x + 1`).
#[derive(Clone)]
pub struct CalcFunction {
    filter: Option<Arc<Expr>>,
    /// How each output column is made, in output order.
    outputs: Arc<Vec<Output>>,
    /// When the projection starts with the input's columns 0..k in order and only
    /// evaluates the rest: k and the rest, to extend a row of k columns in place.
    extends: Option<(usize, Arc<Vec<Expr>>)>,
}

/// How one output column of a Calc is made.
#[derive(Clone, Debug)]
enum Output {
    /// The input's column, moved out (no other output reads it).
    Move(usize),
    /// A field of the input's ROW column, moved out where the row value is not shared
    /// (no other output reads the field or the whole column).
    MoveField(usize, usize),
    /// Any other expression, evaluated before anything moves.
    Eval(Expr),
}

impl CalcFunction {
    pub fn new(projection: Vec<Expr>, filter: Option<Expr>) -> Self {
        // How often each column, and each field of a ROW column, is read by the projection.
        let mut columns: std::collections::HashMap<usize, usize> = Default::default();
        let mut fields: std::collections::HashMap<(usize, usize), usize> = Default::default();
        for e in &projection {
            match field_of_column(e) {
                Some(path) => *fields.entry(path).or_default() += 1,
                None => e.visit_columns(&mut |c| *columns.entry(c).or_default() += 1),
            }
        }
        let outputs = projection
            .iter()
            .map(|e| match (e.as_column(), field_of_column(e)) {
                (Some(c), _) if columns[&c] == 1 && !fields.keys().any(|(fc, _)| *fc == c) => Output::Move(c),
                (_, Some((c, f))) if fields[&(c, f)] == 1 && !columns.contains_key(&c) => Output::MoveField(c, f),
                _ => Output::Eval(e.clone()),
            })
            .collect::<Vec<_>>();
        let kept = projection.iter().enumerate().take_while(|(i, e)| e.as_column() == Some(*i)).count();
        let extends = (kept > 0 && projection[kept..].iter().all(|e| e.columns().iter().all(|c| *c < kept)))
            .then(|| (kept, Arc::new(projection[kept..].to_vec())));
        Self { filter: filter.map(Arc::new), outputs: Arc::new(outputs), extends }
    }

    /// The output row of `row`, or `None` if the filter drops it.
    pub fn apply(&self, row: Row) -> Result<Option<Row>, String> {
        if let Some(filter) = &self.filter {
            if !filter.eval_condition(&row.fields).map_err(|e| e.0)? {
                return Ok(None);
            }
        }
        let mut input = row.fields;
        if let Some((kept, added)) = &self.extends {
            if input.len() == *kept {
                input.reserve(added.len());
                for e in added.iter() {
                    let value = e.eval(&input[..*kept]).map_err(|e| e.0)?;
                    input.push(value);
                }
                return Ok(Some(Row { kind: row.kind, fields: input }));
            }
        }
        // Evaluated values first (they read the input), then what moves out of it.
        let mut out = Vec::with_capacity(self.outputs.len());
        for output in self.outputs.iter() {
            out.push(match output {
                Output::Eval(e) => e.eval(&input).map_err(|e| e.0)?,
                _ => Value::Null,
            });
        }
        for (slot, output) in out.iter_mut().zip(self.outputs.iter()) {
            match output {
                Output::Move(c) => *slot = std::mem::replace(&mut input[*c], Value::Null),
                Output::MoveField(c, f) => *slot = take_field(&mut input[*c], *f),
                Output::Eval(_) => {}
            }
        }
        Ok(Some(Row { kind: row.kind, fields: out }))
    }
}

/// `(column, field)` when the expression reads a field of a ROW column (`bid.price`).
fn field_of_column(e: &Expr) -> Option<(usize, usize)> {
    match &e.kind {
        ExprKind::Field(inner, f) => Some((inner.as_column()?, *f)),
        _ => None,
    }
}

/// Field `f` of a ROW value: moved out when this is the only reference to the row, cloned
/// otherwise; NULL when the row is NULL.
fn take_field(row: &mut Value, f: usize) -> Value {
    match row {
        Value::Row(fields) => match Arc::get_mut(fields) {
            Some(fields) => std::mem::replace(&mut fields[f], Value::Null),
            None => fields[f].clone(),
        },
        _ => Value::Null,
    }
}

impl RichFunction for CalcFunction {}

impl ProcessFunction<Row, Row> for CalcFunction {
    fn process_element(&mut self, row: Row, _ctx: &mut Context<'_>, out: &mut Collector<'_, Row>) -> FunctionResult {
        if let Some(row) = self.apply(row)? {
            out.collect(row);
        }
        Ok(())
    }
}

/// A table's rows from its physical rows: computed columns evaluated, then timestamps and
/// watermarks from its `WATERMARK FOR` clause.
pub fn computed_columns_and_watermarks(source: DataStream<Row>, table: &CatalogTable, uid: &str) -> DataStream<Row> {
    let mut stream = source;
    if !table.is_physical_only() {
        let projection: Vec<Expr> = table
            .columns
            .iter()
            .zip(&table.fields)
            .map(|(c, f)| match c {
                TableColumn::Physical(i) => Expr::column(*i, f.ty.clone()),
                TableColumn::Computed(e) => e.clone(),
            })
            .collect();
        let names: Vec<String> = table.physical.iter().map(|f| f.name.clone()).collect();
        let described: Vec<String> = projection
            .iter()
            .zip(&table.fields)
            .map(|(e, f)| {
                let text = crate::plan::explain::expression(e, &names);
                if text == f.name {
                    text
                } else {
                    format!("{text} AS {}", f.name)
                }
            })
            .collect();
        stream = stream
            .process(CalcFunction::new(projection, None))
            .name(&format!("Calc(select=[{}])", described.join(", ")))
            .uid(uid);
    }
    if let Some((column, watermark)) = &table.watermark {
        let column = *column;
        let generator = SqlWatermarks::new(watermark);
        let strategy = WatermarkStrategy::for_generator(move || generator.clone())
            .with_timestamp_assigner(move |row: &Row| row.fields[column].as_millis().unwrap_or(i64::MIN));
        let names: Vec<String> = table.fields.iter().map(|f| f.name.clone()).collect();
        stream = stream
            .assign_timestamps_and_watermarks(strategy)
            .name(&format!(
                "WatermarkAssigner(rowtime=[{}], watermark=[{}])",
                table.fields[column].name,
                crate::plan::explain::expression(watermark, &names)
            ))
            .uid(&format!("{uid}-watermarks"));
    }
    stream
}

/// Flink SQL's watermarks: the largest value of the `WATERMARK FOR` expression over the
/// rows so far, emitted periodically (a row whose expression is NULL leaves it).
#[derive(Clone)]
pub struct SqlWatermarks {
    expression: WatermarkExpression,
    current: i64,
}

/// The `WATERMARK FOR` expression; the usual `column - INTERVAL …` is read without
/// evaluating an expression per row.
#[derive(Clone)]
enum WatermarkExpression {
    /// The column's milliseconds less a fixed delay.
    Delayed {
        column: usize,
        delay_ms: i64,
    },
    Other(Arc<Expr>),
}

impl SqlWatermarks {
    pub fn new(expression: &Expr) -> Self {
        let expression = match &expression.kind {
            ExprKind::Arithmetic(ArithmeticOp::Subtract, a, b) => match (&a.kind, &b.kind) {
                (ExprKind::Column(column), ExprKind::Literal(Value::Interval(delay_ms)))
                    if matches!(a.ty.kind, TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. }) =>
                {
                    WatermarkExpression::Delayed { column: *column, delay_ms: *delay_ms }
                }
                _ => WatermarkExpression::Other(Arc::new(expression.clone())),
            },
            _ => WatermarkExpression::Other(Arc::new(expression.clone())),
        };
        Self { expression, current: i64::MIN }
    }
}

impl WatermarkGenerator<Row> for SqlWatermarks {
    fn on_event(&mut self, row: &Row, _timestamp: i64, _output: &mut WatermarkOutput) {
        let value = match &self.expression {
            WatermarkExpression::Delayed { column, delay_ms } => {
                row.fields[*column].as_millis().and_then(|ms| ms.checked_sub(*delay_ms))
            }
            WatermarkExpression::Other(e) => match e.eval(&row.fields) {
                Ok(Value::Timestamp(ms, _)) => Some(ms),
                _ => None,
            },
        };
        if let Some(ms) = value {
            self.current = self.current.max(ms);
        }
    }

    fn on_periodic_emit(&mut self, output: &mut WatermarkOutput) {
        if self.current > i64::MIN {
            output.emit_watermark(self.current);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::CompareOp;
    use crate::types::DataType;

    fn nested(values: Vec<Value>) -> Value {
        Value::Row(Arc::from(values))
    }

    fn field(column: usize, f: usize) -> Expr {
        Expr::new(ExprKind::Field(Box::new(Expr::column(column, DataType::string())), f), DataType::string())
    }

    #[test]
    fn fields_of_a_row_column_move_out_or_are_copied_when_the_row_is_shared() {
        // SELECT r.1, r.0, x: each field is read once (moves), x moves.
        let calc = CalcFunction::new(vec![field(0, 1), field(0, 0), Expr::column(1, DataType::string())], None);
        assert!(matches!(calc.outputs[..], [Output::MoveField(0, 1), Output::MoveField(0, 0), Output::Move(1)]));
        let input = || Row::insert(vec![nested(vec![Value::string("a"), Value::string("b")]), Value::string("x")]);
        let expected = vec![Value::string("b"), Value::string("a"), Value::string("x")];
        assert_eq!(calc.apply(input()).unwrap().unwrap().fields, expected);
        // The same row value held elsewhere too (a stream read twice) is left intact.
        let row = input();
        let shared = row.fields[0].clone();
        assert_eq!(calc.apply(row).unwrap().unwrap().fields, expected);
        assert_eq!(shared, nested(vec![Value::string("a"), Value::string("b")]));
        // A NULL row gives NULL fields.
        let null = Row::insert(vec![Value::Null, Value::string("x")]);
        assert_eq!(calc.apply(null).unwrap().unwrap().fields, vec![Value::Null, Value::Null, Value::string("x")]);

        // SELECT r.1, r.0, r.1 || x: r.1 is read twice and the column by an expression:
        // every output is evaluated (nothing moves before the concatenation reads it).
        let concat = Expr::new(
            ExprKind::Call(crate::expr::Builtin::Concat, vec![field(0, 1), Expr::column(1, DataType::string())]),
            DataType::string(),
        );
        let calc = CalcFunction::new(vec![field(0, 1), field(0, 0), concat], None);
        assert!(calc.outputs.iter().all(|o| matches!(o, Output::Eval(_))));
        let expected = vec![Value::string("b"), Value::string("a"), Value::string("bx")];
        assert_eq!(calc.apply(input()).unwrap().unwrap().fields, expected);
    }

    #[test]
    fn a_projection_that_keeps_every_column_and_adds_some_extends_the_row() {
        let plus = Expr::new(
            ExprKind::Arithmetic(
                ArithmeticOp::Add,
                Box::new(Expr::column(0, DataType::bigint())),
                Box::new(Expr::column(1, DataType::bigint())),
            ),
            DataType::bigint(),
        );
        let filter = Expr::new(
            ExprKind::Compare(
                CompareOp::Gt,
                Box::new(Expr::column(0, DataType::bigint())),
                Box::new(Expr::literal(Value::Int(0), DataType::bigint())),
            ),
            DataType::new(TypeKind::Boolean),
        );
        let projection = vec![Expr::column(0, DataType::bigint()), Expr::column(1, DataType::bigint()), plus];
        let calc = CalcFunction::new(projection, Some(filter));
        assert!(calc.extends.is_some());
        let row = Row::insert(vec![Value::Int(2), Value::Int(3)]);
        assert_eq!(calc.apply(row).unwrap().unwrap().fields, vec![Value::Int(2), Value::Int(3), Value::Int(5)]);
        assert_eq!(calc.apply(Row::insert(vec![Value::Int(0), Value::Int(3)])).unwrap(), None);
        // A row of another width than the plan's (never made by the planner) still
        // gets the projection.
        let wide = Row::insert(vec![Value::Int(2), Value::Int(3), Value::Int(9)]);
        assert_eq!(calc.apply(wide).unwrap().unwrap().fields, vec![Value::Int(2), Value::Int(3), Value::Int(5)]);
    }

    #[test]
    fn a_filter_evaluates_what_follows_an_unknown_operand_of_and_as_flink_does() {
        // WHERE x > 0 AND 10 / y > 1 with x NULL and y 0: UNKNOWN does not stop AND, the
        // division fails the job (as in Flink); with x = -1 FALSE stops it.
        let int = DataType::bigint();
        let compare = |op, a: Expr, b: Expr| {
            Expr::new(ExprKind::Compare(op, Box::new(a), Box::new(b)), DataType::new(TypeKind::Boolean))
        };
        let literal = |v| Expr::literal(Value::Int(v), int.clone());
        let divide = Expr::new(
            ExprKind::Arithmetic(ArithmeticOp::Divide, Box::new(literal(10)), Box::new(Expr::column(1, int.clone()))),
            int.clone(),
        );
        let filter = Expr::new(
            ExprKind::And(vec![
                compare(CompareOp::Gt, Expr::column(0, int.clone()), literal(0)),
                compare(CompareOp::Gt, divide, literal(1)),
            ]),
            DataType::new(TypeKind::Boolean),
        );
        let calc = CalcFunction::new(vec![Expr::column(0, int.clone())], Some(filter));
        let error = calc.apply(Row::insert(vec![Value::Null, Value::Int(0)])).unwrap_err();
        assert!(error.contains("division by zero"), "{error}");
        assert_eq!(calc.apply(Row::insert(vec![Value::Int(-1), Value::Int(0)])).unwrap(), None);
        assert_eq!(calc.apply(Row::insert(vec![Value::Null, Value::Int(5)])).unwrap(), None);
        assert!(calc.apply(Row::insert(vec![Value::Int(1), Value::Int(5)])).unwrap().is_some());
    }

    #[test]
    fn the_usual_watermark_expression_is_read_without_evaluation_and_equals_it() {
        let ts = DataType::timestamp(3);
        let expression = Expr::new(
            ExprKind::Arithmetic(
                ArithmeticOp::Subtract,
                Box::new(Expr::column(1, ts.clone())),
                Box::new(Expr::literal(Value::Interval(4000), DataType::new(TypeKind::IntervalDayTime))),
            ),
            ts,
        );
        let mut fast = SqlWatermarks::new(&expression);
        assert!(matches!(fast.expression, WatermarkExpression::Delayed { column: 1, delay_ms: 4000 }));
        let mut general =
            SqlWatermarks { expression: WatermarkExpression::Other(Arc::new(expression)), current: i64::MIN };
        let mut output = WatermarkOutput::default();
        for row in [
            Row::insert(vec![Value::Int(0), Value::timestamp_millis(10_000)]),
            Row::insert(vec![Value::Int(0), Value::Null]),
            Row::insert(vec![Value::Int(0), Value::timestamp_millis(7_000)]),
        ] {
            fast.on_event(&row, 0, &mut output);
            general.on_event(&row, 0, &mut output);
            assert_eq!(fast.current, general.current);
        }
        assert_eq!(fast.current, 6_000);
    }
}
