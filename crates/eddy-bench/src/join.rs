//! W2 `join`: two streams connected by key into one co-flat-map with two ValueStates.

use crate::checksum::{checksum_of_job, CHECKSUM};
use crate::generator::{splitmix64, Event};
use crate::rate::RateLimiter;
use crate::{Args, Report};
use eddy::prelude::*;

/// The counter of emitted joins.
const EMITTED: &str = "emitted";

/// Keeps the last `i` of each side per key; emits `(key, a, b)` when the other side is set.
#[derive(Clone)]
struct Join {
    a: Option<ValueState<u64>>,
    b: Option<ValueState<u64>>,
    checksum: u64,
    counter: Option<LongCounter>,
}

impl RichFunction for Join {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.a = Some(ctx.get_state(&ValueStateDescriptor::new("a"))?);
        self.b = Some(ctx.get_state(&ValueStateDescriptor::new("b"))?);
        Ok(())
    }

    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let state = ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new("checksum"))?;
        self.checksum = state.as_slice().iter().fold(0u64, |a, b| a.wrapping_add(*b));
        self.counter = Some(ctx.long_counter(CHECKSUM));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new("checksum"))?.update(vec![self.checksum]);
        Ok(())
    }

    /// Published when the job finished, so restores never count an input twice.
    fn notify_job_finished(&mut self) -> FunctionResult {
        if let Some(counter) = &self.counter {
            counter.add(self.checksum);
        }
        Ok(())
    }
}

impl Join {
    fn side(&mut self, first: bool, event: &Event, out: &mut Collector<'_, (u64, u64, u64)>) -> FunctionResult {
        self.checksum = self.checksum.wrapping_add(splitmix64(event.key));
        let (mine, other) = match (&self.a, &self.b) {
            (Some(a), Some(b)) if first => (a, b),
            (Some(a), Some(b)) => (b, a),
            _ => return Err("join state not declared".into()),
        };
        mine.update(event.i)?;
        if let Some(last) = other.value()? {
            out.collect(if first { (event.key, event.i, last) } else { (event.key, last, event.i) });
        }
        Ok(())
    }
}

impl CoFlatMapFunction<Event, Event, (u64, u64, u64)> for Join {
    fn flat_map1(&mut self, event: Event, out: &mut Collector<'_, (u64, u64, u64)>) -> FunctionResult {
        self.side(true, &event, out)
    }
    fn flat_map2(&mut self, event: Event, out: &mut Collector<'_, (u64, u64, u64)>) -> FunctionResult {
        self.side(false, &event, out)
    }
}

/// Counts emitted joins.
#[derive(Clone)]
struct CountSink {
    local: u64,
    counter: Option<LongCounter>,
}

impl RichFunction for CountSink {
    fn initialize_state(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let state = ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new("emitted"))?;
        self.local = state.as_slice().iter().sum();
        self.counter = Some(ctx.long_counter(EMITTED));
        Ok(())
    }

    fn snapshot_state(&mut self, ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        ctx.operator_state().list_state(&ListStateDescriptor::<u64>::new("emitted"))?.update(vec![self.local]);
        Ok(())
    }

    fn notify_job_finished(&mut self) -> FunctionResult {
        if let Some(counter) = &self.counter {
            counter.add(self.local);
        }
        Ok(())
    }
}

impl Sink<(u64, u64, u64)> for CountSink {
    #[inline]
    fn invoke(&mut self, _joined: (u64, u64, u64)) -> FunctionResult {
        self.local += 1;
        Ok(())
    }
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let env = Env::new();
    args.configure(&env)?;
    let keys = args.keys();
    let stream = |s: u64| {
        let mut limiter = RateLimiter::new(args.rate / 2 / u64::from(args.parallelism));
        env.from_sequence(0, args.events - 1)
            .name(&format!("events-{s}"))
            .map(move |i| {
                limiter.admit();
                Event::generate(s, i, keys)
            })
            .name(&format!("generate-{s}"))
            .uid(&format!("generate-{s}"))
            .key_by(|e: &Event| e.key)
    };
    stream(1)
        .connect(&stream(2))
        .co_flat_map(Join { a: None, b: None, checksum: 0, counter: None })
        .name("join")
        .uid("join")
        .add_sink(CountSink { local: 0, counter: None })
        .name("count")
        .uid("count");
    let result = env.execute("W2 join")?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: 2 * args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra: [("emitted".to_string(), result.accumulators.get(EMITTED).copied().unwrap_or(0).to_string())]
            .into_iter()
            .chain(args.checkpoints.report(&result))
            .collect(),
    })
}
