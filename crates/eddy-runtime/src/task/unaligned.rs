//! A task's side of unaligned checkpoints and of replaying their in-flight data: the
//! announcements its producers send, the snapshot it took and holds until its in-flight
//! data is complete, and the records it replays after a restore (see
//! [`super::in_flight`] for the protocol).

use super::context::TaskShared;
use super::gate::InputGate;
use super::in_flight::{self, Announcement, ChannelLayout, InFlightChannel, RecordedChannel, ReplayChannel};
use crate::channel::CheckpointBarrier;
use crate::error::TaskError;
use crate::output::Lifecycle;
use crate::writer::KeySelectorFactory;
use crossbeam_channel::Select;
use eddy_checkpoint::OperatorSnapshot;
use eddy_types::{assign_to_key_group, Watermark};
use std::collections::VecDeque;

/// The job's accumulator of the in-flight bytes its unaligned checkpoints stored, summed
/// over every subtask and checkpoint.
pub const IN_FLIGHT_BYTES: &str = "eddy.in-flight-bytes";

/// What a task keeps for unaligned checkpoints.
pub(super) struct UnalignedInputs {
    layout: ChannelLayout,
    /// The aligner's index of each input's first channel.
    offsets: Vec<usize>,
    /// Unaligned checkpoints are on: producers announce barriers.
    listening: bool,
    /// The snapshot taken when the current checkpoint went unaligned, written once every
    /// channel delivered its barrier.
    taken: Option<(CheckpointBarrier, Vec<OperatorSnapshot>)>,
}

impl UnalignedInputs {
    /// The task's layout (none for drivers built by hand, which take aligned checkpoints).
    pub(super) fn new(shared: &TaskShared, offsets: Vec<usize>) -> Option<Self> {
        let layout = shared.take_channel_layout()?;
        Some(Self { layout, offsets, listening: shared.unaligned().enabled, taken: None })
    }

    /// Whether a producer announced a barrier that is not taken yet (a cheap look, made
    /// between records).
    #[inline]
    pub(super) fn announced(&self) -> bool {
        self.listening && self.layout.inputs.iter().any(|input| !input.announcements.is_empty())
    }

    pub(super) fn listening(&self) -> bool {
        self.listening
    }

    /// The announcements waiting, by the aligner's channel index.
    pub(super) fn announcements(&self) -> Vec<(usize, CheckpointBarrier)> {
        let mut all = Vec::new();
        for (input, layout) in self.layout.inputs.iter().enumerate() {
            all.extend(
                layout
                    .announcements
                    .try_iter()
                    .map(|Announcement { channel, barrier }| (self.offsets[input] + channel, barrier)),
            );
        }
        all
    }

    /// The snapshot of an unaligned checkpoint, taken now; it is written by [`Self::finish`].
    pub(super) fn start(
        &mut self,
        head: &mut dyn Lifecycle,
        shared: &TaskShared,
        barrier: CheckpointBarrier,
    ) -> Result<(), TaskError> {
        if let Some((older, _)) = self.taken.take() {
            // A newer checkpoint's barrier came first: the older one cannot complete here.
            shared.decline(&older, "a newer checkpoint started before every barrier of this one arrived");
        }
        let mut snapshots = Vec::new();
        head.snapshot(&barrier, &mut snapshots)?;
        shared.check()?;
        tracing::debug!(checkpoint = barrier.id.0, "unaligned checkpoint: snapshot taken, recording in-flight records");
        self.taken = Some((barrier, snapshots));
        Ok(())
    }

    /// Every channel delivered the barrier: the snapshot goes out with the in-flight
    /// records and watermarks `recorded`.
    pub(super) fn finish(&mut self, shared: &TaskShared, recorded: Vec<RecordedChannel>) -> Result<(), TaskError> {
        let Some((barrier, mut snapshots)) = self.taken.take() else { return Ok(()) };
        let layout = &self.layout;
        let channels: Vec<InFlightChannel> = recorded
            .into_iter()
            .map(|RecordedChannel { input, channel, records, watermarks }| {
                let origin = &layout.inputs[input].origins[channel];
                InFlightChannel {
                    input: input as u8,
                    from_uid: origin.from_uid.clone(),
                    from_port: origin.from_port,
                    nth: origin.nth,
                    producer: origin.producer,
                    consumer: layout.subtask,
                    consumer_parallelism: layout.parallelism,
                    records,
                    producer_parallelism: origin.producers,
                    watermarks,
                }
            })
            .collect();
        let bytes: usize = channels.iter().map(|c| c.records.len()).sum();
        tracing::debug!(
            checkpoint = barrier.id.0,
            channels = channels.len(),
            bytes,
            "unaligned checkpoint: in-flight records complete"
        );
        shared.long_counter(IN_FLIGHT_BYTES).fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
        in_flight::attach(&mut snapshots, layout, channels)
            .map_err(|message| TaskError::StateBackend { operator: layout.head_name.clone(), message })?;
        shared.acknowledge(&barrier, snapshots);
        Ok(())
    }

    /// Drops the snapshot held for a checkpoint the aligner no longer works on (declined or
    /// aborted); says whether there was one, so that the caller drops what it recorded.
    pub(super) fn abandon_unless(&mut self, current: Option<CheckpointBarrier>) -> bool {
        match &self.taken {
            Some((barrier, _)) if current != Some(*barrier) => {
                self.taken = None;
                true
            }
            _ => false,
        }
    }

    /// Input `input`'s counts of batches held beyond the queues, for its gate.
    pub(super) fn take_backlogs(&mut self, input: usize) -> Vec<super::in_flight::Backlog> {
        self.layout.inputs.get_mut(input).map(|i| std::mem::take(&mut i.backlogs)).unwrap_or_default()
    }

