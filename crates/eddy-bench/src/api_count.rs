//! W1 `api-count`: requests per API path, a keyed `ValueState<u64>` per path.

use crate::checksum::{checksum_of_job, ChecksumSink};
use crate::generator::{splitmix64, Event};
use crate::rate::{RateLimiter, RateSteps, SteppedLimiter};
use crate::{Args, Report};
use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use std::sync::Arc;

/// Counts per path and emits `(path, count)` after every event.
#[derive(Clone, Default)]
pub(crate) struct CountPerPath {
    count: Option<ValueState<u64>>,
}

impl RichFunction for CountPerPath {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.count = Some(ctx.get_state(&ValueStateDescriptor::new("count"))?);
        Ok(())
    }
}

impl CountPerPath {
    /// Adds one to `path`'s count and emits `(path, count)`.
    #[inline]
    fn count(&self, path: String, out: &mut Collector<'_, (String, u64)>) -> FunctionResult {
        let state = self.count.as_ref().ok_or("count state not declared")?;
        let count = state.value()?.unwrap_or(0) + 1;
        state.update(count)?;
        out.collect((path, count));
        Ok(())
    }
}

impl KeyedProcessFunction<String, Event, (String, u64)> for CountPerPath {
    fn process_element(
        &mut self,
        event: Event,
        _ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> FunctionResult {
        self.count(event.path, out)
    }
}

/// W1 over paths read from Kafka.
impl KeyedProcessFunction<String, String, (String, u64)> for CountPerPath {
    fn process_element(
        &mut self,
        path: String,
        _ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> FunctionResult {
        self.count(path, out)
    }
}

/// W1's checksum term of one emitted `(path, count)`: `splitmix64(key) * count`.
#[inline]
pub fn checksum_of(path: &str, count: u64) -> Result<u64, String> {
    let key = Event::key_of_path(path).ok_or_else(|| format!("not an API path: {path}"))?;
    Ok(splitmix64(key).wrapping_mul(count))
}

pub(crate) fn checksum_term((path, count): &(String, u64)) -> Result<u64, String> {
    checksum_of(path, *count)
}

/// Makes W1's events from their indexes at the run's rate: each subtask lets its share of
/// the total through (`--rate`, or `--rate-steps`), learnt when it opens, so the total
/// stays the same at any parallelism (a rescale too).
#[derive(Clone)]
struct Generate {
    keys: u64,
    rate: u64,
    steps: Option<Arc<RateSteps>>,
    limiter: Option<Limiter>,
}

#[derive(Clone)]
enum Limiter {
    Fixed(RateLimiter),
    Stepped(SteppedLimiter),
}

impl RichFunction for Generate {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let parallelism = ctx.number_of_parallel_subtasks();
        self.limiter = Some(match &self.steps {
            Some(steps) => Limiter::Stepped(SteppedLimiter::new(steps.clone(), 1.0 / f64::from(parallelism))),
            None => Limiter::Fixed(RateLimiter::new(self.rate / u64::from(parallelism))),
        });
        Ok(())
    }
}

impl ProcessFunction<u64, Event> for Generate {
    fn process_element(
        &mut self,
        index: u64,
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, Event>,
    ) -> FunctionResult {
        match &mut self.limiter {
            Some(Limiter::Fixed(limiter)) => limiter.admit(),
            Some(Limiter::Stepped(limiter)) => limiter.admit(),
            None => {}
        }
        out.collect(Event::generate(1, index, self.keys));
        Ok(())
    }
}

/// A per-record cost in every subtask: it sleeps `micros` per event, so that what a
/// subtask can take is bounded and grows with the parallelism even on a small machine
/// (a sleep holds no core), for trying the autoscaler.
#[derive(Clone)]
struct Cost {
    micros: u64,
}

impl RichFunction for Cost {}

impl KeyedProcessFunction<String, Event, Event> for Cost {
    fn process_element(
        &mut self,
        event: Event,
        _ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, Event>,
    ) -> FunctionResult {
        std::thread::sleep(std::time::Duration::from_micros(self.micros));
        out.collect(event);
        Ok(())
    }
}

/// Passes records on, waiting `micros` per record in subtask 0 only: a sink that is slow
/// on one TaskManager.
#[derive(Clone)]
struct SlowFirstSubtask {
    micros: u64,
    slow: bool,
}

impl RichFunction for SlowFirstSubtask {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.slow = ctx.index_of_this_subtask().0 == 0;
        Ok(())
    }
}

impl ProcessFunction<(String, u64), (String, u64)> for SlowFirstSubtask {
    fn process_element(
        &mut self,
        value: (String, u64),
        _ctx: &mut Context<'_>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> FunctionResult {
        if self.slow {
            // Spinning, not sleeping: a sleep lasts at least ~60 µs whatever it is asked.
            let until = std::time::Instant::now() + std::time::Duration::from_micros(self.micros);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        out.collect(value);
        Ok(())
    }
}

/// W1, or W4 (the same job over 2 M keys), named `job` in its logs.
pub fn run(args: &Args, job: &str) -> anyhow::Result<Report> {
    let env = Env::new();
    args.configure(&env)?;
    let keys = args.keys();
    let steps = args.rate_steps.as_deref().map(RateSteps::parse).transpose().map_err(anyhow::Error::msg)?;
    let generate = Generate { keys, rate: args.rate, steps: steps.map(Arc::new), limiter: None };
    let keyed = env
        .from_sequence(0, args.events - 1)
        .name("events")
        .uid("events")
        .process(generate)
        .name("generate")
        .uid("generate")
        .key_by_ref(|e: &Event| &e.path);
    let keyed = if args.cost_us > 0 {
        keyed.process(Cost { micros: args.cost_us }).name("cost").uid("cost").key_by_ref(|e: &Event| &e.path)
    } else {
        keyed
    };
    let counts = keyed.process(CountPerPath::default()).name("count per path").uid("count-per-path");
    let counts = if args.slow_sink_us > 0 {
        counts.process(SlowFirstSubtask { micros: args.slow_sink_us, slow: false }).name("slow").uid("slow")
    } else {
        counts
    };
    counts.add_sink(ChecksumSink::new(checksum_term)).name("checksum").uid("checksum");
    if let Some(dir) = &args.checkpoints.output {
        // W1's output: one line per emitted record, `/api/<key> <count>`.
        counts
            .map(|(path, count)| format!("{path} {count}"))
            .name("format")
            .uid("format")
            .add_sink(ExactlyOnceFileSink::<String>::new_in(dir))
            .name("exactly-once file sink")
            .uid("file-sink");
    }
    let result = env.execute(job)?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra: args.checkpoints.report(&result),
    })
}
