//! Calc (projection and filter), a table's computed columns, and the watermarks its
//! `WATERMARK FOR` clause defines.

use crate::catalog::{CatalogTable, TableColumn};
use crate::expr::Expr;
use crate::row::Row;
use crate::value::Value;
use eddy_api::time::{WatermarkGenerator, WatermarkOutput, WatermarkStrategy};
use eddy_api::{Context, DataStream, FunctionResult, ProcessFunction, RichFunction};
use eddy_runtime::Collector;
use std::sync::Arc;

/// Projection and filter of rows: the filter (if any) is TRUE, then the projection. A
/// projection of columns only moves the values; others are evaluated.
#[derive(Clone)]
pub struct CalcFunction {
    projection: Arc<Vec<Expr>>,
    filter: Option<Arc<Expr>>,
    /// `Some(columns)` when every projected expression is a column read.
    columns: Option<Arc<Vec<usize>>>,
    /// For each projected expression: the column it moves out of the input row (a column
    /// read by nothing else), or `None` to evaluate it.
    moves: Arc<Vec<Option<usize>>>,
}

impl CalcFunction {
    pub fn new(projection: Vec<Expr>, filter: Option<Expr>) -> Self {
        let columns: Option<Vec<usize>> = projection.iter().map(Expr::as_column).collect();
        // How often each column is read by the projection.
        let mut reads: std::collections::HashMap<usize, usize> = Default::default();
        for e in &projection {
            e.visit_columns(&mut |c| *reads.entry(c).or_default() += 1);
        }
        let moves = projection.iter().map(|e| e.as_column().filter(|c| reads[c] == 1)).collect();
        Self {
            projection: Arc::new(projection),
            filter: filter.map(Arc::new),
            columns: columns.map(Arc::new),
            moves: Arc::new(moves),
        }
    }

    /// The output row of `row`, or `None` if the filter drops it.
    pub fn apply(&self, row: Row) -> Result<Option<Row>, String> {
        if let Some(filter) = &self.filter {
            if !filter.eval_condition(&row.fields).map_err(|e| e.0)? {
                return Ok(None);
            }
        }
        let fields = match &self.columns {
            Some(columns) => {
                let mut input = row.fields;
                let mut out = Vec::with_capacity(columns.len());
                for (i, c) in columns.iter().enumerate() {
                    // A column read once moves; one read again is cloned.
                    if columns[i + 1..].contains(c) {
                        out.push(input[*c].clone());
                    } else {
                        out.push(std::mem::replace(&mut input[*c], Value::Null));
                    }
                }
                out
            }
            None => {
                // Computed values first (they read the input), then the columns moved out.
                let mut input = row.fields;
                let mut out = Vec::with_capacity(self.projection.len());
                for (e, moved) in self.projection.iter().zip(self.moves.iter()) {
                    out.push(match moved {
                        Some(_) => Value::Null,
                        None => e.eval(&input).map_err(|e| e.0)?,
                    });
                }
                for (slot, moved) in out.iter_mut().zip(self.moves.iter()) {
                    if let Some(c) = moved {
                        *slot = std::mem::replace(&mut input[*c], Value::Null);
                    }
                }
                out
            }
        };
        Ok(Some(Row { kind: row.kind, fields }))
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
        let watermark = Arc::new(watermark.clone());
        let generator = SqlWatermarks { expression: watermark.clone(), current: i64::MIN };
        let strategy = WatermarkStrategy::for_generator(move || generator.clone())
            .with_timestamp_assigner(move |row: &Row| row.fields[column].as_millis().unwrap_or(i64::MIN));
        let names: Vec<String> = table.fields.iter().map(|f| f.name.clone()).collect();
        stream = stream
            .assign_timestamps_and_watermarks(strategy)
            .name(&format!(
                "WatermarkAssigner(rowtime=[{}], watermark=[{}])",
                table.fields[column].name,
                crate::plan::explain::expression(&watermark, &names)
            ))
            .uid(&format!("{uid}-watermarks"));
    }
    stream
}

/// Flink SQL's watermarks: the largest value of the `WATERMARK FOR` expression over the
/// rows so far, emitted periodically (a row whose expression is NULL leaves it).
#[derive(Clone)]
pub struct SqlWatermarks {
    expression: Arc<Expr>,
    current: i64,
}

impl WatermarkGenerator<Row> for SqlWatermarks {
    fn on_event(&mut self, row: &Row, _timestamp: i64, _output: &mut WatermarkOutput) {
        if let Ok(Value::Timestamp(ms, _)) = self.expression.eval(&row.fields) {
            self.current = self.current.max(ms);
        }
    }

    fn on_periodic_emit(&mut self, output: &mut WatermarkOutput) {
        if self.current > i64::MIN {
            output.emit_watermark(self.current);
        }
    }
}
