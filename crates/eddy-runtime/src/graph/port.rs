//! [`PortType`]: everything the runtime must do with one record type, made by the API
//! where the type is known, called by the runtime where it is not.

use super::Partitioning;
use crate::channel::{BatchReceiver, BatchSender, ChannelCapacity};
use crate::network::{
    ChannelKey, InboundChannel, LostReason, OutboundChannel, Overtaking, RemoteInputChannel, TypedInbound,
    TypedOutbound,
};
use crate::output::{Discard, FanOut, PortOutput, TypedOutput};
use crate::task::in_flight::{Announcement, AnnouncementTarget};
use crate::task::InputChannel;
use crate::task::{MailboxReceiver, OneInputDriver, TaskDriver, TaskShared};
use crate::writer::{KeySelectorFactory, Partitioner, RecordWriter};
use crossbeam_channel::Sender;
use eddy_types::MaxParallelism;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;
use std::marker::PhantomData;
use std::rc::Rc;

/// A value whose type only the code that made it knows, on the subtask's thread.
pub type Erased = Box<dyn Any>;
/// An output (or a chained operator, which is its predecessor's output), type erased.
pub type ErasedOutput = Box<dyn PortOutput>;
/// The same, for values handed from the executor to a subtask's thread.
pub type ErasedSend = Box<dyn Any + Send>;

/// A subtask's writer for one edge: its channel into each target subtask.
pub struct WriterTargets {
    /// One channel per target subtask.
    pub senders: Vec<ErasedSend>,
    /// Per target, the batches in flight beyond its queue: a network channel's credits.
    pub credits: Vec<usize>,
    /// Per target, where unaligned checkpoints' barriers are announced: the consumer's
    /// input in this process, or the network channel's sender, which tells the consumer.
    pub announce: Vec<Option<AnnouncementTarget>>,
}

/// The type-specific work of one stream type.
pub trait PortType: Send + Sync {
    fn type_name(&self) -> &'static str;
    /// A channel: (`BatchSender<T>`, `BatchReceiver<T>`).
    fn channel(&self, capacity: ChannelCapacity) -> (ErasedSend, ErasedSend);
    /// A `Box<dyn Output<T>>` that writes into `targets`.
    fn writer(
        &self,
        targets: WriterTargets,
        partitioning: &Partitioning,
        producer_subtask: u32,
        max_parallelism: MaxParallelism,
        shared: Rc<TaskShared>,
    ) -> ErasedOutput;
    /// One output feeding several.
    fn fan_out(&self, outputs: Vec<ErasedOutput>) -> ErasedOutput;
    /// An output that drops everything.
    fn discard(&self) -> ErasedOutput;
    /// The network end of a channel's producer side: encodes what `receiver` (a
    /// `BatchReceiver<T>`) gets into frames; `one_batch_per_frame` (buffer debloating)
    /// keeps a frame, which costs one credit, to one (debloated) batch; with `overtaking`,
    /// unaligned checkpoints' barriers overtake the queue.
    fn outbound(
        &self,
        receiver: ErasedSend,
        one_batch_per_frame: bool,
        overtaking: Option<Overtaking>,
    ) -> Box<dyn OutboundChannel>;
    /// A channel's consumer side: the network end that decodes frames into `sender` (a
    /// `BatchSender<T>`), and the input channel the consumer reads them from, `receiver`
    /// (a `BatchReceiver<T>`) returning credits to `credits`. With `announce` (the input's
    /// announcements and the channel's index there), it hears overtaking barriers.
    fn remote_channel(
        &self,
        queue: (ErasedSend, ErasedSend),
        key: ChannelKey,
        credits: Sender<ChannelKey>,
        lost: LostReason,
        announce: Option<(Sender<Announcement>, usize)>,
    ) -> (Box<dyn InboundChannel>, ErasedSend);
    /// The driver of a chain whose head (a `Box<dyn Output<T>>`) reads this type from
    /// `channels` (one per producer subtask).
    fn one_input_driver(
        &self,
        channels: Vec<ErasedSend>,
        head: ErasedOutput,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
    ) -> Box<dyn TaskDriver>;
}

/// The [`PortType`] of records of type `T`.
pub struct TypedPort<T>(PhantomData<fn() -> T>);

