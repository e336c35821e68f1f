//! The DataStream pieces after windows and state, end to end with hand-computed results:
//! rolling aggregations (`sum`, `min`, `max`, `min_by`, `max_by`) as Flink emits them,
//! `window_all` and `count_window_all` at parallelism 1, window join and coGroup with
//! sessions merged across both sides, triggers, allowed lateness and late side outputs,
//! the interval join's late side outputs and timestamps, jobs refused for joins that cannot
//! work, and ingestion time. (Flink's own outputs for window and interval joins on
//! generated inputs: eddy-bench's `tests/join_replay.rs`.)

use eddy::join::{join_function, JoinContext, TaggedUnion};
use eddy::prelude::*;
use eddy::time::{WatermarkGenerator, WatermarkOutput};
use eddy::window::CountTrigger;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    key: u32,
    amount: i64,
    tag: String,
}

fn order(key: u32, amount: i64, tag: &str) -> Order {
    Order { key, amount, tag: tag.to_string() }
}

/// Runs one rolling aggregation over the same orders at parallelism 2; per key, what was
/// emitted in order, as `(amount, tag)`.
fn rolling(aggregate: impl Fn(KeyedStream<Order, u32>) -> DataStream<Order>) -> BTreeMap<u32, Vec<(i64, String)>> {
    let env = Env::new();
    env.set_parallelism(2);
    let orders = vec![
        order(1, 5, "a"),
        order(2, 3, "b"),
        order(1, 2, "c"),
        order(1, 9, "d"),
        order(2, 3, "e"),
        order(2, 1, "f"),
    ];
    let sink = CollectSink::new();
    aggregate(env.from_collection(orders).key_by(|o: &Order| o.key)).add_sink(sink.clone());
    env.execute("rolling").unwrap();
    let mut per_key: BTreeMap<u32, Vec<(i64, String)>> = BTreeMap::new();
    for o in sink.take() {
        per_key.entry(o.key).or_default().push((o.amount, o.tag));
    }
    per_key
}

fn seq(items: &[(i64, &str)]) -> Vec<(i64, String)> {
    items.iter().map(|(a, t)| (*a, t.to_string())).collect()
}

#[test]
fn rolling_aggregations_emit_every_update_as_flink_does() {
    // sum, min and max keep the key's first record and replace the field.
    let sum = rolling(|k| k.sum(|o: &mut Order| &mut o.amount));
    assert_eq!(sum[&1], seq(&[(5, "a"), (7, "a"), (16, "a")]));
    assert_eq!(sum[&2], seq(&[(3, "b"), (6, "b"), (7, "b")]));
    let min = rolling(|k| k.min(|o: &mut Order| &mut o.amount));
    assert_eq!(min[&1], seq(&[(5, "a"), (2, "a"), (2, "a")]));
    assert_eq!(min[&2], seq(&[(3, "b"), (3, "b"), (1, "b")]));
    let max = rolling(|k| k.max(|o: &mut Order| &mut o.amount));
    assert_eq!(max[&1], seq(&[(5, "a"), (5, "a"), (9, "a")]));
    assert_eq!(max[&2], seq(&[(3, "b"), (3, "b"), (3, "b")]));
    // min_by and max_by give the record holding the extreme; of equals, the first.
    let min_by = rolling(|k| k.min_by(|o: &Order| o.amount));
    assert_eq!(min_by[&1], seq(&[(5, "a"), (2, "c"), (2, "c")]));
    assert_eq!(min_by[&2], seq(&[(3, "b"), (3, "b"), (1, "f")]));
    let max_by = rolling(|k| k.max_by(|o: &Order| o.amount));
    assert_eq!(max_by[&1], seq(&[(5, "a"), (5, "a"), (9, "d")]));
    assert_eq!(max_by[&2], seq(&[(3, "b"), (3, "b"), (3, "b")]));
}

/// Counts a window's records and remembers how many subtasks its operator had.
#[derive(Clone)]
struct CountAll(Arc<AtomicU32>);

impl RichFunction for CountAll {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.0.fetch_max(ctx.number_of_parallel_subtasks(), Ordering::SeqCst);
        Ok(())
    }
}

impl<W: std::fmt::Debug> ProcessWindowFunction<u64, (String, usize), (), W> for CountAll {
    fn process(
        &mut self,
        _: &(),
        ctx: &mut WindowContext<'_, W>,
        elements: &mut dyn Iterator<Item = u64>,
        out: &mut Collector<'_, (String, usize)>,
    ) -> FunctionResult {
        out.collect((format!("{:?}", ctx.window()), elements.count()));
        Ok(())
    }
}

