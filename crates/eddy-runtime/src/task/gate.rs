//! The input gate of a subtask's input: one channel per producer subtask (Flink's
//! `InputGate` of `InputChannel`s). Each channel is bounded on its own, so barrier
//! alignment blocks a channel simply by not reading it: its producer fills it and waits,
//! and nothing is held back in the task beyond what the channel holds.
//!
//! For unaligned checkpoints the gate also reads a channel ahead up to its barrier,
//! keeping what it read to hand out next ([`InputGate::read_ahead`]), and records the
//! records and watermarks a channel delivers while it is told to
//! ([`InputGate::start_recording`]): the in-flight data of the checkpoint (see
//! [`super::in_flight`]).
//!
//! A channel is anything that implements [`InputChannel`]: the in-process crossbeam
//! channel, or a network channel (`network::RemoteInputChannel`). A new stream element
//! is a new [`StreamMessage`] variant: the gate passes it through untouched.

use super::in_flight::{Backlog, InFlightWatermark, RecordCodec, RecordedChannel};
use crate::channel::{BatchReceiver, CheckpointBarrier, StreamMessage};
use crate::error::TaskError;
use crossbeam_channel::{Select, TryRecvError};
use eddy_checkpoint::CheckpointId;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// One producer's channel into a gate.
pub trait InputChannel<T>: Send {
    /// The next message, if one is waiting.
    fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError>;
    /// The next message, read ahead of processing: a network channel returns its
    /// buffer's credit only at [`Self::release`], once the message is handed out.
    fn try_recv_ahead(&self) -> Result<StreamMessage<T>, TryRecvError> {
        self.try_recv()
    }
    /// A records message read ahead was handed out.
    fn release(&self) {}
    /// Appends the records that `barrier` overtook at the producer (a network channel's
    /// copies of them, sent ahead of the barrier), if it did, and the watermarks among
    /// them at their places in `into`.
    fn take_overtaken(
        &self,
        _barrier: &CheckpointBarrier,
        _into: &mut Vec<T>,
        _watermarks: &mut Vec<InFlightWatermark>,
    ) {
    }
    /// Drops the copies of overtaken records of checkpoint `done` and older ones, which
    /// the task is done with: a channel not read for a while (a declined checkpoint)
    /// would pile them up.
    fn discard_overtaken(&self, _done: CheckpointId) {}
    /// Registers the channel with `select`, to wait until it has a message.
    fn watch<'a>(&'a self, select: &mut Select<'a>);
    /// Why the channel is gone when its producer went away without ending it: in-process
    /// that means the attempt is being cancelled; a network channel names the connection
    /// it lost.
    fn disconnected(&self) -> TaskError {
        TaskError::Cancelled
    }
    /// Takes back the buffer of a batch whose records were taken out, for the next batch
    /// (see [`BatchReceiver::recycle`]): a channel in the process gives it to its
    /// producer's writer, a network channel to the connection that decodes its frames.
    /// Without it, the buffer is freed.
    fn recycle(&self, _batch: Vec<T>) {}
}

impl<T: Send> InputChannel<T> for BatchReceiver<T> {
    #[inline]
    fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError> {
        BatchReceiver::try_recv(self)
    }

    #[inline]
    fn recycle(&self, batch: Vec<T>) {
        BatchReceiver::recycle(self, batch);
    }

    fn watch<'a>(&'a self, select: &mut Select<'a>) {
        BatchReceiver::watch(self, select);
    }
}

/// The channels of one input, read round robin.
pub struct InputGate<T> {
    channels: Vec<Box<dyn InputChannel<T>>>,
    ended: Vec<bool>,
    /// Per channel, its end of input was read ahead and waits among what it holds.
    end_held: Vec<bool>,
    open: usize,
    /// Where the next poll starts.
    next: usize,
    /// Batches read in a row from the channel at `next`.
    streak: u32,
    /// Per channel, what was read ahead (or put back) and is handed out before the
    /// channel's queue; `pending_messages` counts them all, for a quick look.
    pending: Vec<VecDeque<StreamMessage<T>>>,
    pending_messages: usize,
    /// Per channel, the count of `pending` its producer sees (see [`Backlog`]).
    backlogs: Vec<Backlog>,
    /// Per channel, the records messages in `pending`, and how many of them were read
    /// ahead and owe their channel a [`InputChannel::release`] (the last ones: what is
    /// put back goes in front).
    pending_records: Vec<usize>,
    owed: Vec<usize>,
    /// Per channel, whether its records are recorded as they are taken from its queue.
    recording: Vec<bool>,
    recording_any: bool,
    recorded: Vec<Vec<T>>,
    /// Per channel, the watermarks among `recorded`.
    recorded_watermarks: Vec<Vec<InFlightWatermark>>,
    /// Per channel, copies of the records and watermarks its last barrier overtook at the
    /// producer.
    overtaken: Vec<Option<OvertakenCopies<T>>>,
    codec: RecordCodec<T>,
}

