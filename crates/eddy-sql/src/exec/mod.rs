//! From a plan to eddy operators: every node becomes DataStream operators of rows, named
//! as the plan prints the node (the dashboard and REST show those names) and with a uid
//! made of the statement's hash and the node's place in the plan, so that a restart of the
//! same statement text restores each operator's state.

pub mod aggregate;
mod calc;
mod changelog_join;
mod changelog_normalize;
mod group_aggregate;
mod join;
mod lookup;
mod outer_interval_join;
mod over;
mod rank;
mod retract_rank;
mod temporal;
mod window;

use crate::connector;
use crate::error::SqlError;
use crate::plan::reads::{self, ReadColumns};
use crate::plan::{explain, JoinStrategy, JoinType, Node, Plan};
use crate::row::Row;
use eddy_api::{DataStream, Env, KeyedProcessFunction};
use eddy_state::{ListStateDescriptor, StateTtlConfig, TtlUpdateType, ValueStateDescriptor};
use std::sync::Arc;

pub use calc::{CalcFunction, SqlWatermarks};
pub use window::key_bytes;

/// `table.exec.state.ttl` as a state's time to live (0: none): every SQL operator's state
/// expires as Flink's does, counted from the last write.
fn state_ttl(ttl_ms: u64) -> Option<StateTtlConfig> {
    (ttl_ms > 0).then_some(StateTtlConfig { ttl_ms, update_type: TtlUpdateType::OnCreateAndWrite })
}

/// A value state of a SQL operator, expiring after `table.exec.state.ttl`.
fn value_descriptor<T>(name: &str, ttl_ms: u64) -> ValueStateDescriptor<T> {
    let d = ValueStateDescriptor::new(name);
    match state_ttl(ttl_ms) {
        Some(ttl) => d.with_ttl(ttl),
        None => d,
    }
}

/// A list state of a SQL operator, expiring after `table.exec.state.ttl`.
fn list_descriptor<T>(name: &str, ttl_ms: u64) -> ListStateDescriptor<T> {
    let d = ListStateDescriptor::new(name);
    match state_ttl(ttl_ms) {
        Some(ttl) => d.with_ttl(ttl),
        None => d,
    }
}

/// Rows keyed by the values of `keys` (all to one subtask without keys), then a keyed
/// function: the shape of every unwindowed keyed SQL operator.
fn keyed_process<F>(input: DataStream<Row>, keys: &[usize], function: F, name: &str, uid: &str) -> DataStream<Row>
where
    F: KeyedProcessFunction<Vec<u8>, Row, Row>,
{
    let routing = Arc::new(keys.to_vec());
    input.key_by(move |row: &Row| key_bytes(row, &routing)).process(function).name(name).uid(uid)
}

/// What the translation needs from the session: its options and the uids' prefix.
#[derive(Debug, Clone, Default)]
pub struct ExecConfig {
    /// `table.exec.state.ttl` in milliseconds (0: kept forever).
    pub state_ttl_ms: u64,
    /// Makes uids unique per statement and stable across runs of the same text.
    pub uid_prefix: String,
}

pub struct Translator<'e> {
    pub env: &'e Env,
    pub config: &'e ExecConfig,
    /// Streams a program registered as tables.
    pub data_streams: &'e [DataStream<Row>],
    next: usize,
    /// Streams translated so far by their subplan: a subplan that occurs twice (a
    /// table two views of one query read) runs once and feeds both (Flink's source and
    /// sub-plan reuse).
    translated: std::collections::HashMap<String, DataStream<Row>>,
    /// What the plan reads of each table it scans (by name), found at the root.
    reads: Option<std::collections::HashMap<String, ReadColumns>>,
}

impl<'e> Translator<'e> {
    pub fn new(env: &'e Env, config: &'e ExecConfig, data_streams: &'e [DataStream<Row>]) -> Self {
        Self { env, config, data_streams, next: 0, translated: Default::default(), reads: None }
    }

    /// The uid of the next operator of this statement.
    pub fn uid(&mut self, kind: &str) -> String {
        self.next += 1;
        format!("{}-{}-{kind}", self.config.uid_prefix, self.next)
    }

    /// The operators of a plan (the root's, or a subplan's).
    pub fn translate(&mut self, plan: &Plan) -> Result<DataStream<Row>, SqlError> {
        if self.reads.is_none() {
            self.reads = Some(reads::read_columns(plan));
        }
        // The whole subplan, every expression and value of it (not its short description).
        let key = format!("{plan:?}");
        if let Some(stream) = self.translated.get(&key) {
            return Ok(stream.clone());
        }
        let stream = self.translate_once(plan)?;
        self.translated.insert(key, stream.clone());
        Ok(stream)
    }

