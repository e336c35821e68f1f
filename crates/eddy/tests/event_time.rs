//! Event time, timers and windows end to end: timers that survive savepoints and rescales
//! on both backends and fire in timestamp order, an idle input that holds the watermark
//! back until idleness is detected, processing-time timers on the simulated clock, and
//! window results with late records and allowed lateness checked against a hand-computed
//! reference. (Flink's own outputs for many more window cases: eddy-bench's
//! `tests/window_replay.rs`.)

use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use eddy::time::WatermarkStrategy;
use eddy::window::{window_function, TimeWindow, TumblingEventTimeWindows};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::late_windows::{differences, expected_lines, timed_event, EveryRecord, WINDOW_MS};

const EVENTS: u64 = 30_000;
const KEYS: u64 = 7;
/// Each record asks for a timer this far after its timestamp.
const DELAY: i64 = 250;

/// Registers an event-time timer `DELAY` after every record; `on_timer` emits
/// `(key, time)`.
#[derive(Clone, Default)]
struct Remind;

impl RichFunction for Remind {}

impl KeyedProcessFunction<u64, u64, (u64, i64)> for Remind {
    fn process_element(
        &mut self,
        _value: u64,
        ctx: &mut KeyedContext<'_, u64>,
        _out: &mut Collector<'_, (u64, i64)>,
    ) -> FunctionResult {
        let timestamp = ctx.timestamp().ok_or("the stream has timestamps")?;
        ctx.timer_service().register_event_time_timer(timestamp + DELAY)?;
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, (u64, i64)>,
    ) -> FunctionResult {
        assert_eq!(ctx.time_domain(), Some(TimeDomain::EventTime));
        assert!(ctx.timer_service().current_watermark() >= timestamp, "fires once the watermark passed it");
        out.collect((*ctx.current_key(), timestamp));
        Ok(())
    }
}

fn reminder_job(env: &Env, out: &Path) {
    env.from_sequence(0, EVENTS - 1)
        .uid("numbers")
        .map(|i| {
            if i.is_multiple_of(200) {
                std::thread::sleep(Duration::from_millis(2));
            }
            i
        })
        .uid("slow")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|i: &u64| *i as i64)
                .with_auto_watermark_interval(Duration::from_millis(5)),
        )
        .uid("timestamps")
        .key_by(|i: &u64| i % KEYS)
        .process(Remind)
        .uid("remind")
        .map(|(key, time)| format!("{key} {time}"))
        .uid("format")
        .add_sink(ExactlyOnceFileSink::<String>::new_in(out))
        .uid("sink");
}

/// Lines of each committed file (one subtask's transaction: in emission order).
fn committed_files(out: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(out).unwrap().flatten() {
        assert!(!entry.file_name().to_string_lossy().starts_with('.'), "uncommitted file left");
        files.push(std::fs::read_to_string(entry.path()).unwrap().lines().map(String::from).collect());
    }
    files
}

#[derive(Debug, Clone, Copy)]
enum Backend {
    Heap,
    #[cfg(feature = "rocksdb")]
    RocksDbIncremental,
}

