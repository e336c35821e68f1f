//! Flink's ChangelogNormalize: an upsert source's records (`+U` of a key's latest row, `-D`
//! of a key) made a changelog that downstream operators can take rows back from. Keyed by
//! the primary key, it keeps each key's last row: `+I` for a new key, `-U` of the old row
//! and `+U` of the new for a changed one (nothing for a record that repeats the row), `-D`
//! of the whole last row for a delete (nothing for a key it does not have). Its state
//! expires after `table.exec.state.ttl`, as Flink's does.

use super::{keyed_process, value_descriptor};
use crate::row::{Row, RowKind};
use eddy_api::{DataStream, FunctionResult, KeyedContext, KeyedProcessFunction, RichFunction, RuntimeContext};
use eddy_runtime::Collector;
use eddy_state::ValueState;

#[derive(Clone)]
struct ChangelogNormalize {
    ttl_ms: u64,
    last: Option<ValueState<Row>>,
}

impl RichFunction for ChangelogNormalize {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.last = Some(ctx.get_state(&value_descriptor("last-row", self.ttl_ms))?);
        Ok(())
    }
}

impl KeyedProcessFunction<Vec<u8>, Row, Row> for ChangelogNormalize {
    fn process_element(
        &mut self,
        row: Row,
        _ctx: &mut KeyedContext<'_, Vec<u8>>,
        out: &mut Collector<'_, Row>,
    ) -> FunctionResult {
        let last = self.last.as_ref().ok_or("the changelog normalization is used before open (bug)")?;
        if !row.kind.is_accumulate() {
            if let Some(gone) = last.take()? {
                out.collect(Row { kind: RowKind::Delete, fields: gone.fields });
            }
            return Ok(());
        }
        let new = Row { kind: RowKind::Insert, fields: row.fields };
        match last.with_value(|old| old.map(|old| old.fields == new.fields))? {
            Some(true) => {}
            Some(false) => match last.take()? {
                Some(old) => {
                    out.collect(Row { kind: RowKind::UpdateBefore, fields: old.fields });
                    out.collect(Row { kind: RowKind::UpdateAfter, fields: new.fields.clone() });
                    last.update(new)?;
                }
                // Expired between the two reads: a new key again.
                None => {
                    out.collect(new.clone());
                    last.update(new)?;
                }
            },
            None => {
                out.collect(new.clone());
                last.update(new)?;
            }
        }
        Ok(())
    }
}

/// The ChangelogNormalize after an upsert source: rows keyed by the primary key's columns.
pub fn changelog_normalize(
    input: DataStream<Row>,
    keys: &[usize],
    ttl_ms: u64,
    name: &str,
    uid: &str,
) -> DataStream<Row> {
    keyed_process(input, keys, ChangelogNormalize { ttl_ms, last: None }, name, uid)
}
