//! The input gate of a subtask's input: one channel per producer subtask (Flink's
//! `InputGate` of `InputChannel`s). Each channel is bounded on its own, so barrier
//! alignment blocks a channel simply by not reading it: its producer fills it and waits,
//! and nothing is held back in the task beyond what the channel holds.
//!
//! A channel is anything that implements [`InputChannel`]: the in-process crossbeam
//! channel today, a network channel beside it later. A new stream element (a watermark)
//! is a new [`StreamMessage`] variant: the gate passes it through untouched.

use crate::channel::StreamMessage;
use crate::error::TaskError;
use crossbeam_channel::{Receiver, Select, TryRecvError};

/// One producer's channel into a gate.
pub trait InputChannel<T>: Send {
    /// The next message, if one is waiting.
    fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError>;
    /// Registers the channel with `select`, to wait until it has a message.
    fn watch<'a>(&'a self, select: &mut Select<'a>);
    /// Why the channel is gone when its producer went away without ending it: in-process
    /// that means the attempt is being cancelled; a network channel names the connection
    /// it lost.
    fn disconnected(&self) -> TaskError {
        TaskError::Cancelled
    }
}

impl<T: Send> InputChannel<T> for Receiver<StreamMessage<T>> {
    #[inline]
    fn try_recv(&self) -> Result<StreamMessage<T>, TryRecvError> {
        Receiver::try_recv(self)
    }

    fn watch<'a>(&'a self, select: &mut Select<'a>) {
        select.recv(self);
    }
}

/// The channels of one input, read round robin.
pub struct InputGate<T> {
    channels: Vec<Box<dyn InputChannel<T>>>,
    ended: Vec<bool>,
    open: usize,
    /// Where the next poll starts.
    next: usize,
    /// Batches read in a row from the channel at `next`.
    streak: u32,
}

/// Batches read in a row from one channel before the gate moves on: a few, for locality
/// (the producer's next batch is usually there already), and never more, so that a busy
/// channel cannot starve the others.
const STREAK_BATCHES_MAX: u32 = 4;

impl<T> InputGate<T> {
    pub fn new(channels: Vec<Box<dyn InputChannel<T>>>) -> Self {
        let n = channels.len();
        Self { channels, ended: vec![false; n], open: n, next: 0, streak: 0 }
    }

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

    /// The next message of a channel neither ended nor `blocked`, with the channel's index.
    /// A channel whose producer went away without ending it means the job is cancelled.
    pub fn poll(&mut self, blocked: &dyn Fn(usize) -> bool) -> Result<Option<(usize, StreamMessage<T>)>, TaskError> {
        let n = self.channels.len();
        for step in 0..n {
            let channel = (self.next + step) % n;
            if !self.readable(channel, blocked) {
                continue;
            }
            match self.channels[channel].try_recv() {
                Ok(message) => {
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
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return Err(self.channels[channel].disconnected()),
            }
        }
        Ok(None)
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
    use crossbeam_channel::bounded;

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

    #[test]
    fn a_producer_gone_without_ending_its_channel_cancels() {
        let (tx, rx) = bounded::<StreamMessage<u32>>(1);
        let mut gate: InputGate<u32> = InputGate::new(vec![Box::new(rx)]);
        drop(tx);
        assert_eq!(gate.poll(&|_| false).unwrap_err(), TaskError::Cancelled);
    }
}
