//! Flink SQL's logical types, with nullability, and the precision rules of its DECIMAL
//! arithmetic (those of Flink's `LogicalTypeMerging`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest precision of a DECIMAL (Flink's `DecimalType.MAX_PRECISION`).
pub const MAX_DECIMAL_PRECISION: u8 = 38;
/// The length of `STRING` (Flink's `VarCharType.MAX_LENGTH`).
pub const MAX_LENGTH: u32 = i32::MAX as u32;

/// A SQL type: its kind and whether it admits NULL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataType {
    pub kind: TypeKind,
    pub nullable: bool,
}

/// What a time attribute column is, as Flink marks `TIMESTAMP(3) *ROWTIME*` and
/// `TIMESTAMP_LTZ(3) *PROCTIME*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeAttribute {
    Rowtime,
    Proctime,
}

/// The kinds of Flink's logical types.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TypeKind {
    /// The type of the literal NULL before it meets another type.
    Null,
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Char(u32),
    Varchar(u32),
    Binary(u32),
    Varbinary(u32),
    Date,
    Time(u8),
    Timestamp {
        precision: u8,
        attribute: Option<TimeAttribute>,
    },
    TimestampLtz {
        precision: u8,
        attribute: Option<TimeAttribute>,
    },
    /// `INTERVAL … SECOND` and its kin: a duration in milliseconds.
    IntervalDayTime,
    /// `INTERVAL … MONTH` and its kin: a number of months.
    IntervalYearMonth,
    Row(Vec<Field>),
    Array(Box<DataType>),
    Map(Box<DataType>, Box<DataType>),
    /// The argument of `DESCRIPTOR(col)` in a window table function.
    Descriptor,
}

/// A named field of a ROW type or of a schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub ty: DataType,
}

impl Field {
    pub fn new(name: impl Into<String>, ty: DataType) -> Self {
        Self { name: name.into(), ty }
    }
}

impl DataType {
    pub fn new(kind: TypeKind) -> Self {
        Self { kind, nullable: true }
    }
    pub fn not_null(kind: TypeKind) -> Self {
        Self { kind, nullable: false }
    }
    pub fn with_nullable(mut self, nullable: bool) -> Self {
        self.nullable = nullable;
        self
    }
    pub fn boolean() -> Self {
        Self::new(TypeKind::Boolean)
    }
    pub fn int() -> Self {
        Self::new(TypeKind::Int)
    }
    pub fn bigint() -> Self {
        Self::new(TypeKind::BigInt)
    }
    pub fn double() -> Self {
        Self::new(TypeKind::Double)
    }
    pub fn string() -> Self {
        Self::new(TypeKind::Varchar(MAX_LENGTH))
    }
    pub fn timestamp(precision: u8) -> Self {
        Self::new(TypeKind::Timestamp { precision, attribute: None })
    }
    pub fn decimal(precision: u8, scale: u8) -> Self {
        Self::new(TypeKind::Decimal { precision, scale })
    }

    /// The same type without a time attribute mark (what an expression over a time
    /// attribute computes, and what a window aggregation's input loses).
    pub fn without_time_attribute(mut self) -> Self {
        match &mut self.kind {
            TypeKind::Timestamp { attribute, .. } | TypeKind::TimestampLtz { attribute, .. } => *attribute = None,
            _ => {}
        }
        self
    }

    pub fn time_attribute(&self) -> Option<TimeAttribute> {
        match self.kind {
            TypeKind::Timestamp { attribute, .. } | TypeKind::TimestampLtz { attribute, .. } => attribute,
            _ => None,
        }
    }

