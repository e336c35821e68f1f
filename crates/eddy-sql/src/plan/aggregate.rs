//! Aggregate calls: which functions aggregate, their result types (Flink's
//! `LogicalTypeMerging.findSumAggType` / `findAvgAggType`), and what a call reads.

use crate::types::{DataType, TypeKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateKind {
    /// `COUNT(*)`.
    CountStar,
    /// `COUNT(x)`: the non-NULL values.
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

/// One aggregate of a grouping: over a column of the aggregation's input, optionally of
/// its distinct values only, optionally of the rows a FILTER column is TRUE for.
#[derive(Clone, Debug)]
pub struct AggregateCall {
    pub kind: AggregateKind,
    pub argument: Option<usize>,
    pub distinct: bool,
    pub filter: Option<usize>,
    /// The argument's type (for arithmetic on the accumulator).
    pub argument_type: Option<DataType>,
    pub ty: DataType,
    /// As written, for plans.
    pub text: String,
}

/// Whether a function name (upper case) is an aggregate.
pub fn is_aggregate(name: &str) -> bool {
    matches!(
        name,
        "COUNT"
            | "SUM"
            | "MIN"
            | "MAX"
            | "AVG"
            | "SUM0"
            | "STDDEV"
            | "STDDEV_POP"
            | "STDDEV_SAMP"
            | "VAR_POP"
            | "VAR_SAMP"
            | "VARIANCE"
            | "COLLECT"
            | "LISTAGG"
            | "FIRST_VALUE"
            | "LAST_VALUE"
            | "ARRAY_AGG"
            | "JSON_ARRAYAGG"
            | "JSON_OBJECTAGG"
    )
}

/// The kind of a supported aggregate function, or `None`.
pub fn kind_of(name: &str, star: bool) -> Option<AggregateKind> {
    Some(match name {
        "COUNT" if star => AggregateKind::CountStar,
        "COUNT" => AggregateKind::Count,
        "SUM" => AggregateKind::Sum,
        "MIN" => AggregateKind::Min,
        "MAX" => AggregateKind::Max,
        "AVG" => AggregateKind::Avg,
        _ => return None,
    })
}

/// The result type of an aggregate over `argument`; `Err` names what does not fit.
pub fn result_type(kind: AggregateKind, argument: Option<&DataType>) -> Result<DataType, String> {
    use AggregateKind::*;
    match (kind, argument) {
        (CountStar | Count, _) => Ok(DataType::not_null(TypeKind::BigInt)),
        (Min | Max, Some(t)) => Ok(t.clone().without_time_attribute().with_nullable(true)),
        (Sum | Avg, Some(t)) => {
            let kind = match &t.kind {
                k if k.is_integer() => k.clone(),
                TypeKind::Float | TypeKind::Double => t.kind.clone(),
                TypeKind::Decimal { scale, .. } if kind == Sum => TypeKind::Decimal { precision: 38, scale: *scale },
                TypeKind::Decimal { scale, .. } => TypeKind::Decimal { precision: 38, scale: (*scale).max(6) },
                _ => return Err(format!("{kind:?} needs a numeric argument, not {t}").to_uppercase()),
            };
            Ok(DataType::new(kind))
        }
        (_, None) => Err("the aggregate needs an argument".into()),
    }
}
