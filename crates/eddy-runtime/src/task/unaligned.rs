//! A task's side of unaligned checkpoints and of replaying their in-flight data: the
//! announcements its producers send, the snapshot it took and holds until its in-flight
//! data is complete, and the records it replays after a restore (see
//! [`super::in_flight`] for the protocol).

use super::context::TaskShared;
use super::gate::InputGate;
use super::in_flight::{self, Announcement, ChannelLayout, InFlightChannel, ReplayChannel};
use crate::channel::CheckpointBarrier;
use crate::error::TaskError;
use crate::output::Lifecycle;
use crate::writer::KeySelectorFactory;
use crossbeam_channel::Select;
use eddy_checkpoint::OperatorSnapshot;
use eddy_types::assign_to_key_group;
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
        let mut snapshots = Vec::new();
        head.snapshot(&barrier, &mut snapshots)?;
        shared.check()?;
        tracing::debug!(checkpoint = barrier.id.0, "unaligned checkpoint: snapshot taken, recording in-flight records");
        self.taken = Some((barrier, snapshots));
        Ok(())
    }

    /// Every channel delivered the barrier: the snapshot goes out with the in-flight
    /// records `recorded` (input, channel of the input, encoded records).
    pub(super) fn finish(
        &mut self,
        shared: &TaskShared,
        recorded: Vec<(usize, usize, Vec<u8>)>,
    ) -> Result<(), TaskError> {
        let Some((barrier, mut snapshots)) = self.taken.take() else { return Ok(()) };
        let layout = &self.layout;
        let channels: Vec<InFlightChannel> = recorded
            .into_iter()
            .map(|(input, channel, records)| {
                let origin = &layout.inputs[input].origins[channel];
                InFlightChannel {
                    input: input as u8,
                    from_uid: origin.from_uid.clone(),
                    producer: origin.producer,
                    consumer: layout.subtask,
                    consumer_parallelism: layout.parallelism,
                    records,
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

    /// Waits a little for room downstream (the task takes no input meanwhile), counted as
    /// backpressure; returns early for a control message or an announcement.
    pub(super) fn wait_for_room(&self, shared: &TaskShared, mailbox: &super::MailboxReceiver) {
        let since = std::time::Instant::now();
        let mut select = Select::new();
        select.recv(mailbox);
        self.watch(&mut select);
        let _ = select.ready_timeout(ROOM_WAIT);
        shared.counters().add_backpressured(since.elapsed());
    }

    pub(super) fn head_name(&self) -> &str {
        &self.layout.head_name
    }
}

/// Replays in-flight records of a restored unaligned checkpoint into `process`, keeping
/// only this subtask's key groups where the channel says so.
pub(super) fn replay<T: 'static>(
    gate: &InputGate<T>,
    channels: Vec<ReplayChannel>,
    operator: &str,
    mut process: impl FnMut(T),
) -> Result<usize, TaskError> {
    let fail = |message: String| TaskError::StateBackend { operator: operator.to_string(), message };
    let mut replayed = 0;
    for channel in channels {
        let records = gate.decode(&channel.records).map_err(|e| fail(format!("undecodable in-flight records: {e}")))?;
        match &channel.key_filter {
            None => {
                replayed += records.len();
                records.into_iter().for_each(&mut process);
            }
            Some(filter) => {
                let factory = filter
                    .selector
                    .downcast_ref::<KeySelectorFactory<T>>()
                    .ok_or_else(|| fail("in-flight records of another type than the input's key selector".into()))?;
                let mut selector = factory();
                for record in records {
                    let key_group = assign_to_key_group(selector.key_hash(&record), filter.max_parallelism);
                    if filter.range.contains(key_group) {
                        replayed += 1;
                        process(record);
                    }
                }
            }
        }
    }
    Ok(replayed)
}
