//! Scalar functions eddy ships for well-known SQL suites, registered by `eddy sql` under
//! the Java class names those suites' `CREATE FUNCTION` statements name.

use crate::expr::ScalarFunction;
use crate::types::{DataType, TypeKind};
use crate::value::Value;

/// The Nexmark benchmark's `count_char(s, c)` (q14): how many times the character `c`
/// occurs in `s`.
#[derive(Debug, Clone, Copy)]
pub struct CountChar;

/// The class name the benchmark's q14 gives it.
pub const COUNT_CHAR_CLASS: &str = "com.github.nexmark.flink.udf.CountChar";

impl ScalarFunction for CountChar {
    fn name(&self) -> &str {
        "count_char"
    }

    fn result_type(&self, args: &[DataType]) -> Result<DataType, String> {
        match args {
            [a, b] if a.is_string() && b.is_string() => Ok(DataType::not_null(TypeKind::BigInt)),
            _ => Err("count_char takes two strings: count_char(text, character)".into()),
        }
    }

    fn eval(&self, args: &[Value]) -> Result<Value, String> {
        let (Some(text), Some(c)) = (args[0].as_str(), args[1].as_str()) else {
            return Ok(Value::Int(0));
        };
        let Some(c) = c.chars().next() else { return Ok(Value::Int(0)) };
        Ok(Value::Int(text.chars().filter(|x| *x == c).count() as i64))
    }
}
