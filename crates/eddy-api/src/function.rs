//! The functions users write, and what they are given: Flink's function interfaces with
//! Rust idioms. Every function may fail by returning an error (any error type converts
//! into [`FunctionError`]); a failure fails the job with the operator and subtask named.

use crate::operator::timers::InternalTimers;
pub use crate::operator::timers::{TimeDomain, TimerService};
use eddy_runtime::task::OperatorInfo;
use eddy_runtime::{Collector, PortOutput, TypedOutput};
use eddy_state::{
    AggregateFunction, AggregatingState, AggregatingStateDescriptor, ListState, ListStateDescriptor, MapKey, MapState,
    MapStateDescriptor, OperatorStateStore, ReducingState, ReducingStateDescriptor, StateError, StateErrorKind,
    StateValue, ValueState, ValueStateDescriptor,
};
use eddy_types::{CheckpointId, SubtaskIndex};
use std::marker::PhantomData;

/// Any error a user function returns.
pub type FunctionError = Box<dyn std::error::Error + Send + Sync>;
/// What user functions return.
pub type FunctionResult<T = ()> = Result<T, FunctionError>;

/// A counter of one subtask, summed over the job's subtasks into its result (Flink's
/// `LongCounter` accumulator). Additions wrap around.
#[derive(Debug, Clone)]
pub struct LongCounter(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl LongCounter {
    pub fn add(&self, value: u64) {
        self.0.fetch_add(value, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a function learns about where it runs, and where it declares its state (Flink's
/// `RuntimeContext`). Keyed state can only be declared by functions on a keyed stream.
pub struct RuntimeContext<'a> {
    info: &'a OperatorInfo,
    keyed: bool,
    operator_state: &'a mut OperatorStateStore,
}

impl<'a> RuntimeContext<'a> {
    pub(crate) fn new(info: &'a OperatorInfo, keyed: bool, operator_state: &'a mut OperatorStateStore) -> Self {
        Self { info, keyed, operator_state }
    }

    /// This instance's index, `0..parallelism`.
    pub fn index_of_this_subtask(&self) -> SubtaskIndex {
        SubtaskIndex(self.info.subtask)
    }

    pub fn number_of_parallel_subtasks(&self) -> u32 {
        self.info.parallelism
    }

    /// The way to this operator's coordinator ([`SourceFunction::coordinator`]); `None`
    /// when the operator has none, or nothing coordinates the task (a task run alone by a
    /// test).
    pub fn operator_event_gateway(&self) -> Option<eddy_runtime::coordination::OperatorEventGateway> {
        self.info.coordinated.then(|| self.info.shared.operator_event_gateway()).flatten()
    }

    pub fn max_number_of_parallel_subtasks(&self) -> u32 {
        self.info.max_parallelism.get()
    }

    /// This run of the job: differs on every restart and in every run (derived from the
    /// run's seed, so the same under the same simulation seed). Transactional sinks put
    /// it in their transactions' names.
    pub fn attempt_id(&self) -> u64 {
        self.info.seed.0
    }

    /// The operator's name.
    pub fn task_name(&self) -> &str {
        &self.info.name
    }

    /// The counter `name` (Flink's `getLongCounter`): what this subtask adds to it, summed
    /// over every subtask, is in [`JobResult::accumulators`](eddy_jobmaster::JobResult)
    /// once the job finished, whichever process each subtask ran in. Only the attempt
    /// that finished the job counts: add what the job's state holds (as a sink publishing
    /// its total in `notify_job_finished`), and a restart never counts twice.
    pub fn long_counter(&self, name: &str) -> LongCounter {
        LongCounter(self.info.shared.long_counter(name))
    }

    fn keyed(&self, state: &str) -> Result<(), StateError> {
        if self.keyed {
            Ok(())
        } else {
            Err(StateError::from(StateErrorKind::NotKeyed { state: state.to_string() }))
        }
    }

    /// Declares a keyed `ValueState` (Flink's `getState`).
    pub fn get_state<T: StateValue>(&self, descriptor: &ValueStateDescriptor<T>) -> Result<ValueState<T>, StateError> {
        self.keyed(descriptor.name())?;
        ValueState::declare(descriptor)
    }

    pub fn get_list_state<T: StateValue>(
        &self,
        descriptor: &ListStateDescriptor<T>,
    ) -> Result<ListState<T>, StateError> {
        self.keyed(descriptor.name())?;
        ListState::declare(descriptor)
    }

    pub fn get_map_state<K: MapKey, V: StateValue>(
        &self,
        descriptor: &MapStateDescriptor<K, V>,
    ) -> Result<MapState<K, V>, StateError> {
        self.keyed(descriptor.name())?;
        MapState::declare(descriptor)
    }

    pub fn get_reducing_state<T: StateValue>(
        &self,
        descriptor: &ReducingStateDescriptor<T>,
    ) -> Result<ReducingState<T>, StateError> {
        self.keyed(descriptor.name())?;
        ReducingState::declare(descriptor)
    }

    pub fn get_aggregating_state<F>(
        &self,
        descriptor: &AggregatingStateDescriptor<F>,
    ) -> Result<AggregatingState<F::In, F::Out>, StateError>
    where
        F: AggregateFunction,
        F::In: 'static,
        F::Out: 'static,
        F::Acc: StateValue,
    {
        self.keyed(descriptor.name())?;
        AggregatingState::declare(descriptor)
    }

    /// This instance's operator state (list, union list and broadcast state).
    pub fn operator_state(&mut self) -> &mut OperatorStateStore {
        self.operator_state
    }
}

/// Lifecycle and checkpoint hooks every user function may implement; all default to doing
/// nothing. `initialize_state` / `snapshot_state` are Flink's `CheckpointedFunction`:
/// `initialize_state` runs before `open`, on a fresh start and on restore
/// (`ctx.operator_state().is_restored()`), `snapshot_state` at each checkpoint.
pub trait RichFunction {
    fn initialize_state(&mut self, _ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        Ok(())
    }
    fn open(&mut self, _ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        Ok(())
    }
    fn snapshot_state(&mut self, _ctx: &mut SnapshotContext<'_>) -> FunctionResult {
        Ok(())
    }
    /// Checkpoint `checkpoint` completed everywhere (Flink's `CheckpointListener`);
    /// two-phase-commit sinks commit what they pre-committed up to it.
    fn notify_checkpoint_complete(&mut self, _checkpoint: CheckpointId) -> FunctionResult {
        Ok(())
    }
    /// Checkpoint `checkpoint` was aborted (timed out, failed, subsumed) and will never
    /// complete; what it pre-committed stays pending until a later checkpoint completes.
    fn notify_checkpoint_aborted(&mut self, _checkpoint: CheckpointId) -> FunctionResult {
        Ok(())
    }
    /// The job finished and its final checkpoint, which holds every task's end-of-input
    /// state, is stored: two-phase-commit sinks commit all that is pending. Not called
    /// when the job fails or is cancelled.
    fn notify_job_finished(&mut self) -> FunctionResult {
        Ok(())
    }
    fn close(&mut self) -> FunctionResult {
        Ok(())
    }
}

/// Given to [`RichFunction::snapshot_state`].
pub struct SnapshotContext<'a> {
    checkpoint: Option<CheckpointId>,
    operator_state: &'a mut OperatorStateStore,
}

impl<'a> SnapshotContext<'a> {
    pub fn new(checkpoint: Option<CheckpointId>, operator_state: &'a mut OperatorStateStore) -> Self {
        Self { checkpoint, operator_state }
    }

    /// The checkpoint (or savepoint) being taken; `None` for the end-of-input snapshot of
    /// a task whose input ended, which stands in for the task in every later checkpoint.
    pub fn checkpoint_id(&self) -> Option<CheckpointId> {
        self.checkpoint
    }

    pub fn operator_state(&mut self) -> &mut OperatorStateStore {
        self.operator_state
    }
}

/// Names a side output of type `X` (Flink's `OutputTag`).
pub struct OutputTag<X> {
    id: String,
    _type: PhantomData<fn() -> X>,
}

impl<X> Clone for OutputTag<X> {
    fn clone(&self) -> Self {
        Self::new(self.id.clone())
    }
}

impl<X> OutputTag<X> {
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into(), _type: PhantomData }
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The side outputs of an operator, by tag.
pub struct SideOutputs {
    ports: Vec<(String, Box<dyn PortOutput>)>,
    /// Where an emit of the wrong type fails the operator.
    shared: std::rc::Rc<eddy_runtime::task::TaskShared>,
    operator: usize,
}

impl SideOutputs {
    pub(crate) fn new(
        ports: Vec<(String, Box<dyn PortOutput>)>,
        shared: std::rc::Rc<eddy_runtime::task::TaskShared>,
        operator: usize,
    ) -> Self {
        Self { ports, shared, operator }
    }

    /// Emits `value` to the side output `tag`; dropped if nobody consumes that tag. A tag
    /// whose consumer reads another type fails the operator: dropping would lose records.
    pub fn emit<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        if let Some((_, port)) = self.ports.iter_mut().find(|(id, _)| *id == tag.id) {
            match port.as_any_mut().downcast_mut::<TypedOutput<X>>() {
                Some(typed) => typed.0.collect(value),
                None => self.shared.fail(
                    self.operator,
                    format!(
                        "side output '{}' is consumed as {}, but a record of type {} was emitted to it; use one type \
                            per tag",
                        tag.id,
                        port.record_type(),
                        std::any::type_name::<X>()
                    ),
                ),
            }
        }
    }

    pub(crate) fn ports(&mut self) -> impl Iterator<Item = &mut Box<dyn PortOutput>> {
        self.ports.iter_mut().map(|(_, p)| p)
    }
}

/// The context of a [`ProcessFunction`] call.
pub struct Context<'a> {
    pub(crate) side: &'a mut SideOutputs,
}

impl Context<'_> {
    /// Emits to a side output.
    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        self.side.emit(tag, value)
    }
}

