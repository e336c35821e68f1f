//! The `TableEnvironment` from Rust: a DataStream of rows as a table, a Rust function
//! that `CREATE FUNCTION` names, and a query's rows back as a DataStream of the same job.

use eddy_api::sink::CollectSink;
use eddy_api::Env;
use eddy_sql::{DataType, Field, Row, ScalarFunction, SqlError, TableEnvironment, TypeKind, Value};

/// `shout(s)`: `s` in capitals and an exclamation mark.
#[derive(Debug)]
struct Shout;

impl ScalarFunction for Shout {
    fn name(&self) -> &str {
        "shout"
    }
    fn result_type(&self, args: &[DataType]) -> Result<DataType, String> {
        match args {
            [s] if s.is_string() => Ok(DataType::string()),
            _ => Err("shout takes one string".into()),
        }
    }
    fn eval(&self, args: &[Value]) -> Result<Value, String> {
        Ok(match args[0].as_str() {
            Some(s) => Value::string(&format!("{}!", s.to_uppercase())),
            None => Value::Null,
        })
    }
}

#[test]
fn a_data_stream_goes_through_sql_and_back() {
    let env = Env::new();
    env.set_parallelism(1);
    let words = ["apple", "kiwi", "banana", "fig", "cherry"];
    let rows: Vec<Row> =
        words.iter().enumerate().map(|(i, w)| Row::insert(vec![Value::Int(i as i64), Value::string(w)])).collect();
    let mut tables = TableEnvironment::create(&env);
    tables
        .from_data_stream(
            "words",
            env.from_collection(rows),
            vec![Field::new("id", DataType::not_null(TypeKind::BigInt)), Field::new("word", DataType::string())],
        )
        .unwrap();
    tables.register_function("com.example.Shout", Shout);
    tables.execute_sql("CREATE FUNCTION loud AS 'com.example.Shout'").unwrap();
    let (stream, fields) = tables
        .to_data_stream("SELECT id * 10 AS id, loud(word) AS word FROM words WHERE CHAR_LENGTH(word) > 4")
        .unwrap();
    assert_eq!(fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["id", "word"]);
    assert_eq!(fields[0].ty.to_string(), "BIGINT NOT NULL");
    let sink = CollectSink::new();
    stream.add_sink(sink.clone());
    env.execute("words").unwrap();
    let mut out: Vec<String> = sink.take().iter().map(|r: &Row| r.to_string()).collect();
    out.sort();
    assert_eq!(out, ["+I[0, APPLE!]", "+I[20, BANANA!]", "+I[40, CHERRY!]"]);
}

#[test]
fn a_function_no_program_registered_is_an_error_naming_it() {
    let mut tables = TableEnvironment::new(Box::new(|| Ok(Env::new())));
    let err = tables.execute_sql("CREATE FUNCTION f AS 'com.example.Missing'").unwrap_err();
    assert!(matches!(err, SqlError::Validation { .. }), "{err}");
    assert!(
        err.to_string().contains("Function class 'com.example.Missing' of function 'f' is not registered"),
        "{err}"
    );
}

#[test]
fn an_updating_query_cannot_become_an_append_only_stream() {
    let env = Env::new();
    let mut tables = TableEnvironment::create(&env);
    tables
        .from_data_stream(
            "t",
            env.from_collection(vec![Row::insert(vec![Value::Int(1)])]),
            vec![Field::new("a", DataType::int())],
        )
        .unwrap();
    let Err(err) = tables.to_data_stream("SELECT a, COUNT(*) FROM t GROUP BY a") else {
        panic!("an updating query became a stream")
    };
    assert!(
        err.to_string().contains("doesn't support consuming update changes which is produced by node GroupAggregate"),
        "{err}"
    );
}