/// Stops with a savepoint at every step but the last and restores the next step, at its
/// parallelism and backend, from it.
fn run_reminders(chain: &[(u32, Backend)], name: &str) {
    let dir = common::temp_dir(name);
    let out = dir.join("out");
    let mut savepoint: Option<String> = None;
    for (step, &(parallelism, backend)) in chain.iter().enumerate() {
        let env = Env::new();
        env.set_parallelism(parallelism).set_max_parallelism(32);
        // Without RocksDB every step runs on the heap, the default.
        #[cfg(not(feature = "rocksdb"))]
        let _ = backend;
        #[cfg(feature = "rocksdb")]
        if let Backend::RocksDbIncremental = backend {
            let rocksdb = RocksDbStateBackend::new(dir.join("rocksdb")).with_cache_entries(4);
            env.set_state_backend(rocksdb.with_incremental_checkpoints(true));
            env.enable_checkpointing(15);
            env.set_checkpoint_dir(dir.join(format!("chk-{step}")));
        }
        if let Some(path) = &savepoint {
            env.restore_from(path);
        }
        if step + 1 < chain.len() {
            env.stop_with_savepoint_after(dir.join(format!("sp-{step}")), 60);
        }
        reminder_job(&env, &out);
        let result = env.execute("reminders").unwrap_or_else(|e| panic!("{name} step {step}: {e}"));
        if step + 1 < chain.len() {
            savepoint = Some(result.savepoint.unwrap_or_else(|| panic!("{name} step {step}: no savepoint")));
        }
    }
    let files = committed_files(&out);
    for file in &files {
        let mut last: std::collections::HashMap<u64, i64> = std::collections::HashMap::new();
        for line in file {
            let (key, time) = line.split_once(' ').unwrap();
            let (key, time): (u64, i64) = (key.parse().unwrap(), time.parse().unwrap());
            let previous = last.insert(key, time);
            assert!(previous.is_none_or(|p| p < time), "{name}: key {key}'s timers fire in time order");
        }
    }
    let mut lines: Vec<String> = files.into_iter().flatten().collect();
    lines.sort();
    let mut expected: Vec<String> = (0..EVENTS).map(|i| format!("{} {}", i % KEYS, i as i64 + DELAY)).collect();
    expected.sort();
    assert_eq!(lines.len(), expected.len(), "{name}: every timer fires exactly once");
    assert_eq!(lines, expected, "{name}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn timers_survive_savepoints_and_rescales_and_fire_once_in_time_order() {
    run_reminders(&[(2, Backend::Heap), (3, Backend::Heap), (1, Backend::Heap)], "timers-heap");
}

#[cfg(feature = "rocksdb")]
#[test]
fn timers_travel_beside_rocksdb_files_and_across_backends() {
    run_reminders(
        &[(1, Backend::RocksDbIncremental), (3, Backend::Heap), (2, Backend::RocksDbIncremental)],
        "timers-rocks",
    );
}

/// Emits `count` records with timestamps 0.., then waits (idle) until `release` is set or
/// `give_up` idle calls passed, then sets `finished` and finishes.
#[derive(Clone)]
struct HoldingSource {
    next: u64,
    count: u64,
    release: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
    idle_calls: u64,
    give_up: u64,
}

impl RichFunction for HoldingSource {}

impl SourceFunction<(u64, i64)> for HoldingSource {
    fn emit_batch(&mut self, max: usize, out: &mut Collector<'_, (u64, i64)>) -> FunctionResult<SourceStep> {
        if self.next < self.count {
            let end = (self.next + max as u64).min(self.count);
            for i in self.next..end {
                out.collect((i % 3, i as i64));
            }
            self.next = end;
            return Ok(SourceStep::More);
        }
        self.idle_calls += 1;
        if self.release.load(Ordering::SeqCst) || self.idle_calls > self.give_up {
            self.finished.store(true, Ordering::SeqCst);
            return Ok(SourceStep::Finished);
        }
        std::thread::sleep(Duration::from_millis(1));
        Ok(SourceStep::Idle)
    }
}

/// Two sources unioned into a 10 ms window count; the second never emits. Returns how
/// many windows fired while both sources still ran.
fn windows_fired_before_the_end(idleness: Option<Duration>) -> u64 {
    let env = Env::new();
    env.set_parallelism(1);
    let release = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let fired_early = Arc::new(AtomicU64::new(0));
    let strategy = |idleness: Option<Duration>| {
        let strategy = WatermarkStrategy::for_monotonous_timestamps()
            .with_timestamp_assigner(|r: &(u64, i64)| r.1)
            .with_auto_watermark_interval(Duration::from_millis(5));
        match idleness {
            Some(timeout) => strategy.with_idleness(timeout),
            None => strategy,
        }
    };
    let source = |count| HoldingSource {
        next: 0,
        count,
        release: release.clone(),
        finished: finished.clone(),
        idle_calls: 0,
        give_up: 400,
    };
    let busy = env.add_source(source(100)).assign_timestamps_and_watermarks(strategy(idleness));
    let silent = env.add_source(source(0)).assign_timestamps_and_watermarks(strategy(idleness));
    let (finished_at_fire, fired) = (finished.clone(), fired_early.clone());
    busy.union(&[silent])
        .key_by(|r: &(u64, i64)| r.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .process(window_function(
            move |_key: &u64,
                  _w: &TimeWindow,
                  _records: &mut dyn Iterator<Item = (u64, i64)>,
                  out: &mut Collector<'_, u64>| {
                if !finished_at_fire.load(Ordering::SeqCst) {
                    fired.fetch_add(1, Ordering::SeqCst);
                }
                out.collect(1);
            },
        ))
        .map(move |n| {
            release.store(true, Ordering::SeqCst);
            n
        })
        .add_sink(CollectSink::new());
    env.execute("idleness").unwrap();
    fired_early.load(Ordering::SeqCst)
}

#[test]
fn an_idle_input_holds_the_watermark_back_until_idleness_releases_it() {
    assert_eq!(windows_fired_before_the_end(None), 0, "the silent source holds event time at its start");
    assert!(
        windows_fired_before_the_end(Some(Duration::from_millis(30))) > 0,
        "marked idle after 30 ms, the silent source no longer holds windows back"
    );
}

/// Registers a processing-time timer `after_ms` after each key's first record; emits
/// `(key, timer time, processing time when it fired)`.
#[derive(Clone)]
struct Alarm {
    after_ms: i64,
    armed: Option<ValueState<bool>>,
}

impl RichFunction for Alarm {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.armed = Some(ctx.get_state(&ValueStateDescriptor::new("armed"))?);
        Ok(())
    }
}