#[test]
fn window_all_and_count_window_all_run_at_parallelism_1_over_the_whole_stream() {
    let env = Env::new();
    env.set_parallelism(4);
    let subtasks = Arc::new(AtomicU32::new(0));
    let numbers = env.from_sequence(0, 99).assign_timestamps_and_watermarks(
        WatermarkStrategy::for_monotonous_timestamps().with_timestamp_assigner(|i: &u64| *i as i64),
    );
    let windows = CollectSink::new();
    numbers
        .window_all(TumblingEventTimeWindows::of(Duration::from_millis(25)))
        .process(CountAll(subtasks.clone()))
        .add_sink(windows.clone());
    let counts = CollectSink::new();
    numbers.count_window_all(30).reduce(|a, b| a + b).add_sink(counts.clone());
    env.execute("window all").unwrap();
    assert_eq!(subtasks.load(Ordering::SeqCst), 1, "the window operator ran at parallelism 1");
    let mut got = windows.take();
    got.sort();
    let expected: Vec<(String, usize)> =
        (0..4).map(|w| (format!("{:?}", TimeWindow { start: w * 25, end: w * 25 + 25 }), 25)).collect();
    assert_eq!(got, expected);
    // 100 records in windows of 30: three fire, the last 10 never fill theirs. The sums
    // depend on which records share a window (the four sources interleave), not their total.
    let sums = counts.take();
    assert_eq!(sums.len(), 3, "{sums:?}");
}

/// A record of one side: key, timestamp, name.
type Named = (u32, i64, String);

/// One source of both sides of a join: `(left?, key, timestamp, name, gate)`. A record
/// with gate `n` is emitted only once the join emitted `n` results: the two sides reach
/// the join on channels of their own, so only what the join itself did (a window fired,
/// a pair was made) proves how far its watermark got before a record meant to be late.
type Ev = (bool, u32, i64, String, usize);

fn ev(left: bool, key: u32, timestamp: i64, name: &str) -> Ev {
    (left, key, timestamp, name.to_string(), 0)
}

/// `ev` emitted only after the join emitted `results` results.
fn after(results: usize, left: bool, key: u32, timestamp: i64, name: &str) -> Ev {
    (left, key, timestamp, name.to_string(), results)
}

/// The watermark after every record: the largest timestamp so far − 1.
struct PerRecord(i64);

impl WatermarkGenerator<Ev> for PerRecord {
    fn on_event(&mut self, _: &Ev, timestamp: i64, output: &mut WatermarkOutput) {
        self.0 = self.0.max(timestamp);
        output.emit_watermark(self.0 - 1);
    }
    fn on_periodic_emit(&mut self, _: &mut WatermarkOutput) {}
}

/// `events` as two streams of `(key, timestamp, name)`, left and right, with watermarks
/// after every record, each record held back until `emitted` reaches its gate. Sends
/// every record and watermark at once (buffer timeout 0), since the source waits.
fn two_sides(env: &Env, events: Vec<Ev>, emitted: &Arc<AtomicUsize>) -> (DataStream<Named>, DataStream<Named>) {
    env.set_buffer_timeout(0);
    let emitted = emitted.clone();
    let all = env
        .from_collection(events)
        .map(move |e: Ev| {
            let started = Instant::now();
            while emitted.load(Ordering::SeqCst) < e.4 {
                assert!(started.elapsed() < Duration::from_secs(30), "{} waited 30 s for result {}", e.3, e.4);
                std::thread::sleep(Duration::from_millis(1));
            }
            e
        })
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_generator(|| PerRecord(i64::MIN)).with_timestamp_assigner(|e: &Ev| e.2),
        )
        .set_parallelism(1);
    let side = |left: bool| {
        all.flat_map(move |e: Ev, out: &mut Collector<'_, Named>| {
            if e.0 == left {
                out.collect((e.1, e.2, e.3))
            }
        })
        .set_parallelism(1)
        .with_timestamps(|r: &Named| r.1)
    };
    (side(true), side(false))
}

/// Counts into `emitted` what passes.
fn counted<T: Clone + Send + 'static>(emitted: &Arc<AtomicUsize>, result: T) -> T {
    emitted.fetch_add(1, Ordering::SeqCst);
    result
}

