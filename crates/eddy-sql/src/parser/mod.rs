//! From script text to statements: the script split at its semicolons (as Flink's SQL
//! client splits a `-f` file), each statement parsed with the Flink dialect. Positions in
//! errors are the script's lines and columns.

mod ddl;
pub mod dialect;
mod types;

pub use ddl::{ColumnDef, ColumnKind, TableDdl};
pub use dialect::FlinkDialect;
pub use types::from_ast as types_from_ast;

use crate::error::{Location, SqlError};
use sqlparser::ast::{ObjectName, Query};

/// One statement of a script.
#[derive(Debug, Clone)]
pub struct Statement {
    /// Where it starts in the script.
    pub location: Location,
    /// Its text as written.
    pub text: String,
    pub kind: StatementKind,
}

/// What eddy runs. Queries stay sqlparser's AST; the planner reads them.
#[derive(Debug, Clone)]
pub enum StatementKind {
    /// `SET 'key' = 'value'` (or `SET key = value`).
    Set {
        key: String,
        value: String,
    },
    /// `RESET 'key'`, or every key with `RESET`.
    Reset {
        key: Option<String>,
    },
    CreateTable(Box<TableDdl>),
    CreateView {
        name: String,
        temporary: bool,
        if_not_exists: bool,
        columns: Vec<String>,
        query: Box<Query>,
    },
    /// `CREATE [TEMPORARY [SYSTEM]] FUNCTION name AS 'identifier' [LANGUAGE …]`.
    CreateFunction {
        name: String,
        identifier: String,
        if_not_exists: bool,
    },
    Drop {
        what: &'static str,
        name: String,
        if_exists: bool,
    },
    Insert {
        table: String,
        overwrite: bool,
        columns: Vec<String>,
        query: Box<Query>,
    },
    Query(Box<Query>),
    Explain(Box<StatementKind>),
    ShowTables,
    ShowFunctions,
    Describe(String),
}

/// Splits a script at the semicolons outside quotes, backticks and comments; each piece
/// with the line and column it starts at. Comment-only pieces are dropped.
pub fn split_script(script: &str) -> Vec<(Location, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut start: Option<Location> = None;
    let (mut line, mut column) = (1u64, 1u64);
    let mut chars = script.chars().peekable();
    let (mut quoted, mut backticked) = (false, false);
    while let Some(c) = chars.next() {
        let here = Location { line, column };
        let advance = |c: char, line: &mut u64, column: &mut u64| {
            if c == '\n' {
                *line += 1;
                *column = 1;
            } else {
                *column += 1;
            }
        };
        if !quoted && !backticked && c == '-' && chars.peek() == Some(&'-') {
            // A line comment: kept as a blank so that columns stay right.
            advance(c, &mut line, &mut column);
            for c in chars.by_ref() {
                advance(c, &mut line, &mut column);
                if c == '\n' {
                    if start.is_some() {
                        current.push('\n');
                    }
                    break;
                }
            }
            continue;
        }
        if !quoted && !backticked && c == '/' && chars.peek() == Some(&'*') {
            let mut previous = c;
            advance(c, &mut line, &mut column);
            for c in chars.by_ref() {
                advance(c, &mut line, &mut column);
                if start.is_some() {
                    current.push(if c == '\n' { '\n' } else { ' ' });
                }
                if previous == '*' && c == '/' {
                    break;
                }
                previous = c;
            }
            if start.is_some() {
                current.push(' ');
            }
            continue;
        }
        if c == '\'' && !backticked {
            quoted = !quoted;
        }
        if c == '`' && !quoted {
            backticked = !backticked;
        }
        advance(c, &mut line, &mut column);
        if c == ';' && !quoted && !backticked {
            if let Some(at) = start.take() {
                out.push((at, current.trim_end().to_string()));
            }
            current.clear();
            continue;
        }
        if start.is_none() {
            if c.is_whitespace() {
                continue;
            }
            start = Some(here);
        }
        current.push(c);
    }
    if let Some(at) = start {
        if !current.trim().is_empty() {
            out.push((at, current.trim_end().to_string()));
        }
    }
    out
}

/// Parses every statement of a script.
pub fn parse_script(script: &str) -> Result<Vec<Statement>, SqlError> {
    split_script(script).into_iter().map(|(location, text)| parse_statement_at(&text, location)).collect()
}

/// Parses one statement that starts at `location` of its script.
pub fn parse_statement_at(text: &str, location: Location) -> Result<Statement, SqlError> {
    let kind = ddl::parse(text, location)?;
    Ok(Statement { location, text: text.to_string(), kind })
}

/// The text of an object name, its parts joined by dots (identifiers as written, without
/// quotes: Flink's identifiers are case-sensitive).
pub fn object_name(name: &ObjectName) -> String {
    name.0
        .iter()
        .map(|part| part.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| part.to_string()))
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_semicolons_outside_quotes_and_comments() {
        let script = "SET 'a' = 'b;c';\n-- a comment; still a comment\nSELECT `x;y` FROM t;\n\n  /* ; */ SELECT 1";
        let pieces = split_script(script);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[0].1, "SET 'a' = 'b;c'");
        assert_eq!(pieces[1].0, Location { line: 3, column: 1 });
        assert_eq!(pieces[1].1.trim(), "SELECT `x;y` FROM t");
        assert_eq!(pieces[2].0, Location { line: 5, column: 11 });
    }
}
