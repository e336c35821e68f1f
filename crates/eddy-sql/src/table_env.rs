//! The `TableEnvironment` (Flink's `StreamTableEnvironment`): runs SQL statements over a
//! catalog — DDL changes the catalog, `INSERT INTO` runs a job that writes a table, a
//! query run as a statement prints its changelog, `EXPLAIN` shows the plan — and moves
//! append-only tables to and from DataStreams.

use crate::catalog::{Catalog, CatalogTable, CatalogView, TableColumn};
use crate::connector::{self, PrintRowSink};
use crate::error::{Location, SqlError};
use crate::exec::{ExecConfig, Translator};
use crate::expr::ScalarFunction;
use crate::parser::{self, Statement, StatementKind};
use crate::plan::builder::Builder;
use crate::plan::{changelog, explain, rules, Node, Plan};
use crate::row::Row;
use crate::types::{DataType, Field};
use eddy_api::{DataStream, Env};
use eddy_jobmaster::JobResult;
use sqlparser::ast::Query;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a statement did.
#[derive(Debug)]
pub enum TableResult {
    /// DDL or SET: nothing to show.
    Ok,
    /// Lines to show (EXPLAIN, SHOW, DESCRIBE).
    Text(String),
    /// The job an INSERT or a query ran.
    Job(Box<JobResult>),
}

/// Makes the environment of each job a statement runs (the CLI's applies the command
/// line: parallelism, checkpoints, a cluster to submit to).
pub type EnvFactory = Box<dyn Fn() -> Result<Env, String>>;

pub struct TableEnvironment {
    catalog: Catalog,
    /// SET options.
    options: BTreeMap<String, String>,
    make_env: EnvFactory,
    /// The environment of `create(env)`: every statement builds into it.
    shared: Option<Env>,
    data_streams: Vec<DataStream<Row>>,
    /// A job ran on the shared environment (its operators stay in it).
    ran_shared: bool,
}

/// A parsed Flink duration: `10 s`, `10s`, `1 min`, `500 ms`, `1h`, `2 d`, or milliseconds.
pub fn parse_duration(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().ok()?;
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(factor)
}

impl TableEnvironment {
    /// A table environment whose statements each run as a job of an environment
    /// `make_env` makes.
    pub fn new(make_env: EnvFactory) -> Self {
        Self {
            catalog: Catalog::default(),
            options: BTreeMap::new(),
            make_env,
            shared: None,
            data_streams: Vec::new(),
            ran_shared: false,
        }
    }

    /// A table environment on `env` (Flink's `StreamTableEnvironment.create(env)`): tables
    /// from and to DataStreams of `env`; an INSERT runs `env`'s job.
    pub fn create(env: &Env) -> Self {
        let shared = env.clone();
        let mut t = Self::new(Box::new(move || Ok(shared.clone())));
        t.shared = Some(env.clone());
        t
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// A SET option's value.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    pub fn set_option(&mut self, key: &str, value: &str) {
        self.options.insert(key.to_string(), value.to_string());
    }

    /// Makes a Rust function available to `CREATE FUNCTION name AS 'identifier'`, and
    /// by its own name at once.
    pub fn register_function(&mut self, identifier: &str, function: impl ScalarFunction) {
        self.catalog.register_function(identifier, Arc::new(function));
    }

    /// Runs every statement of a script in order (Flink's SQL client `-f`).
    pub fn execute_script(
        &mut self,
        script: &str,
        mut each: impl FnMut(&Statement, TableResult),
    ) -> Result<(), SqlError> {
        for statement in parser::parse_script(script)? {
            let result = self.execute_statement(&statement)?;
            each(&statement, result);
        }
        Ok(())
    }

    /// Runs one statement (Flink's `executeSql`).
    pub fn execute_sql(&mut self, sql: &str) -> Result<TableResult, SqlError> {
        let statements = parser::parse_script(sql)?;
        match statements.as_slice() {
            [one] => self.execute_statement(one),
            [] => Err(SqlError::validation(None, "no statement")),
            _ => Err(SqlError::validation(None, "execute_sql runs one statement; execute_script runs several")),
        }
    }

