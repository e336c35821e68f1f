//! Every example against a sequential reference, at several parallelisms.

#![allow(dead_code)]

#[path = "../examples/api_count.rs"]
mod api_count;
#[path = "../examples/async_enrichment.rs"]
mod async_enrichment;
#[path = "../examples/broadcast_rules.rs"]
mod broadcast_rules;
#[path = "../examples/consumer_lag.rs"]
mod consumer_lag;
#[path = "../examples/dedup.rs"]
mod dedup;
#[path = "../examples/order_state_machine.rs"]
mod order_state_machine;
#[path = "../examples/orders_payments.rs"]
mod orders_payments;
#[path = "../examples/requests_per_minute.rs"]
mod requests_per_minute;
#[path = "../examples/two_topic_join.rs"]
mod two_topic_join;
#[path = "../examples/word_count.rs"]
mod word_count;

use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

mod common;

fn env(parallelism: u32) -> Env {
    let env = Env::new();
    env.set_parallelism(parallelism);
    env
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// Records of an example's streams come back equal from the form they take between
/// processes (every stream's type must, as any edge but forward may cross processes).
fn round_trips<T: Data + PartialEq + std::fmt::Debug>(records: &[T]) {
    let mut bytes = Vec::new();
    eddy::types::codec::encode_batch(records, &mut bytes).unwrap();
    let back: Vec<T> = eddy::types::codec::decode_batch(&bytes).unwrap();
    assert_eq!(back, records, "{} through the codec", std::any::type_name::<T>());
}

#[test]
fn api_count_emits_every_running_count_per_path() {
    let log = api_count::access_log(20_000);
    // Reference: for each line in order, the path's count so far.
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut expected = Vec::new();
    for line in &log {
        let (_, path) = api_count::parse(line).unwrap();
        let c = counts.entry(path.clone()).or_default();
        *c += 1;
        expected.push((path, *c));
    }
    let expected = sorted(expected);
    round_trips(&log);
    round_trips(&log.iter().filter_map(|l| api_count::parse(l)).collect::<Vec<_>>());
    round_trips(&expected);
    for p in 1..=4 {
        let env = env(p);
        let sink = CollectSink::new();
        api_count::job(&env, log.clone(), sink.clone());
        env.execute("api count").unwrap();
        assert_eq!(sorted(sink.take()), expected, "parallelism {p}");
    }
}

#[test]
fn consumer_lag_is_producer_minus_consumer() {
    let input: Vec<consumer_lag::Progress> = (0..500u64)
        .map(|t| consumer_lag::Progress {
            timestamp: t,
            producer_offset: t * 3,
            consumer_offsets: vec![t, t * 2, t * 3],
        })
        .collect();
    let expected = sorted(
        input
            .iter()
            .flat_map(|p| (0..3).map(move |c| (p.timestamp, c, p.producer_offset - p.consumer_offsets[c])))
            .collect(),
    );
    round_trips(&input);
    round_trips(&expected);
    for p in [1, 3] {
        let env = env(p);
        let sink = CollectSink::new();
        consumer_lag::job(&env, input.clone(), sink.clone());
        env.execute("consumer lag").unwrap();
        assert_eq!(sorted(sink.take()), expected);
    }
}

#[test]
fn order_state_machine_matches_a_sequential_run_and_reports_invalid_transitions() {
    use order_state_machine::*;
    let events = sample_events(40);
    let mut states: HashMap<u64, Option<OrderState>> = HashMap::new();
    let (mut outcomes, mut invalid) = (Vec::new(), Vec::new());
    for e in &events {
        let state = states.entry(e.order).or_default();
        match transition(*state, e.action) {
            Transition::To(next) => *state = Some(next),
            Transition::Finished => {
                *state = None;
                outcomes.push(if e.action == Action::Cancel {
                    Outcome::Cancelled(e.order)
                } else {
                    Outcome::Completed(e.order)
                });
            }
            Transition::Invalid => invalid.push((e.order, format!("{:?}", e.action))),
        }
    }
    assert!(!invalid.is_empty() && !outcomes.is_empty(), "the sample exercises both paths");
    round_trips(&events);
    round_trips(&outcomes);
    for p in 1..=4 {
        let env = env(p);
        let (out, bad) = (CollectSink::new(), CollectSink::new());
        job(&env, events.clone(), out.clone(), bad.clone());
        env.execute("orders").unwrap();
        assert_eq!(sorted(out.take()), sorted(outcomes.clone()), "parallelism {p}");
        let bad: Vec<_> = bad.take().into_iter().map(|e| (e.order, format!("{:?}", e.action))).collect();
        assert_eq!(sorted(bad), sorted(invalid.clone()), "parallelism {p}");
    }
}

#[test]
fn two_topic_join_pairs_every_key_that_has_both_sides() {
    use two_topic_join::*;
    // One value per key and side: the join result does not depend on arrival order.
    let a: Vec<Record> = (0..300).map(|k| Record { key: format!("k{k}"), value: k }).collect();
    let b: Vec<Record> = (150..450).map(|k| Record { key: format!("k{k}"), value: -k }).collect();
    let expected = sorted((150..300).map(|k| (format!("k{k}"), k, -k)).collect::<Vec<_>>());
    round_trips(&a);
    round_trips(&expected);
    for p in 1..=4 {
        let env = env(p);
        let sink = CollectSink::new();
        job(&env, a.clone(), b.clone(), sink.clone());
        env.execute("join").unwrap();
        assert_eq!(sorted(sink.take()), expected, "parallelism {p}");
    }
}

#[test]
fn dedup_keeps_the_first_record_of_every_key() {
    let records: Vec<(u64, String)> = (0..5_000u64).map(|i| (i % 97, format!("r{i}"))).collect();
    let mut first = BTreeMap::new();
    for (id, payload) in &records {
        first.entry(*id).or_insert_with(|| payload.clone());
    }
    let expected: Vec<_> = first.into_iter().collect();
    round_trips(&records);
    for p in 1..=4 {
        let env = env(p);
        let sink = CollectSink::new();
        dedup::job(&env, records.clone(), sink.clone());
        env.execute("dedup").unwrap();
        assert_eq!(sorted(sink.take()), expected, "parallelism {p}");
    }
}

#[test]
fn word_count_reaches_the_sequential_totals() {
    let lines: Vec<String> = (0..2_000).map(|i| format!("w{} w{} common, W{}!", i % 13, i % 7, i % 13)).collect();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for line in &lines {
        for w in line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *totals.entry(w.to_lowercase()).or_default() += 1;
        }
    }
    round_trips(&lines);
    round_trips(&totals.clone().into_iter().collect::<Vec<_>>());
    for p in [1, 2, 4] {
        let env = env(p);
        let sink = CollectSink::new();
        word_count::job(&env, lines.clone(), sink.clone());
        env.execute("word count").unwrap();
        let emitted = sink.take();
        // One emission per word occurrence, the last (largest) being the total.
        assert_eq!(emitted.len() as u64, totals.values().sum::<u64>());
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        for (w, c) in emitted {
            let e = last.entry(w).or_default();
            *e = (*e).max(c);
        }
        assert_eq!(last, totals, "parallelism {p}");
    }
}

