//! Plans: what a query computes, as a tree of nodes that each know their output columns
//! and their changelog mode. [`builder`] makes the tree from a query, [`rules`] push
//! filters and projections down and pick join strategies, [`reads`] finds what sources
//! may leave out, [`explain`] prints it, and
//! `crate::exec` turns it into eddy operators.

pub mod aggregate;
pub mod builder;
pub mod changelog;
pub mod explain;
pub mod reads;
pub mod rules;

use crate::catalog::CatalogTable;
use crate::expr::Expr;
use crate::types::{DataType, Field, TimeAttribute, TypeKind};
use crate::value::Value;
use aggregate::AggregateCall;
use std::sync::Arc;

/// What a node's output does to the table it describes (Flink's `ChangelogMode`): which
/// row kinds it emits. Insert-only outputs append; the others update rows emitted
/// before, by retraction (`-U` then `+U`) and deletion (`-D`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ChangelogMode {
    /// Emits `+U` rows (and `-U` before each, where `update_before`).
    pub updates: bool,
    /// Emits `-U` before each `+U`: what a consumer that is not keyed by the same key
    /// needs to retract the old row.
    pub update_before: bool,
    /// Emits `-D` rows.
    pub deletes: bool,
}

impl ChangelogMode {
    /// `[I]`: every row is +I.
    pub const INSERT_ONLY: ChangelogMode = ChangelogMode { updates: false, update_before: false, deletes: false };
    /// `[I,UB,UA]`: rows are updated, never deleted (an aggregation of an insert-only input).
    pub const UPDATES: ChangelogMode = ChangelogMode { updates: true, update_before: true, deletes: false };
    /// `[I,UB,UA,D]`: rows are retracted, updated and deleted.
    pub const RETRACT: ChangelogMode = ChangelogMode { updates: true, update_before: true, deletes: true };
    /// `[I,UA,D]`: updates by key, without the row before.
    pub const UPSERT: ChangelogMode = ChangelogMode { updates: true, update_before: false, deletes: true };

    pub fn is_insert_only(self) -> bool {
        !self.updates && !self.deletes
    }

    /// The kinds both emit.
    pub fn union(self, other: ChangelogMode) -> ChangelogMode {
        ChangelogMode {
            updates: self.updates || other.updates,
            update_before: self.update_before || other.update_before,
            deletes: self.deletes || other.deletes,
        }
    }

    /// `[I]`, `[I,UB,UA]`, `[I,UB,UA,D]`, `[I,UA,D]`, as Flink's EXPLAIN prints them.
    pub fn short(self) -> String {
        let mut kinds = vec!["I"];
        if self.updates && self.update_before {
            kinds.push("UB");
        }
        if self.updates {
            kinds.push("UA");
        }
        if self.deletes {
            kinds.push("D");
        }
        format!("[{}]", kinds.join(","))
    }

    /// What a consumer that takes only inserts is refused (Flink's words: "update", "update
    /// and delete", "delete").
    pub fn changes_text(self) -> &'static str {
        match (self.updates, self.deletes) {
            (true, true) => "update and delete",
            (true, false) => "update",
            _ => "delete",
        }
    }
}

/// A node and its output.
#[derive(Clone, Debug)]
pub struct Plan {
    pub node: Node,
    pub fields: Vec<Field>,
    pub changelog: ChangelogMode,
    /// The output's `window_start` and `window_end` columns, where the output is windowed
    /// (Flink's window properties): what a later window aggregation or join can group by.
    pub window: Option<WindowColumns>,
}

/// Where a windowed output keeps its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowColumns {
    pub start: usize,
    pub end: usize,
    pub time: TimeAttribute,
}

/// The window of a window table function or a group window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowKind {
    Tumble {
        size: i64,
        offset: i64,
    },
    Hop {
        slide: i64,
        size: i64,
        offset: i64,
    },
    Cumulate {
        step: i64,
        size: i64,
        offset: i64,
    },
    Session {
        gap: i64,
    },
    /// The windows an input already carries as its `window_start` and `window_end`
    /// columns (a window aggregation over another one's result): each row belongs to the
    /// window its columns name. `time_column` is the start column, the end follows it.
    Attached,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    pub kind: WindowKind,
    /// The time attribute column of the input the windows follow.
    pub time_column: usize,
    pub time: TimeAttribute,
}

