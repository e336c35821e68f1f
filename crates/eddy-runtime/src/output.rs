//! [`Output`]: where an operator puts its records. A chained operator is the `Output` of
//! the one before it; a record writer is the `Output` at the end of a chain. Every one of
//! them, and every chain head, has the one [`Lifecycle`].

use crate::channel::{CheckpointBarrier, CheckpointEvent};
use eddy_checkpoint::OperatorSnapshot;
use eddy_types::KeyHash;
use eddy_types::{Watermark, WatermarkStatus};

/// The lifecycle of an operator, and through it of everything downstream in its chain:
/// what every chain member, record writer, chain head and erased port answers to. One
/// trait, forwarded through boxes by one impl, so that a new kind of stream element (a
/// watermark) is one method here and in the operators that react to it.
pub trait Lifecycle {
    /// Opens everything downstream, then this operator (Flink opens tail first, so that a
    /// function may emit in `open`).
    fn open(&mut self) -> Result<(), crate::TaskError>;
    /// Pushes partial batches downstream (input idle or flush interval passed).
    fn flush(&mut self) -> Result<(), crate::TaskError>;
    /// All input has ended: finish this operator, then tell downstream.
    fn end_input(&mut self) -> Result<(), crate::TaskError>;
    /// Releases resources; called on success and on failure.
    fn close(&mut self);
    /// Adds this operator's snapshot for `barrier` to `snapshots` (the synchronous part),
    /// then passes the barrier on: writers send it downstream behind their records.
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), crate::TaskError>;
    /// A checkpoint completed everywhere (two-phase-commit sinks commit here), or was
    /// aborted.
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), crate::TaskError>;
    /// Event time reached `watermark` at this operator's input: it reacts (fires what is
    /// due), then passes it on; writers send it on every channel, behind their records.
    fn on_watermark(&mut self, watermark: Watermark) -> Result<(), crate::TaskError>;
    /// The input went idle or active again (see [`WatermarkStatus`]): passed on as is.
    fn on_watermark_status(&mut self, status: WatermarkStatus) -> Result<(), crate::TaskError>;
    /// Processing time reached `now_ms` (the task's wall clock, epoch ms; the simulated
    /// clock under simulation) and some operator of the chain asked to hear about it
    /// ([`crate::task::TaskShared::request_processing_time`]): each fires what is due and
    /// passes it on down the chain. Writers stop it: processing time is per task.
    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), crate::TaskError>;
    /// An event from the operator's coordinator ([`crate::coordination`]); only heads of
    /// operators that have one receive any.
    fn handle_operator_event(&mut self, _event: Vec<u8>) -> Result<(), crate::TaskError> {
        Ok(())
    }
}

impl<L: Lifecycle + ?Sized> Lifecycle for Box<L> {
    fn open(&mut self) -> Result<(), crate::TaskError> {
        (**self).open()
    }
    fn handle_operator_event(&mut self, event: Vec<u8>) -> Result<(), crate::TaskError> {
        (**self).handle_operator_event(event)
    }
    fn flush(&mut self) -> Result<(), crate::TaskError> {
        (**self).flush()
    }
    fn end_input(&mut self) -> Result<(), crate::TaskError> {
        (**self).end_input()
    }
    fn close(&mut self) {
        (**self).close()
    }
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), crate::TaskError> {
        (**self).snapshot(barrier, snapshots)
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), crate::TaskError> {
        (**self).notify_checkpoint(event)
    }
    fn on_watermark(&mut self, watermark: Watermark) -> Result<(), crate::TaskError> {
        (**self).on_watermark(watermark)
    }
    fn on_watermark_status(&mut self, status: WatermarkStatus) -> Result<(), crate::TaskError> {
        (**self).on_watermark_status(status)
    }
    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), crate::TaskError> {
        (**self).on_processing_time(now_ms)
    }
}

/// Receives records of type `T`, and the lifecycle of the chain behind it.
///
/// `collect` is infallible on purpose: it runs once per record, and an error there (a user
/// function's) is put into the task's failure slot, which the task loop checks after each
/// batch. The lifecycle calls return errors directly.
pub trait Output<T>: Lifecycle {
    fn collect(&mut self, record: T);
    /// Collects the records of a batch in order, from the front of `records`, until it is
    /// empty or `stop(collected so far)` says to stop; what is left stays in `records`, and
    /// the driver puts it back into the input (a failure may end the batch early too: the
    /// task then fails at the driver's next check). An operator may take the batch in
    /// passes: a keyed operator encodes, hashes and prefetches the keys of some records,
    /// then runs its function on each of them. `_hashes` are the hashes of all the
    /// records' keys, in order, as the writer of a key-partitioned edge computed them (see
    /// [`crate::channel::StreamMessage::HashedRecords`]); empty when not known.
    #[inline]
    fn collect_batch(
        &mut self,
        records: &mut std::vec::Drain<'_, T>,
        _hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
    ) {
        each_record(records, stop, |record| self.collect(record))
    }
}

/// Hands the records of a batch to `each` one at a time, in order, until the batch is
/// empty, or `stop(handed so far)` says to stop, or `each` fails: the batch operations of
/// operators that gain nothing from seeing the batch whole. What is left stays in `records`.
#[inline]
pub fn try_each_record<T, E>(
    records: &mut std::vec::Drain<'_, T>,
    stop: &mut dyn FnMut(usize) -> bool,
    mut each: impl FnMut(T) -> Result<(), E>,
) -> Result<(), E> {
    let mut handed = 0;
    for record in records.by_ref() {
        each(record)?;
        handed += 1;
        if stop(handed) {
            break;
        }
    }
    Ok(())
}