/// What a barrier overtook in its producer's output queue (a network channel's producer
/// going unaligned): what the consumer must keep for the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overtook {
    Nothing,
    /// Watermarks and no record: an aligned checkpoint loses nothing by leaving them out
    /// (it stores no watermark), an unaligned one keeps them.
    Watermarks,
    /// Records (and the watermarks among them): the checkpoint must be unaligned here.
    Records,
}

/// What a channel's barrier overtook at its producer, gathered from the channel's
/// copies (`network::Overtaken`, one record batch or watermark each): the records (maybe
/// none), and the watermarks among them (positions among the records).
struct OvertakenCopies<T> {
    barrier: CheckpointId,
    records: Vec<T>,
    watermarks: Vec<InFlightWatermark>,
}

/// Appends copies of `message`'s records to `recorded`, or its watermark to
/// `watermarks` at its place among them.
fn copy_message<T>(
    message: &StreamMessage<T>,
    recorded: &mut Vec<T>,
    watermarks: &mut Vec<InFlightWatermark>,
    copy: fn(&T) -> T,
) {
    match message {
        StreamMessage::Records(batch) | StreamMessage::HashedRecords(batch, _) => {
            recorded.extend(batch.iter().map(copy))
        }
        StreamMessage::Watermark(watermark) => {
            watermarks.push(InFlightWatermark { after: recorded.len() as u32, watermark: watermark.0 })
        }
        _ => {}
    }
}

/// What reading a channel ahead came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAhead {
    /// The channel's queue is empty for now; its barrier is still to come.
    Waiting,
    /// Reached the barrier (taken out of the channel, not kept).
    Barrier(CheckpointBarrier),
    /// The channel ended (kept, to be handed out in order).
    Ended,
}

/// Batches read in a row from one channel before the gate moves on: a few, for locality
/// (the producer's next batch is usually there already), and never more, so that a busy
/// channel cannot starve the others.
const STREAK_BATCHES_MAX: u32 = 4;

impl<T: Clone + Serialize + DeserializeOwned> InputGate<T> {
    pub fn new(channels: Vec<Box<dyn InputChannel<T>>>) -> Self {
        let n = channels.len();
        Self {
            channels,
            ended: vec![false; n],
            end_held: vec![false; n],
            open: n,
            next: 0,
            streak: 0,
            pending: (0..n).map(|_| VecDeque::new()).collect(),
            pending_messages: 0,
            backlogs: (0..n).map(|_| Backlog::default()).collect(),
            pending_records: vec![0; n],
            owed: vec![0; n],
            recording: vec![false; n],
            recording_any: false,
            recorded: (0..n).map(|_| Vec::new()).collect(),
            recorded_watermarks: (0..n).map(|_| Vec::new()).collect(),
            overtaken: (0..n).map(|_| None).collect(),
            codec: RecordCodec::new(),
        }
    }
}

impl<T> InputGate<T> {
    /// Number of channels.
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// Every channel delivered its end of input.
    pub fn ended(&self) -> bool {
        self.open == 0
    }

    /// Whether channel `channel` may be read: not ended, and not held by `blocked`.
    fn readable(&self, channel: usize, blocked: &dyn Fn(usize) -> bool) -> bool {
        !self.ended[channel] && !blocked(channel)
    }

    /// Whether every channel still open is held by `blocked`.
    pub fn all_blocked(&self, blocked: &dyn Fn(usize) -> bool) -> bool {
        (0..self.len()).all(|c| !self.readable(c, blocked))
    }