#[test]
fn co_group_merges_sessions_across_both_sides_and_gives_empty_groups_too() {
    let env = Env::new();
    env.set_parallelism(2);
    // Gap 10: per side the sessions would be left [0,10) and [25,35), right [8,27); over
    // both sides they chain into one session [0,35).
    let (left, right) = two_sides(
        &env,
        vec![
            ev(true, 1, 0, "a1"),
            ev(false, 1, 8, "b1"),
            ev(false, 1, 17, "b2"),
            ev(true, 1, 25, "a2"),
            ev(true, 2, 100, "a3"),
        ],
        &Arc::new(AtomicUsize::new(0)),
    );
    let sink = CollectSink::new();
    left.co_group(&right)
        .where_(|l: &Named| l.0)
        .equal_to(|r: &Named| r.0)
        .window(EventTimeSessionWindows::with_gap(Duration::from_millis(10)))
        .process(|key: &u32, w: &TimeWindow, lefts: Vec<Named>, rights: Vec<Named>, out: &mut Collector<'_, String>| {
            let names = |side: &[Named]| {
                let mut names: Vec<String> = side.iter().map(|r| r.2.clone()).collect();
                names.sort();
                names.join("+")
            };
            out.collect(format!("{key} [{},{}) {} | {}", w.start, w.end, names(&lefts), names(&rights)));
        })
        .add_sink(sink.clone());
    env.execute("co-group sessions").unwrap();
    let mut got = sink.take();
    got.sort();
    assert_eq!(got, vec!["1 [0,35) a1+a2 | b1+b2".to_string(), "2 [100,110) a3 | ".to_string()]);
}

#[test]
fn window_join_fires_again_within_allowed_lateness_and_sends_later_records_to_the_side_output() {
    let env = Env::new();
    let emitted = Arc::new(AtomicUsize::new(0));
    // Tumbling 10 ms, lateness 5: [0,10) fires at watermark 11 (a1 b1), again for b2 (a1
    // b1, a1 b2), is cleaned at watermark 14; [10,20) fires at watermark 20 (a2 b3), after
    // which a3 is late.
    let (left, right) = two_sides(
        &env,
        vec![
            ev(true, 7, 1, "a1"),
            ev(false, 7, 3, "b1"),
            ev(true, 7, 12, "a2"),
            after(1, false, 7, 5, "b2"),
            ev(false, 7, 15, "b3"),
            ev(true, 7, 21, "a4"),
            after(4, true, 7, 2, "a3"),
        ],
        &emitted,
    );
    let late = OutputTag::<TaggedUnion<Named, Named>>::new("late");
    let counter = emitted.clone();
    let pairs = left
        .join(&right)
        .where_(|l: &Named| l.0)
        .equal_to(|r: &Named| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .allowed_lateness(Duration::from_millis(5))
        .side_output_late_data(&late)
        .apply(move |l: &Named, r: &Named| counted(&counter, format!("{} {}", l.2, r.2)));
    let (sink, late_sink) = (CollectSink::new(), CollectSink::new());
    pairs.add_sink(sink.clone());
    pairs.side_output(&late).add_sink(late_sink.clone());
    env.execute("late join").unwrap();
    let mut got = sink.take();
    got.sort();
    assert_eq!(got, vec!["a1 b1", "a1 b1", "a1 b2", "a2 b3"]);
    assert_eq!(late_sink.take(), vec![TaggedUnion::One((7, 2, "a3".to_string()))]);
}

#[test]
fn window_join_on_global_windows_fires_by_its_trigger_counting_both_sides() {
    let env = Env::new();
    let emitted = Arc::new(AtomicUsize::new(0));
    let (left, right) = two_sides(
        &env,
        vec![
            ev(true, 1, 0, "a1"),
            ev(false, 1, 0, "b1"),
            ev(true, 1, 0, "a2"),
            after(2, false, 1, 0, "b2"),
            ev(true, 1, 0, "a3"),
            ev(false, 1, 0, "b3"),
        ],
        &emitted,
    );
    let sink = CollectSink::new();
    let counter = emitted.clone();
    left.join(&right)
        .where_(|l: &Named| l.0)
        .equal_to(|r: &Named| r.0)
        .window(GlobalWindows)
        .trigger(CountTrigger::of(3))
        .flat_apply(move |l: &Named, r: &Named, out: &mut Collector<'_, String>| {
            out.collect(counted(&counter, format!("{} {}", l.2, r.2)))
        })
        .add_sink(sink.clone());
    env.execute("count-triggered join").unwrap();
    let mut got = sink.take();
    got.sort();
    // After 3 records: a1 a2 × b1; after 6 (not purged): a1 a2 a3 × b1 b2 b3.
    let mut expected: Vec<String> = ["a1 b1", "a2 b1"].iter().map(|s| s.to_string()).collect();
    for a in ["a1", "a2", "a3"] {
        for b in ["b1", "b2", "b3"] {
            expected.push(format!("{a} {b}"));
        }
    }
    expected.sort();
    assert_eq!(got, expected);
}