/// [`try_each_record`] with an `each` that cannot fail.
#[inline]
pub fn each_record<T>(
    records: &mut std::vec::Drain<'_, T>,
    stop: &mut dyn FnMut(usize) -> bool,
    mut each: impl FnMut(T),
) {
    let handed: Result<(), std::convert::Infallible> = try_each_record(records, stop, |record| {
        each(record);
        Ok(())
    });
    match handed {
        Ok(()) => {}
        Err(never) => match never {},
    }
}

impl<T> Output<T> for Box<dyn Output<T>> {
    #[inline]
    fn collect(&mut self, record: T) {
        (**self).collect(record)
    }
    #[inline]
    fn collect_batch(
        &mut self,
        records: &mut std::vec::Drain<'_, T>,
        hashes: &[KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
    ) {
        (**self).collect_batch(records, hashes, stop)
    }
}

/// Sends each record to several outputs (a stream consumed by more than one operator).
pub struct FanOut<T> {
    outputs: Vec<Box<dyn Output<T>>>,
}

impl<T> FanOut<T> {
    pub fn new(outputs: Vec<Box<dyn Output<T>>>) -> Self {
        Self { outputs }
    }
}

impl<T: Clone> Output<T> for FanOut<T> {
    fn collect(&mut self, record: T) {
        if let Some((last, rest)) = self.outputs.split_last_mut() {
            for output in rest {
                output.collect(record.clone());
            }
            last.collect(record);
        }
    }
}

impl<T> Lifecycle for FanOut<T> {
    fn open(&mut self) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.open())
    }
    fn flush(&mut self) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.flush())
    }
    fn end_input(&mut self) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.end_input())
    }
    fn close(&mut self) {
        self.outputs.iter_mut().for_each(|o| o.close())
    }
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.snapshot(barrier, snapshots))
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.notify_checkpoint(event))
    }
    fn on_watermark(&mut self, watermark: Watermark) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.on_watermark(watermark))
    }
    fn on_watermark_status(&mut self, status: WatermarkStatus) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.on_watermark_status(status))
    }
    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), crate::TaskError> {
        self.outputs.iter_mut().try_for_each(|o| o.on_processing_time(now_ms))
    }
}

/// The output of a port nobody consumes (an unused side output).
pub struct Discard;

impl<T> Output<T> for Discard {
    fn collect(&mut self, _record: T) {}
}

impl Lifecycle for Discard {
    fn open(&mut self) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn flush(&mut self) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn end_input(&mut self) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn close(&mut self) {}
    fn snapshot(
        &mut self,
        _barrier: &CheckpointBarrier,
        _snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn notify_checkpoint(&mut self, _event: CheckpointEvent) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn on_watermark(&mut self, _watermark: Watermark) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn on_watermark_status(&mut self, _status: WatermarkStatus) -> Result<(), crate::TaskError> {
        Ok(())
    }
    fn on_processing_time(&mut self, _now_ms: i64) -> Result<(), crate::TaskError> {
        Ok(())
    }
}

/// What a user function emits records into (Flink's `Collector`).
pub struct Collector<'a, T> {
    output: &'a mut dyn Output<T>,
}

impl<'a, T> Collector<'a, T> {
    pub fn new(output: &'a mut dyn Output<T>) -> Self {
        Self { output }
    }

    /// Emits one record downstream.
    #[inline]
    pub fn collect(&mut self, record: T) {
        self.output.collect(record)
    }
}

/// An output port with its record type erased: the lifecycle can be driven without the
/// type, records need a downcast to [`TypedOutput`] (done once, when a chain is built).
pub trait PortOutput: Lifecycle {
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
    /// The name of the record type, for messages.
    fn record_type(&self) -> &'static str;
}

/// The typed output behind a [`PortOutput`].
pub struct TypedOutput<T>(pub Box<dyn Output<T>>);

impl<T: 'static> TypedOutput<T> {
    /// Erases a typed output.
    pub fn erase(output: Box<dyn Output<T>>) -> Box<dyn PortOutput> {
        Box::new(TypedOutput(output))
    }

    /// Takes the typed output back out of an erased one.
    pub fn unerase(erased: Box<dyn PortOutput>) -> Box<dyn Output<T>> {
        match erased.into_any().downcast::<TypedOutput<T>>() {
            Ok(typed) => typed.0,
            Err(_) => panic!("output port is not of type {} (bug in graph building)", std::any::type_name::<T>()),
        }
    }
}

impl<T: 'static> PortOutput for TypedOutput<T> {
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
    fn record_type(&self) -> &'static str {
        std::any::type_name::<T>()
    }
}

impl<T> Lifecycle for TypedOutput<T> {
    fn open(&mut self) -> Result<(), crate::TaskError> {
        self.0.open()
    }
    fn flush(&mut self) -> Result<(), crate::TaskError> {
        self.0.flush()
    }
    fn end_input(&mut self) -> Result<(), crate::TaskError> {
        self.0.end_input()
    }
    fn close(&mut self) {
        self.0.close()
    }
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), crate::TaskError> {
        self.0.snapshot(barrier, snapshots)
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), crate::TaskError> {
        self.0.notify_checkpoint(event)
    }
    fn on_watermark(&mut self, watermark: Watermark) -> Result<(), crate::TaskError> {
        self.0.on_watermark(watermark)
    }
    fn on_watermark_status(&mut self, status: WatermarkStatus) -> Result<(), crate::TaskError> {
        self.0.on_watermark_status(status)
    }
    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), crate::TaskError> {
        self.0.on_processing_time(now_ms)
    }
}