    /// The next message of a channel neither ended nor `blocked`, with the channel's index:
    /// what was read ahead or put back first, then its queue. A channel whose producer went
    /// away without ending it means the job is cancelled.
    pub fn poll(&mut self, blocked: &dyn Fn(usize) -> bool) -> Result<Option<(usize, StreamMessage<T>)>, TaskError> {
        let n = self.channels.len();
        for step in 0..n {
            let channel = (self.next + step) % n;
            if !self.readable(channel, blocked) {
                continue;
            }
            let message = match self.take_pending(channel) {
                Some(message) => message,
                None => match self.channels[channel].try_recv() {
                    Ok(message) => {
                        self.record(channel, &message);
                        if let StreamMessage::Barrier(barrier) = &message {
                            self.take_overtaken(channel, barrier);
                        }
                        message
                    }
                    Err(TryRecvError::Empty) => continue,
                    Err(TryRecvError::Disconnected) => return Err(self.channels[channel].disconnected()),
                },
            };
            if matches!(message, StreamMessage::EndOfInput) {
                self.ended[channel] = true;
                self.open -= 1;
            }
            self.streak = if channel == self.next { self.streak + 1 } else { 1 };
            self.next = channel;
            if self.streak >= STREAK_BATCHES_MAX {
                (self.next, self.streak) = ((channel + 1) % n, 0);
            }
            return Ok(Some((channel, message)));
        }
        Ok(None)
    }

    #[inline]
    fn take_pending(&mut self, channel: usize) -> Option<StreamMessage<T>> {
        if self.pending_messages == 0 {
            return None;
        }
        let message = self.pending[channel].pop_front()?;
        self.pending_messages -= 1;
        self.backlogs[channel].fetch_sub(1, Ordering::Relaxed);
        if message.is_records() {
            self.pending_records[channel] -= 1;
            if self.owed[channel] > self.pending_records[channel] {
                self.owed[channel] -= 1;
                self.channels[channel].release();
            }
        }
        Some(message)
    }

    fn hold(&mut self, channel: usize, message: StreamMessage<T>, front: bool) {
        if message.is_records() {
            self.pending_records[channel] += 1;
            // Read ahead (at the back): its credit is owed until it is handed out.
            self.owed[channel] += usize::from(!front);
        }
        if front {
            self.pending[channel].push_front(message);
        } else {
            self.pending[channel].push_back(message);
        }
        self.pending_messages += 1;
        self.backlogs[channel].fetch_add(1, Ordering::Relaxed);
    }

    /// Shares each channel's count of held batches with its producer (in-process
    /// channels; the others' producers cannot see them).
    pub fn share_backlogs(&mut self, backlogs: Vec<Backlog>) {
        if backlogs.len() == self.backlogs.len() {
            self.backlogs = backlogs;
        }
    }

    /// Keeps a copy of `message`'s records, or its watermark, if `channel` is recorded.
    #[inline]
    fn record(&mut self, channel: usize, message: &StreamMessage<T>) {
        if self.recording_any && self.recording[channel] {
            let (records, watermarks) = (&mut self.recorded[channel], &mut self.recorded_watermarks[channel]);
            copy_message(message, records, watermarks, self.codec.copy);
        }
    }

    /// Keeps the copies of the records and watermarks `barrier` overtook at `channel`'s
    /// producer, if it overtook any, for [`Self::keep_overtaken`]: they come behind the
    /// barrier, after a snapshot taken at it, so they are in flight for its checkpoint.
    fn take_overtaken(&mut self, channel: usize, barrier: &CheckpointBarrier) {
        let (mut records, mut watermarks) = (Vec::new(), Vec::new());
        self.channels[channel].take_overtaken(barrier, &mut records, &mut watermarks);
        // Watermarks overtaken without records are kept too: left out, the channel would
        // restore behind them, and records after them that were late would not be.
        self.overtaken[channel] = (!records.is_empty() || !watermarks.is_empty()).then_some(OvertakenCopies {
            barrier: barrier.id,
            records,
            watermarks,
        });
    }

    /// See [`InputChannel::discard_overtaken`].
    pub fn discard_overtaken(&self, done: CheckpointId) {
        self.channels.iter().for_each(|channel| channel.discard_overtaken(done));
    }