    fn translate_once(&mut self, plan: &Plan) -> Result<DataStream<Row>, SqlError> {
        let name = explain::describe(plan);
        let stream = match &plan.node {
            Node::Scan { table } => {
                let uid = self.uid("source");
                let all = ReadColumns::all(table.physical.len());
                let read = self.reads.as_ref().and_then(|r| r.get(&table.name)).unwrap_or(&all);
                let source = connector::source(table, self.env, &uid, read)?;
                let uid = self.uid("computed");
                let stream = calc::computed_columns_and_watermarks(source, table, &uid);
                if !connector::emits_upserts(table) {
                    stream
                } else {
                    // Watermarks come from the scan's subtasks, before the keyed normalization.
                    let keys: Vec<usize> = (table.primary_key.iter())
                        .filter_map(|k| plan.fields.iter().position(|f| &f.name == k))
                        .collect();
                    let name = format!("ChangelogNormalize(key=[{}])", table.primary_key.join(", "));
                    let (uid, ttl) = (self.uid("changelog-normalize"), self.config.state_ttl_ms);
                    changelog_normalize::changelog_normalize(stream, &keys, ttl, &name, &uid)
                }
            }
            Node::Values { rows } => {
                let rows: Vec<Row> = rows.iter().map(|r| Row::insert(r.clone())).collect();
                let uid = self.uid("values");
                self.env.from_collection(rows).set_parallelism(1).name(&name).uid(&uid)
            }
            Node::DataStream { index } => self.data_streams[*index].clone(),
            Node::Calc { input, projection, filter } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("calc");
                let function = CalcFunction::new(projection.clone(), filter.clone());
                input_stream.process(function).name(&name).uid(&uid)
            }
            Node::WindowTableFunction { input, window } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("window-table-function");
                window::table_function(input_stream, input, window, &name, &uid)?
            }
            Node::WindowAggregate { input, window, keys, aggregates } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("window-aggregate");
                window::aggregate(input_stream, input, window, keys, aggregates, &name, &uid)?
            }
            Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy } => {
                let l = self.translate(left)?;
                let r = self.translate(right)?;
                let uid = self.uid("join");
                let updates = !left.changelog.is_insert_only() || !right.changelog.is_insert_only();
                if let (JoinStrategy::Interval { left_time, right_time, lower, upper }, false) =
                    (strategy, *join_type == JoinType::Inner)
                {
                    let widths = (left.fields.len(), right.fields.len());
                    let keys = (left_keys.as_slice(), right_keys.as_slice());
                    let (times, bounds) = ((*left_time, *right_time), (*lower, *upper));
                    let c = condition.clone();
                    outer_interval_join::outer_interval_join(
                        *join_type,
                        (l, r),
                        widths,
                        keys,
                        times,
                        bounds,
                        c,
                        &name,
                        &uid,
                    )
                } else if *join_type != JoinType::Inner || updates {
                    let widths = (left.fields.len(), right.fields.len());
                    let ttl = self.config.state_ttl_ms;
                    let keys = (left_keys.as_slice(), right_keys.as_slice());
                    let c = condition.clone();
                    changelog_join::changelog_join(*join_type, (l, r), widths, keys, c, ttl, &name, &uid)
                } else {
                    join::join(
                        self,
                        (l, left),
                        (r, right),
                        (left_keys, right_keys),
                        condition.clone(),
                        strategy,
                        &name,
                        &uid,
                    )?
                }
            }
            Node::GroupAggregate { input, keys, aggregates } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("group-aggregate");
                let retracts = !input.changelog.is_insert_only();
                let ttl = self.config.state_ttl_ms;
                group_aggregate::group_aggregate(input_stream, keys, aggregates, retracts, ttl, &name, &uid)
            }
            Node::Rank { input, partition_keys, order, rank_end, output_rank, window } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("rank");
                let end =
                    rank_end.ok_or_else(|| SqlError::unsupported(None, "ROW_NUMBER() OVER without a filter on it"))?;
                let ttl = self.config.state_ttl_ms;
                if input.changelog.is_insert_only() || window.is_some() {
                    let top = rank::TopN::new(order, end, *output_rank, ttl, *window);
                    keyed_process(input_stream, partition_keys, top, &name, &uid)
                } else {
                    let top = retract_rank::RetractableTopN::new(order, end, *output_rank, ttl);
                    keyed_process(input_stream, partition_keys, top, &name, &uid)
                }
            }
            Node::TemporalJoin { left, right, key_expressions, keys, left_time, right_time, condition, left_outer } => {
                let l = self.translate(left)?;
                let r = self.translate(right)?;
                let uid = self.uid("temporal-join");
                let width = right.fields.len();
                let (times, c) = ((*left_time, *right_time), condition.clone());
                temporal::temporal_join((l, r), (key_expressions, keys), times, width, c, *left_outer, &name, &uid)
            }
            Node::OverAggregate { input, partition_keys, time_column, time, frame, aggregates } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("over-aggregate");
                over::over_aggregate(
                    input_stream,
                    partition_keys,
                    (*time_column, *time),
                    *frame,
                    aggregates,
                    &name,
                    &uid,
                )
            }
            Node::LookupJoin { input, table, key_expressions, keys, condition, left_outer } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("lookup-join");
                let (table, condition) = (table.clone(), condition.clone());
                lookup::lookup_join(input_stream, table, (key_expressions, keys), condition, *left_outer, &name, &uid)
            }
            Node::Deduplicate { input, keys, keep_last, time_column, time } => {
                let input_stream = self.translate(input)?;
                let uid = self.uid("deduplicate");
                let ttl = self.config.state_ttl_ms;
                rank::deduplicate(input_stream, keys, *keep_last, (*time_column, *time), ttl, &name, &uid)
            }
            Node::Union { inputs } => {
                let mut streams = Vec::new();
                for input in inputs {
                    streams.push(self.translate(input)?);
                }
                let first = streams.remove(0);
                first.union(&streams)
            }
        };
        // Event time follows the output's rowtime column, wherever the node put it.
        Ok(match plan.rowtime() {
            Some(column) => stream.with_timestamps(move |row: &Row| row.fields[column].as_millis().unwrap_or(i64::MIN)),
            None => stream,
        })
    }
}