impl KeyedProcessFunction<u64, (u64, i64), (u64, i64, i64)> for Alarm {
    fn process_element(
        &mut self,
        _value: (u64, i64),
        ctx: &mut KeyedContext<'_, u64>,
        _out: &mut Collector<'_, (u64, i64, i64)>,
    ) -> FunctionResult {
        let armed = self.armed.as_ref().ok_or("declared")?;
        if armed.value()?.is_none() {
            armed.update(true)?;
            let now = ctx.timer_service().current_processing_time();
            ctx.timer_service().register_processing_time_timer(now + self.after_ms)?;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut KeyedContext<'_, u64>,
        out: &mut Collector<'_, (u64, i64, i64)>,
    ) -> FunctionResult {
        assert_eq!(ctx.time_domain(), Some(TimeDomain::ProcessingTime));
        let now = ctx.timer_service().current_processing_time();
        out.collect((*ctx.current_key(), timestamp, now));
        Ok(())
    }
}

/// A job on the simulated clock: three keys arm a 5 s alarm each; the source waits until
/// all three went off.
fn simulated_alarms(seed: u64) -> Vec<(u64, i64, i64)> {
    let env = Env::new();
    env.set_parallelism(2).simulate(seed, 0);
    let release = Arc::new(AtomicBool::new(false));
    let source = HoldingSource {
        next: 0,
        count: 30,
        release: release.clone(),
        finished: Arc::new(AtomicBool::new(false)),
        idle_calls: 0,
        give_up: u64::MAX,
    };
    let alarms = CollectSink::new();
    let seen = Arc::new(AtomicU64::new(0));
    env.add_source(source)
        .key_by(|r: &(u64, i64)| r.0)
        .process(Alarm { after_ms: 5_000, armed: None })
        .map(move |alarm| {
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
                release.store(true, Ordering::SeqCst);
            }
            alarm
        })
        .add_sink(alarms.clone());
    let started = std::time::Instant::now();
    env.execute("alarms").unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "5 s alarms on the simulated clock take no 5 s");
    let mut alarms = alarms.take();
    alarms.sort();
    alarms
}

#[test]
fn processing_time_timers_fire_on_the_simulated_clock() {
    let alarms = simulated_alarms(11);
    assert_eq!(alarms.iter().map(|a| a.0).collect::<Vec<_>>(), vec![0, 1, 2], "one alarm per key");
    for (key, time, fired_at) in &alarms {
        assert!(fired_at >= time, "key {key}: fired at {fired_at}, before its time {time}");
    }
    assert_eq!(simulated_alarms(11), alarms, "the same seed gives the same times");
}

