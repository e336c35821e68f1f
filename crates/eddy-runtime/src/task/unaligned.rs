//! A task's side of unaligned checkpoints and of replaying their in-flight data: the
//! announcements its producers send, the snapshot it took and holds until its in-flight
//! data is complete, and the records it replays after a restore (see
//! [`super::in_flight`] for the protocol).

use super::alignment::{Alignment, BarrierAligner};
use super::context::TaskShared;
use super::gate::{InputGate, Overtook, ReadAhead};
use super::in_flight::{self, Announcement, ChannelLayout, InFlightChannel, RecordedChannel, ReplayChannel};
use super::metrics::{AlignmentTimer, TaskCounters};
use super::watermarks::WatermarkValve;
use super::MailboxReceiver;
use crate::channel::CheckpointBarrier;
use crate::error::TaskError;
use crate::output::Lifecycle;
use crate::writer::KeySelectorFactory;
use crossbeam_channel::Select;
use eddy_checkpoint::{CheckpointId, OperatorSnapshot};
use eddy_types::{assign_to_key_group, Watermark};
use std::collections::VecDeque;
use std::time::Duration;

/// How long a task with unaligned checkpoints waits at most for room downstream before it
/// looks at its mailbox and announcements again.
const ROOM_WAIT: Duration = Duration::from_millis(1);

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

/// Waits a little for room downstream (the task takes no input meanwhile), counted as
/// backpressure; returns early for a control message or an announcement.
pub(super) fn wait_for_room(shared: &TaskShared, mailbox: &MailboxReceiver, unaligned: Option<&UnalignedInputs>) {
    let since = std::time::Instant::now();
    let mut select = Select::new();
    select.recv(mailbox);
    if let Some(unaligned) = unaligned {
        unaligned.watch(&mut select);
    }
    let _ = select.ready_timeout(ROOM_WAIT);
    shared.counters().add_backpressured(since.elapsed());
}

/// A task's input gates, by the aligner's channel index: one gate, or both of a
/// two-input task.
pub(super) trait Gates {
    fn channels(&self) -> usize;
    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError>;
    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook;
    fn discard_overtaken(&self, done: CheckpointId);
    fn keep_overtaken(&mut self, channel: usize, keep: bool);
    fn stop_recording(&mut self, channel: usize);
    /// Drops what was recorded, and records the channels `recorded` names from now on,
    /// every channel from the watermark it `reached`.
    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>);
    /// Drops what was recorded (a checkpoint abandoned).
    fn clear_recorded(&mut self);
    /// What was recorded, per channel of each input.
    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String>;
}

impl<T> Gates for InputGate<T> {
    fn channels(&self) -> usize {
        self.len()
    }

    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        InputGate::read_ahead(self, channel)
    }

    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        InputGate::overtook(self, channel, barrier)
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        InputGate::discard_overtaken(self, done)
    }

    fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        InputGate::keep_overtaken(self, channel, keep)
    }

    fn stop_recording(&mut self, channel: usize) {
        InputGate::stop_recording(self, channel)
    }

    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        self.clear_recorded();
        self.start_recording(recorded, reached);
    }

    fn clear_recorded(&mut self) {
        InputGate::clear_recorded(self)
    }

    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        InputGate::take_recorded(self)
    }
}

impl<G: Gates + ?Sized> Gates for &mut G {
    fn channels(&self) -> usize {
        (**self).channels()
    }

    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        (**self).read_ahead(channel)
    }

    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        (**self).overtook(channel, barrier)
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        (**self).discard_overtaken(done)
    }

    fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        (**self).keep_overtaken(channel, keep)
    }

    fn stop_recording(&mut self, channel: usize) {
        (**self).stop_recording(channel)
    }

    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        (**self).restart_recording(recorded, reached)
    }

    fn clear_recorded(&mut self) {
        (**self).clear_recorded()
    }

    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        (**self).take_recorded()
    }
}

/// Both gates of a two-input task: input 1's channels, then input 2's.
pub(super) struct BothGates<'a, A, B> {
    pub(super) first: &'a mut InputGate<A>,
    pub(super) second: &'a mut InputGate<B>,
}

