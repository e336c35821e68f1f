//! W1 `api-count`: requests per API path, a keyed `ValueState<u64>` per path.

use crate::generator::{splitmix64, Event};
use crate::rate::RateLimiter;
use crate::{Args, Report};
use eddy::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts per path and emits `(path, count)` after every event.
#[derive(Clone, Default)]
struct CountPerPath {
    count: Option<ValueState<u64>>,
}

impl RichFunction for CountPerPath {
    fn open(&mut self, ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        self.count = Some(ctx.get_state(&ValueStateDescriptor::new("count"))?);
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
        let state = self.count.as_ref().ok_or("count state not declared")?;
        let count = state.value()?.unwrap_or(0) + 1;
        state.update(count)?;
        out.collect((event.path, count));
        Ok(())
    }
}

/// Folds `splitmix64(key) * count` over what it receives.
#[derive(Clone)]
struct ChecksumSink {
    local: u64,
    total: Arc<AtomicU64>,
}

impl RichFunction for ChecksumSink {}

impl Sink<(String, u64)> for ChecksumSink {
    #[inline]
    fn invoke(&mut self, (path, count): (String, u64)) -> FunctionResult {
        let key = Event::key_of_path(&path).ok_or_else(|| format!("not an API path: {path}"))?;
        self.local = self.local.wrapping_add(splitmix64(key).wrapping_mul(count));
        Ok(())
    }

    fn finish(&mut self) -> FunctionResult {
        self.total.fetch_add(self.local, Ordering::SeqCst);
        Ok(())
    }
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let env = Env::new();
    env.set_parallelism(args.parallelism);
    let keys = args.keys;
    let mut limiter = RateLimiter::new(args.rate / u64::from(args.parallelism));
    let total = Arc::new(AtomicU64::new(0));
    env.from_sequence(0, args.events - 1)
        .name("events")
        .map(move |i| {
            limiter.admit();
            Event::generate(1, i, keys)
        })
        .name("generate")
        .key_by_ref(|e: &Event| &e.path)
        .process(CountPerPath::default())
        .name("count per path")
        .add_sink(ChecksumSink { local: 0, total: total.clone() })
        .name("checksum");
    let result = env.execute("W1 api-count")?;
    Ok(Report {
        events: args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: total.load(Ordering::SeqCst),
        extra: vec![],
    })
}