/// Tumbling 10 ms windows, 5 ms allowed lateness, watermark = largest timestamp − 1 after
/// every record (no out-of-orderness); records in arrival order.
#[test]
fn late_records_update_windows_within_allowed_lateness_and_go_to_the_side_output_after() {
    struct PerRecord(i64);
    impl eddy::time::WatermarkGenerator<(String, i64)> for PerRecord {
        fn on_event(&mut self, _: &(String, i64), timestamp: i64, output: &mut eddy::time::WatermarkOutput) {
            self.0 = self.0.max(timestamp);
            output.emit_watermark(self.0 - 1);
        }
        fn on_periodic_emit(&mut self, _: &mut eddy::time::WatermarkOutput) {}
    }
    let input = [("a", 1), ("a", 12), ("a", 5), ("a", 16), ("a", 3), ("b", 2), ("a", 25), ("a", 14)];
    let env = Env::new();
    env.set_parallelism(1);
    let late = OutputTag::<(String, i64)>::new("late");
    let records: Vec<(String, i64)> = input.iter().map(|(k, t)| (k.to_string(), *t)).collect();
    let fired = env
        .from_collection(records)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_generator(|| PerRecord(i64::MIN)).with_timestamp_assigner(|r: &(String, i64)| r.1),
        )
        .key_by(|r: &(String, i64)| r.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .allowed_lateness(Duration::from_millis(5))
        .side_output_late_data(&late)
        .process(window_function(
            |key: &String,
             w: &TimeWindow,
             records: &mut dyn Iterator<Item = (String, i64)>,
             out: &mut Collector<'_, String>| {
                out.collect(format!("W {key} {} {}", w.start, records.count()));
            },
        ));
    let dropped = fired.side_output(&late).map(|(key, t)| format!("L {key} {t}"));
    let sink = CollectSink::new();
    fired.union(&[dropped]).add_sink(sink.clone());
    env.execute("lateness").unwrap();
    let mut lines = sink.take();
    lines.sort();
    // a,12 moves the watermark to 11: [0,10) fires with 1. a,5 is late within the
    // lateness (cleanup at 9 + 5 = 14 > 11): fires again with 2. a,16 moves it to 15:
    // [0,10) is cleaned up, so a,3 is dropped as late. b,2 is late too (2 + 5 <= 15).
    // a,25 moves it to 24: [10,20) fires with 2 (12, 16) and is cleaned up (19 + 5 = 24),
    // so a,14 is dropped as late. The end of input fires [20,30) with 1.
    let expected = ["L a 14", "L a 3", "L b 2", "W a 0 1", "W a 0 2", "W a 10 2", "W a 20 1"];
    assert_eq!(lines, expected);
}

/// Global windows with count triggers: `count_window(3)` fires and purges every third
/// record of a key; `count_window_sliding(4, 2)` fires every second record with the last
/// four (a count evictor). Records of a key arrive in order, so the sums are exact.
#[test]
fn count_windows_fire_every_n_records_per_key() {
    let env = Env::new();
    env.set_parallelism(2);
    let numbers: Vec<(u64, u64)> = (0..40).map(|i| (i % 2, i)).collect();
    let tumbling = CollectSink::new();
    let sliding = CollectSink::new();
    let keyed = env.from_collection(numbers).key_by(|r: &(u64, u64)| r.0);
    keyed.count_window(3).reduce(|a, b| (a.0, a.1 + b.1)).add_sink(tumbling.clone());
    keyed
        .count_window_sliding(4, 2)
        .process(window_function(
            |key: &u64,
             _: &eddy::window::GlobalWindow,
             records: &mut dyn Iterator<Item = (u64, u64)>,
             out: &mut Collector<'_, (u64, Vec<u64>)>| {
                out.collect((*key, records.map(|r| r.1).collect()));
            },
        ))
        .add_sink(sliding.clone());
    env.execute("count windows").unwrap();
    let mut expected_tumbling = Vec::new();
    let mut expected_sliding = Vec::new();
    for key in 0..2u64 {
        let values: Vec<u64> = (0..40).filter(|i| i % 2 == key).collect();
        for chunk in values.chunks_exact(3) {
            expected_tumbling.push((key, chunk.iter().sum::<u64>()));
        }
        for end in (2..=values.len()).step_by(2) {
            expected_sliding.push((key, values[end.saturating_sub(4)..end].to_vec()));
        }
    }
    let mut tumbling = tumbling.take();
    tumbling.sort();
    expected_tumbling.sort();
    assert_eq!(tumbling, expected_tumbling, "two records of each key never fill a third window");
    let mut sliding = sliding.take();
    sliding.sort();
    expected_sliding.sort();
    assert_eq!(sliding, expected_sliding);
}

