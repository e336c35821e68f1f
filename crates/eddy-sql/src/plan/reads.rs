//! Projection push-down into sources: which physical columns of each scanned table a
//! plan reads, and of a ROW column which fields (Flink's `SupportsProjectionPushDown` with
//! nested fields). A source may leave what is not read NULL and skip making it: the
//! Nexmark queries read a few fields of one of three nested rows.
//!
//! Only a Calc directly above a scan is looked into; any other reader of a scan (a join,
//! a window) reads every column. A table's computed columns and its watermark are always
//! evaluated, so what they read is read too.

use super::{Node, Plan};
use crate::catalog::{CatalogTable, TableColumn};
use crate::expr::{Expr, ExprKind};
use std::collections::{BTreeSet, HashMap};

/// What a plan reads of one physical column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnRead {
    Unread,
    /// These fields of a ROW column, and nothing else of it.
    Fields(BTreeSet<usize>),
    Whole,
}

/// What a plan reads of a table's physical columns, in their order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadColumns(pub Vec<ColumnRead>);

impl ReadColumns {
    pub fn all(physical: usize) -> Self {
        Self(vec![ColumnRead::Whole; physical])
    }

    /// Whether field `field` of physical column `column` is read.
    pub fn reads_field(&self, column: usize, field: usize) -> bool {
        match &self.0[column] {
            ColumnRead::Unread => false,
            ColumnRead::Fields(fields) => fields.contains(&field),
            ColumnRead::Whole => true,
        }
    }

    pub fn reads(&self, column: usize) -> bool {
        self.0[column] != ColumnRead::Unread
    }

    fn add(&mut self, column: usize, field: Option<usize>) {
        let read = &mut self.0[column];
        match (read as &ColumnRead, field) {
            (ColumnRead::Whole, _) => {}
            (_, None) => *read = ColumnRead::Whole,
            (ColumnRead::Unread, Some(f)) => *read = ColumnRead::Fields(BTreeSet::from([f])),
            (ColumnRead::Fields(_), Some(f)) => {
                if let ColumnRead::Fields(fields) = read {
                    fields.insert(f);
                }
            }
        }
    }

    /// Adds what `e` reads of the physical row.
    fn add_expression(&mut self, e: &Expr) {
        visit_reads(e, &mut |column, field| self.add(column, field));
    }
}

/// What `plan` reads of each table it scans, by table name.
pub fn read_columns(plan: &Plan) -> HashMap<String, ReadColumns> {
    let mut reads = HashMap::new();
    collect(plan, None, &mut reads);
    reads
}

/// `reader`: the Calc directly above `plan`, if the parent is one.
fn collect(plan: &Plan, reader: Option<(&[Expr], Option<&Expr>)>, reads: &mut HashMap<String, ReadColumns>) {
    match &plan.node {
        Node::Scan { table } => {
            let read = reads.entry(table.name.clone()).or_insert_with(|| computed_reads(table));
            match reader {
                Some((projection, filter)) => {
                    for e in projection.iter().chain(filter) {
                        add_scan_reads(read, table, e);
                    }
                }
                None => *read = ReadColumns::all(table.physical.len()),
            }
        }
        Node::Calc { input, projection, filter } => collect(input, Some((projection, filter.as_ref())), reads),
        _ => {
            for input in plan.inputs() {
                collect(input, None, reads);
            }
        }
    }
}

/// What a table's computed columns and its watermark read (they are always evaluated).
fn computed_reads(table: &CatalogTable) -> ReadColumns {
    let mut read = ReadColumns(vec![ColumnRead::Unread; table.physical.len()]);
    for column in &table.columns {
        if let TableColumn::Computed(e) = column {
            read.add_expression(e);
        }
    }
    // The watermark expression is over the whole row (computed columns included).
    if let Some((_, watermark)) = &table.watermark {
        add_scan_reads(&mut read, table, watermark);
    }
    read
}

/// Adds what `e`, over the scan's output row (physical and computed columns in declared
/// order), reads of the physical row.
fn add_scan_reads(read: &mut ReadColumns, table: &CatalogTable, e: &Expr) {
    visit_reads(e, &mut |column, field| {
        if let Some(TableColumn::Physical(p)) = table.columns.get(column) {
            read.add(*p, field);
        }
    });
}

/// Calls `f(column, Some(field))` for each `column.field` read of a ROW column and
/// `f(column, None)` for each column read otherwise.
fn visit_reads(e: &Expr, f: &mut dyn FnMut(usize, Option<usize>)) {
    if let ExprKind::Field(inner, field) = &e.kind {
        if let Some(column) = inner.as_column() {
            f(column, Some(*field));
            return;
        }
    }
    if let Some(column) = e.as_column() {
        f(column, None);
        return;
    }
    e.visit_children(&mut |child| visit_reads(child, f));
}
