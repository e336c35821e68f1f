//! Flink's SQL dialect on sqlparser-rs: backtick identifiers, `FILTER (WHERE …)` on
//! aggregates, and `TABLE t` as an argument of a window table function
//! (`TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))`). The statements
//! sqlparser does not know (`CREATE TABLE` with `WATERMARK FOR`, computed columns and
//! `WITH (…)`, `CREATE FUNCTION … AS 'class'`, `SET 'k' = 'v'`) are parsed in
//! [`super::ddl`] from sqlparser's tokens.

use sqlparser::ast::{Expr, Ident};
use sqlparser::dialect::Dialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// The first part of the compound identifier that stands for `TABLE t` in a table
/// function's arguments: no SQL text can spell it, so it cannot clash with a column.
pub const TABLE_ARGUMENT: &str = "\u{0}TABLE";

/// The Flink SQL dialect.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlinkDialect;

impl Dialect for FlinkDialect {
    fn is_identifier_start(&self, ch: char) -> bool {
        ch.is_alphabetic() || ch == '_' || ch == '$'
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        ch.is_alphanumeric() || ch == '_' || ch == '$'
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        ch == '`'
    }

    fn identifier_quote_style(&self, _identifier: &str) -> Option<char> {
        Some('`')
    }

    /// `JOIN t FOR SYSTEM_TIME AS OF l.time`: temporal and lookup joins.
    fn supports_table_versioning(&self) -> bool {
        true
    }

    fn supports_filter_during_aggregation(&self) -> bool {
        true
    }

    fn supports_group_by_expr(&self) -> bool {
        true
    }

    /// `TABLE name` as an expression (only a table function's argument uses it).
    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        let is_table = matches!(&parser.peek_token_ref().token, Token::Word(w) if w.keyword == Keyword::TABLE);
        let names_table = matches!(&parser.peek_nth_token(1).token, Token::Word(_));
        if !(is_table && names_table) {
            return None;
        }
        parser.next_token();
        Some(parser.parse_object_name(false).map(|name| {
            let mut parts = vec![Ident::new(TABLE_ARGUMENT)];
            parts.extend(name.0.into_iter().filter_map(|part| part.as_ident().cloned()));
            Expr::CompoundIdentifier(parts)
        }))
    }
}