#[test]
fn word_count_reads_a_text_file() {
    let dir = std::env::temp_dir().join(format!("eddy-wc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "x y\nx\n").unwrap();
    std::fs::write(dir.join("b.txt"), "y z x").unwrap();
    let env = env(2);
    let sink = CollectSink::new();
    word_count::words(&env.read_text_file(&dir)).add_sink(sink.clone());
    env.execute("wc file").unwrap();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for (w, c) in sink.take() {
        let e = last.entry(w).or_default();
        *e = (*e).max(c);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(last, BTreeMap::from([("x".into(), 3), ("y".into(), 2), ("z".into(), 1)]));
}

#[test]
fn broadcast_rules_flag_every_payment_above_each_rule() {
    use broadcast_rules::*;
    let rules: Vec<Rule> = vec![("large".into(), 500), ("huge".into(), 800), ("tiny".into(), 5)];
    let payments: Vec<Payment> = (0..3_000).map(|id| Payment { id, amount: (id * 37) % 1000 }).collect();
    let expected = sorted(
        payments
            .iter()
            .flat_map(|p| {
                rules.iter().filter(move |(_, limit)| p.amount > *limit).map(move |(name, _)| (p.id, name.clone()))
            })
            .collect(),
    );
    round_trips(&rules);
    round_trips(&payments);
    round_trips(&expected);
    for p in 1..=4 {
        let env = env(p);
        let sink = CollectSink::new();
        job(&env, rules.clone(), payments.clone(), sink.clone());
        env.execute("rules").unwrap();
        assert_eq!(sorted(sink.take()), expected, "parallelism {p}");
    }
}

/// Runs `build` (which adds sinks writing into `out`) in two steps: stopped with a
/// savepoint mid-run at `first` parallelism, then restored from it at `second`. The
/// committed lines of both steps, sorted.
fn stopped_and_restored(name: &str, first: u32, second: u32, build: impl Fn(&Env, &Path)) -> Vec<String> {
    let dir = common::temp_dir(name);
    let out = dir.join("out");
    let env = env(first);
    env.stop_with_savepoint_after(dir.join("savepoints"), 30);
    build(&env, &out);
    let savepoint = env.execute(name).unwrap().savepoint.expect("stopped with a savepoint mid-run");
    let partial = committed(&out);
    let env = self::env(second);
    env.restore_from(&savepoint);
    build(&env, &out);
    env.execute(name).unwrap();
    let lines = committed(&out);
    assert!(partial.len() < lines.len(), "{name}: the first step stopped before the end");
    std::fs::remove_dir_all(&dir).unwrap();
    lines
}

fn committed(out: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(out).into_iter().flatten().flatten() {
        assert!(!entry.file_name().to_string_lossy().starts_with('.'), "uncommitted file left");
        lines.extend(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from));
    }
    lines.sort();
    lines
}

/// Requests per path and minute, replayed in order with the watermark after every line:
/// (counts, late lines).
fn requests_reference(log: &[String]) -> (Vec<requests_per_minute::MinuteCount>, Vec<requests_per_minute::Request>) {
    use requests_per_minute::*;
    let mut watermark = i64::MIN;
    let mut max = i64::MIN;
    let mut counts: BTreeMap<(String, i64), u64> = BTreeMap::new();
    let mut late = Vec::new();
    for line in log {
        let (timestamp, path) = parse(line).unwrap();
        let start = timestamp.div_euclid(MINUTE_MS) * MINUTE_MS;
        if start + MINUTE_MS - 1 <= watermark {
            late.push((timestamp, path));
        } else {
            *counts.entry((path, start)).or_default() += 1;
        }
        max = max.max(timestamp);
        watermark = watermark.max(max - OUT_OF_ORDERNESS_MS as i64 - 1);
    }
    (counts.into_iter().map(|((path, start), n)| (path, start, n)).collect(), sorted(late))
}

#[test]
fn requests_per_minute_match_a_sequential_replay_and_late_lines_are_reported() {
    use requests_per_minute::*;
    let log = access_log(6_000, 1_700_000_000_000);
    let (expected, expected_late) = requests_reference(&log);
    assert!(!expected_late.is_empty(), "the log has lines too late for their minute");
    round_trips(&expected);
    for p in [1, 3] {
        let env = env(p);
        let (counts, late) = (CollectSink::new(), CollectSink::new());
        let lines = env.from_collection(log.clone());
        let (per_minute, too_late) = job(&lines, watermark_after_every_line());
        per_minute.add_sink(counts.clone());
        too_late.add_sink(late.clone());
        env.execute("requests per minute").unwrap();
        assert_eq!(sorted(counts.take()), expected, "parallelism {p}");
        assert_eq!(sorted(late.take()), expected_late, "parallelism {p}");
    }
    // Periodic watermarks drop no more than the per-line ones, and lose nothing else.
    let env = env(2);
    let (counts, late) = (CollectSink::new(), CollectSink::new());
    let lines = env.from_collection(log.clone());
    let (per_minute, too_late) = job(&lines, periodic_watermarks());
    per_minute.add_sink(counts.clone());
    too_late.add_sink(late.clone());
    env.execute("requests per minute").unwrap();
    let counted: u64 = counts.take().iter().map(|c| c.2).sum();
    let late = late.take();
    assert!(late.len() <= expected_late.len());
    assert_eq!(counted + late.len() as u64, log.len() as u64, "every line is counted or reported late");
}

#[test]
fn requests_per_minute_resume_from_a_savepoint_at_another_parallelism() {
    use requests_per_minute::*;
    let log = access_log(6_000, 1_700_000_000_000);
    let (expected, _) = requests_reference(&log);
    let expected = sorted(expected.iter().map(|(p, m, n)| format!("{p} {m} {n}")).collect());
    let lines = stopped_and_restored("requests-restore", 2, 3, |env, out| {
        let slow = env
            .from_collection(log.clone())
            .uid("access-log")
            .map(|line| {
                std::thread::sleep(std::time::Duration::from_micros(20));
                line
            })
            .uid("slow")
            .set_parallelism(1);
        let (per_minute, _) = job(&slow, watermark_after_every_line());
        per_minute
            .map(|(path, minute, n)| format!("{path} {minute} {n}"))
            .uid("format")
            .add_sink(ExactlyOnceFileSink::<String>::new_in(out))
            .uid("file");
    });
    assert_eq!(lines, expected);
}

/// The state machine with a payment timeout, replayed in order: before each event, the
/// timers its watermark (the largest timestamp so far − 1) passed fire in deadline order.
fn orders_with_timeout_reference(events: &[order_state_machine::OrderEvent], timeout: i64) -> Vec<String> {
    use order_state_machine::*;
    let mut states: HashMap<u64, OrderState> = HashMap::new();
    let mut deadlines: BTreeMap<(i64, u64), ()> = BTreeMap::new();
    let mut outcomes = Vec::new();
    let mut max = i64::MIN;
    let fire = |watermark: i64,
                states: &mut HashMap<u64, OrderState>,
                deadlines: &mut BTreeMap<(i64, u64), ()>,
                outcomes: &mut Vec<String>| {
        while let Some((&(at, order), _)) = deadlines.iter().next() {
            if at > watermark {
                break;
            }
            deadlines.remove(&(at, order));
            if states.get(&order) == Some(&OrderState::AwaitingPayment) {
                states.remove(&order);
                outcomes.push(format!("{:?}", Outcome::Unpaid(order)));
            }
        }
    };
    for e in events {
        fire(max.saturating_sub(1), &mut states, &mut deadlines, &mut outcomes);
        let deadline_of = |deadlines: &BTreeMap<(i64, u64), ()>| deadlines.keys().find(|(_, o)| *o == e.order).copied();
        match transition(states.get(&e.order).copied(), e.action) {
            Transition::To(next) => {
                states.insert(e.order, next);
                if next == OrderState::AwaitingPayment {
                    deadlines.insert((e.timestamp + timeout, e.order), ());
                } else if let Some(key) = deadline_of(&deadlines) {
                    deadlines.remove(&key);
                }
            }
            Transition::Finished => {
                states.remove(&e.order);
                if let Some(key) = deadline_of(&deadlines) {
                    deadlines.remove(&key);
                }
                let outcome =
                    if e.action == Action::Cancel { Outcome::Cancelled(e.order) } else { Outcome::Completed(e.order) };
                outcomes.push(format!("{outcome:?}"));
            }
            Transition::Invalid => {}
        }
        max = max.max(e.timestamp);
    }
    fire(i64::MAX, &mut states, &mut deadlines, &mut outcomes);
    sorted(outcomes)
}

#[test]
fn unpaid_orders_are_reported_by_their_timers_also_after_a_restore() {
    use order_state_machine::*;
    let orders = 400;
    let events = sample_events(orders);
    let timeout = orders as i64 * 3 / 2;
    let expected = orders_with_timeout_reference(&events, timeout);
    assert!(expected.iter().any(|o| o.starts_with("Unpaid")), "some orders time out");
    assert!(expected.iter().any(|o| o.starts_with("Completed")), "and some are paid in time");
    for p in [1, 3] {
        let env = env(p);
        let sink = CollectSink::new();
        job_with_timeout(&env, events.clone(), timeout, sink.clone());
        env.execute("orders with timeout").unwrap();
        assert_eq!(sorted(sink.take()), expected, "parallelism {p}");
    }
    let lines = stopped_and_restored("orders-restore", 3, 2, |env, out| {
        job_with_timeout(env, events.clone(), timeout, ExactlyOnceFileSink::<String>::new_in(out));
    });
    assert_eq!(lines, expected);
}

#[test]
fn orders_payments_pairs_exactly_the_orders_paid_within_15_minutes() {
    use orders_payments::*;
    let (orders, payments) = orders_and_payments(3_000);
    let mut expected = Vec::new();
    for p in &payments {
        let o = &orders[p.order as usize];
        let waited = p.paid_ms - o.placed_ms;
        if (0..=PAY_WITHIN_MS).contains(&waited) {
            expected.push((o.id, o.customer.clone(), waited / 60_000));
        }
    }
    assert!(expected.len() > 1_000 && expected.len() < payments.len(), "some payments are too late");
    for parallelism in [1, 4] {
        let sink = CollectSink::new();
        let env = env(parallelism);
        job(&env, orders.clone(), payments.clone(), sink.clone());
        env.execute("orders and payments").unwrap();
        assert_eq!(sorted(sink.take()), sorted(expected.clone()), "at parallelism {parallelism}");
    }
}

#[test]
fn async_enrichment_gives_every_order_its_customer_name_once() {
    let service = async_enrichment::start_customer_service().unwrap();
    let sink = CollectSink::new();
    let env = env(2);
    async_enrichment::job(&env, service, 2_000, sink.clone());
    env.execute("async enrichment").unwrap();
    let expected: Vec<(u64, String)> = (0..2_000).map(|o| (o, format!("name-{}", o % 100))).collect();
    assert_eq!(sorted(sink.take()), expected, "every order once, retried past the 503s");
}
