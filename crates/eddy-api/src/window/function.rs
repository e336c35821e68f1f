//! What a firing window's contents go to: a [`ProcessWindowFunction`] (Flink's), given
//! the key, the window and its elements (or the one aggregate of an incremental window).

use crate::function::{FunctionResult, OutputTag, RichFunction, SideOutputs};
use crate::operator::timers::InternalTimers;
use eddy_runtime::Collector;

/// What a window function learns besides the elements.
pub struct WindowContext<'a, W> {
    pub(crate) window: &'a W,
    pub(crate) timers: &'a InternalTimers,
    pub(crate) side: &'a mut SideOutputs,
}

impl<W> WindowContext<'_, W> {
    /// The window that fires.
    pub fn window(&self) -> &W {
        self.window
    }

    pub fn current_watermark(&self) -> i64 {
        self.timers.watermark().0
    }

    pub fn current_processing_time(&self) -> i64 {
        self.timers.processing_time()
    }

    /// Emits to a side output.
    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        self.side.emit(tag, value)
    }
}

/// Receives a firing window's contents (Flink's `ProcessWindowFunction`): all elements
/// (`process`), or the single result of an incremental `reduce` / `aggregate`.
///
/// Keyed state the function declares in `open` is the key's (Flink's global state), the
/// same for all of the key's windows.
pub trait ProcessWindowFunction<IN, OUT, K, W>: RichFunction + Clone + Send + Sync + 'static {
    fn process(
        &mut self,
        key: &K,
        ctx: &mut WindowContext<'_, W>,
        elements: &mut dyn Iterator<Item = IN>,
        out: &mut Collector<'_, OUT>,
    ) -> FunctionResult;

    /// Whether `process` may touch keyed state, so that it must run in the key's own
    /// namespace rather than the window's. True unless the function has no keyed state:
    /// a closure ([`window_function`]) has no `open` to declare state in, and runs in the
    /// window's namespace, saving two namespace switches per firing (a closure must not
    /// declare state while it runs).
    fn uses_keyed_state(&self) -> bool {
        true
    }
}

/// A closure as a [`ProcessWindowFunction`]: see [`window_function`].
#[derive(Clone)]
pub struct WindowFn<F>(F);

impl<F> RichFunction for WindowFn<F> {}

/// `|key, window, elements, out| …` as a window function.
pub fn window_function<IN, OUT, K, W, F>(f: F) -> WindowFn<F>
where
    F: FnMut(&K, &W, &mut dyn Iterator<Item = IN>, &mut Collector<'_, OUT>) + Clone + Send + Sync + 'static,
{
    WindowFn(f)
}

impl<IN, OUT, K, W, F> ProcessWindowFunction<IN, OUT, K, W> for WindowFn<F>
where
    F: FnMut(&K, &W, &mut dyn Iterator<Item = IN>, &mut Collector<'_, OUT>) + Clone + Send + Sync + 'static,
{
    fn process(
        &mut self,
        key: &K,
        ctx: &mut WindowContext<'_, W>,
        elements: &mut dyn Iterator<Item = IN>,
        out: &mut Collector<'_, OUT>,
    ) -> FunctionResult {
        (self.0)(key, ctx.window, elements, out);
        Ok(())
    }

    fn uses_keyed_state(&self) -> bool {
        false
    }
}

/// Emits the elements as they are (an incremental window without a window function).
#[derive(Clone, Copy, Default)]
pub(crate) struct PassThrough;

impl RichFunction for PassThrough {}

impl<T, K, W> ProcessWindowFunction<T, T, K, W> for PassThrough {
    fn process(
        &mut self,
        _: &K,
        _: &mut WindowContext<'_, W>,
        elements: &mut dyn Iterator<Item = T>,
        out: &mut Collector<'_, T>,
    ) -> FunctionResult {
        elements.for_each(|e| out.collect(e));
        Ok(())
    }

    fn uses_keyed_state(&self) -> bool {
        false
    }
}
