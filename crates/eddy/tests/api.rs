//! The API end to end: every keyed state kind inside a running job, co-process, side
//! outputs, the socket source and the text file sink.

use eddy::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// Per key, after every value: (key, value, list so far, distinct values with counts,
/// max so far, average so far).
type Summary = (u64, i64, Vec<i64>, Vec<(i64, u32)>, i64, f64);

struct Avg;
impl AggregateFunction for Avg {
    type In = i64;
    type Acc = (i64, u64);
    type Out = f64;
    fn create_accumulator(&self) -> (i64, u64) {
        (0, 0)
    }
    fn add(&self, v: i64, acc: (i64, u64)) -> (i64, u64) {
        (acc.0 + v, acc.1 + 1)
    }
    fn get_result(&self, acc: &(i64, u64)) -> f64 {
        acc.0 as f64 / acc.1 as f64
    }
    fn merge(&self, a: (i64, u64), b: (i64, u64)) -> (i64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

#[derive(Clone, Default)]
struct AllKinds {
    list: Option<ListState<i64>>,
    map: Option<MapState<i64, u32>>,
    max: Option<ReducingState<i64>>,
    avg: Option<AggregatingState<i64, f64>>,
}

impl RichFunction for AllKinds {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.list = Some(ctx.get_list_state(&ListStateDescriptor::new("list"))?);
        self.map = Some(ctx.get_map_state(&MapStateDescriptor::new("map"))?);
        self.max = Some(ctx.get_reducing_state(&ReducingStateDescriptor::new("max", |a: i64, b: i64| a.max(b)))?);
        self.avg = Some(ctx.get_aggregating_state(&AggregatingStateDescriptor::new("avg", Avg))?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, (u64, i64), Summary> for AllKinds {
    fn process_element(
        &mut self,
        (key, v): (u64, i64),
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, Summary>,
    ) -> FunctionResult {
        assert_eq!(*ctx.current_key(), key);
        let (list, map, max, avg) = (
            self.list.as_ref().unwrap(),
            self.map.as_ref().unwrap(),
            self.max.as_ref().unwrap(),
            self.avg.as_ref().unwrap(),
        );
        list.add(v)?;
        map.put(v, map.get(&v)?.unwrap_or(0) + 1)?;
        max.add(v)?;
        avg.add(v)?;
        let mut entries = map.entries()?;
        entries.sort();
        out.collect((key, v, list.get()?, entries, max.get()?.unwrap(), avg.get()?.unwrap()));
        Ok(())
    }
}

#[test]
fn every_keyed_state_kind_matches_a_sequential_reference_in_a_parallel_job() {
    let input: Vec<(u64, i64)> = (0..3_000i64).map(|i| ((i * 7 % 31) as u64, (i * 13 % 17) - 8)).collect();
    let mut lists: HashMap<u64, Vec<i64>> = HashMap::new();
    let mut expected: Vec<String> = Vec::new();
    for &(k, v) in &input {
        let list = lists.entry(k).or_default();
        list.push(v);
        let mut counts: BTreeMap<i64, u32> = BTreeMap::new();
        list.iter().for_each(|x| *counts.entry(*x).or_default() += 1);
        let avg = list.iter().sum::<i64>() as f64 / list.len() as f64;
        let s: Summary = (k, v, list.clone(), counts.into_iter().collect(), *list.iter().max().unwrap(), avg);
        expected.push(format!("{s:?}"));
    }
    expected.sort();
    for p in [1, 3] {
        let env = Env::new();
        env.set_parallelism(p);
        let sink = CollectSink::new();
        env.from_collection(input.clone())
            .key_by(|(k, _): &(u64, i64)| *k)
            .process(AllKinds::default())
            .add_sink(sink.clone());
        env.execute("all kinds").unwrap();
        let mut got: Vec<String> = sink.take().iter().map(|s| format!("{s:?}")).collect();
        got.sort();
        assert_eq!(got, expected, "parallelism {p}");
    }
}

/// Per key: remembers the last order amount; a payment emits (key, amount, paid) when an
/// order is known, else reports the key on a side output.
#[derive(Clone, Default)]
struct Matcher {
    last_order: Option<ValueState<u32>>,
}

fn unmatched() -> OutputTag<String> {
    OutputTag::new("unmatched")
}

impl RichFunction for Matcher {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.last_order = Some(ctx.get_state(&ValueStateDescriptor::new("order"))?);
        Ok(())
    }
}

impl KeyedCoProcessFunction<String, (String, u32), (String, u32), (String, u32, u32)> for Matcher {
    fn process_element1(
        &mut self,
        (_, amount): (String, u32),
        _: &mut KeyedContext<'_, String>,
        _: &mut Collector<'_, (String, u32, u32)>,
    ) -> FunctionResult {
        self.last_order.as_ref().unwrap().update(amount)?;
        Ok(())
    }
    fn process_element2(
        &mut self,
        (_, paid): (String, u32),
        ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, (String, u32, u32)>,
    ) -> FunctionResult {
        match self.last_order.as_ref().unwrap().value()? {
            Some(amount) => out.collect((ctx.current_key().clone(), amount, paid)),
            None => {
                let key = ctx.current_key().clone();
                ctx.output(&unmatched(), key)
            }
        }
        Ok(())
    }
}

#[test]
fn keyed_co_process_shares_state_between_inputs_and_has_side_outputs() {
    let env = Env::new();
    env.set_parallelism(3);
    let (matched, missing) = (CollectSink::new(), CollectSink::new());
    // Orders and payments race, so the check is order-independent: users 50..100 never
    // have an order (always unmatched), and every match pairs a user's own order.
    let orders = env
        .from_collection((0..50u32).map(|u| (format!("u{u}"), u * 10)).collect::<Vec<_>>())
        .key_by(|o: &(String, u32)| o.0.clone());
    let payments = env
        .from_collection((0..100u32).map(|u| (format!("u{u}"), u)).collect::<Vec<_>>())
        .key_by_ref(|p: &(String, u32)| &p.0);
    let out = orders.connect(&payments).co_process(Matcher::default());
    out.side_output(&unmatched()).add_sink(missing.clone());
    out.add_sink(matched.clone());
    env.execute("co-process").unwrap();
    let matched = matched.take();
    let missing = missing.take();
    assert_eq!(matched.len() + missing.len(), 100, "every payment is either matched or reported");
    for (user, amount, paid) in &matched {
        assert_eq!(format!("u{paid}"), *user);
        assert_eq!(*amount, paid * 10, "a match joins the same key's order");
    }
    for user in &missing {
        let n: u32 = user[1..].parse().unwrap();
        assert!(n < 100);
    }
    assert!(
        missing.iter().filter(|u| u[1..].parse::<u32>().unwrap() >= 50).count() == 50,
        "users without orders are never matched"
    );
}

#[derive(Clone)]
struct SplitEvenOdd;
impl RichFunction for SplitEvenOdd {}
impl ProcessFunction<u64, u64> for SplitEvenOdd {
    fn process_element(&mut self, v: u64, ctx: &mut Context<'_>, out: &mut Collector<'_, u64>) -> FunctionResult {
        if v.is_multiple_of(2) {
            out.collect(v)
        } else {
            ctx.output(&OutputTag::<String>::new("odd"), format!("odd {v}"))
        }
        Ok(())
    }
}

#[test]
fn process_function_side_outputs_go_only_where_tagged() {
    let env = Env::new();
    env.set_parallelism(2);
    let (evens, odds) = (CollectSink::new(), CollectSink::new());
    let split = env.from_sequence(0, 99).process(SplitEvenOdd);
    split.side_output(&OutputTag::<String>::new("odd")).map(|s| s.len()).add_sink(odds.clone());
    split.add_sink(evens.clone());
    env.execute("side outputs").unwrap();
    let mut evens = evens.take();
    evens.sort();
    assert_eq!(evens, (0..100).step_by(2).collect::<Vec<u64>>());
    assert_eq!(odds.take().len(), 50);
}

#[test]
fn a_side_output_read_as_another_type_than_emitted_fails_the_operator_not_the_records() {
    let env = Env::new();
    let (evens, odds) = (CollectSink::new(), CollectSink::<u64>::new());
    let split = env.from_sequence(0, 99).process(SplitEvenOdd).name("split");
    // SplitEvenOdd emits Strings to "odd"; read as numbers here.
    split.side_output(&OutputTag::<u64>::new("odd")).add_sink(odds.clone());
    split.add_sink(evens.clone());
    let error = env.execute("side outputs").unwrap_err().to_string();
    assert!(
        error.contains("split") && error.contains("side output 'odd' is consumed as u64") && error.contains("String"),
        "{error}"
    );
}

#[test]
fn one_side_output_tag_read_as_two_types_is_refused_before_the_job_runs() {
    let env = Env::new();
    let split = env.from_sequence(0, 99).process(SplitEvenOdd).name("split");
    split.side_output(&OutputTag::<String>::new("odd")).add_sink(CollectSink::new());
    split.side_output(&OutputTag::<u64>::new("odd")).add_sink(CollectSink::new());
    let error = env.execute("side outputs").unwrap_err().to_string();
    assert!(error.contains("side output 'odd' of operator 'split' is read as") && error.contains("u64"), "{error}");
}

#[test]
fn socket_source_reads_lines_until_the_peer_closes() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let writer = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        for i in 0..1_000 {
            write!(conn, "line {i}\r\n").unwrap();
            if i % 250 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(60));
            }
        }
        write!(conn, "last without newline").unwrap();
    });
    let env = Env::new();
    env.set_parallelism(2);
    let sink = CollectSink::new();
    env.socket_text_stream("127.0.0.1", port).map(|l| l).add_sink(sink.clone());
    env.execute("socket").unwrap();
    writer.join().unwrap();
    let mut got = sink.take();
    got.sort();
    let mut expected: Vec<String> = (0..1_000).map(|i| format!("line {i}")).collect();
    expected.push("last without newline".into());
    expected.sort();
    assert_eq!(got, expected);
}