    /// What `barrier`, just delivered by `channel`, overtook at the producer.
    pub fn overtook(&self, channel: usize, barrier: &CheckpointBarrier) -> Overtook {
        match self.overtaken[channel].as_ref().filter(|o| o.barrier == barrier.id) {
            None => Overtook::Nothing,
            Some(copies) if copies.records.is_empty() => Overtook::Watermarks,
            Some(_) => Overtook::Records,
        }
    }

    /// Adds the records `channel`'s last barrier overtook, and the watermarks among them,
    /// to what the channel recorded (after everything it delivered before the barrier),
    /// or drops them (`keep` false: the checkpoint is not taken here).
    pub fn keep_overtaken(&mut self, channel: usize, keep: bool) {
        if let Some(OvertakenCopies { mut records, watermarks, .. }) = self.overtaken[channel].take() {
            if keep {
                let before = self.recorded[channel].len() as u32;
                let moved =
                    watermarks.into_iter().map(|w| InFlightWatermark { after: before.saturating_add(w.after), ..w });
                self.recorded_watermarks[channel].extend(moved);
                self.recorded[channel].append(&mut records);
            }
        }
    }

    /// Reads `channel`'s queue up to its barrier, keeping what comes before to hand out
    /// next (recorded if the channel is).
    pub fn read_ahead(&mut self, channel: usize) -> Result<ReadAhead, TaskError> {
        if self.end_held[channel] {
            // Nothing comes after it (its producer may be gone): all it sent is held.
            return Ok(ReadAhead::Ended);
        }
        loop {
            match self.channels[channel].try_recv_ahead() {
                Ok(StreamMessage::Barrier(barrier)) => {
                    self.take_overtaken(channel, &barrier);
                    return Ok(ReadAhead::Barrier(barrier));
                }
                Ok(message) => {
                    self.record(channel, &message);
                    let ended = matches!(message, StreamMessage::EndOfInput);
                    self.hold(channel, message, false);
                    if ended {
                        self.end_held[channel] = true;
                        return Ok(ReadAhead::Ended);
                    }
                }
                Err(TryRecvError::Empty) => return Ok(ReadAhead::Waiting),
                Err(TryRecvError::Disconnected) => return Err(self.channels[channel].disconnected()),
            }
        }
    }

    /// Gives the buffer of a batch `channel` delivered back to where it came from, once its
    /// records were taken out.
    #[inline]
    pub fn recycle(&self, channel: usize, batch: Vec<T>) {
        self.channels[channel].recycle(batch);
    }

    /// Puts records of `channel` back in front of everything else it holds: the rest of a
    /// batch whose processing stopped for a checkpoint.
    pub fn put_back(&mut self, channel: usize, records: Vec<T>) {
        if !records.is_empty() {
            self.hold(channel, StreamMessage::Records(records), true);
        }
    }

    /// Starts recording the channels `recorded` names. Every channel keeps the watermark
    /// it had reached (`reached`: none below any), recorded or not: a channel not
    /// recorded delivered its barrier already, and took nothing after it. What a
    /// recorded channel holds already, read ahead or put back, was delivered before the
    /// snapshot and is not in it: it is recorded first.
    pub fn start_recording(&mut self, recorded: &dyn Fn(usize) -> bool, reached: &dyn Fn(usize) -> Option<i64>) {
        for channel in 0..self.channels.len() {
            let (records, watermarks) = (&mut self.recorded[channel], &mut self.recorded_watermarks[channel]);
            if let Some(watermark) = reached(channel) {
                watermarks.push(InFlightWatermark { after: records.len() as u32, watermark });
            }
            if !recorded(channel) {
                continue;
            }
            self.recording[channel] = true;
            self.recording_any = true;
            for message in &self.pending[channel] {
                copy_message(message, records, watermarks, self.codec.copy);
            }
        }
    }

    /// Stops recording everywhere and drops what was recorded (a checkpoint abandoned).
    pub fn clear_recorded(&mut self) {
        self.recording.iter_mut().for_each(|r| *r = false);
        self.recording_any = false;
        self.recorded.iter_mut().for_each(Vec::clear);
        self.recorded_watermarks.iter_mut().for_each(Vec::clear);
    }

