//! Flink's data type syntax (`ROW<id BIGINT, name STRING>`, `DECIMAL(23, 3)`,
//! `TIMESTAMP(3) WITH LOCAL TIME ZONE`, `ARRAY<INT> NOT NULL` …) read from sqlparser's
//! tokens, and sqlparser's own data types (in `CAST`) mapped to the same types.

use crate::types::{DataType, Field, TypeKind, MAX_LENGTH};
use sqlparser::ast::{self, ExactNumberInfo};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// Reads a type; `>` closing an outer type may arrive glued to an inner one's (`>>`),
/// which `pending_gt` remembers.
pub struct TypeReader<'p, 'a> {
    parser: &'p mut Parser<'a>,
    pending_gt: usize,
}

fn err<T>(message: String) -> Result<T, ParserError> {
    Err(ParserError::ParserError(message))
}

impl<'p, 'a> TypeReader<'p, 'a> {
    pub fn new(parser: &'p mut Parser<'a>) -> Self {
        Self { parser, pending_gt: 0 }
    }

    pub fn read(mut self) -> Result<DataType, ParserError> {
        let ty = self.data_type()?;
        if self.pending_gt > 0 {
            return err("unexpected '>' after a type".into());
        }
        Ok(ty)
    }

    fn expect_gt(&mut self) -> Result<(), ParserError> {
        if self.pending_gt > 0 {
            self.pending_gt -= 1;
            return Ok(());
        }
        let token = self.parser.next_token();
        match token.token {
            Token::Gt => Ok(()),
            Token::ShiftRight => {
                self.pending_gt += 1;
                Ok(())
            }
            _ => self.parser.expected("'>'", token),
        }
    }

    fn word(&mut self) -> Option<String> {
        match &self.parser.peek_token_ref().token {
            Token::Word(w) => Some(w.value.to_ascii_uppercase()),
            _ => None,
        }
    }

    fn take_word(&mut self, word: &str) -> bool {
        if self.pending_gt == 0 && self.word().as_deref() == Some(word) {
            self.parser.next_token();
            true
        } else {
            false
        }
    }

    /// `(n)` or `(p, s)` after a type name, if there.
    fn arguments(&mut self) -> Result<Vec<u64>, ParserError> {
        if self.pending_gt > 0 || !self.parser.consume_token(&Token::LParen) {
            return Ok(Vec::new());
        }
        let mut out = vec![self.parser.parse_literal_uint()?];
        while self.parser.consume_token(&Token::Comma) {
            out.push(self.parser.parse_literal_uint()?);
        }
        self.parser.expect_token(&Token::RParen)?;
        Ok(out)
    }

