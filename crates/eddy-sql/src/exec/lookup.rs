//! The processing-time lookup join (Flink's `LookupJoin` over a filesystem table, as its
//! filesystem lookup source does it): each subtask reads the table whole when it opens,
//! indexed by the lookup keys, and every input row meets the rows of its key at once; a
//! left join pads a row without a match with NULLs. The input's row kind carries over, so
//! an updating input is joined row for row.

use crate::catalog::CatalogTable;
use crate::connector;
use crate::expr::Expr;
use crate::row::Row;
use crate::value::Value;
use eddy_api::{Context, DataStream, FunctionResult, ProcessFunction, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone)]
struct LookupJoin {
    table: Arc<CatalogTable>,
    key_expressions: Arc<Vec<Expr>>,
    keys: Arc<Vec<usize>>,
    condition: Option<Arc<Expr>>,
    left_outer: bool,
    /// The table's rows by the key bytes of their lookup columns (read at open).
    index: Arc<HashMap<Vec<u8>, Vec<Row>>>,
}

impl RichFunction for LookupJoin {
    fn open(&mut self, _ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let rows = connector::lookup_rows(&self.table).map_err(|e| e.to_string())?;
        let mut index: HashMap<Vec<u8>, Vec<Row>> = HashMap::new();
        for row in rows {
            // A NULL key matches nothing (SQL's `=`).
            if self.keys.iter().any(|k| row.fields[*k].is_null()) {
                continue;
            }
            let mut key = Vec::new();
            for k in self.keys.iter() {
                row.fields[*k].encode_key(&mut key);
            }
            index.entry(key).or_default().push(row);
        }
        tracing::info!(table = %self.table.name, keys = index.len(), "lookup join read its table");
        self.index = Arc::new(index);
        Ok(())
    }
}

impl ProcessFunction<Row, Row> for LookupJoin {
    fn process_element(&mut self, row: Row, _ctx: &mut Context<'_>, out: &mut Collector<'_, Row>) -> FunctionResult {
        let mut key = Vec::new();
        let mut null_key = false;
        for e in self.key_expressions.iter() {
            let v = e.eval(&row.fields).map_err(|e| e.0)?;
            null_key |= v.is_null();
            v.encode_key(&mut key);
        }
        let mut matched = false;
        if !null_key {
            for other in self.index.get(&key).map(Vec::as_slice).unwrap_or_default() {
                let mut fields = Vec::with_capacity(row.fields.len() + other.fields.len());
                fields.extend(row.fields.iter().cloned());
                fields.extend(other.fields.iter().cloned());
                if let Some(c) = &self.condition {
                    if !c.eval_condition(&fields).map_err(|e| e.0)? {
                        continue;
                    }
                }
                matched = true;
                out.collect(Row { kind: row.kind, fields });
            }
        }
        if !matched && self.left_outer {
            let mut fields = row.fields;
            fields.extend(std::iter::repeat_n(Value::Null, self.table.fields.len()));
            out.collect(Row { kind: row.kind, fields });
        }
        Ok(())
    }
}

pub fn lookup_join(
    input: DataStream<Row>,
    table: Arc<CatalogTable>,
    (key_expressions, keys): (&[Expr], &[usize]),
    condition: Option<Expr>,
    left_outer: bool,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    let function = LookupJoin {
        table,
        key_expressions: Arc::new(key_expressions.to_vec()),
        keys: Arc::new(keys.to_vec()),
        condition: condition.map(Arc::new),
        left_outer,
        index: Arc::default(),
    };
    input.process(function).name(name).uid(uid)
}