#[test]
fn interval_join_pairs_within_bounds_with_both_timestamps_and_sends_late_records_aside() {
    let env = Env::new();
    env.set_parallelism(2);
    let emitted = Arc::new(AtomicUsize::new(0));
    // Bounds [-2, 2]. The third pair (aq bq) proves that the right channel brought
    // watermark 19 (it precedes bq), and the left one brings 20 before a2 (12): a2 is late.
    // Once a2 is seen late, the left channel is at 20 too, so b3 (5) is late. a3 (21) is
    // not, and meets b2 and bq (b1 was cleaned at 13).
    let (left, right) = two_sides(
        &env,
        vec![
            ev(true, 3, 10, "a1"),
            ev(false, 3, 11, "b1"),
            ev(false, 3, 20, "b2"),
            ev(true, 3, 20, "aq"),
            ev(false, 3, 21, "bq"),
            after(3, true, 3, 12, "a2"),
            after(4, false, 3, 5, "b3"),
            after(5, true, 3, 21, "a3"),
        ],
        &emitted,
    );
    let (left_late, right_late) = (OutputTag::<Named>::new("left-late"), OutputTag::<Named>::new("right-late"));
    let counter = emitted.clone();
    let pairs = left
        .key_by(|l: &Named| l.0)
        .interval_join(&right.key_by(|r: &Named| r.0))
        .between(-2, 2)
        .side_output_left_late_data(&left_late)
        .side_output_right_late_data(&right_late)
        .process(join_function(
            move |l: &Named, r: &Named, ctx: &mut JoinContext<'_, '_, u32>, out: &mut Collector<'_, String>| {
                assert_eq!(*ctx.current_key(), l.0);
                out.collect(counted(
                    &counter,
                    format!("{} {} {} {} {}", l.2, r.2, ctx.left_timestamp(), ctx.right_timestamp(), ctx.timestamp()),
                ))
            },
        ));
    let (sink, lefts, rights) = (CollectSink::new(), CollectSink::new(), CollectSink::new());
    pairs.add_sink(sink.clone());
    // The late records count as results too: the gates above wait for them.
    let late_counter = emitted.clone();
    pairs.side_output(&left_late).map(move |r: Named| counted(&late_counter, r)).add_sink(lefts.clone());
    let late_counter = emitted.clone();
    pairs.side_output(&right_late).map(move |r: Named| counted(&late_counter, r)).add_sink(rights.clone());
    env.execute("interval join").unwrap();
    let mut got = sink.take();
    got.sort();
    assert_eq!(got, vec!["a1 b1 10 11 11", "a3 b2 21 20 21", "a3 bq 21 21 21", "aq b2 20 20 20", "aq bq 20 21 21"]);
    assert_eq!(lefts.take(), vec![(3, 12, "a2".to_string())]);
    assert_eq!(rights.take(), vec![(3, 5, "b3".to_string())]);
}

/// The right records that meet `a` (at 10) within [12, 14], with the bounds exclusive or
/// not. All come after `a` and none is late, so only the bounds decide.
fn met_within_2_to_4(exclusive: bool) -> Vec<String> {
    let env = Env::new();
    let events = vec![ev(true, 1, 10, "a"), ev(false, 1, 12, "lo"), ev(false, 1, 13, "in"), ev(false, 1, 14, "hi")];
    let (left, right) = two_sides(&env, events, &Arc::new(AtomicUsize::new(0)));
    let mut between = left.key_by(|l: &Named| l.0).interval_join(&right.key_by(|r: &Named| r.0)).between(2, 4);
    if exclusive {
        between = between.lower_bound_exclusive().upper_bound_exclusive();
    }
    let sink = CollectSink::new();
    between
        .process(join_function(
            |_: &Named, r: &Named, _: &mut JoinContext<'_, '_, u32>, out: &mut Collector<'_, String>| {
                out.collect(r.2.clone())
            },
        ))
        .add_sink(sink.clone());
    env.execute("bounds").unwrap();
    let mut got = sink.take();
    got.sort();
    got
}