    fn execute_statement(&mut self, statement: &Statement) -> Result<TableResult, SqlError> {
        let location = statement.location;
        match &statement.kind {
            StatementKind::Set { key, value } => {
                if !key.is_empty() {
                    self.check_option(key, value, location)?;
                    self.options.insert(key.clone(), value.clone());
                }
                Ok(TableResult::Ok)
            }
            StatementKind::Reset { key } => {
                match key {
                    Some(k) => {
                        self.options.remove(k);
                    }
                    None => self.options.clear(),
                }
                Ok(TableResult::Ok)
            }
            StatementKind::CreateTable(ddl) => {
                self.catalog.create_table(ddl)?;
                Ok(TableResult::Ok)
            }
            StatementKind::CreateView { name, if_not_exists, columns, query, .. } => {
                // Planned now, so that an error in the view shows where it is defined.
                let mut builder = Builder::new(&self.catalog);
                builder.query(query)?;
                let view = CatalogView { name: name.clone(), query: query.clone(), columns: columns.clone() };
                self.catalog.create_view(view, *if_not_exists, location)?;
                Ok(TableResult::Ok)
            }
            StatementKind::CreateFunction { name, identifier, if_not_exists } => {
                self.catalog.create_function(name, identifier, *if_not_exists, location)?;
                Ok(TableResult::Ok)
            }
            StatementKind::Drop { what, name, if_exists } => {
                self.catalog.drop(what, name, *if_exists, location)?;
                Ok(TableResult::Ok)
            }
            StatementKind::ShowTables => Ok(TableResult::Text(self.catalog.table_names().join("\n"))),
            StatementKind::ShowFunctions => Ok(TableResult::Text(self.catalog.function_names().join("\n"))),
            StatementKind::Describe(name) => {
                let table = self
                    .catalog
                    .table(name)
                    .ok_or_else(|| SqlError::validation(Some(location), format!("Object '{name}' not found")))?;
                let lines: Vec<String> = table.fields.iter().map(|f| format!("{} {}", f.name, f.ty)).collect();
                Ok(TableResult::Text(lines.join("\n")))
            }
            StatementKind::Explain(inner) => Ok(TableResult::Text(self.explain(inner, location)?)),
            StatementKind::Insert { table, columns, query, overwrite } => {
                if *overwrite {
                    return Err(SqlError::unsupported(
                        Some(location),
                        "INSERT OVERWRITE in streaming mode (Flink refuses it too)",
                    ));
                }
                let env = self.job_env()?;
                let (target, plan) = self.plan_insert(table, columns, query, location)?;
                let uid_prefix = uid_prefix(&statement.text);
                self.build_insert(&env, &target, &plan, &uid_prefix)?;
                let name = self
                    .option("pipeline.name")
                    .map(String::from)
                    .unwrap_or_else(|| format!("insert-into_default_catalog.default_database.{table}"));
                self.run(&env, &name, &statement.text)
            }
            StatementKind::Query(query) => {
                let env = self.job_env()?;
                let plan = self.plan_query(query)?;
                let uid_prefix = uid_prefix(&statement.text);
                let config = self.exec_config(uid_prefix.clone())?;
                let rows = Translator::new(&env, &config, &self.data_streams).translate(&plan)?;
                rows.add_sink(PrintRowSink::new(None, false)).name("Sink(print)").uid(&format!("{uid_prefix}-print"));
                let name = self.option("pipeline.name").map(String::from).unwrap_or_else(|| "collect".to_string());
                self.run(&env, &name, &statement.text)
            }
        }
    }

    /// Checks the options whose values eddy reads.
    fn check_option(&self, key: &str, value: &str, location: Location) -> Result<(), SqlError> {
        let bad = |what: &str| Err(SqlError::validation(Some(location), format!("SET '{key}' = '{value}': {what}")));
        match key {
            "parallelism.default" if value.parse::<u32>().map_or(true, |p| p == 0) => {
                bad("the parallelism is a positive integer")
            }
            "execution.checkpointing.interval" | "table.exec.state.ttl" if parse_duration(value).is_none() => {
                bad("not a duration ('10 s', '1 min', '500 ms')")
            }
            _ => Ok(()),
        }
    }

    fn exec_config(&self, uid_prefix: String) -> Result<ExecConfig, SqlError> {
        let state_ttl_ms = self.option("table.exec.state.ttl").and_then(parse_duration).unwrap_or(0);
        Ok(ExecConfig { state_ttl_ms, uid_prefix })
    }