#[test]
fn an_updating_query_becomes_a_changelog_stream_with_every_row_kind() {
    let env = Env::new();
    env.set_parallelism(1);
    let mut tables = TableEnvironment::create(&env);
    let rows = [1, 2, 1, 1].iter().map(|a| Row::insert(vec![Value::Int(*a)])).collect();
    tables.from_data_stream("t", env.from_collection(rows), vec![Field::new("a", DataType::int())]).unwrap();
    // The count per value, then how many values have each count: a group empties (-D).
    let (stream, fields) = tables
        .to_changelog_stream("SELECT n, COUNT(*) AS vs FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) GROUP BY n")
        .unwrap();
    assert_eq!(fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["n", "vs"]);
    let sink = CollectSink::new();
    stream.add_sink(sink.clone());
    env.execute("changelog").unwrap();
    let out: Vec<String> = sink.take().iter().map(|r: &Row| r.to_string()).collect();
    assert_eq!(
        out,
        [
            "+I[1, 1]", // a=1 counted once
            "-U[1, 1]", // a=2 counted once: two values with count 1
            "+U[1, 2]", "-U[1, 2]", // a=1 again: it leaves count 1 …
            "+U[1, 1]", "+I[2, 1]", // … for count 2
            "-D[2, 1]", // a=1 a third time: count 2 empties …
            "+I[3, 1]", // … and count 3 begins
        ]
    );
}

/// The Nexmark table as the benchmark declares it (ddl_gen.sql's shape).
const NEXMARK_TABLE: &str = "CREATE TABLE events (
  event_type INT,
  person ROW<id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING, `dateTime` TIMESTAMP(3), extra STRING>,
  auction ROW<id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING>,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3), extra STRING>,
  `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime` WHEN event_type = 1 THEN auction.`dateTime` ELSE bid.`dateTime` END,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'events.num' = '3000')";

/// Runs `query` over the Nexmark table and returns its rows.
fn nexmark_query(query: &str) -> Vec<Row> {
    let env = Env::new();
    env.set_parallelism(2);
    let mut tables = TableEnvironment::create(&env);
    tables.execute_sql(NEXMARK_TABLE).unwrap();
    let (stream, _) = tables.to_data_stream(query).unwrap();
    let sink = CollectSink::new();
    stream.add_sink(sink.clone());
    env.execute("nexmark").unwrap();
    sink.take()
}

fn printed_and_sorted(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = rows.iter().map(Row::to_string).collect();
    out.sort();
    out
}

#[test]
fn a_source_that_makes_only_the_fields_a_query_reads_gives_the_rows_of_the_whole_table() {
    // Some fields of two of the nested rows, and a whole nested row: the connector
    // makes the first two partly and the third whole.
    let narrow = nexmark_query(
        "SELECT bid.auction, bid.price * 2, auction.seller, person, `dateTime` FROM events \
         WHERE event_type <> 1 OR auction.category = 10",
    );
    // The same from whole rows (a query that reads every column whole).
    let whole = nexmark_query("SELECT event_type, person, auction, bid, `dateTime` FROM events");
    assert_eq!(whole.len(), 3000);
    let expected: Vec<Row> = whole
        .iter()
        .filter_map(|row| {
            let [kind, person, auction, bid, time] = &row.fields[..] else { unreachable!() };
            let field = |v: &Value, i: usize| match v {
                Value::Row(fields) => fields[i].clone(),
                _ => Value::Null,
            };
            if kind.as_i64() == Some(1) && field(auction, 8) != Value::Int(10) {
                return None;
            }
            let price = field(bid, 2).as_i64().map_or(Value::Null, |p| Value::Int(p * 2));
            Some(Row::insert(vec![field(bid, 0), price, field(auction, 7), person.clone(), time.clone()]))
        })
        .collect();
    assert!(expected.len() > 2700, "{} rows", expected.len());
    assert_eq!(printed_and_sorted(&narrow), printed_and_sorted(&expected));
}

/// `key_or_draw(s)`: `s`, or when it is NULL a string no call returned before: a function
/// of the program's whose result changes from call to call.
#[derive(Debug, Default)]
struct KeyOrDraw(std::sync::atomic::AtomicU64);

