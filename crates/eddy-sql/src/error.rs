//! The SQL layer's one error type: where in the script, and what is wrong, in the words
//! of Flink's own messages where Flink has one.

use std::fmt;

/// A line and column of a script, both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    pub line: u64,
    pub column: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

impl Location {
    pub fn of_span(span: sqlparser::tokenizer::Span) -> Option<Location> {
        (span.start.line > 0).then_some(Location { line: span.start.line, column: span.start.column })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The text is not SQL eddy can read.
    #[error("SQL parse failed at {location}: {message}")]
    Parse { location: Location, message: String },
    /// Names or types do not fit (Flink's "SQL validation failed").
    #[error("SQL validation failed{}: {message}", at(location))]
    Validation { location: Option<Location>, message: String },
    /// A node or sink that takes only inserts is given an updating input (Flink's words).
    #[error("{consumer} doesn't support consuming {changes} changes which is produced by node {producer}")]
    ConsumesUpdates { consumer: String, changes: &'static str, producer: String },
    /// A construct Flink has and eddy does not (yet).
    #[error("{}not supported: {what}", at_prefix(location))]
    Unsupported { location: Option<Location>, what: String },
    /// A table's connector or format options are wrong.
    #[error("table '{table}': {message}")]
    Table { table: String, message: String },
    /// Running a statement's job failed.
    #[error("the job of '{statement}' failed: {message}")]
    Job { statement: String, message: String },
    #[error("cannot read '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn at(location: &Option<Location>) -> String {
    location.map(|l| format!(" at {l}")).unwrap_or_default()
}

fn at_prefix(location: &Option<Location>) -> String {
    location.map(|l| format!("{l}: ")).unwrap_or_default()
}

impl SqlError {
    pub fn validation(location: Option<Location>, message: impl Into<String>) -> Self {
        SqlError::Validation { location, message: message.into() }
    }
    pub fn unsupported(location: Option<Location>, what: impl Into<String>) -> Self {
        SqlError::Unsupported { location, what: what.into() }
    }
    pub fn table(table: &str, message: impl Into<String>) -> Self {
        SqlError::Table { table: table.to_string(), message: message.into() }
    }

    /// sqlparser's error, whose message ends in "at Line: L, Column: C" (the positions
    /// are the script's: statements are parsed at their place in it).
    pub fn from_parser(error: sqlparser::parser::ParserError, fallback: Location) -> Self {
        let text = match error {
            sqlparser::parser::ParserError::TokenizerError(m) | sqlparser::parser::ParserError::ParserError(m) => m,
            sqlparser::parser::ParserError::RecursionLimitExceeded => "the statement nests too deeply".into(),
        };
        let (message, location) = match text.rfind(" at Line: ") {
            Some(at) => {
                let tail = &text[at + " at Line: ".len()..];
                let mut parts = tail.split(", Column: ");
                let line = parts.next().and_then(|l| l.trim().parse().ok());
                let column = parts.next().and_then(|c| c.trim().parse().ok());
                match (line, column) {
                    (Some(line), Some(column)) if line > 0 => (text[..at].to_string(), Location { line, column }),
                    (Some(_), Some(_)) => (text[..at].to_string(), fallback),
                    _ => (text.clone(), fallback),
                }
            }
            None => (text, fallback),
        };
        let message = message.strip_prefix("sql parser error: ").unwrap_or(&message).to_string();
        SqlError::Parse { location, message }
    }
}

pub type Result<T, E = SqlError> = std::result::Result<T, E>;