impl<A, B> Gates for BothGates<'_, A, B> {
    fn channels(&self) -> usize {
        self.first.len() + self.second.len()
    }

    fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        match channel.checked_sub(self.first.len()) {
            None => self.first.read_ahead(channel),
            Some(second) => self.second.read_ahead(second),
        }
    }

    fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        match channel.checked_sub(self.first.len()) {
            None => self.first.overtook(channel, barrier),
            Some(second) => self.second.overtook(second, barrier),
        }
    }

    fn discard_overtaken(&self, done: CheckpointId) {
        self.first.discard_overtaken(done);
        self.second.discard_overtaken(done);
    }

    fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        match channel.checked_sub(self.first.len()) {
            None => self.first.keep_overtaken(channel, keep),
            Some(second) => self.second.keep_overtaken(second, keep),
        }
    }

    fn stop_recording(&mut self, channel: usize) {
        match channel.checked_sub(self.first.len()) {
            None => self.first.stop_recording(channel),
            Some(second) => self.second.stop_recording(second),
        }
    }

    fn restart_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        let offset = self.first.len();
        Gates::restart_recording(self.first, recorded, reached);
        Gates::restart_recording(self.second, &|c| recorded(offset + c), &|c| reached(offset + c));
    }

    fn clear_recorded(&mut self) {
        self.first.clear_recorded();
        self.second.clear_recorded();
    }

    fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        let mut recorded = Gates::take_recorded(self.first)?;
        let second = Gates::take_recorded(self.second)?;
        recorded.extend(second.into_iter().map(|channel| RecordedChannel { input: 1, ..channel }));
        Ok(recorded)
    }
}

/// What a driver lends for one call of the checkpoint machinery that every multi-input
/// driver shares: barriers, announcements, the aligned timeout, reading ahead, room.
pub(super) struct Checkpointing<'a, G> {
    pub(super) aligner: &'a mut BarrierAligner,
    pub(super) gates: G,
    pub(super) head: &'a mut dyn Lifecycle,
    pub(super) shared: &'a TaskShared,
    pub(super) mailbox: &'a MailboxReceiver,
    pub(super) timer: &'a mut AlignmentTimer,
    pub(super) counters: &'a TaskCounters,
    pub(super) unaligned: Option<&'a mut UnalignedInputs>,
    /// The task's watermark valve, by the aligner's channel index: where each recorded
    /// channel's watermark starts.
    pub(super) watermarks: &'a WatermarkValve,
}