    pub fn is_numeric(&self) -> bool {
        self.kind.is_integer() || matches!(self.kind, TypeKind::Float | TypeKind::Double | TypeKind::Decimal { .. })
    }
    pub fn is_string(&self) -> bool {
        matches!(self.kind, TypeKind::Char(_) | TypeKind::Varchar(_))
    }
    pub fn is_timestamp(&self) -> bool {
        matches!(self.kind, TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. })
    }
    pub fn is_interval(&self) -> bool {
        matches!(self.kind, TypeKind::IntervalDayTime | TypeKind::IntervalYearMonth)
    }

    /// The decimal precision and scale an exact numeric type is read as in arithmetic
    /// (Flink: TINYINT is DECIMAL(3, 0) … BIGINT is DECIMAL(19, 0)).
    pub fn decimal_shape(&self) -> Option<(u8, u8)> {
        Some(match self.kind {
            TypeKind::TinyInt => (3, 0),
            TypeKind::SmallInt => (5, 0),
            TypeKind::Int => (10, 0),
            TypeKind::BigInt => (19, 0),
            TypeKind::Decimal { precision, scale } => (precision, scale),
            _ => return None,
        })
    }

    /// Whether a value of `self` can be stored where `target` is expected without an
    /// explicit CAST (Flink's implicit casts for INSERT: a wider number, a longer string…).
    pub fn assignable_to(&self, target: &DataType) -> bool {
        use TypeKind::*;
        match (&self.kind, &target.kind) {
            (Null, _) => true,
            (a, b) if a.is_integer() && (b.is_integer() || matches!(b, Decimal { .. } | Float | Double)) => true,
            (Decimal { .. }, Decimal { .. } | Float | Double) => true,
            (Float | Double, Float | Double) => true,
            (Char(_) | Varchar(_), Char(_) | Varchar(_)) => true,
            (Binary(_) | Varbinary(_), Binary(_) | Varbinary(_)) => true,
            (Timestamp { .. }, Timestamp { .. }) | (TimestampLtz { .. }, TimestampLtz { .. }) => true,
            (Row(a), Row(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.ty.assignable_to(&b.ty)),
            (Array(a), Array(b)) => a.assignable_to(b),
            (Map(ak, av), Map(bk, bv)) => ak.assignable_to(bk) && av.assignable_to(bv),
            (a, b) => a == b,
        }
    }
}

impl TypeKind {
    pub fn is_integer(&self) -> bool {
        matches!(self, TypeKind::TinyInt | TypeKind::SmallInt | TypeKind::Int | TypeKind::BigInt)
    }

    /// The family a comparison or a CASE needs both sides in.
    pub fn family(&self) -> &'static str {
        use TypeKind::*;
        match self {
            Null => "NULL",
            Boolean => "BOOLEAN",
            TinyInt | SmallInt | Int | BigInt | Float | Double | Decimal { .. } => "NUMERIC",
            Char(_) | Varchar(_) => "CHARACTER",
            Binary(_) | Varbinary(_) => "BINARY",
            Date => "DATE",
            Time(_) => "TIME",
            Timestamp { .. } => "TIMESTAMP",
            TimestampLtz { .. } => "TIMESTAMP_LTZ",
            IntervalDayTime | IntervalYearMonth => "INTERVAL",
            Row(_) => "ROW",
            Array(_) => "ARRAY",
            Map(..) => "MAP",
            Descriptor => "DESCRIPTOR",
        }
    }
}

/// The type of `a + b`, `a - b`, `a * b`, `a / b` and `MOD(a, b)` over exact numerics,
/// as Flink derives it: Flink's `LogicalTypeMerging.findAdditionDecimalType` and kin,
/// which follow SQL Server's rules (scale kept, precision capped at 38).
pub fn decimal_arithmetic(op: char, (p1, s1): (u8, u8), (p2, s2): (u8, u8)) -> (u8, u8) {
    let (p1, s1, p2, s2) = (p1 as i32, s1 as i32, p2 as i32, s2 as i32);
    let (precision, scale) = match op {
        '+' | '-' => {
            let scale = s1.max(s2);
            (scale + (p1 - s1).max(p2 - s2) + 1, scale)
        }
        '*' => (p1 + p2 + 1, s1 + s2),
        '/' => {
            let scale = 6.max(s1 + p2 + 1);
            (p1 - s1 + s2 + scale, scale)
        }
        _ => {
            // MOD: the integral digits of the smaller, the larger scale.
            let scale = s1.max(s2);
            ((p1 - s1).min(p2 - s2) + scale, scale)
        }
    };
    adjust_precision_scale(precision, scale)
}