impl WindowSpec {
    pub fn describe(&self, names: &[String]) -> String {
        let column = names.get(self.time_column).cloned().unwrap_or_else(|| format!("${}", self.time_column));
        let ms = |v: i64| format!("{v} ms");
        match &self.kind {
            WindowKind::Tumble { size, .. } => format!("TUMBLE(time_col=[{column}], size=[{}])", ms(*size)),
            WindowKind::Hop { slide, size, .. } => {
                format!("HOP(time_col=[{column}], size=[{}], slide=[{}])", ms(*size), ms(*slide))
            }
            WindowKind::Cumulate { step, size, .. } => {
                format!("CUMULATE(time_col=[{column}], max_size=[{}], step=[{}])", ms(*size), ms(*step))
            }
            WindowKind::Session { gap } => format!("SESSION(time_col=[{column}], gap=[{}])", ms(*gap)),
            WindowKind::Attached => format!("WindowAttached(start=[{column}])"),
        }
    }
}

/// The rows an OVER aggregate of a row covers, up to the row itself: the `preceding`
/// rows before it (`rows`) or those at most `preceding` ms older (RANGE; its peers of the
/// same time included), all of them where `preceding` is `None` (UNBOUNDED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverFrame {
    pub rows: bool,
    pub preceding: Option<i64>,
}

/// One key of an ORDER BY: a column, its direction, and whether NULLs come first
/// (Flink's default: NULL is the smallest value, first ascending and last descending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    pub column: usize,
    pub ascending: bool,
    pub nulls_first: bool,
}

/// Which rows a join keeps: matches only, or also those of one side or both without a
/// match (padded with NULLs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinType {
    Inner,
    Left,
    Right,
    Full,
}

impl JoinType {
    /// As Flink's plans name it.
    pub fn name(self) -> &'static str {
        match self {
            JoinType::Inner => "InnerJoin",
            JoinType::Left => "LeftOuterJoin",
            JoinType::Right => "RightOuterJoin",
            JoinType::Full => "FullOuterJoin",
        }
    }
    /// Left rows without a match are kept (padded with NULLs on the right).
    pub fn keeps_left(self) -> bool {
        matches!(self, JoinType::Left | JoinType::Full)
    }
    /// Right rows without a match are kept.
    pub fn keeps_right(self) -> bool {
        matches!(self, JoinType::Right | JoinType::Full)
    }
}

/// How an inner join of two insert-only inputs runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinStrategy {
    /// Every row of both sides kept (until `table.exec.state.ttl`).
    Regular,
    /// `l.rowtime BETWEEN r.rowtime + lower AND r.rowtime + upper` (both inclusive): rows
    /// kept until the watermark passes their bound.
    Interval { left_time: usize, right_time: usize, lower: i64, upper: i64 },
    /// Both sides are windowed aggregates or TVFs of the same windows, joined on their
    /// window start and end: rows kept until their window ends.
    Window { left_end: usize, right_end: usize },
}