impl<G: Gates> Checkpointing<'_, G> {
    /// Gives up `barrier`'s checkpoint here (and every older one) and tells the
    /// coordinator why; not a failure (Flink's "task not ready").
    pub(super) fn decline(&mut self, barrier: &CheckpointBarrier, reason: &str) {
        self.aligner.decline(barrier.id);
        self.shared.decline(barrier, reason);
    }

    /// A barrier on `channel` (read in order or ahead).
    pub(super) fn on_barrier(&mut self, channel: usize, barrier: CheckpointBarrier) -> Result<(), TaskError> {
        let first = self.aligner.current().is_none_or(|current| current.id < barrier.id);
        let overtook = self.gates.overtook(channel, &barrier);
        if overtook == Overtook::Watermarks && self.aligner.loses_overtaken(&barrier) {
            // Taken aligned here: an aligned checkpoint stores no watermark, so leaving
            // these out loses nothing it would have kept.
            self.gates.keep_overtaken(channel, false);
        } else if overtook != Overtook::Nothing {
            if self.aligner.loses_overtaken(&barrier) {
                // Never complete it without them: the restore would miss them.
                const REASON: &str = "its barrier overtook records at the producer, and this task takes it aligned \
                                      (unaligned checkpoints are configured differently here)";
                tracing::warn!(checkpoint = barrier.id.0, "checkpoint declined: {REASON}");
                self.decline(&barrier, REASON);
            }
            // Records (or watermarks) its producer counts as sent come behind this barrier:
            // the checkpoint is unaligned here (snapshotted now if it was not), and they are
            // in flight, whichever way the barrier was read and whatever the task heard before.
            let alignment = self.aligner.force_unaligned(barrier, std::time::Instant::now());
            self.on_alignment(alignment)?;
            let taken = self.aligner.is_unaligned() && self.aligner.current() == Some(barrier);
            self.gates.keep_overtaken(channel, taken);
        }
        let alignment = self.aligner.on_barrier(channel, barrier);
        let complete = matches!(alignment, Alignment::Complete(_) | Alignment::Unaligned { finish: true, .. });
        self.timer.on_barrier(first, complete, self.counters);
        if !self.aligner.is_recording(channel) {
            self.gates.stop_recording(channel);
        }
        self.on_alignment(alignment)
    }

    /// Snapshots when the alignment says so: aligned at once; unaligned when it starts,
    /// written when its in-flight records are complete.
    pub(super) fn on_alignment(&mut self, alignment: Alignment) -> Result<(), TaskError> {
        let (barrier, start, finish) = match alignment {
            Alignment::Pending => return Ok(()),
            Alignment::Complete(barrier) => {
                return super::driver::snapshot_and_acknowledge(self.head, self.shared, &barrier)
            }
            Alignment::Unaligned { barrier, start, finish } => (barrier, start, finish),
        };
        let unaligned = self.unaligned.as_deref_mut().expect("unaligned checkpoints only with a channel layout");
        if start {
            unaligned.start(self.head, self.shared, barrier)?;
            let (aligner, watermarks) = (&*self.aligner, self.watermarks);
            self.gates.restart_recording(&|c| aligner.is_recording(c), &|c| watermarks.reached(c).map(|w| w.0));
        }
        if finish {
            let name = unaligned.head_name().to_string();
            let recorded = self.gates.take_recorded().map_err(|message| TaskError::StateBackend {
                operator: name,
                message: format!("cannot encode in-flight records: {message}"),
            })?;
            unaligned.finish(self.shared, recorded)?;
        }
        Ok(())
    }

    /// Reads the channels of an unaligned checkpoint ahead to their barriers.
    pub(super) fn read_ahead(&mut self) -> Result<(), TaskError> {
        for channel in 0..self.gates.channels() {
            if self.aligner.reads_ahead(channel) {
                if let ReadAhead::Barrier(barrier) = self.gates.read_ahead(channel)? {
                    self.on_barrier(channel, barrier)?;
                }
            }
        }
        Ok(())
    }

    /// Unaligned checkpoints' work before the next batch: announcements, the aligned
    /// timeout, channels read ahead to their barriers, and no input without room
    /// downstream (`Some` then: the step is over). `declining`: the task cannot take part
    /// in checkpoints now (it reads one input to its end first) and says why.
    pub(super) fn step(&mut self, declining: Option<&str>) -> Result<Option<super::StepResult>, TaskError> {
        let Some(unaligned) = self.unaligned.as_deref_mut() else { return Ok(None) };
        if unaligned.abandon_unless(self.aligner.current()) {
            self.gates.clear_recorded();
        }
        if !unaligned.listening() {
            return Ok(None);
        }
        let now = std::time::Instant::now();
        for (channel, barrier) in unaligned.announcements() {
            if let Some(reason) = declining {
                if self.aligner.current().is_none_or(|current| current.id <= barrier.id) {
                    self.decline(&barrier, reason);
                }
                continue;
            }
            // An announcement starts a checkpoint's alignment as a barrier does (metrics).
            let first = self.aligner.current().is_none_or(|current| current.id < barrier.id);
            let alignment = self.aligner.on_announcement(channel, barrier, now);
            let done = matches!(alignment, Alignment::Unaligned { finish: true, .. });
            self.timer.on_barrier(first && self.aligner.current() == Some(barrier), done, self.counters);
            self.on_alignment(alignment)?;
        }
        if let Some(done) = self.aligner.done_through() {
            self.gates.discard_overtaken(done);
        }
        if self.aligner.timeout_at().is_some_and(|at| at <= now) {
            let alignment = self.aligner.on_time(now);
            self.on_alignment(alignment)?;
        }
        self.read_ahead()?;
        if !self.shared.has_output_room() {
            wait_for_room(self.shared, self.mailbox, self.unaligned.as_deref());
            return Ok(Some(super::StepResult::Continue));
        }
        Ok(None)
    }

    /// Whether to stop between two records of a batch (putting the rest back) for an
    /// unaligned checkpoint to start: a producer announced a barrier, or an aligning
    /// checkpoint's timeout passed. While a checkpoint records, the channels are read
    /// ahead here too, so that it completes as soon as the barriers are queued.
    #[inline]
    pub(super) fn between_records(&mut self) -> Result<bool, TaskError> {
        let announced = self.unaligned.as_ref().is_some_and(|u| u.announced());
        if announced || self.aligner.timeout_at().is_some_and(|at| std::time::Instant::now() >= at) {
            return Ok(true);
        }
        if self.aligner.is_unaligned() {
            self.read_ahead()?;
        }
        Ok(false)
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
    let fail = |message: String| TaskError::StateBackend { operator: operator.to_string(), message };
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