/// The context of a keyed function call (Flink's `KeyedProcessFunction.Context` and
/// `OnTimerContext`): the current key, the record's timestamp, the timer service and side
/// outputs.
pub struct KeyedContext<'a, K> {
    key: crate::key::CurrentKey<'a, K>,
    side: &'a mut SideOutputs,
    timers: &'a InternalTimers,
    timestamp: Option<i64>,
    domain: Option<TimeDomain>,
}

impl<'a, K> KeyedContext<'a, K> {
    #[inline]
    pub(crate) fn new(
        key: crate::key::CurrentKey<'a, K>,
        side: &'a mut SideOutputs,
        timers: Option<&'a InternalTimers>,
        timestamp: Option<i64>,
        domain: Option<TimeDomain>,
    ) -> Result<Self, FunctionError> {
        let timers = timers.ok_or("a keyed function runs without its timer service (bug)")?;
        Ok(Self { key, side, timers, timestamp, domain })
    }
}

impl<K: eddy_types::Key> KeyedContext<'_, K> {
    /// The key of the record being processed, or of the timer firing.
    pub fn current_key(&self) -> &K {
        self.key.get()
    }
}

impl<K> KeyedContext<'_, K> {
    /// Emits to a side output.
    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        self.side.emit(tag, value)
    }

    /// The event time of the record being processed (`None` when the stream has no
    /// timestamps); in `on_timer`, the timer's time.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp
    }

    /// Timers for the current key, and the current times.
    pub fn timer_service(&mut self) -> TimerService<'_> {
        TimerService { timers: self.timers }
    }

    /// In `on_timer`: which clock the firing timer followed; `None` for a record.
    pub fn time_domain(&self) -> Option<TimeDomain> {
        self.domain
    }
}