#[derive(Clone, Debug)]
pub enum Node {
    /// A catalog table's rows through its connector.
    Scan {
        table: Arc<CatalogTable>,
    },
    /// Rows a program gave (`TableEnvironment::from_data_stream`) or `VALUES`.
    Values {
        rows: Vec<Vec<Value>>,
    },
    /// A registered data stream, by its index in the environment.
    DataStream {
        index: usize,
    },
    /// Projection and filter: the output row is `projection` over the input rows for
    /// which `filter` is TRUE.
    Calc {
        input: Box<Plan>,
        projection: Vec<Expr>,
        filter: Option<Expr>,
    },
    /// A window table function left as it is (not under a window aggregation): the input
    /// row and `window_start`, `window_end`, `window_time`, once per window.
    WindowTableFunction {
        input: Box<Plan>,
        window: WindowSpec,
    },
    /// Aggregation per key and window: the output row is the keys, the aggregates, then
    /// `window_start`, `window_end` and `window_time`.
    WindowAggregate {
        input: Box<Plan>,
        window: WindowSpec,
        keys: Vec<usize>,
        aggregates: Vec<AggregateCall>,
    },
    /// A join: the output row is the left row then the right row.
    Join {
        join_type: JoinType,
        left: Box<Plan>,
        right: Box<Plan>,
        left_keys: Vec<usize>,
        right_keys: Vec<usize>,
        /// The rest of the condition, over the joined row.
        condition: Option<Expr>,
        strategy: JoinStrategy,
    },
    Union {
        inputs: Vec<Plan>,
    },
    /// `ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)` with a filter on it (Flink's
    /// `Rank`): the rows ranked `1..=rank_end` of each partition, and their rank as a last
    /// column where `output_rank`. `rank_end` is `None` until a filter bounds it.
    Rank {
        input: Box<Plan>,
        partition_keys: Vec<usize>,
        order: Vec<SortKey>,
        rank_end: Option<u64>,
        output_rank: bool,
        /// A window TopN (Flink's `WindowRank`): the partition holds the input's window
        /// (start and end), whose rows are ranked once, when the window ends.
        window: Option<WindowColumns>,
    },
    /// The first or last row of each key by a time attribute (Flink's `Deduplicate`: a
    /// rank of 1 ordered by time, without the rank column).
    Deduplicate {
        input: Box<Plan>,
        keys: Vec<usize>,
        keep_last: bool,
        time_column: usize,
        time: TimeAttribute,
    },
    /// A processing-time join against a table whose source answers lookups (`JOIN t FOR
    /// SYSTEM_TIME AS OF l.proctime ON …`, Flink's `LookupJoin`): each input row meets the
    /// table's rows whose `keys` columns equal its `key_expressions`; the output row is
    /// the input row then the table's.
    LookupJoin {
        input: Box<Plan>,
        table: Arc<CatalogTable>,
        key_expressions: Vec<Expr>,
        keys: Vec<usize>,
        /// The rest of the condition, over the joined row.
        condition: Option<Expr>,
        left_outer: bool,
    },
    /// An event-time temporal join (`JOIN r FOR SYSTEM_TIME AS OF l.rowtime ON …`, Flink's
    /// `TemporalJoin`) against a versioned table (a primary key and a watermark): each left
    /// row meets the version of its key that was valid at its time, once the watermarks of
    /// both sides passed it. The output row is the left row then the right.
    TemporalJoin {
        left: Box<Plan>,
        right: Box<Plan>,
        key_expressions: Vec<Expr>,
        keys: Vec<usize>,
        left_time: usize,
        right_time: usize,
        condition: Option<Expr>,
        left_outer: bool,
    },
    /// Aggregates over each row's frame of its partition, ordered by a time attribute
    /// (Flink's `OverAggregate`): the output row is the input row then each aggregate.
    OverAggregate {
        input: Box<Plan>,
        partition_keys: Vec<usize>,
        time_column: usize,
        time: TimeAttribute,
        frame: OverFrame,
        aggregates: Vec<AggregateCall>,
    },
    /// Aggregation per key without a window (Flink's `GroupAggregate`): the output row is
    /// the keys then the aggregates, updated as rows of the key arrive or are retracted.
    /// Without aggregates it is `SELECT DISTINCT`.
    GroupAggregate {
        input: Box<Plan>,
        keys: Vec<usize>,
        aggregates: Vec<AggregateCall>,
    },
}

impl Node {
    /// The same node over inputs `f` made of its inputs (what a rule that only recurses
    /// does with a node it does not rewrite).
    pub fn map_inputs(self, mut f: impl FnMut(Plan) -> Plan) -> Node {
        let mut boxed = |p: Box<Plan>| Box::new(f(*p));
        match self {
            Node::Scan { .. } | Node::Values { .. } | Node::DataStream { .. } => self,
            Node::Calc { input, projection, filter } => Node::Calc { input: boxed(input), projection, filter },
            Node::WindowTableFunction { input, window } => Node::WindowTableFunction { input: boxed(input), window },
            Node::WindowAggregate { input, window, keys, aggregates } => {
                Node::WindowAggregate { input: boxed(input), window, keys, aggregates }
            }
            Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy } => {
                let left = boxed(left);
                let right = boxed(right);
                Node::Join { join_type, left, right, left_keys, right_keys, condition, strategy }
            }
            Node::Union { inputs } => Node::Union { inputs: inputs.into_iter().map(f).collect() },
            Node::GroupAggregate { input, keys, aggregates } => {
                Node::GroupAggregate { input: boxed(input), keys, aggregates }
            }
            Node::Rank { input, partition_keys, order, rank_end, output_rank, window } => {
                Node::Rank { input: boxed(input), partition_keys, order, rank_end, output_rank, window }
            }
            Node::TemporalJoin { left, right, key_expressions, keys, left_time, right_time, condition, left_outer } => {
                let (left, right) = (boxed(left), boxed(right));
                Node::TemporalJoin { left, right, key_expressions, keys, left_time, right_time, condition, left_outer }
            }
            Node::OverAggregate { input, partition_keys, time_column, time, frame, aggregates } => {
                Node::OverAggregate { input: boxed(input), partition_keys, time_column, time, frame, aggregates }
            }
            Node::LookupJoin { input, table, key_expressions, keys, condition, left_outer } => {
                Node::LookupJoin { input: boxed(input), table, key_expressions, keys, condition, left_outer }
            }
            Node::Deduplicate { input, keys, keep_last, time_column, time } => {
                Node::Deduplicate { input: boxed(input), keys, keep_last, time_column, time }
            }
        }
    }
}