    /// `channel` delivered its barrier: what it delivers from now on is not in flight.
    pub fn stop_recording(&mut self, channel: usize) {
        self.recording[channel] = false;
        self.recording_any = self.recording.iter().any(|r| *r);
    }

    /// Stops recording everywhere and hands out what was recorded, the records encoded
    /// (empty bytes for none), per channel that recorded any record or watermark (as
    /// input 0).
    pub fn take_recorded(&mut self) -> Result<Vec<RecordedChannel>, String> {
        self.recording.iter_mut().for_each(|r| *r = false);
        self.recording_any = false;
        let (mut taken, encode) = (Vec::new(), self.codec.encode);
        let recorded = self.recorded.iter_mut().zip(&mut self.recorded_watermarks);
        for (channel, (records, watermarks)) in recorded.enumerate() {
            if !records.is_empty() || !watermarks.is_empty() {
                // No records: no bytes, rather than an encoded empty list.
                let records_bytes = if records.is_empty() { Vec::new() } else { encode(records)? };
                taken.push(RecordedChannel {
                    input: 0,
                    channel,
                    records: records_bytes,
                    watermarks: std::mem::take(watermarks),
                });
                records.clear();
            }
        }
        Ok(taken)
    }

    /// Decodes records stored by [`Self::take_recorded`] (on restore).
    pub fn decode(&self, bytes: &[u8]) -> Result<Vec<T>, String> {
        (self.codec.decode)(bytes)
    }

    /// Registers every readable channel with `select`.
    pub fn watch<'a>(&'a self, select: &mut Select<'a>, blocked: &dyn Fn(usize) -> bool) {
        for (channel, receiver) in self.channels.iter().enumerate() {
            if self.readable(channel, blocked) {
                receiver.watch(select);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::batch_channel as bounded;

    #[test]
    fn reads_every_channel_skips_blocked_and_ended_ones_and_counts_ends() {
        let (a_tx, a_rx) = bounded(4);
        let (b_tx, b_rx) = bounded(4);
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(a_rx), Box::new(b_rx)]);
        a_tx.send(StreamMessage::Records(vec![1])).unwrap();
        b_tx.send(StreamMessage::Records(vec![2])).unwrap();
        let none = |_: usize| false;
        let only_b = |c: usize| c == 0;
        let (channel, _) = gate.poll(&only_b).unwrap().unwrap();
        assert_eq!(channel, 1, "channel 0 is blocked");
        assert!(gate.poll(&only_b).unwrap().is_none(), "and holds its record");
        assert_eq!(gate.poll(&none).unwrap().unwrap().0, 0, "unblocked, it is read");
        a_tx.send(StreamMessage::EndOfInput).unwrap();
        b_tx.send(StreamMessage::EndOfInput).unwrap();
        gate.poll(&none).unwrap();
        assert!(!gate.ended());
        gate.poll(&none).unwrap();
        assert!(gate.ended() && gate.all_blocked(&none));
        drop(a_tx);
        assert!(gate.poll(&none).unwrap().is_none(), "ended channels are not read again");
    }

