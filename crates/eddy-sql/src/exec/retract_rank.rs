//! A top-N over an input that retracts (Flink's `RetractableTopNFunction`): the top of a
//! GROUP BY's counts, of a join that updates, of CDC rows.
//!
//! A retraction can take a row out of the top, and then the best row below it moves up:
//! so the partition keeps all its rows in order, not only the top. A row of equal sort
//! key ranks after those that came before it. An added row (`+I`, `+U`) that lands in the
//! top inserts itself and deletes the row it pushes below rank N; a taken-back row (`-U`,
//! `-D`) in the top deletes itself and inserts the row that moves up to rank N. With the
//! row number as a column, every rank whose occupant changed is updated instead (`-U` of
//! the old occupant, `+U` of the new; `+I`/`-D` where a rank fills or empties).
//!
//! The rows of a partition are one ordered vector: a change costs a binary search and a
//! shift of the rows below it, which suits partitions of thousands of rows (a top-N of a
//! GROUP BY over all keys, as `ORDER BY … LIMIT` is, keeps every key's row in one).

use super::rank::{compare_rows, with_rank};
use super::value_descriptor;
use crate::plan::SortKey;
use crate::row::{Row, RowKind};
use eddy_api::{FunctionResult, KeyedContext, KeyedProcessFunction, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ValueState;
use std::cmp::Ordering;
use std::sync::Arc;

#[derive(Clone)]
pub struct RetractableTopN {
    order: Arc<Vec<SortKey>>,
    rank_end: usize,
    output_rank: bool,
    ttl_ms: u64,
    /// Every row of the partition, in rank order.
    state: Option<ValueState<Vec<Row>>>,
}

impl RetractableTopN {
    pub fn new(order: &[SortKey], rank_end: u64, output_rank: bool, ttl_ms: u64) -> Self {
        let rank_end = rank_end.min(usize::MAX as u64) as usize;
        Self { order: Arc::new(order.to_vec()), rank_end, output_rank, ttl_ms, state: None }
    }

    /// Adds a row after every row that sorts before it or equal to it, emitting what
    /// changed in the top.
    fn add(&self, rows: &mut Vec<Row>, row: Row, out: &mut Collector<'_, Row>) {
        let at = rows.partition_point(|r| compare_rows(r, &row, &self.order) != Ordering::Greater);
        rows.insert(at, Row { kind: RowKind::Insert, fields: row.fields });
        if at >= self.rank_end {
            return;
        }
        // The top is rows[..n] now; before, rank k + 1 (k > at) held what is now at k + 1.
        let n = rows.len().min(self.rank_end);
        if self.output_rank {
            for k in at..n {
                match rows.get(k + 1) {
                    Some(old) => {
                        out.collect(with_rank(old, k + 1, RowKind::UpdateBefore));
                        out.collect(with_rank(&rows[k], k + 1, RowKind::UpdateAfter));
                    }
                    None => out.collect(with_rank(&rows[k], k + 1, RowKind::Insert)),
                }
            }
        } else {
            // The row pushed below the top goes before the new one comes.
            if let Some(pushed) = rows.get(self.rank_end) {
                out.collect(Row { kind: RowKind::Delete, fields: pushed.fields.clone() });
            }
            out.collect(rows[at].clone());
        }
    }

    /// Takes back a row equal to `row`, emitting what changed in the top. A row never
    /// added (its state expired) changes nothing.
    fn remove(&self, rows: &mut Vec<Row>, row: &Row, out: &mut Collector<'_, Row>) {
        let first = rows.partition_point(|r| compare_rows(r, row, &self.order) == Ordering::Less);
        let Some(at) = rows[first..]
            .iter()
            .take_while(|r| compare_rows(r, row, &self.order) == Ordering::Equal)
            .position(|r| r.fields == row.fields)
            .map(|i| first + i)
        else {
            return;
        };
        let removed = rows.remove(at);
        if at >= self.rank_end {
            return;
        }
        if self.output_rank {
            // Rank k + 1 held `removed` (k = at) or what is now at k - 1; now rows[k].
            let old_len = (rows.len() + 1).min(self.rank_end);
            for k in at..old_len {
                let old = if k == at { &removed } else { &rows[k - 1] };
                match rows.get(k).filter(|_| k < self.rank_end) {
                    Some(new) => {
                        out.collect(with_rank(old, k + 1, RowKind::UpdateBefore));
                        out.collect(with_rank(new, k + 1, RowKind::UpdateAfter));
                    }
                    None => out.collect(with_rank(old, k + 1, RowKind::Delete)),
                }
            }
        } else {
            out.collect(Row { kind: RowKind::Delete, fields: removed.fields });
            // The best row below the top moves up into it.
            if let Some(up) = rows.get(self.rank_end - 1) {
                out.collect(up.clone());
            }
        }
    }
}

impl RichFunction for RetractableTopN {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.state = Some(ctx.get_state(&value_descriptor("ranked-rows", self.ttl_ms))?);
        Ok(())
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for RetractableTopN {
    fn process_element(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        if self.rank_end == 0 {
            // LIMIT 0: nothing is ever in the top.
            return Ok(());
        }
        let state = self.state.as_ref().ok_or("the top-N is used before open (bug)")?;
        let mut rows = state.take()?.unwrap_or_default();
        if row.kind.is_accumulate() {
            self.add(&mut rows, row, out);
        } else {
            self.remove(&mut rows, &row, out);
        }
        if !rows.is_empty() {
            state.update(rows)?;
        }
        Ok(())
    }
}