    /// The environment the statement's job runs in, with the SET options applied.
    fn job_env(&mut self) -> Result<Env, SqlError> {
        if self.shared.is_some() {
            // The shared environment keeps every operator built into it: a second job
            // would run the first one's again (and write its rows twice).
            if self.ran_shared {
                return Err(SqlError::validation(
                    None,
                    "a TableEnvironment made with create(&env) runs one INSERT or query, as a job of that environment; \
                     use TableEnvironment::new for a script of several",
                ));
            }
            self.ran_shared = true;
        }
        let env = (self.make_env)().map_err(|m| SqlError::validation(None, m))?;
        if let Some(p) = self.option("parallelism.default").and_then(|p| p.parse::<u32>().ok()) {
            env.set_parallelism(p);
        }
        if let Some(ms) = self.option("execution.checkpointing.interval").and_then(parse_duration) {
            if ms > 0 {
                env.enable_checkpointing(ms);
            }
        }
        if let Some(dir) = self.option("execution.checkpointing.dir").or(self.option("state.checkpoints.dir")) {
            env.set_checkpoint_dir(dir.strip_prefix("file://").unwrap_or(dir));
        }
        Ok(env)
    }

    fn run(&self, env: &Env, name: &str, text: &str) -> Result<TableResult, SqlError> {
        tracing::info!(job = name, "running the job of a SQL statement");
        let result = env
            .execute(name)
            .map_err(|e| SqlError::Job { statement: first_line(text), message: eddy_types::chain(&e).to_string() })?;
        Ok(TableResult::Job(Box::new(result)))
    }

    /// The optimized plan of a query.
    pub fn plan_query(&self, query: &Query) -> Result<Plan, SqlError> {
        let mut builder = Builder::new(&self.catalog);
        let planned = builder.query(query)?;
        changelog::derive(rules::optimize(planned.plan))
    }