    fn data_type(&mut self) -> Result<DataType, ParserError> {
        let token = self.parser.next_token();
        let name = match &token.token {
            Token::Word(w) => w.value.to_ascii_uppercase(),
            _ => return self.parser.expected("a data type", token),
        };
        let kind = match name.as_str() {
            "BOOLEAN" | "BOOL" => TypeKind::Boolean,
            "TINYINT" => TypeKind::TinyInt,
            "SMALLINT" => TypeKind::SmallInt,
            "INT" | "INTEGER" => TypeKind::Int,
            "BIGINT" => TypeKind::BigInt,
            "FLOAT" | "REAL" => TypeKind::Float,
            "DOUBLE" => {
                self.take_word("PRECISION");
                TypeKind::Double
            }
            "DECIMAL" | "DEC" | "NUMERIC" => {
                let args = self.arguments()?;
                let precision = *args.first().unwrap_or(&10);
                let scale = *args.get(1).unwrap_or(&0);
                if !(1..=38).contains(&precision) || scale > precision {
                    return err(format!("DECIMAL({precision}, {scale}): the precision must be 1 to 38 and the scale at most the precision"));
                }
                TypeKind::Decimal { precision: precision as u8, scale: scale as u8 }
            }
            "CHAR" | "CHARACTER" => {
                if self.take_word("VARYING") {
                    TypeKind::Varchar(self.length(MAX_LENGTH)?)
                } else {
                    TypeKind::Char(self.length(1)?)
                }
            }
            // An unsized VARCHAR in DDL is Flink's STRING.
            "VARCHAR" => TypeKind::Varchar(self.length(MAX_LENGTH)?),
            "STRING" => TypeKind::Varchar(MAX_LENGTH),
            "BINARY" => TypeKind::Binary(self.length(1)?),
            "VARBINARY" => TypeKind::Varbinary(self.length(MAX_LENGTH)?),
            "BYTES" => TypeKind::Varbinary(MAX_LENGTH),
            "DATE" => TypeKind::Date,
            "TIME" => {
                let precision = self.precision(0, 9)?;
                if self.take_word("WITHOUT") {
                    self.expect_words(&["TIME", "ZONE"])?;
                }
                TypeKind::Time(precision)
            }
            "TIMESTAMP" => {
                let precision = self.precision(6, 9)?;
                if self.take_word("WITH") {
                    self.expect_words(&["LOCAL", "TIME", "ZONE"])?;
                    TypeKind::TimestampLtz { precision, attribute: None }
                } else {
                    if self.take_word("WITHOUT") {
                        self.expect_words(&["TIME", "ZONE"])?;
                    }
                    TypeKind::Timestamp { precision, attribute: None }
                }
            }
            "TIMESTAMP_LTZ" => TypeKind::TimestampLtz { precision: self.precision(6, 9)?, attribute: None },
            "INTERVAL" => self.interval()?,
            "ROW" => TypeKind::Row(self.row_fields()?),
            "ARRAY" => {
                if !self.parser.consume_token(&Token::Lt) {
                    return err("ARRAY needs its element type: ARRAY<INT>".into());
                }
                let element = self.data_type()?;
                self.expect_gt()?;
                TypeKind::Array(Box::new(element))
            }
            "MAP" => {
                if !self.parser.consume_token(&Token::Lt) {
                    return err("MAP needs its key and value types: MAP<STRING, INT>".into());
                }
                let key = self.data_type()?;
                self.parser.expect_token(&Token::Comma)?;
                let value = self.data_type()?;
                self.expect_gt()?;
                TypeKind::Map(Box::new(key), Box::new(value))
            }
            other => return err(format!("unknown data type '{other}'")),
        };
        let mut ty = DataType::new(kind);
        // `INT ARRAY`: the element type before the word.
        while self.take_word("ARRAY") {
            ty = DataType::new(TypeKind::Array(Box::new(ty)));
        }
        if self.pending_gt == 0
            && self.parser.parse_keywords(&[sqlparser::keywords::Keyword::NOT, sqlparser::keywords::Keyword::NULL])
        {
            ty.nullable = false;
        } else if self.take_word("NULL") {
            ty.nullable = true;
        }
        Ok(ty)
    }

    fn expect_words(&mut self, words: &[&str]) -> Result<(), ParserError> {
        for word in words {
            if !self.take_word(word) {
                let found = self.parser.peek_token();
                return self.parser.expected(word, found);
            }
        }
        Ok(())
    }

    fn length(&mut self, default: u32) -> Result<u32, ParserError> {
        let args = self.arguments()?;
        match args.first() {
            None => Ok(default),
            Some(n) if (1..=MAX_LENGTH as u64).contains(n) => Ok(*n as u32),
            Some(n) => err(format!("length {n} is out of range 1 to {MAX_LENGTH}")),
        }
    }

    fn precision(&mut self, default: u8, max: u8) -> Result<u8, ParserError> {
        let args = self.arguments()?;
        match args.first() {
            None => Ok(default),
            Some(p) if *p <= max as u64 => Ok(*p as u8),
            Some(p) => err(format!("precision {p} is out of range 0 to {max}")),
        }
    }

    fn interval(&mut self) -> Result<TypeKind, ParserError> {
        let unit = self.word().unwrap_or_default();
        self.parser.next_token();
        self.arguments()?;
        if self.take_word("TO") {
            self.parser.next_token();
            self.arguments()?;
        }
        Ok(match unit.as_str() {
            "YEAR" | "MONTH" => TypeKind::IntervalYearMonth,
            "DAY" | "HOUR" | "MINUTE" | "SECOND" => TypeKind::IntervalDayTime,
            other => return err(format!("unknown interval unit '{other}'")),
        })
    }