impl<T> TypedPort<T> {
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for TypedPort<T> {
    fn default() -> Self {
        Self::new()
    }
}

const WRONG_TYPE: &str = "a port was given a value of another type (bug in graph building)";

/// Downcasts erased input channels: in-process receivers, or network channels.
pub fn receivers_of<T: 'static + Send>(erased: Vec<ErasedSend>) -> Vec<Box<dyn InputChannel<T>>> {
    erased
        .into_iter()
        .map(|r| match r.downcast::<BatchReceiver<T>>() {
            Ok(receiver) => Box::new(*receiver) as Box<dyn InputChannel<T>>,
            Err(other) => *other.downcast::<Box<dyn InputChannel<T>>>().expect(WRONG_TYPE),
        })
        .collect()
}

impl<T: Clone + Send + Serialize + DeserializeOwned + 'static> PortType for TypedPort<T> {
    fn type_name(&self) -> &'static str {
        std::any::type_name::<T>()
    }

    fn channel(&self, capacity: ChannelCapacity) -> (ErasedSend, ErasedSend) {
        let (tx, rx) = capacity.channel::<T>();
        (Box::new(tx), Box::new(rx))
    }

    fn writer(
        &self,
        targets: WriterTargets,
        partitioning: &Partitioning,
        producer_subtask: u32,
        max_parallelism: MaxParallelism,
        shared: Rc<TaskShared>,
    ) -> ErasedOutput {
        let WriterTargets { senders: targets, credits, announce } = targets;
        let targets: Vec<BatchSender<T>> =
            targets.into_iter().map(|t| *t.downcast::<BatchSender<T>>().expect(WRONG_TYPE)).collect();
        let partitioner = match partitioning {
            Partitioning::Forward => Partitioner::Forward,
            Partitioning::Rebalance => Partitioner::Rebalance { next: producer_subtask as usize % targets.len() },
            Partitioning::Shuffle => {
                Partitioner::Shuffle { state: 0x9E37_79B9_7F4A_7C15 ^ u64::from(producer_subtask + 1) }
            }
            Partitioning::Broadcast => Partitioner::Broadcast,
            Partitioning::KeyGroups(factory) => {
                let factory = factory.downcast_ref::<KeySelectorFactory<T>>().expect(WRONG_TYPE);
                Partitioner::KeyGroups { selector: factory(), max_parallelism }
            }
        };
        TypedOutput::<T>::erase(Box::new(
            RecordWriter::new(targets, &credits, partitioner, shared).announcing(announce),
        ))
    }

    fn fan_out(&self, outputs: Vec<ErasedOutput>) -> ErasedOutput {
        TypedOutput::<T>::erase(Box::new(FanOut::new(outputs.into_iter().map(TypedOutput::<T>::unerase).collect())))
    }

    fn discard(&self) -> ErasedOutput {
        TypedOutput::<T>::erase(Box::new(Discard))
    }

    fn outbound(
        &self,
        receiver: ErasedSend,
        one_batch_per_frame: bool,
        overtaking: Option<Overtaking>,
    ) -> Box<dyn OutboundChannel> {
        let queue = *receiver.downcast::<BatchReceiver<T>>().expect(WRONG_TYPE);
        let mut outbound = TypedOutbound::new(queue);
        if one_batch_per_frame {
            outbound = outbound.one_batch_per_frame();
        }
        if let Some(overtaking) = overtaking {
            outbound = outbound.overtaking(overtaking);
        }
        Box::new(outbound)
    }

    fn remote_channel(
        &self,
        (sender, receiver): (ErasedSend, ErasedSend),
        key: ChannelKey,
        credits: Sender<ChannelKey>,
        lost: LostReason,
        announce: Option<(Sender<Announcement>, usize)>,
    ) -> (Box<dyn InboundChannel>, ErasedSend) {
        let mut inbound = TypedInbound::new(*sender.downcast::<BatchSender<T>>().expect(WRONG_TYPE));
        let receiver = *receiver.downcast::<BatchReceiver<T>>().expect(WRONG_TYPE);
        let mut input = RemoteInputChannel::new(receiver, key, credits, lost);
        if let Some((inbox, channel)) = announce {
            let (overtaken_tx, overtaken_rx) = crossbeam_channel::unbounded();
            inbound = inbound.overtaken_by_barriers(inbox, channel, overtaken_tx);
            input = input.with_overtaken(overtaken_rx);
        }
        let input: Box<dyn InputChannel<T>> = Box::new(input);
        (Box::new(inbound), Box::new(input))
    }

    fn one_input_driver(
        &self,
        channels: Vec<ErasedSend>,
        head: ErasedOutput,
        mailbox: MailboxReceiver,
        shared: Rc<TaskShared>,
    ) -> Box<dyn TaskDriver> {
        Box::new(OneInputDriver::from_channels(
            receivers_of::<T>(channels),
            TypedOutput::<T>::unerase(head),
            mailbox,
            shared,
        ))
    }
}