/// Flink's `RichMapFunction`: one record in, one out, with lifecycle and state.
pub trait RichMapFunction<I, O>: RichFunction + Clone + Send + Sync + 'static {
    fn map(&mut self, value: I) -> FunctionResult<O>;
}

/// Flink's `RichFlatMapFunction`: one record in, any number out.
pub trait RichFlatMapFunction<I, O>: RichFunction + Clone + Send + Sync + 'static {
    fn flat_map(&mut self, value: I, out: &mut Collector<'_, O>) -> FunctionResult;
}

/// Flink's `ProcessFunction` (non-keyed): records in, records and side outputs out.
pub trait ProcessFunction<I, O>: RichFunction + Clone + Send + Sync + 'static {
    fn process_element(&mut self, value: I, ctx: &mut Context<'_>, out: &mut Collector<'_, O>) -> FunctionResult;
}

/// Flink's `KeyedProcessFunction`: like [`ProcessFunction`], on a keyed stream, with the
/// current key and keyed state.
pub trait KeyedProcessFunction<K, I, O>: RichFunction + Clone + Send + Sync + 'static {
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    /// A timer registered through `ctx.timer_service()` fired, for `ctx.current_key()`, at
    /// `timestamp` (`ctx.time_domain()` says on which clock). Timers fire in time order.
    fn on_timer(
        &mut self,
        _timestamp: i64,
        _ctx: &mut KeyedContext<'_, K>,
        _out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        Ok(())
    }
}

