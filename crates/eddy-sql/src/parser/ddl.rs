//! The statements of a script, read with sqlparser's parser and the Flink dialect: eddy
//! reads each statement's head itself (Flink's DDL is not sqlparser's) and hands queries
//! and expressions to sqlparser.

use super::dialect::FlinkDialect;
use super::types::TypeReader;
use super::StatementKind;
use crate::error::{Location, SqlError};
use crate::types::DataType;
use sqlparser::ast::Expr;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// `CREATE TABLE`: columns, watermark, partition keys and connector options.
#[derive(Debug, Clone)]
pub struct TableDdl {
    pub name: String,
    pub temporary: bool,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    /// `WATERMARK FOR column AS expression`.
    pub watermark: Option<(String, Expr)>,
    pub primary_key: Vec<String>,
    pub partition_keys: Vec<String>,
    /// `WITH ('key' = 'value', …)`, in the order written.
    pub options: Vec<(String, String)>,
    pub location: Location,
}

#[derive(Debug, Clone)]
pub struct ColumnDef {
    pub name: String,
    pub kind: ColumnKind,
    pub location: Option<Location>,
}

#[derive(Debug, Clone)]
pub enum ColumnKind {
    Physical(DataType),
    /// `name AS expression`.
    Computed(Box<Expr>),
    /// `name type METADATA [FROM 'key'] [VIRTUAL]`.
    Metadata {
        ty: DataType,
        key: Option<String>,
        is_virtual: bool,
    },
}

/// Parses one statement (its text placed at `location` of the script, so that every
/// position sqlparser reports is the script's).
pub(super) fn parse(text: &str, location: Location) -> Result<StatementKind, SqlError> {
    let head = text.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
    match head.as_str() {
        "SET" => return Ok(parse_set(text)),
        "RESET" => {
            let key = text[5..].trim().trim_matches('\'').trim();
            return Ok(StatementKind::Reset { key: (!key.is_empty()).then(|| key.to_string()) });
        }
        _ => {}
    }
    let placed = format!(
        "{}{}{}",
        "\n".repeat(location.line.saturating_sub(1) as usize),
        " ".repeat(location.column.saturating_sub(1) as usize),
        text
    );
    // Where an error at the end of the statement is (sqlparser's end of input has none).
    let end = match text.rfind('\n') {
        Some(at) => {
            Location { line: location.line + text.matches('\n').count() as u64, column: (text.len() - at) as u64 }
        }
        None => Location { line: location.line, column: location.column + text.len() as u64 },
    };
    let dialect = FlinkDialect;
    let mut parser = Parser::new(&dialect).try_with_sql(&placed).map_err(|e| SqlError::from_parser(e, location))?;
    let kind = statement(&mut parser, location).map_err(|e| SqlError::from_parser(e, end))?;
    let _ = parser.consume_token(&Token::SemiColon);
    let rest = parser.peek_token();
    if rest.token != Token::EOF {
        return Err(SqlError::from_parser(
            parser.expected::<()>("the end of the statement", rest).expect_err("expected() fails"),
            location,
        ));
    }
    Ok(kind)
}

/// `SET 'key' = 'value'` or `SET key = value`; `SET` alone lists (ignored here).
fn parse_set(text: &str) -> StatementKind {
    let body = text[3..].trim();
    let (key, value) = body.split_once('=').unwrap_or((body, ""));
    let unquote = |s: &str| s.trim().trim_matches('\'').to_string();
    StatementKind::Set { key: unquote(key), value: unquote(value) }
}