/// Processing-time tumbling windows on the simulated clock: records of one key arrive 1
/// ms of simulated time apart (the source idles between them), windows of 50 ms fire as
/// the clock passes their ends, and every record is counted once.
#[test]
fn processing_time_windows_fire_on_the_simulated_clock() {
    #[derive(Clone)]
    struct Trickle {
        next: u64,
        released: Arc<AtomicBool>,
    }
    impl RichFunction for Trickle {}
    impl SourceFunction<u64> for Trickle {
        fn emit_batch(&mut self, _max: usize, out: &mut Collector<'_, u64>) -> FunctionResult<SourceStep> {
            if self.next < 200 {
                out.collect(self.next);
                self.next += 1;
                return Ok(SourceStep::Idle);
            }
            // Wait for the last window: the job ends with its input, and processing-time
            // windows still open then are not fired (as in Flink).
            Ok(if self.released.load(Ordering::SeqCst) { SourceStep::Finished } else { SourceStep::Idle })
        }
    }
    let env = Env::new();
    env.set_parallelism(1).simulate(5, 0);
    let released = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicU64::new(0));
    let sink = CollectSink::new();
    let (release, total) = (released.clone(), counted.clone());
    env.add_source(Trickle { next: 0, released })
        .key_by(|_: &u64| 0u8)
        .window(eddy::window::TumblingProcessingTimeWindows::of(Duration::from_millis(50)))
        .process(window_function(
            move |_: &u8,
                  w: &TimeWindow,
                  records: &mut dyn Iterator<Item = u64>,
                  out: &mut Collector<'_, (i64, u64)>| {
                let n = records.count() as u64;
                if total.fetch_add(n, Ordering::SeqCst) + n == 200 {
                    release.store(true, Ordering::SeqCst);
                }
                out.collect((w.start, n));
            },
        ))
        .add_sink(sink.clone());
    env.execute("processing-time windows").unwrap();
    let windows = sink.take();
    assert_eq!(windows.iter().map(|w| w.1).sum::<u64>(), 200, "every record in exactly one window");
    assert!(windows.len() > 2, "the clock moved through several windows: {windows:?}");
    assert!(windows.iter().all(|w| w.0 % 50 == 0), "windows aligned to their size");
}

/// A keyed stream connected with a broadcast stream: each key arms an event-time timer 10
/// ms after its record; the timer reports the key with the factor the broadcast side set
/// (read-only on the keyed side), read when it fires.
#[derive(Clone)]
struct Scaled;

impl RichFunction for Scaled {}

fn factor() -> MapStateDescriptor<String, u64> {
    MapStateDescriptor::new("factor")
}

impl KeyedBroadcastProcessFunction<u64, (u64, i64), u64, (u64, u64)> for Scaled {
    fn process_element(
        &mut self,
        (_key, timestamp): (u64, i64),
        ctx: &mut KeyedReadOnlyContext<'_, u64>,
        _out: &mut Collector<'_, (u64, u64)>,
    ) -> FunctionResult {
        assert_eq!(ctx.timestamp(), Some(timestamp));
        ctx.timer_service().register_event_time_timer(timestamp + 10)?;
        Ok(())
    }

    fn process_broadcast_element(
        &mut self,
        value: u64,
        ctx: &mut BroadcastContext<'_>,
        _out: &mut Collector<'_, (u64, u64)>,
    ) -> FunctionResult {
        ctx.broadcast_state(&factor())?.put("factor".to_string(), value);
        Ok(())
    }