#[test]
fn exclusive_bounds_leave_out_pairs_on_the_bounds() {
    assert_eq!(met_within_2_to_4(false), vec!["hi", "in", "lo"]);
    assert_eq!(met_within_2_to_4(true), vec!["in"]);
}

#[test]
fn joins_that_cannot_work_are_refused_before_the_job_runs() {
    // An interval join without event time.
    let env = Env::new();
    let plain = env.from_collection(vec![(1u32, 0i64, String::new())]);
    plain
        .key_by(|l: &Named| l.0)
        .interval_join(&plain.key_by(|r: &Named| r.0))
        .between(0, 5)
        .process(join_function(|_: &Named, _: &Named, _: &mut JoinContext<'_, '_, u32>, _: &mut Collector<'_, u8>| {}))
        .add_sink(CollectSink::new());
    let error = env.execute("no time").unwrap_err().to_string();
    assert!(error.contains("interval join needs event time, and its first input has no timestamps"), "{error}");

    // Bounds the wrong way round.
    let env = Env::new();
    let (left, right) = two_sides(&env, vec![ev(true, 1, 0, "a")], &Arc::new(AtomicUsize::new(0)));
    left.key_by(|l: &Named| l.0)
        .interval_join(&right.key_by(|r: &Named| r.0))
        .between(5, 5)
        .upper_bound_exclusive()
        .process(join_function(|_: &Named, _: &Named, _: &mut JoinContext<'_, '_, u32>, _: &mut Collector<'_, u8>| {}))
        .add_sink(CollectSink::new());
    let error = env.execute("bounds").unwrap_err().to_string();
    assert!(error.contains("the lower bound (5 ms) is above the upper bound (5 ms, exclusive)"), "{error}");

    // An event-time window join whose second input has no timestamps.
    let env = Env::new();
    let (left, _) = two_sides(&env, vec![ev(true, 1, 0, "a")], &Arc::new(AtomicUsize::new(0)));
    let untimed = env.from_collection(vec![(1u32, 0i64, String::new())]);
    left.join(&untimed)
        .where_(|l: &Named| l.0)
        .equal_to(|r: &Named| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .apply(|_: &Named, _: &Named| 0u8)
        .add_sink(CollectSink::new());
    let error = env.execute("window join").unwrap_err().to_string();
    assert!(
        error.contains("event-time window join needs timestamps on both inputs, and the second has none"),
        "{error}"
    );
}

#[test]
fn ingestion_time_stamps_records_with_the_sources_clock_and_windows_follow_it() {
    use eddy::time::Ingested;
    // The stamping takes the parallelism of the operator before it (1 here, the job's is
    // 2), so it runs in that operator's task, as it should.
    let env = Env::new();
    env.set_parallelism(2);
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    // Two groups of records 500 ms apart on the clock: no 250 ms window can hold both.
    let stamped = env
        .from_sequence(0, 19)
        .set_parallelism(1)
        .map(|i| {
            if i == 10 {
                std::thread::sleep(Duration::from_millis(500));
            }
            i
        })
        .set_parallelism(1)
        .with_ingestion_time();
    let stamps = CollectSink::new();
    stamped.add_sink(stamps.clone());
    let windows = CollectSink::new();
    stamped
        .window_all(TumblingEventTimeWindows::of(Duration::from_millis(250)))
        .process(eddy::window::window_function(
            |_: &(),
             _: &TimeWindow,
             records: &mut dyn Iterator<Item = Ingested<u64>>,
             out: &mut Collector<'_, Vec<u64>>| { out.collect(records.map(|r| r.value).collect()) },
        ))
        .add_sink(windows.clone());
    env.execute("ingestion time").unwrap();
    let ended = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let mut stamps = stamps.take();
    stamps.sort_by_key(|r| r.value);
    assert_eq!(stamps.len(), 20);
    assert!(stamps.windows(2).all(|w| w[0].timestamp <= w[1].timestamp), "stamps never go back: {stamps:?}");
    assert!(stamps.iter().all(|r| (started..=ended).contains(&r.timestamp)), "stamped by the clock of the run");
    assert!(stamps[10].timestamp - stamps[9].timestamp >= 500, "the pause is in the stamps");
    let windows = windows.take();
    assert_eq!(windows.iter().map(Vec::len).sum::<usize>(), 20, "{windows:?}");
    for window in &windows {
        assert!(window.iter().all(|&i| i < 10) || window.iter().all(|&i| i >= 10), "one group per window: {windows:?}");
    }
}