    #[test]
    fn a_busy_channel_does_not_starve_the_others() {
        let (a_tx, a_rx) = bounded(64);
        let (b_tx, b_rx) = bounded(64);
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(a_rx), Box::new(b_rx)]);
        for value in 0..10 {
            a_tx.send(StreamMessage::Records(vec![value])).unwrap();
        }
        b_tx.send(StreamMessage::Records(vec![100])).unwrap();
        let read: Vec<usize> = (0..STREAK_BATCHES_MAX + 1).map(|_| gate.poll(&|_| false).unwrap().unwrap().0).collect();
        assert!(read.contains(&1), "channel 1 is read among the first batches: {read:?}");
    }

    /// What a network channel delivers ahead of processing keeps its credit until it is
    /// handed out; what is put back in front was credited when it was first taken.
    #[test]
    fn a_network_channel_read_ahead_is_credited_only_as_it_is_handed_out() {
        use crate::network::{ChannelKey, LostReason, RemoteInputChannel};
        use eddy_checkpoint::SnapshotKind;
        let key = ChannelKey { edge: 0, from: 0, to: 0 };
        let (tx, rx) = bounded::<u32>(8);
        let (credit_tx, credit_rx) = crossbeam_channel::unbounded();
        let remote = RemoteInputChannel::new(rx, key, credit_tx, LostReason::default());
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(remote)]);
        let barrier = CheckpointBarrier { id: CheckpointId(1), kind: SnapshotKind::Checkpoint };
        tx.send(StreamMessage::Records(vec![0, 1])).unwrap();
        tx.send(StreamMessage::Records(vec![2])).unwrap();
        tx.send(StreamMessage::Records(vec![3])).unwrap();
        tx.send(StreamMessage::Barrier(barrier)).unwrap();
        let Some((_, StreamMessage::Records(mut first))) = gate.poll(&|_| false).unwrap() else { panic!() };
        assert_eq!(credit_rx.try_iter().count(), 1, "taken in order: credited at once");
        assert_eq!(gate.read_ahead(0).unwrap(), ReadAhead::Barrier(barrier));
        assert_eq!(credit_rx.try_iter().count(), 0, "read ahead: not yet");
        gate.put_back(0, first.split_off(1));
        let mut credited = Vec::new();
        while let Some((_, message)) = gate.poll(&|_| false).unwrap() {
            credited.push((format!("{message:?}"), credit_rx.try_iter().count()));
        }
        let expected = [("Records([1])", 0), ("Records([2])", 1), ("Records([3])", 1)];
        assert_eq!(credited, expected.map(|(m, n)| (m.to_string(), n)));
    }

    #[test]
    fn a_producer_gone_without_ending_its_channel_cancels() {
        let (tx, rx) = bounded::<u32>(1);
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(rx)]);
        drop(tx);
        assert_eq!(gate.poll(&|_| false).unwrap_err(), TaskError::Cancelled);
    }

    /// A recorded channel keeps the watermark it had reached, then every record and
    /// watermark it delivers before its barrier, read ahead or not, each watermark at its
    /// place among the records.
    #[test]
    fn a_recorded_channel_keeps_its_watermarks_at_their_places_among_its_records() {
        use eddy_checkpoint::SnapshotKind;
        use eddy_types::Watermark;
        let (tx, rx) = bounded::<u32>(16);
        let (other_tx, other_rx) = bounded::<u32>(16);
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(rx), Box::new(other_rx)]);
        let barrier = CheckpointBarrier { id: CheckpointId(1), kind: SnapshotKind::Checkpoint };
        tx.send(StreamMessage::Records(vec![1])).unwrap();
        tx.send(StreamMessage::Watermark(Watermark(3))).unwrap();
        // Read ahead before the snapshot: recorded first.
        assert_eq!(gate.read_ahead(0).unwrap(), ReadAhead::Waiting);
        gate.start_recording(&|c| c == 0, &|c| (c == 0).then_some(2));
        for message in [
            StreamMessage::Records(vec![2, 3]),
            StreamMessage::Watermark(Watermark(4)),
            StreamMessage::Watermark(Watermark(6)),
            StreamMessage::Records(vec![4]),
            StreamMessage::Barrier(barrier),
        ] {
            tx.send(message).unwrap();
        }
        other_tx.send(StreamMessage::Watermark(Watermark(100))).unwrap();
        while let Some((channel, message)) = gate.poll(&|_| false).unwrap() {
            if matches!(message, StreamMessage::Barrier(_)) {
                gate.stop_recording(channel);
            }
        }
        let recorded = gate.take_recorded().unwrap();
        assert_eq!(recorded.len(), 1, "only channel 0 was recorded: {recorded:?}");
        assert_eq!(gate.decode(&recorded[0].records).unwrap(), vec![1, 2, 3, 4]);
        let marks: Vec<(u32, i64)> = recorded[0].watermarks.iter().map(|w| (w.after, w.watermark)).collect();
        assert_eq!(marks, vec![(0, 2), (1, 3), (3, 4), (3, 6)]);
        assert!(gate.take_recorded().unwrap().is_empty(), "taken once");
    }

    /// The copies a barrier overtook at a network producer come after everything the
    /// channel delivered before the barrier, the watermarks among them at their places.
    #[test]
    fn a_network_channels_overtaken_copies_are_recorded_with_their_watermarks() {
        use crate::network::{ChannelKey, LostReason, Overtaken, RemoteInputChannel};
        use eddy_checkpoint::SnapshotKind;
        use eddy_types::Watermark;
        let key = ChannelKey { edge: 0, from: 0, to: 0 };
        let (tx, rx) = bounded::<u32>(8);
        let (credit_tx, _credit_rx) = crossbeam_channel::unbounded();
        let (overtaken_tx, overtaken_rx) = crossbeam_channel::unbounded();
        let remote = RemoteInputChannel::new(rx, key, credit_tx, LostReason::default()).with_overtaken(overtaken_rx);
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(remote)]);
        let barrier = CheckpointBarrier { id: CheckpointId(1), kind: SnapshotKind::Checkpoint };
        gate.start_recording(&|_| true, &|_| Some(1));
        tx.send(StreamMessage::Records(vec![10])).unwrap();
        tx.send(StreamMessage::Watermark(Watermark(2))).unwrap();
        for copy in [Overtaken::Records(vec![20]), Overtaken::Watermark(Watermark(3)), Overtaken::Records(vec![21])] {
            overtaken_tx.send((barrier.id, copy)).unwrap();
        }
        tx.send(StreamMessage::Barrier(barrier)).unwrap();
        while let Some((channel, message)) = gate.poll(&|_| false).unwrap() {
            if let StreamMessage::Barrier(barrier) = message {
                assert_eq!(gate.overtook(channel, &barrier), Overtook::Records);
                gate.keep_overtaken(channel, true);
                gate.stop_recording(channel);
            }
        }
        let recorded = gate.take_recorded().unwrap();
        assert_eq!(gate.decode(&recorded[0].records).unwrap(), vec![10, 20, 21]);
        let marks: Vec<(u32, i64)> = recorded[0].watermarks.iter().map(|w| (w.after, w.watermark)).collect();
        assert_eq!(marks, vec![(0, 1), (1, 2), (2, 3)]);
    }

    /// A barrier that overtook a watermark and no record at a network producer: the
    /// watermark is kept after what the channel delivered (a restore reaches it before
    /// the records behind it), or left out when the checkpoint is aligned here.
    #[test]
    fn a_watermark_overtaken_without_records_is_kept_in_an_unaligned_checkpoint() {
        use crate::network::{ChannelKey, LostReason, Overtaken, RemoteInputChannel};
        use eddy_checkpoint::SnapshotKind;
        use eddy_types::Watermark;
        for keep in [true, false] {
            let key = ChannelKey { edge: 0, from: 0, to: 0 };
            let (tx, rx) = bounded::<u32>(8);
            let (credit_tx, _credit_rx) = crossbeam_channel::unbounded();
            let (overtaken_tx, overtaken_rx) = crossbeam_channel::unbounded();
            let remote =
                RemoteInputChannel::new(rx, key, credit_tx, LostReason::default()).with_overtaken(overtaken_rx);
            let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(remote)]);
            let barrier = CheckpointBarrier { id: CheckpointId(1), kind: SnapshotKind::Checkpoint };
            gate.start_recording(&|_| true, &|_| Some(1));
            tx.send(StreamMessage::Records(vec![10])).unwrap();
            tx.send(StreamMessage::Watermark(Watermark(2))).unwrap();
            overtaken_tx.send((barrier.id, Overtaken::Watermark(Watermark(3)))).unwrap();
            tx.send(StreamMessage::Barrier(barrier)).unwrap();
            let mut seen = false;
            while let Some((channel, message)) = gate.poll(&|_| false).unwrap() {
                if let StreamMessage::Barrier(barrier) = message {
                    assert_eq!(gate.overtook(channel, &barrier), Overtook::Watermarks);
                    gate.keep_overtaken(channel, keep);
                    gate.stop_recording(channel);
                    seen = true;
                }
            }
            assert!(seen, "the barrier came");
            let recorded = gate.take_recorded().unwrap();
            assert_eq!(gate.decode(&recorded[0].records).unwrap(), vec![10]);
            let marks: Vec<(u32, i64)> = recorded[0].watermarks.iter().map(|w| (w.after, w.watermark)).collect();
            let expected = if keep { vec![(0, 1), (1, 2), (1, 3)] } else { vec![(0, 1), (1, 2)] };
            assert_eq!(marks, expected, "kept: {keep}");
        }
    }
}