fn statement(parser: &mut Parser<'_>, location: Location) -> Result<StatementKind, ParserError> {
    if parser.parse_keyword(Keyword::EXPLAIN) {
        let _ = parser.parse_keywords(&[Keyword::PLAN, Keyword::FOR]);
        return Ok(StatementKind::Explain(Box::new(statement(parser, location)?)));
    }
    if parser.parse_keyword(Keyword::CREATE) {
        let _ = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
        let temporary = parser.parse_keyword(Keyword::TEMPORARY);
        let _ = parser.parse_keyword(Keyword::SYSTEM);
        if parser.parse_keyword(Keyword::TABLE) {
            return create_table(parser, temporary, location).map(|t| StatementKind::CreateTable(Box::new(t)));
        }
        if parser.parse_keyword(Keyword::VIEW) {
            let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
            let name = super::object_name(&parser.parse_object_name(false)?);
            let columns =
                if parser.peek_token_ref().token == Token::LParen { identifier_list(parser)? } else { Vec::new() };
            parser.expect_keyword_is(Keyword::AS)?;
            let query = parser.parse_query()?;
            return Ok(StatementKind::CreateView { name, temporary, if_not_exists, columns, query });
        }
        if parser.parse_keyword(Keyword::FUNCTION) {
            let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
            let name = super::object_name(&parser.parse_object_name(false)?);
            parser.expect_keyword_is(Keyword::AS)?;
            let identifier = parser.parse_literal_string()?;
            if parser.parse_keyword(Keyword::LANGUAGE) {
                parser.parse_identifier()?;
            }
            return Ok(StatementKind::CreateFunction { name, identifier, if_not_exists });
        }
        let found = parser.peek_token();
        return parser.expected("TABLE, VIEW or FUNCTION after CREATE", found);
    }
    if parser.parse_keyword(Keyword::DROP) {
        let _ = parser.parse_keyword(Keyword::TEMPORARY);
        let _ = parser.parse_keyword(Keyword::SYSTEM);
        let what = match parser.parse_one_of_keywords(&[Keyword::TABLE, Keyword::VIEW, Keyword::FUNCTION]) {
            Some(Keyword::TABLE) => "table",
            Some(Keyword::VIEW) => "view",
            Some(_) => "function",
            None => {
                let found = parser.peek_token();
                return parser.expected("TABLE, VIEW or FUNCTION after DROP", found);
            }
        };
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        let name = super::object_name(&parser.parse_object_name(false)?);
        return Ok(StatementKind::Drop { what, name, if_exists });
    }
    if parser.parse_keyword(Keyword::INSERT) {
        let overwrite = match parser.parse_one_of_keywords(&[Keyword::INTO, Keyword::OVERWRITE]) {
            Some(Keyword::OVERWRITE) => true,
            Some(_) => false,
            None => {
                let found = parser.peek_token();
                return parser.expected("INTO or OVERWRITE after INSERT", found);
            }
        };
        let _ = parser.parse_keyword(Keyword::TABLE);
        let table = super::object_name(&parser.parse_object_name(false)?);
        if parser.parse_keyword(Keyword::PARTITION) {
            return Err(ParserError::ParserError(
                "INSERT … PARTITION (…) with static partition values is not supported; write the partition columns in the query"
                    .into(),
            ));
        }
        let columns = if parser.peek_token_ref().token == Token::LParen
            && !matches!(&parser.peek_nth_token(1).token, Token::Word(w) if matches!(w.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES))
        {
            identifier_list(parser)?
        } else {
            Vec::new()
        };
        let query = parser.parse_query()?;
        return Ok(StatementKind::Insert { table, overwrite, columns, query });
    }
    if parser.parse_keyword(Keyword::SHOW) {
        if parser.parse_keyword(Keyword::TABLES) {
            return Ok(StatementKind::ShowTables);
        }
        if parser.parse_keyword(Keyword::FUNCTIONS) {
            return Ok(StatementKind::ShowFunctions);
        }
        let found = parser.peek_token();
        return parser.expected("TABLES or FUNCTIONS after SHOW", found);
    }
    if parser.parse_one_of_keywords(&[Keyword::DESCRIBE, Keyword::DESC]).is_some() {
        return Ok(StatementKind::Describe(super::object_name(&parser.parse_object_name(false)?)));
    }
    Ok(StatementKind::Query(parser.parse_query()?))
}

/// `(a, b, …)`: a view's or INSERT's columns, a primary key, partition keys.
fn identifier_list(parser: &mut Parser<'_>) -> Result<Vec<String>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let names = parser.parse_comma_separated(|p| p.parse_identifier())?;
    parser.expect_token(&Token::RParen)?;
    Ok(names.into_iter().map(|i| i.value).collect())
}