    fn on_timer(
        &mut self,
        _: i64,
        ctx: &mut KeyedReadOnlyContext<'_, u64>,
        out: &mut Collector<'_, (u64, u64)>,
    ) -> FunctionResult {
        let key = *ctx.current_key();
        let factor = ctx.broadcast_state(&factor())?.get(&"factor".to_string()).copied().unwrap_or(0);
        out.collect((key, key * factor));
        Ok(())
    }

    fn broadcast_first(&self) -> bool {
        true
    }
}

#[test]
fn keyed_broadcast_functions_have_timers_and_read_broadcast_state() {
    let env = Env::new();
    env.set_parallelism(3);
    let sink = CollectSink::new();
    let records: Vec<(u64, i64)> = (0..30).map(|i| (i % 6, i as i64)).collect();
    let keyed = env
        .from_collection(records)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps().with_timestamp_assigner(|r: &(u64, i64)| r.1),
        )
        .key_by(|r: &(u64, i64)| r.0);
    keyed.connect_broadcast(&env.from_collection(vec![7u64])).process(Scaled).add_sink(sink.clone());
    env.execute("keyed broadcast").unwrap();
    let mut fired = sink.take();
    fired.sort();
    // Each record's timer is its own (timestamps differ): 30 firings, 5 per key.
    let mut expected: Vec<(u64, u64)> = (0..30).map(|i| (i % 6, (i % 6) * 7)).collect();
    expected.sort();
    assert_eq!(fired, expected);
}

/// Emits `count` records with timestamps 0, 1, 2, … ms, one per call, sleeping `pause`
/// after each; records how far it got in `progress`.
#[derive(Clone)]
struct Paced {
    next: u64,
    count: u64,
    pause: Duration,
    progress: Arc<AtomicU64>,
}

impl RichFunction for Paced {}

impl SourceFunction<(u8, i64)> for Paced {
    fn emit_batch(&mut self, _max: usize, out: &mut Collector<'_, (u8, i64)>) -> FunctionResult<SourceStep> {
        if self.next == self.count {
            return Ok(SourceStep::Finished);
        }
        out.collect((0, self.next as i64));
        self.progress.store(self.next, Ordering::SeqCst);
        self.next += 1;
        std::thread::sleep(self.pause);
        Ok(SourceStep::More)
    }
}

/// A fast and a slow source, with or without an alignment group of 20 ms drift: the
/// largest lead of the fast one over the slow one, in event time, seen by the fast one.
fn largest_lead(aligned: bool) -> u64 {
    let env = Env::new();
    env.set_parallelism(1);
    let (fast_progress, slow_progress) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let strategy = || {
        let strategy = WatermarkStrategy::for_monotonous_timestamps()
            .with_timestamp_assigner(|r: &(u8, i64)| r.1)
            .with_auto_watermark_interval(Duration::from_millis(2));
        if aligned {
            strategy.with_watermark_alignment("sources", Duration::from_millis(20), Duration::from_millis(2))
        } else {
            strategy
        }
    };
    let fast = Paced { next: 0, count: 1500, pause: Duration::from_micros(20), progress: fast_progress.clone() };
    let slow = Paced { next: 0, count: 1500, pause: Duration::from_micros(700), progress: slow_progress.clone() };
    let lead = Arc::new(AtomicU64::new(0));
    let (seen_lead, seen_slow) = (lead.clone(), slow_progress.clone());
    let fast = env.add_source(fast).assign_timestamps_and_watermarks(strategy()).map(move |r: (u8, i64)| {
        let slow = seen_slow.load(Ordering::SeqCst);
        seen_lead.fetch_max((r.1 as u64).saturating_sub(slow), Ordering::SeqCst);
        r
    });
    let slow = env.add_source(slow).assign_timestamps_and_watermarks(strategy());
    fast.union(&[slow]).add_sink(CollectSink::new());
    env.execute("alignment").unwrap();
    lead.load(Ordering::SeqCst)
}