impl Plan {
    pub fn new(node: Node, fields: Vec<Field>) -> Self {
        let window = window_columns_of(&node);
        Self { node, fields, changelog: ChangelogMode::INSERT_ONLY, window }
    }

    /// A node with a known changelog mode (the rules rebuild nodes with it).
    pub fn with(node: Node, fields: Vec<Field>, changelog: ChangelogMode) -> Self {
        Self { changelog, ..Self::new(node, fields) }
    }

    pub fn names(&self) -> Vec<String> {
        self.fields.iter().map(|f| f.name.clone()).collect()
    }

    pub fn inputs(&self) -> Vec<&Plan> {
        match &self.node {
            Node::Scan { .. } | Node::Values { .. } | Node::DataStream { .. } => vec![],
            Node::Calc { input, .. }
            | Node::WindowTableFunction { input, .. }
            | Node::WindowAggregate { input, .. }
            | Node::GroupAggregate { input, .. }
            | Node::Rank { input, .. }
            | Node::LookupJoin { input, .. }
            | Node::OverAggregate { input, .. }
            | Node::Deduplicate { input, .. } => vec![input],
            Node::Join { left, right, .. } | Node::TemporalJoin { left, right, .. } => vec![left, right],
            Node::Union { inputs } => inputs.iter().collect(),
        }
    }

    /// The rowtime attribute column of the output, if one is.
    pub fn rowtime(&self) -> Option<usize> {
        self.fields.iter().position(|f| f.ty.time_attribute() == Some(TimeAttribute::Rowtime))
    }
}

/// The window columns a node's output carries: a window aggregation's or table
/// function's own, or those a Calc passes through.
fn window_columns_of(node: &Node) -> Option<WindowColumns> {
    match node {
        Node::WindowAggregate { keys, aggregates, window, .. } => {
            let start = keys.len() + aggregates.len();
            Some(WindowColumns { start, end: start + 1, time: window.time })
        }
        Node::WindowTableFunction { input, window } => {
            let start = input.fields.len();
            Some(WindowColumns { start, end: start + 1, time: window.time })
        }
        Node::Rank { input, window: Some(_), .. } => input.window,
        Node::Calc { input, projection, .. } => {
            let w = input.window?;
            let start = projection.iter().position(|e| e.as_column() == Some(w.start))?;
            let end = projection.iter().position(|e| e.as_column() == Some(w.end))?;
            Some(WindowColumns { start, end, time: w.time })
        }
        _ => None,
    }
}

/// The output fields of a window aggregation or table function's window columns.
pub fn window_fields(time: TimeAttribute) -> [Field; 3] {
    let plain = DataType::not_null(TypeKind::Timestamp { precision: 3, attribute: None });
    let time_ty = match time {
        TimeAttribute::Rowtime => {
            DataType::not_null(TypeKind::Timestamp { precision: 3, attribute: Some(TimeAttribute::Rowtime) })
        }
        TimeAttribute::Proctime => {
            DataType::not_null(TypeKind::TimestampLtz { precision: 3, attribute: Some(TimeAttribute::Proctime) })
        }
    };
    [Field::new("window_start", plain.clone()), Field::new("window_end", plain), Field::new("window_time", time_ty)]
}