/// Flink's `CoFlatMapFunction` (rich): two inputs, one output. On keyed connected streams
/// it may use keyed state, shared by both sides for the same key.
pub trait CoFlatMapFunction<A, B, O>: RichFunction + Clone + Send + Sync + 'static {
    fn flat_map1(&mut self, value: A, out: &mut Collector<'_, O>) -> FunctionResult;
    fn flat_map2(&mut self, value: B, out: &mut Collector<'_, O>) -> FunctionResult;
}

/// Flink's `KeyedCoProcessFunction`: two keyed inputs with the current key and side outputs.
pub trait KeyedCoProcessFunction<K, A, B, O>: RichFunction + Clone + Send + Sync + 'static {
    fn process_element1(
        &mut self,
        value: A,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    fn process_element2(
        &mut self,
        value: B,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    /// A timer fired, as [`KeyedProcessFunction::on_timer`].
    fn on_timer(
        &mut self,
        _timestamp: i64,
        _ctx: &mut KeyedContext<'_, K>,
        _out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        Ok(())
    }
}

/// The context of [`BroadcastProcessFunction::process_element`]: broadcast state is
/// read-only here, so that the instances never diverge.
pub struct ReadOnlyContext<'a> {
    pub(crate) operator_state: &'a mut OperatorStateStore,
    pub(crate) side: &'a mut SideOutputs,
}

impl ReadOnlyContext<'_> {
    pub fn broadcast_state<K: MapKey, V: StateValue>(
        &mut self,
        descriptor: &MapStateDescriptor<K, V>,
    ) -> Result<eddy_state::ReadOnlyBroadcastState<'_, K, V>, StateError> {
        self.operator_state.read_only_broadcast_state(descriptor)
    }

    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        self.side.emit(tag, value)
    }
}

/// The context of [`BroadcastProcessFunction::process_broadcast_element`]: broadcast state
/// is writable.
pub struct BroadcastContext<'a> {
    pub(crate) operator_state: &'a mut OperatorStateStore,
    pub(crate) side: &'a mut SideOutputs,
}

impl BroadcastContext<'_> {
    pub fn broadcast_state<K: MapKey, V: StateValue>(
        &mut self,
        descriptor: &MapStateDescriptor<K, V>,
    ) -> Result<eddy_state::BroadcastState<'_, K, V>, StateError> {
        self.operator_state.broadcast_state(descriptor)
    }

    pub fn output<X: 'static>(&mut self, tag: &OutputTag<X>, value: X) {
        self.side.emit(tag, value)
    }
}

/// Flink's `BroadcastProcessFunction`: a stream connected with a broadcast stream whose
/// elements update broadcast state that every instance holds alike.
pub trait BroadcastProcessFunction<I, B, O>: RichFunction + Clone + Send + Sync + 'static {
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut ReadOnlyContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    fn process_broadcast_element(
        &mut self,
        value: B,
        ctx: &mut BroadcastContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    /// `true`: read the broadcast stream to its end before any stream element (Flink's
    /// `InputSelectable`), so that every element sees all rules; only for a bounded
    /// broadcast stream, since the other input waits until it ends.
    fn broadcast_first(&self) -> bool {
        false
    }
}

/// The context of a [`KeyedBroadcastProcessFunction`]'s stream element or timer: the keyed
/// context (current key, timestamp, timers, side outputs) and read-only broadcast state.
pub struct KeyedReadOnlyContext<'a, K> {
    pub(crate) keyed: KeyedContext<'a, K>,
    pub(crate) operator_state: &'a mut OperatorStateStore,
}

impl<K> KeyedReadOnlyContext<'_, K> {
    pub fn broadcast_state<MK: MapKey, V: StateValue>(
        &mut self,
        descriptor: &MapStateDescriptor<MK, V>,
    ) -> Result<eddy_state::ReadOnlyBroadcastState<'_, MK, V>, StateError> {
        self.operator_state.read_only_broadcast_state(descriptor)
    }
}