#[test]
fn socket_source_that_cannot_connect_names_the_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = Env::new();
    env.socket_text_stream("127.0.0.1", port).add_sink(CollectSink::new());
    let message = env.execute("socket").unwrap_err().to_string();
    assert!(message.contains(&format!("cannot connect to socket 127.0.0.1:{port}")), "{message}");
}

#[test]
fn text_file_sink_writes_a_file_or_one_file_per_subtask() {
    let dir = std::env::temp_dir().join(format!("eddy-sink-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for p in [1u32, 3] {
        let env = Env::new();
        let target = dir.join(format!("out-{p}"));
        env.from_sequence(1, 300).write_as_text(&target).set_parallelism(p);
        env.execute("text sink").unwrap();
        let mut lines: Vec<u64> = if p == 1 {
            std::fs::read_to_string(&target).unwrap().lines().map(|l| l.parse().unwrap()).collect()
        } else {
            (1..=p)
                .flat_map(|i| {
                    std::fs::read_to_string(target.join(i.to_string()))
                        .unwrap()
                        .lines()
                        .map(|l| l.parse().unwrap())
                        .collect::<Vec<u64>>()
                })
                .collect()
        };
        lines.sort();
        assert_eq!(lines, (1..=300).collect::<Vec<_>>(), "parallelism {p}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Counts its lifecycle calls in a shared log.
#[derive(Clone)]
struct Lifecycle(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl RichFunction for Lifecycle {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let restored = ctx.operator_state().is_restored();
        self.0.lock().unwrap().push(format!("init {} restored={restored}", ctx.index_of_this_subtask()));
        Ok(())
    }
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.0.lock().unwrap().push(format!(
            "open {}/{} of {}",
            ctx.index_of_this_subtask(),
            ctx.number_of_parallel_subtasks(),
            ctx.task_name()
        ));
        Ok(())
    }
    fn close(&mut self) -> FunctionResult {
        self.0.lock().unwrap().push("close".into());
        Ok(())
    }
}

impl RichMapFunction<u64, u64> for Lifecycle {
    fn map(&mut self, v: u64) -> FunctionResult<u64> {
        Ok(v)
    }
}

#[test]
fn rich_functions_are_initialized_opened_and_closed_once_per_subtask() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let env = Env::new();
    env.from_sequence(0, 10)
        .rich_map(Lifecycle(log.clone()))
        .name("life")
        .set_parallelism(2)
        .add_sink(CollectSink::new());
    env.execute("lifecycle").unwrap();
    let mut log = log.lock().unwrap().clone();
    log.sort();
    assert_eq!(
        log,
        vec![
            "close",
            "close",
            "init 0 restored=false",
            "init 1 restored=false",
            "open 0/2 of life",
            "open 1/2 of life"
        ]
    );
}