    fn plan_insert(
        &self,
        table: &str,
        columns: &[String],
        query: &Query,
        location: Location,
    ) -> Result<(Arc<CatalogTable>, Plan), SqlError> {
        let target = self
            .catalog
            .table(table)
            .ok_or_else(|| SqlError::validation(Some(location), format!("Object '{table}' not found")))?;
        connector::check_sink(&target)?;
        let plan = self.plan_query(query)?;
        let fields = &target.physical;
        // The query's columns in the sink's order (named columns, or all physical ones).
        let order: Vec<usize> = if columns.is_empty() {
            (0..fields.len()).collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    fields
                        .iter()
                        .position(|f| &f.name == c)
                        .ok_or_else(|| SqlError::validation(Some(location), format!("Unknown target column '{c}'")))
                })
                .collect::<Result<_, _>>()?
        };
        if plan.fields.len() != order.len() {
            return Err(SqlError::validation(
                Some(location),
                format!(
                    "Column types of query result and sink for 'default_catalog.default_database.{table}' do not match.\nCause: Different number of columns.\n\nQuery schema: [{}]\nSink schema:  [{}]",
                    schema_text(&plan.fields),
                    schema_text(fields)
                ),
            ));
        }
        for (i, f) in plan.fields.iter().enumerate() {
            let target_field = &fields[order[i]];
            if !f.ty.assignable_to(&target_field.ty) {
                return Err(SqlError::validation(
                    Some(location),
                    format!(
                        "Column types of query result and sink for 'default_catalog.default_database.{table}' do not match.\nCause: Incompatible types for sink column '{}' at position {i}.\n\nQuery schema: [{}]\nSink schema:  [{}]",
                        target_field.name,
                        schema_text(&plan.fields),
                        schema_text(fields)
                    ),
                ));
            }
        }
        // A final Calc casts to the sink's types (and fills unnamed columns with NULL).
        let projection: Vec<crate::expr::Expr> = fields
            .iter()
            .enumerate()
            .map(|(i, target_field)| match order.iter().position(|o| *o == i) {
                Some(q) => crate::expr::bind::coerce(
                    crate::expr::Expr::column(q, plan.fields[q].ty.clone()),
                    &target_field.ty.clone().with_nullable(true),
                ),
                None => crate::expr::Expr::literal(crate::value::Value::Null, target_field.ty.clone()),
            })
            .collect();
        let out_fields: Vec<Field> = fields.iter().map(|f| Field::new(f.name.clone(), f.ty.clone())).collect();
        let plan = Plan::new(Node::Calc { input: Box::new(plan), projection, filter: None }, out_fields);
        let plan = changelog::derive(rules::optimize(plan))?;
        let sink = format!("default_catalog.default_database.{}", target.name);
        changelog::check_sink(&plan, &sink, connector::accepts_updates(&target)?)?;
        Ok((target, plan))
    }

    fn build_insert(&self, env: &Env, target: &CatalogTable, plan: &Plan, uid_prefix: &str) -> Result<(), SqlError> {
        let config = self.exec_config(uid_prefix.to_string())?;
        let rows = Translator::new(env, &config, &self.data_streams).translate(plan)?;
        connector::sink(target, rows, &format!("{uid_prefix}-sink"))?;
        Ok(())
    }

    fn explain(&self, statement: &StatementKind, location: Location) -> Result<String, SqlError> {
        match statement {
            StatementKind::Query(q) => {
                Ok(format!("== Optimized Physical Plan ==\n{}", explain::explain(&self.plan_query(q)?, None)))
            }
            StatementKind::Insert { table, columns, query, .. } => {
                let (target, plan) = self.plan_insert(table, columns, query, location)?;
                let sink = format!(
                    "Sink(table=[default_catalog.default_database.{}], fields=[{}])",
                    target.name,
                    target.physical.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
                );
                Ok(format!("== Optimized Physical Plan ==\n{}", explain::explain(&plan, Some(&sink))))
            }
            _ => Err(SqlError::unsupported(Some(location), "EXPLAIN of a statement that is not a query or an INSERT")),
        }
    }

    /// Registers an append-only DataStream of rows as the table `name` (Flink's
    /// `createTemporaryView(name, fromDataStream(stream))`), with its columns' names and
    /// types.
    pub fn from_data_stream(
        &mut self,
        name: &str,
        stream: DataStream<Row>,
        fields: Vec<Field>,
    ) -> Result<(), SqlError> {
        if self.shared.is_none() {
            return Err(SqlError::validation(
                None,
                "a DataStream table needs a table environment made with TableEnvironment::create(&env)",
            ));
        }
        self.data_streams.push(stream);
        let index = self.data_streams.len() - 1;
        let physical = fields.clone();
        self.catalog.insert_table(CatalogTable {
            name: name.to_string(),
            fields: fields.clone(),
            physical,
            columns: (0..fields.len()).map(TableColumn::Physical).collect(),
            watermark: None,
            partition_keys: Vec::new(),
            primary_key: Vec::new(),
            options: BTreeMap::new(),
            location: Location::default(),
            data_stream: Some(index),
        });
        Ok(())
    }

    /// An append-only query's rows as a DataStream of the shared environment (Flink's
    /// `toDataStream`); the fields say the columns' names and types. An updating query is
    /// refused, as Flink refuses it: `to_changelog_stream` takes those.
    pub fn to_data_stream(&mut self, query: &str) -> Result<(DataStream<Row>, Vec<Field>), SqlError> {
        self.query_stream(query, false)
    }

    /// A query's changelog as a DataStream of the shared environment (Flink's
    /// `toChangelogStream`): every row with its kind (`+I`, `-U`, `+U`, `-D`).
    pub fn to_changelog_stream(&mut self, query: &str) -> Result<(DataStream<Row>, Vec<Field>), SqlError> {
        self.query_stream(query, true)
    }

    fn query_stream(&mut self, query: &str, changelog: bool) -> Result<(DataStream<Row>, Vec<Field>), SqlError> {
        let env = self.shared.clone().ok_or_else(|| {
            SqlError::validation(
                None,
                "to_data_stream needs a table environment made with TableEnvironment::create(&env)",
            )
        })?;
        let statements = parser::parse_script(query)?;
        let [Statement { kind: StatementKind::Query(q), text, .. }] = statements.as_slice() else {
            return Err(SqlError::validation(None, "to_data_stream takes one query"));
        };
        let plan = self.plan_query(q)?;
        changelog::check_sink(&plan, "*anonymous_datastream_sink$1*", changelog)?;
        let config = self.exec_config(uid_prefix(text))?;
        let stream = Translator::new(&env, &config, &self.data_streams).translate(&plan)?;
        Ok((stream, plan.fields))
    }
}

fn schema_text(fields: &[Field]) -> String {
    fields.iter().map(|f| format!("{}: {}", f.name, f.ty)).collect::<Vec<_>>().join(", ")
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    if text.lines().count() > 1 {
        format!("{line} …")
    } else {
        line.to_string()
    }
}

/// `sql-<hash of the statement's text>`: the same text restores the same operators.
fn uid_prefix(text: &str) -> String {
    let normalized: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("sql-{:016x}", eddy_types::stable_hash(normalized.as_bytes()).0)
}

/// The type of a DataStream table's column, for programs that build field lists.
pub fn field(name: &str, ty: DataType) -> Field {
    Field::new(name, ty)
}