impl<'a, K> std::ops::Deref for KeyedReadOnlyContext<'a, K> {
    type Target = KeyedContext<'a, K>;
    fn deref(&self) -> &Self::Target {
        &self.keyed
    }
}

impl<K> std::ops::DerefMut for KeyedReadOnlyContext<'_, K> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.keyed
    }
}

/// Flink's `KeyedBroadcastProcessFunction`: a keyed stream connected with a broadcast
/// stream. Stream elements have their key's state and timers and read broadcast state;
/// broadcast elements update broadcast state, which every instance holds alike.
pub trait KeyedBroadcastProcessFunction<K, I, B, O>: RichFunction + Clone + Send + Sync + 'static {
    fn process_element(
        &mut self,
        value: I,
        ctx: &mut KeyedReadOnlyContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    fn process_broadcast_element(
        &mut self,
        value: B,
        ctx: &mut BroadcastContext<'_>,
        out: &mut Collector<'_, O>,
    ) -> FunctionResult;
    /// A timer set by a stream element fired, for `ctx.current_key()`.
    fn on_timer(
        &mut self,
        _timestamp: i64,
        _ctx: &mut KeyedReadOnlyContext<'_, K>,
        _out: &mut Collector<'_, O>,
    ) -> FunctionResult {
        Ok(())
    }
    /// As [`BroadcastProcessFunction::broadcast_first`].
    fn broadcast_first(&self) -> bool {
        false
    }
}

/// A user sink (Flink's `SinkFunction`): receives every record of a stream.
pub trait Sink<T>: RichFunction + Clone + Send + Sync + 'static {
    fn invoke(&mut self, value: T) -> FunctionResult;
    /// All input has ended; flush what is buffered.
    fn finish(&mut self) -> FunctionResult {
        Ok(())
    }
    /// What the sink must hold alone, each named so that a person knows it (a Kafka
    /// sink's transactional ids, say): a JobManager refuses a job naming one that a
    /// running job holds, and a job naming one twice is invalid, instead of two writers
    /// fencing each other. Default: nothing.
    fn exclusive_resources(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What a [`SourceFunction::emit_batch`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStep {
    /// Emitted records; call again.
    More,
    /// Nothing available right now (waited a little); call again.
    Idle,
    /// Exhausted.
    Finished,
}

/// A user source: emits up to `max_records` per call, so that the task loop can take
/// control messages between batches. Keep positions in operator state (in
/// `initialize_state` / `snapshot_state`) to make the source replayable.
pub trait SourceFunction<T>: RichFunction + Clone + Send + Sync + 'static {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, T>) -> FunctionResult<SourceStep>;

    /// The records' event time, for a source that makes its own watermarks: the stream
    /// it starts has these timestamps (windows read them). Default: none.
    fn timestamps(&self) -> Option<crate::time::TimestampFn<T>> {
        None
    }

    /// A source that tracks event time itself (per split: Flink's per-split watermarks in
    /// `SourceOperator`) puts its watermark or its idleness here. Asked after every
    /// `emit_batch`; only a watermark higher than the last one goes downstream.
    fn emit_watermarks(&mut self, _output: &mut crate::time::WatermarkOutput) {}

    /// Called instead of `emit_batch` while watermark alignment holds the source back
    /// (its watermark ran ahead of its group's): emit nothing, but keep what the source
    /// reports fresh (a Kafka reader's consumer lag). Keep it short: checkpoints wait.
    /// Default: nothing.
    fn while_paused(&mut self) -> FunctionResult {
        Ok(())
    }

    /// The source's coordinator, which runs once per job with the JobMaster (a split
    /// enumerator: Flink's FLIP-27 `SplitEnumerator`): made anew for every attempt, and
    /// checkpointed with the job ([`eddy_runtime::coordination`]). Default: none.
    fn coordinator(&self) -> Option<eddy_runtime::coordination::CoordinatorProvider> {
        None
    }

    /// An event from the source's coordinator, taken between two batches, in order with
    /// checkpoints. Events to the coordinator go through
    /// [`RuntimeContext::operator_event_gateway`].
    fn handle_operator_event(&mut self, _event: &[u8]) -> FunctionResult {
        Ok(())
    }
}