    /// `ROW<a INT, b STRING>` or `ROW(a INT, b STRING)`, fields with optional comments.
    fn row_fields(&mut self) -> Result<Vec<Field>, ParserError> {
        let angled = if self.parser.consume_token(&Token::Lt) {
            true
        } else {
            self.parser.expect_token(&Token::LParen)?;
            false
        };
        let mut fields = Vec::new();
        loop {
            if angled && self.pending_gt == 0 && self.parser.consume_token(&Token::Gt) {
                break;
            }
            let name = self.parser.parse_identifier()?.value;
            let ty = self.data_type()?;
            if self.pending_gt == 0 && self.parser.parse_keyword(sqlparser::keywords::Keyword::COMMENT) {
                self.parser.parse_literal_string()?;
            }
            fields.push(Field::new(name, ty));
            if self.pending_gt > 0 || !self.parser.consume_token(&Token::Comma) {
                if angled {
                    self.expect_gt()?;
                } else {
                    self.parser.expect_token(&Token::RParen)?;
                }
                break;
            }
        }
        Ok(fields)
    }
}

/// sqlparser's data type of a `CAST(x AS …)` as eddy's.
pub fn from_ast(ty: &ast::DataType) -> Result<DataType, String> {
    use ast::DataType as A;
    let length = |n: &Option<ast::CharacterLength>, default: u32| match n {
        Some(ast::CharacterLength::IntegerLength { length, .. }) => *length as u32,
        _ => default,
    };
    let kind = match ty {
        A::Boolean | A::Bool => TypeKind::Boolean,
        A::TinyInt(_) => TypeKind::TinyInt,
        A::SmallInt(_) => TypeKind::SmallInt,
        A::Int(_) | A::Integer(_) => TypeKind::Int,
        A::BigInt(_) => TypeKind::BigInt,
        A::Float(_) | A::Real => TypeKind::Float,
        A::Double(_) | A::DoublePrecision => TypeKind::Double,
        A::Decimal(info) | A::Numeric(info) | A::Dec(info) => {
            let (precision, scale) = match info {
                ExactNumberInfo::None => (10, 0),
                ExactNumberInfo::Precision(p) => (*p, 0),
                ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
            };
            if !(1..=38).contains(&precision) || scale > precision {
                return Err(format!("DECIMAL({precision}, {scale}): the precision must be 1 to 38"));
            }
            TypeKind::Decimal { precision: precision as u8, scale: scale as u8 }
        }
        A::Char(n) | A::Character(n) => TypeKind::Char(length(n, 1)),
        A::Varchar(n) | A::CharacterVarying(n) | A::CharVarying(n) => TypeKind::Varchar(length(n, MAX_LENGTH)),
        A::String(_) | A::Text => TypeKind::Varchar(MAX_LENGTH),
        A::Binary(n) => TypeKind::Binary(n.unwrap_or(1) as u32),
        A::Varbinary(_) | A::Bytes(_) | A::Bytea => TypeKind::Varbinary(MAX_LENGTH),
        A::Date => TypeKind::Date,
        A::Time(p, _) if p.unwrap_or(0) > 9 => {
            return Err(format!("TIME precision {} is out of range 0 to 9", p.unwrap_or(0)))
        }
        A::Timestamp(Some(p), _) if *p > 9 => return Err(format!("TIMESTAMP precision {p} is out of range 0 to 9")),
        A::Time(p, _) => TypeKind::Time(p.unwrap_or(0) as u8),
        A::Timestamp(p, tz) => {
            let precision = p.unwrap_or(6) as u8;
            if matches!(tz, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) {
                TypeKind::Timestamp { precision, attribute: None }
            } else {
                TypeKind::TimestampLtz { precision, attribute: None }
            }
        }
        A::Custom(name, args) => {
            let name = crate::parser::object_name(name).to_ascii_uppercase();
            match name.as_str() {
                "STRING" => TypeKind::Varchar(MAX_LENGTH),
                "BYTES" => TypeKind::Varbinary(MAX_LENGTH),
                "TIMESTAMP_LTZ" => TypeKind::TimestampLtz {
                    precision: args.first().and_then(|a| a.to_string().parse().ok()).unwrap_or(6),
                    attribute: None,
                },
                other => return Err(format!("unknown data type '{other}'")),
            }
        }
        other => return Err(format!("the data type '{other}' is not supported")),
    };
    Ok(DataType::new(kind))
}
