//! The `datagen` connector: rows of random or sequential values per field, with Flink's
//! options (`rows-per-second`, `number-of-rows`, `fields.<name>.kind` = `random` |
//! `sequence`, `.min`, `.max`, `.length`, `.start`, `.end`, `.null-rate`). Random values
//! are a hash of the row's index and the field's, so that a run is repeatable (Flink's
//! are not).

use crate::catalog::CatalogTable;
use crate::error::SqlError;
use crate::expr::decimal;
use crate::row::Row;
use crate::types::{DataType, Field, TypeKind};
use crate::value::Value;
use eddy_api::source::DataGeneratorSource;
use eddy_api::{DataStream, Env};
use std::sync::Arc;

const FIELD_OPTIONS: &[&str] = &["kind", "min", "max", "max-past", "length", "var-len", "start", "end", "null-rate"];

#[derive(Clone, Debug)]
enum Generator {
    Sequence { start: i64 },
    Random { min: f64, max: f64, length: usize, null_rate: f64, max_past: i64 },
}

fn mix(mut x: u64) -> u64 {
    // splitmix64's finaliser.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn unit(row: u64, field: usize, salt: u64) -> f64 {
    (mix(row.wrapping_mul(1_000_003).wrapping_add(field as u64).wrapping_add(salt << 40)) >> 11) as f64
        / (1u64 << 53) as f64
}

fn generate(g: &Generator, ty: &DataType, row: u64, field: usize, base_time: i64) -> Value {
    match g {
        Generator::Sequence { start, .. } => {
            let v = start + row as i64;
            match &ty.kind {
                k if k.is_integer() => Value::Int(v),
                TypeKind::Float | TypeKind::Double => Value::Float(v as f64),
                TypeKind::Decimal { scale, .. } => Value::Decimal(v as i128 * decimal::pow10(*scale), *scale),
                _ => Value::string(&v.to_string()),
            }
        }
        Generator::Random { min, max, length, null_rate, max_past } => {
            if *null_rate > 0.0 && unit(row, field, 7) < *null_rate {
                return Value::Null;
            }
            let u = unit(row, field, 1);
            match &ty.kind {
                TypeKind::Boolean => Value::Boolean(u < 0.5),
                k if k.is_integer() => Value::Int((min + (u * (max - min + 1.0)).floor()).min(*max) as i64),
                TypeKind::Float | TypeKind::Double => Value::Float(min + u * (max - min)),
                TypeKind::Decimal { precision, scale } => {
                    let v = min + u * (max - min);
                    match decimal::from_f64(v, *scale) {
                        Some(d) if decimal::fits(d, *precision) => Value::Decimal(d, *scale),
                        _ => Value::Null,
                    }
                }
                TypeKind::Char(_) | TypeKind::Varchar(_) => {
                    const ALPHABET: &[u8] = b"0123456789abcdef";
                    let s: String = (0..*length)
                        .map(|i| ALPHABET[(mix(row ^ ((field as u64) << 48) ^ (i as u64) << 32) % 16) as usize] as char)
                        .collect();
                    Value::string(&s)
                }
                TypeKind::Timestamp { .. } | TypeKind::TimestampLtz { .. } => {
                    Value::timestamp_millis(base_time - (u * *max_past as f64) as i64)
                }
                TypeKind::Date => Value::Date(((base_time - (u * *max_past as f64) as i64) / 86_400_000) as i32),
                _ => Value::Null,
            }
        }
    }
}

fn parse<T: std::str::FromStr>(table: &CatalogTable, key: &str) -> Result<Option<T>, SqlError> {
    match table.option(key) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| SqlError::table(&table.name, format!("the option '{key}' has the bad value '{v}'"))),
    }
}