    /// The records to replay into input `input` before any other input.
    pub(super) fn take_replay(&mut self, input: usize) -> Vec<ReplayChannel> {
        let (mine, rest) = std::mem::take(&mut self.layout.replay).into_iter().partition(|r| r.input == input);
        self.layout.replay = rest;
        mine
    }

    /// Watches the announcements too, so that an idle task wakes for them.
    pub(super) fn watch<'a>(&'a self, select: &mut Select<'a>) {
        if self.listening {
            for input in &self.layout.inputs {
                select.recv(&input.announcements);
            }
        }
    }

    pub(super) fn head_name(&self) -> &str {
        &self.layout.head_name
    }
}

/// What a replay hands its task: a record of input 1 or 2, or a watermark of a channel
/// (by the valve's index).
pub(super) enum Replayed<A, B> {
    First(A),
    Second(B),
    Watermark { channel: usize, watermark: Watermark },
}

/// One old channel's in-flight data, decoded, in order.
pub(super) struct ReplayQueue<T> {
    items: VecDeque<Item<T>>,
    /// The valve's index of the channel its watermarks go to.
    channel: usize,
}

enum Item<T> {
    Record(T),
    Watermark(Watermark),
}

impl<T> ReplayQueue<T> {
    fn next_record(&mut self) -> Option<T> {
        match self.items.front()? {
            Item::Record(_) => match self.items.pop_front() {
                Some(Item::Record(record)) => Some(record),
                _ => None,
            },
            Item::Watermark(_) => None,
        }
    }

    /// Takes the watermark at the head; the valve's channel it is for.
    fn take_watermark(&mut self) -> usize {
        self.items.pop_front();
        self.channel
    }

    fn next_watermark(&self) -> Option<Watermark> {
        match self.items.front()? {
            Item::Watermark(watermark) => Some(*watermark),
            Item::Record(_) => None,
        }
    }
}

/// Decodes the in-flight data of an input's restored channels, keeping only this
/// subtask's key groups where a channel says so; the watermarks go to the valve's
/// channel `offset + channel`.
pub(super) fn decode_replay<T: 'static>(
    gate: &InputGate<T>,
    channels: Vec<ReplayChannel>,
    offset: usize,
    operator: &str,
) -> Result<Vec<ReplayQueue<T>>, TaskError> {
    // Every restart would read the same bytes: the job fails at once (see `TaskError`).
    let fail = |message: String| TaskError::StateUnreadable { operator: operator.to_string(), message };
    let mut queues = Vec::with_capacity(channels.len());
    for channel in channels {
        let records = match channel.records.is_empty() {
            true => Vec::new(),
            false => gate.decode(&channel.records).map_err(|e| fail(format!("undecodable in-flight records: {e}")))?,
        };
        if let Some(last) = channel.watermarks.last().filter(|w| w.after as usize > records.len()) {
            return Err(fail(format!(
                "corrupt in-flight data: a watermark after record {} of a channel that holds {}",
                last.after,
                records.len()
            )));
        }
        let mut selector = match &channel.key_filter {
            None => None,
            Some(filter) => {
                let factory = filter
                    .selector
                    .downcast_ref::<KeySelectorFactory<T>>()
                    .ok_or_else(|| fail("in-flight records of another type than the input's key selector".into()))?;
                Some((factory(), filter))
            }
        };
        let mut items = VecDeque::with_capacity(records.len() + channel.watermarks.len());
        let mut watermarks = channel.watermarks.iter().peekable();
        for (at, record) in records.into_iter().enumerate() {
            while let Some(w) = watermarks.next_if(|w| w.after as usize <= at) {
                items.push_back(Item::Watermark(Watermark(w.watermark)));
            }
            let kept = match &mut selector {
                None => true,
                Some((selector, filter)) => {
                    filter.range.contains(assign_to_key_group(selector.key_hash(&record), filter.max_parallelism))
                }
            };
            if kept {
                items.push_back(Item::Record(record));
            }
        }
        items.extend(watermarks.map(|w| Item::Watermark(Watermark(w.watermark))));
        queues.push(ReplayQueue { items, channel: offset + channel.channel });
    }
    Ok(queues)
}

/// Replays decoded in-flight data into `process`: each channel in its order, the
/// channels interleaved as if they had moved on together in event time. Every record
/// before its channel's next watermark goes first; then the lowest watermark a channel
/// is at, and so on. Any interleaving is one that a run without failure could have
/// taken; this one holds records back behind a channel's high watermark only once every
/// other channel got as far (the input's watermark is the minimum of its channels').
/// Returns the count of records replayed.
pub(super) fn replay<A, B>(
    mut first: Vec<ReplayQueue<A>>,
    mut second: Vec<ReplayQueue<B>>,
    mut process: impl FnMut(Replayed<A, B>) -> Result<(), TaskError>,
) -> Result<usize, TaskError> {
    let mut replayed = 0;
    loop {
        for queue in &mut first {
            while let Some(record) = queue.next_record() {
                replayed += 1;
                process(Replayed::First(record))?;
            }
        }
        for queue in &mut second {
            while let Some(record) = queue.next_record() {
                replayed += 1;
                process(Replayed::Second(record))?;
            }
        }
        // Each queue's head is a watermark now, or the queue is done.
        let heads = first.iter().enumerate().map(|(at, q)| (q.next_watermark(), 0, at));
        let heads = heads.chain(second.iter().enumerate().map(|(at, q)| (q.next_watermark(), 1, at)));
        let Some((watermark, input, at)) = heads.filter_map(|(w, input, at)| Some((w?, input, at))).min() else {
            break;
        };
        let channel = match input {
            0 => first[at].take_watermark(),
            _ => second[at].take_watermark(),
        };
        process(Replayed::Watermark { channel, watermark })?;
    }
    Ok(replayed)
}