#[test]
fn watermark_alignment_keeps_a_fast_source_within_the_drift_of_a_slow_one() {
    let free = largest_lead(false);
    assert!(free > 600, "unaligned, the fast source runs far ahead: {free} ms");
    let aligned = largest_lead(true);
    eprintln!("lead: free {free} ms, aligned {aligned} ms");
    // Drift 20 ms, plus what the fast source emits between two looks (2 ms, ~100 records)
    // and how far the slow one's watermark trails it: well below the free run.
    assert!(aligned < 300, "aligned, the fast source waits for the slow one: {aligned} ms ahead at most");
}

/// Keyed state a window function declares is the key's (Flink's global state): it counts
/// a key's firings across its windows, and the windows' own contents stay apart.
#[derive(Clone, Default)]
struct FiringsPerKey {
    firings: Option<ValueState<u64>>,
}

impl RichFunction for FiringsPerKey {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.firings = Some(ctx.get_state(&ValueStateDescriptor::new("firings"))?);
        Ok(())
    }
}

impl eddy::window::ProcessWindowFunction<u64, (u64, i64, u64, u64), u64, TimeWindow> for FiringsPerKey {
    fn process(
        &mut self,
        key: &u64,
        ctx: &mut eddy::window::WindowContext<'_, TimeWindow>,
        counts: &mut dyn Iterator<Item = u64>,
        out: &mut Collector<'_, (u64, i64, u64, u64)>,
    ) -> FunctionResult {
        let firings = self.firings.as_ref().ok_or("opened")?;
        let n = firings.value()?.unwrap_or(0) + 1;
        firings.update(n)?;
        for count in counts {
            out.collect((*key, ctx.window().start, count, n));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct CountAll;

impl AggregateFunction for CountAll {
    type In = (u64, i64);
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _: (u64, i64), n: u64) -> u64 {
        n + 1
    }
    fn get_result(&self, n: &u64) -> u64 {
        *n
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

#[test]
fn a_window_functions_keyed_state_is_per_key_across_windows() {
    for sliding in [false, true] {
        let env = Env::new();
        env.set_parallelism(2);
        let sink = CollectSink::new();
        let records: Vec<(u64, i64)> = (0..60).map(|i| (i % 2, i as i64)).collect();
        let keyed = env
            .from_collection(records)
            .assign_timestamps_and_watermarks(
                WatermarkStrategy::for_monotonous_timestamps().with_timestamp_assigner(|r: &(u64, i64)| r.1),
            )
            .key_by(|r: &(u64, i64)| r.0);
        let fired = if sliding {
            keyed
                .window(eddy::window::SlidingEventTimeWindows::of(Duration::from_millis(40), Duration::from_millis(20)))
                .aggregate_with(CountAll, FiringsPerKey::default())
        } else {
            keyed
                .window(TumblingEventTimeWindows::of(Duration::from_millis(20)))
                .aggregate_with(CountAll, FiringsPerKey::default())
        };
        fired.add_sink(sink.clone());
        env.execute("firings").unwrap();
        let mut fired = sink.take();
        fired.sort();
        // Tumbling: [0,20) [20,40) [40,60), 10 records of a key each. Sliding 40 by 20
        // (shared panes): [-20,20) 10, [0,40) 20, [20,60) 20, [40,80) 10.
        let windows: Vec<(i64, u64)> =
            if sliding { vec![(-20, 10), (0, 20), (20, 20), (40, 10)] } else { vec![(0, 10), (20, 10), (40, 10)] };
        let expected: Vec<(u64, i64, u64, u64)> = (0..2u64)
            .flat_map(|key| windows.iter().enumerate().map(move |(i, &(start, n))| (key, start, n, i as u64 + 1)))
            .collect();
        assert_eq!(fired, expected, "sliding {sliding}: firings counted per key across windows");
    }
}

/// Counts, slowly enough that the queue in front of the window stays full of records
/// and watermarks.
#[derive(Clone)]
struct SlowCount;

impl eddy::state::AggregateFunction for SlowCount {
    type In = (u64, i64);
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, _value: (u64, i64), count: u64) -> u64 {
        std::thread::sleep(Duration::from_micros(300));
        count + 1
    }
    fn get_result(&self, count: &u64) -> u64 {
        *count
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// Fails the job at the first record after an attempt's first completed checkpoint,
/// `left` times in all (shared by every attempt).
#[derive(Clone)]
struct FailAfterCheckpoints {
    left: Arc<AtomicU64>,
    completed: u64,
}

impl RichFunction for FailAfterCheckpoints {
    fn notify_checkpoint_complete(&mut self, _checkpoint: eddy::checkpoint::CheckpointId) -> FunctionResult {
        self.completed += 1;
        Ok(())
    }
}

impl RichMapFunction<String, String> for FailAfterCheckpoints {
    fn map(&mut self, line: String) -> FunctionResult<String> {
        if self.completed >= 1 && self.left.load(Ordering::SeqCst) > 0 {
            self.left.fetch_sub(1, Ordering::SeqCst);
            return Err(format!("injected failure after {} checkpoints", self.completed).into());
        }
        Ok(line)
    }
}

const IN_FLIGHT_EVENTS: u64 = 6_000;

/// Per-key counts of 100 ms tumbling windows behind a slow count, late records to a
/// side output, unaligned checkpoints every 50 ms, `failures` failures.
fn in_flight_watermarks_job(out: &Path, checkpoints: &Path, failures: u64) -> eddy::JobResult {
    let env = Env::new();
    env.set_parallelism(1);
    env.set_checkpoint_config(eddy::checkpoint::CheckpointConfig {
        interval_ms: 50,
        ..eddy::checkpoint::CheckpointConfig::default()
    });
    env.enable_unaligned_checkpoints();
    env.set_checkpoint_dir(checkpoints);
    env.set_restart_strategy(eddy::checkpoint::restart::RestartStrategy::FixedDelay { attempts: 10, delay_ms: 10 });
    let late = OutputTag::<(u64, i64)>::new("late");
    let windows = env
        .from_sequence(0, IN_FLIGHT_EVENTS - 1)
        .uid("numbers")
        .map(timed_event)
        .uid("events")
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_generator(|| EveryRecord(i64::MIN)).with_timestamp_assigner(|e: &(u64, i64)| e.1),
        )
        .uid("timestamps")
        .key_by(|e: &(u64, i64)| e.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(WINDOW_MS)))
        .side_output_late_data(&late)
        .aggregate_with(
            SlowCount,
            window_function(
                |key: &u64, w: &TimeWindow, counts: &mut dyn Iterator<Item = u64>, out: &mut Collector<'_, String>| {
                    for count in counts {
                        out.collect(format!("W {key} {} {count}", w.start));
                    }
                },
            ),
        )
        .uid("windows");
    let dropped = windows.side_output(&late).map(|(key, t)| format!("L {key} {t}")).uid("late");
    windows
        .union(&[dropped])
        .rich_map(FailAfterCheckpoints { left: Arc::new(AtomicU64::new(failures)), completed: 0 })
        .uid("fail")
        .add_sink(ExactlyOnceFileSink::<String>::new_in(out))
        .uid("sink");
    env.execute("in-flight watermarks").expect("the job survives its failures")
}

/// A failure restores unaligned checkpoints taken behind a queue full of records and
/// watermarks, some records late behind them. The watermarks in flight, and the one each
/// channel had reached, come back with the records: every late record is late again and
/// every window counts what it counted without a failure (without them a late record
/// was counted into a window fired again, or a window fired twice).
#[test]
fn late_records_stay_late_when_a_failure_restores_unaligned_checkpoints_with_watermarks_in_flight() {
    let dir = common::temp_dir("in-flight-watermarks");
    let (out, checkpoints) = (dir.join("out"), dir.join("chk"));
    let result = in_flight_watermarks_job(&out, &checkpoints, 3);
    // Three failures, each after a completed checkpoint; at least one however loaded the
    // machine is.
    assert!(result.restarts >= 1, "{} restarts: {:?}", result.restarts, result.warnings);
    let mut lines: Vec<String> = committed_files(&out).into_iter().flatten().collect();
    lines.sort();
    // By hand: every delayed event is late (see `timed_event`); the others count.
    if let Some(differences) = differences(&lines, &expected_lines(IN_FLIGHT_EVENTS)) {
        panic!("{differences}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