fn generators(table: &CatalogTable) -> Result<(Vec<Generator>, Option<u64>), SqlError> {
    let mut out = Vec::new();
    let mut rows: Option<u64> = parse(table, "number-of-rows")?;
    for f in &table.physical {
        let key = |o: &str| format!("fields.{}.{o}", f.name);
        let kind = table.option(&key("kind")).unwrap_or("random");
        out.push(match kind {
            "sequence" => {
                let start: i64 = parse(table, &key("start"))?.ok_or_else(|| {
                    SqlError::table(&table.name, format!("'{}' is needed for a sequence", key("start")))
                })?;
                let end: i64 = parse(table, &key("end"))?.ok_or_else(|| {
                    SqlError::table(&table.name, format!("'{}' is needed for a sequence", key("end")))
                })?;
                if end < start {
                    return Err(SqlError::table(&table.name, format!("'{}' is before '{}'", key("end"), key("start"))));
                }
                let n = (end - start + 1) as u64;
                rows = Some(rows.map_or(n, |r| r.min(n)));
                Generator::Sequence { start }
            }
            "random" => {
                let (default_min, default_max) = match f.ty.kind {
                    TypeKind::TinyInt => (i8::MIN as f64, i8::MAX as f64),
                    TypeKind::SmallInt => (i16::MIN as f64, i16::MAX as f64),
                    TypeKind::Int => (i32::MIN as f64, i32::MAX as f64),
                    TypeKind::BigInt => (i64::MIN as f64, i64::MAX as f64),
                    _ => (0.0, 1.0),
                };
                Generator::Random {
                    min: parse(table, &key("min"))?.unwrap_or(default_min),
                    max: parse(table, &key("max"))?.unwrap_or(default_max),
                    length: parse(table, &key("length"))?.unwrap_or(100),
                    null_rate: parse(table, &key("null-rate"))?.unwrap_or(0.0),
                    max_past: parse(table, &key("max-past"))?.unwrap_or(0),
                }
            }
            other => {
                return Err(SqlError::table(
                    &table.name,
                    format!("'{}' must be 'random' or 'sequence', not '{other}'", key("kind")),
                ))
            }
        });
    }
    Ok((out, rows))
}

pub fn check(table: &CatalogTable) -> Result<(), SqlError> {
    let names: Vec<&str> = table.physical.iter().map(|f| f.name.as_str()).collect();
    let mut unknown = Vec::new();
    for key in table.options.keys() {
        let ok = matches!(key.as_str(), "connector" | "rows-per-second" | "number-of-rows" | "scan.parallelism")
            || key
                .strip_prefix("fields.")
                .and_then(|rest| rest.rsplit_once('.'))
                .is_some_and(|(field, option)| names.contains(&field) && FIELD_OPTIONS.contains(&option));
        if !ok {
            unknown.push(key.clone());
        }
    }
    if !unknown.is_empty() {
        let mut supported =
            vec!["connector".to_string(), "number-of-rows".into(), "rows-per-second".into(), "scan.parallelism".into()];
        for n in &names {
            supported.extend(FIELD_OPTIONS.iter().map(|o| format!("fields.{n}.{o}")));
        }
        return Err(SqlError::table(
            &table.name,
            format!(
                "Unsupported options found for 'datagen'.\n\nUnsupported options:\n\n{}\n\nSupported options:\n\n{}",
                unknown.join("\n"),
                supported.join("\n")
            ),
        ));
    }
    generators(table).map(|_| ())
}

pub fn source(table: &CatalogTable, env: &Env) -> Result<DataStream<Row>, SqlError> {
    let (generators, rows) = generators(table)?;
    let rate: u64 = parse(table, "rows-per-second")?.unwrap_or(10_000);
    let fields: Arc<Vec<Field>> = Arc::new(table.physical.clone());
    let generators = Arc::new(generators);
    // Random timestamps lie before the job's start.
    let base_time =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let stream = env.add_parallel_source(DataGeneratorSource::new(rows.unwrap_or(u64::MAX), rate, move |i| {
        Row::insert(
            generators
                .iter()
                .zip(fields.iter())
                .enumerate()
                .map(|(field, (g, f))| generate(g, &f.ty, i, field, base_time))
                .collect(),
        )
    }));
    Ok(match parse::<u32>(table, "scan.parallelism")? {
        Some(p) => stream.set_parallelism(p),
        None => stream,
    })
}