/// Caps a derived precision at 38, giving up scale down to 6 digits first (Flink's
/// `LogicalTypeMerging.adjustPrecisionScale`).
fn adjust_precision_scale(precision: i32, scale: i32) -> (u8, u8) {
    let max = MAX_DECIMAL_PRECISION as i32;
    if precision <= max {
        return (precision as u8, scale as u8);
    }
    let integral = precision - scale;
    let min_scale = scale.min(6);
    let scale = (max - integral).max(min_scale);
    (max as u8, scale as u8)
}

impl fmt::Display for DataType {
    /// As Flink prints types: `BIGINT NOT NULL`, `STRING`, `TIMESTAMP(3) *ROWTIME*`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TypeKind::*;
        match &self.kind {
            Null => write!(f, "NULL")?,
            Boolean => write!(f, "BOOLEAN")?,
            TinyInt => write!(f, "TINYINT")?,
            SmallInt => write!(f, "SMALLINT")?,
            Int => write!(f, "INT")?,
            BigInt => write!(f, "BIGINT")?,
            Float => write!(f, "FLOAT")?,
            Double => write!(f, "DOUBLE")?,
            Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})")?,
            Char(n) => write!(f, "CHAR({n})")?,
            Varchar(n) if *n == MAX_LENGTH => write!(f, "STRING")?,
            Varchar(n) => write!(f, "VARCHAR({n})")?,
            Binary(n) => write!(f, "BINARY({n})")?,
            Varbinary(n) if *n == MAX_LENGTH => write!(f, "BYTES")?,
            Varbinary(n) => write!(f, "VARBINARY({n})")?,
            Date => write!(f, "DATE")?,
            Time(p) => write!(f, "TIME({p})")?,
            Timestamp { precision, attribute } => {
                write!(f, "TIMESTAMP({precision})")?;
                if let Some(a) = attribute {
                    write!(f, " {}", attribute_mark(*a))?;
                }
            }
            TimestampLtz { precision, attribute } => {
                write!(f, "TIMESTAMP_LTZ({precision})")?;
                if let Some(a) = attribute {
                    write!(f, " {}", attribute_mark(*a))?;
                }
            }
            IntervalDayTime => write!(f, "INTERVAL SECOND(3)")?,
            IntervalYearMonth => write!(f, "INTERVAL MONTH")?,
            Row(fields) => {
                write!(f, "ROW<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "`{}` {}", field.name, field.ty)?;
                }
                write!(f, ">")?;
            }
            Array(t) => write!(f, "ARRAY<{t}>")?,
            Map(k, v) => write!(f, "MAP<{k}, {v}>")?,
            Descriptor => write!(f, "DESCRIPTOR")?,
        }
        if !self.nullable {
            write!(f, " NOT NULL")?;
        }
        Ok(())
    }
}

fn attribute_mark(attribute: TimeAttribute) -> &'static str {
    match attribute {
        TimeAttribute::Rowtime => "*ROWTIME*",
        TimeAttribute::Proctime => "*PROCTIME*",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_rules_are_flinks() {
        // 0.908 (DECIMAL(3, 3)) * BIGINT is DECIMAL(23, 3) (Nexmark q1's column type).
        assert_eq!(decimal_arithmetic('*', (3, 3), (19, 0)), (23, 3));
        // DECIMAL(10, 2) / INT: scale max(6, 2 + 10 + 1) = 13.
        assert_eq!(decimal_arithmetic('/', (10, 2), (10, 0)), (21, 13));
        assert_eq!(decimal_arithmetic('/', (3, 1), (10, 0)), (14, 12));
        assert_eq!(decimal_arithmetic('+', (38, 10), (38, 10)), (38, 9));
    }

    #[test]
    fn types_print_as_flink_prints_them() {
        assert_eq!(DataType::string().to_string(), "STRING");
        assert_eq!(DataType::not_null(TypeKind::BigInt).to_string(), "BIGINT NOT NULL");
        let rowtime = DataType::new(TypeKind::Timestamp { precision: 3, attribute: Some(TimeAttribute::Rowtime) });
        assert_eq!(rowtime.to_string(), "TIMESTAMP(3) *ROWTIME*");
    }
}
