//! Rows of a changelog: every row carries Flink's row kind, so that an updating result
//! (part 2's retractions) is the same data model as an appending one.

use crate::value::Value;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Flink's `RowKind`: what a row does to the table it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RowKind {
    /// `+I`: a new row.
    Insert,
    /// `-U`: the row as it was before an update (retracted).
    UpdateBefore,
    /// `+U`: the row as it is after an update.
    UpdateAfter,
    /// `-D`: a row removed.
    Delete,
}

impl RowKind {
    /// `+I`, `-U`, `+U`, `-D`, as Flink prints them.
    pub fn short_string(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// Whether the row adds to the table (+I, +U) rather than takes away (-U, -D).
    pub fn is_accumulate(self) -> bool {
        matches!(self, RowKind::Insert | RowKind::UpdateAfter)
    }
}

/// A row of a table: its kind and its fields, in the schema's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub kind: RowKind,
    pub fields: Vec<Value>,
}

impl Row {
    pub fn insert(fields: Vec<Value>) -> Self {
        Self { kind: RowKind::Insert, fields }
    }
}

impl fmt::Display for Row {
    /// `+I[1, abc, 2026-01-01T00:00:00.106]`, as Flink's print connector prints a row.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.kind.short_string())?;
        for (i, v) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v}")?;
        }
        f.write_str("]")
    }
}