impl ScalarFunction for KeyOrDraw {
    fn name(&self) -> &str {
        "key_or_draw"
    }
    fn result_type(&self, args: &[DataType]) -> Result<DataType, String> {
        match args {
            [s] if s.is_string() => Ok(DataType::string()),
            _ => Err("key_or_draw takes one string".into()),
        }
    }
    fn eval(&self, args: &[Value]) -> Result<Value, String> {
        Ok(match args[0].as_str() {
            Some(s) => Value::string(s),
            None => Value::string(&format!("draw {}", self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed))),
        })
    }
}

/// A temporal join's key computed by a function whose result changes from call to call
/// is computed once per row (before the exchange, as Flink's planner does): a row of a
/// NULL url meets no price and is padded with NULLs, where computing the key where the
/// row is routed and again where it is joined failed the job (its key changed between).
#[test]
fn a_temporal_join_key_that_changes_from_call_to_call_is_computed_once_per_row() {
    let dir = std::env::temp_dir().join(format!("eddy-temporal-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let clicks = [
        r#"{"url": "/home", "ts": "2023-11-14 22:13:20.000"}"#,
        r#"{"url": null, "ts": "2023-11-14 22:13:21.000"}"#,
        r#"{"url": "/cart", "ts": "2023-11-14 22:13:22.000"}"#,
        r#"{"url": null, "ts": "2023-11-14 22:13:23.000"}"#,
        r#"{"url": "/home", "ts": "2023-11-14 22:13:40.000"}"#,
    ];
    let prices = [
        r#"{"url": "/home", "price": 1, "ts": "2023-11-14 22:13:00.000"}"#,
        r#"{"url": "/cart", "price": 7, "ts": "2023-11-14 22:13:00.000"}"#,
        r#"{"url": "/home", "price": 2, "ts": "2023-11-14 22:13:30.000"}"#,
    ];
    std::fs::write(dir.join("clicks.json"), clicks.join("\n")).unwrap();
    std::fs::write(dir.join("prices.json"), prices.join("\n")).unwrap();
    let env = Env::new();
    env.set_parallelism(2);
    let mut tables = TableEnvironment::create(&env);
    for (name, columns) in [("clicks", "url STRING"), ("prices", "url STRING, price INT")] {
        let key = if name == "prices" { "PRIMARY KEY (url) NOT ENFORCED," } else { "" };
        let path = dir.join(format!("{name}.json"));
        tables
            .execute_sql(&format!(
                "CREATE TABLE {name} ({columns}, ts TIMESTAMP(3), {key} WATERMARK FOR ts AS ts) \
                 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json')",
                path.display()
            ))
            .unwrap();
    }
    tables.register_function("com.example.KeyOrDraw", KeyOrDraw::default());
    tables.execute_sql("CREATE FUNCTION key_or_draw AS 'com.example.KeyOrDraw'").unwrap();
    let (stream, _) = tables
        .to_data_stream(
            "SELECT c.url, c.ts, p.price FROM clicks AS c \
             LEFT JOIN prices FOR SYSTEM_TIME AS OF c.ts AS p ON key_or_draw(c.url) = p.url",
        )
        .unwrap();
    let sink = CollectSink::new();
    stream.add_sink(sink.clone());
    env.execute("temporal join with a drawn key").unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let mut out: Vec<String> = sink.take().iter().map(|r: &Row| r.to_string()).collect();
    out.sort();
    assert_eq!(
        out,
        [
            "+I[/cart, 2023-11-14T22:13:22, 7]",
            "+I[/home, 2023-11-14T22:13:20, 1]",
            "+I[/home, 2023-11-14T22:13:40, 2]",
            "+I[null, 2023-11-14T22:13:21, null]",
            "+I[null, 2023-11-14T22:13:23, null]",
        ]
    );
}