fn create_table(parser: &mut Parser<'_>, temporary: bool, location: Location) -> Result<TableDdl, ParserError> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = super::object_name(&parser.parse_object_name(false)?);
    let mut table = TableDdl {
        name,
        temporary,
        if_not_exists,
        columns: Vec::new(),
        watermark: None,
        primary_key: Vec::new(),
        partition_keys: Vec::new(),
        options: Vec::new(),
        location,
    };
    parser.expect_token(&Token::LParen)?;
    loop {
        if matches!(&parser.peek_token_ref().token, Token::Word(w) if w.value.eq_ignore_ascii_case("WATERMARK")) {
            parser.next_token();
            parser.expect_keyword_is(Keyword::FOR)?;
            let column = parser.parse_identifier()?.value;
            parser.expect_keyword_is(Keyword::AS)?;
            table.watermark = Some((column, parser.parse_expr()?));
        } else if parser.parse_keyword(Keyword::CONSTRAINT) || parser.peek_keyword(Keyword::PRIMARY) {
            if !parser.peek_keyword(Keyword::PRIMARY) {
                parser.parse_identifier()?;
            }
            parser.expect_keywords(&[Keyword::PRIMARY, Keyword::KEY])?;
            table.primary_key = identifier_list(parser)?;
            parser.expect_keywords(&[Keyword::NOT, Keyword::ENFORCED])?;
        } else {
            table.columns.push(column(parser, &mut table.primary_key)?);
        }
        if !parser.consume_token(&Token::Comma) {
            break;
        }
        if parser.peek_token_ref().token == Token::RParen {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    if parser.parse_keyword(Keyword::COMMENT) {
        parser.parse_literal_string()?;
    }
    if parser.parse_keywords(&[Keyword::PARTITIONED, Keyword::BY]) {
        table.partition_keys = identifier_list(parser)?;
    }
    if parser.parse_keyword(Keyword::WITH) {
        parser.expect_token(&Token::LParen)?;
        if !parser.consume_token(&Token::RParen) {
            table.options = parser.parse_comma_separated(|p| {
                let key = p.parse_literal_string()?;
                p.expect_token(&Token::Eq)?;
                let value = p.parse_literal_string()?;
                Ok((key, value))
            })?;
            parser.expect_token(&Token::RParen)?;
        }
    }
    if parser.parse_keyword(Keyword::LIKE) {
        return Err(ParserError::ParserError("CREATE TABLE … LIKE is not supported".into()));
    }
    Ok(table)
}

fn column(parser: &mut Parser<'_>, primary_key: &mut Vec<String>) -> Result<ColumnDef, ParserError> {
    let ident = parser.parse_identifier()?;
    let location = Location::of_span(ident.span);
    let name = ident.value;
    let kind = if parser.parse_keyword(Keyword::AS) {
        ColumnKind::Computed(Box::new(parser.parse_expr()?))
    } else {
        let ty = TypeReader::new(parser).read()?;
        if parser.parse_keyword(Keyword::METADATA) {
            let key = if parser.parse_keyword(Keyword::FROM) { Some(parser.parse_literal_string()?) } else { None };
            let is_virtual = parser.parse_keyword(Keyword::VIRTUAL);
            ColumnKind::Metadata { ty, key, is_virtual }
        } else {
            ColumnKind::Physical(ty)
        }
    };
    if parser.parse_keywords(&[Keyword::PRIMARY, Keyword::KEY]) {
        parser.expect_keywords(&[Keyword::NOT, Keyword::ENFORCED])?;
        primary_key.push(name.clone());
    }
    if parser.parse_keyword(Keyword::COMMENT) {
        parser.parse_literal_string()?;
    }
    Ok(ColumnDef { name, kind, location })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TypeKind;

    #[test]
    fn reads_flink_ddl() {
        let text = "CREATE TABLE datagen (\n  event_type int,\n  bid ROW<auction BIGINT, `dateTime` TIMESTAMP(3), tags ARRAY<ARRAY<INT>>>,\n  `dateTime` AS bid.`dateTime`,\n  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND\n) PARTITIONED BY (event_type) WITH ('connector' = 'filesystem', 'path' = '/x')";
        let StatementKind::CreateTable(t) = parse(text, Location { line: 1, column: 1 }).unwrap() else { panic!() };
        assert_eq!(t.name, "datagen");
        assert_eq!(t.columns.len(), 3);
        let ColumnKind::Physical(bid) = &t.columns[1].kind else { panic!() };
        let TypeKind::Row(fields) = &bid.kind else { panic!() };
        assert_eq!(fields[1].name, "dateTime");
        assert!(matches!(t.columns[2].kind, ColumnKind::Computed(_)));
        assert_eq!(t.watermark.as_ref().unwrap().0, "dateTime");
        assert_eq!(t.partition_keys, vec!["event_type"]);
        assert_eq!(t.options[1], ("path".into(), "/x".into()));
    }

    #[test]
    fn errors_name_the_scripts_line_and_column() {
        let err = parse("SELECT a\nFROM t WHERE", Location { line: 7, column: 3 }).unwrap_err();
        let SqlError::Parse { location, .. } = err else { panic!("{err}") };
        assert_eq!(location.line, 8);
    }

    #[test]
    fn reads_window_table_functions_and_functions() {
        let text = "SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))";
        assert!(matches!(parse(text, Location { line: 1, column: 1 }).unwrap(), StatementKind::Query(_)));
        let text = "CREATE FUNCTION count_char AS 'com.github.nexmark.flink.udf.CountChar'";
        assert!(matches!(parse(text, Location { line: 1, column: 1 }).unwrap(), StatementKind::CreateFunction { .. }));
    }
}
