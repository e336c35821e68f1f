//! Credit bookkeeping (Flink's credit-based flow control), both sides of a connection.
//!
//! The consumer grants each channel `initial` credits (its share of buffers) when the
//! connection opens, then one more per records frame its subtask took: [`CreditsDue`]
//! coalesces those into one grant per channel per round. The producer spends one credit
//! per records frame and sends records on a channel only while it has credit:
//! [`SenderCredits`]. Events (barriers, watermarks, ends of input) and an overtaking
//! barrier's announcement and copies of records cost none. A frame the consumer reads
//! ahead of processing (for an unaligned checkpoint) is credited once it is processed.

use super::wire::ChannelKey;
use std::collections::{BTreeMap, HashMap};

/// The producer's credits, per channel of its connection (by the channel's position).
#[derive(Debug)]
pub struct SenderCredits {
    credits: Vec<u32>,
    position: HashMap<ChannelKey, usize>,
}

impl SenderCredits {
    /// No credit yet on any of `keys`' channels.
    pub fn new(keys: &[ChannelKey]) -> Self {
        let position = keys.iter().enumerate().map(|(i, key)| (*key, i)).collect();
        Self { credits: vec![0; keys.len()], position }
    }

    /// The consumer granted `n` more credits on `key`. A key this connection does not
    /// carry is a confused (or hostile) peer: an error, naming the key.
    pub fn grant(&mut self, key: ChannelKey, n: u32) -> Result<(), String> {
        let Some(&i) = self.position.get(&key) else {
            return Err(format!("credit for an unknown channel ({key})"));
        };
        self.credits[i] = self.credits[i].saturating_add(n);
        Ok(())
    }

    /// Whether channel `channel` may send a records frame.
    pub fn has(&self, channel: usize) -> bool {
        self.credits[channel] > 0
    }

    /// A records frame went out on `channel`, which had credit.
    pub fn spend(&mut self, channel: usize) {
        debug_assert!(self.has(channel), "a records frame sent without credit");
        self.credits[channel] = self.credits[channel].saturating_sub(1);
    }

    /// Credits left on `channel`.
    pub fn left(&self, channel: usize) -> u32 {
        self.credits[channel]
    }
}

/// The consumer's credits not yet announced: one per records frame taken, coalesced per
/// channel, in key order.
#[derive(Debug, Default)]
pub struct CreditsDue {
    due: BTreeMap<ChannelKey, u32>,
}

impl CreditsDue {
    /// The subtask reading `key` took one records frame: one buffer is free again.
    pub fn taken(&mut self, key: ChannelKey) {
        let due = self.due.entry(key).or_default();
        *due = due.saturating_add(1);
    }

    /// Every grant to announce now, one per channel, and none left due.
    pub fn drain(&mut self) -> impl Iterator<Item = (ChannelKey, u32)> + '_ {
        std::mem::take(&mut self.due).into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(to: u16) -> ChannelKey {
        ChannelKey { edge: 0, from: 0, to }
    }

    #[test]
    fn a_sender_sends_records_only_on_credit_and_spends_one_per_frame() {
        let mut credits = SenderCredits::new(&[key(0), key(1)]);
        assert!(!credits.has(0) && !credits.has(1), "nothing before the consumer's first grant");
        credits.grant(key(1), 2).unwrap();
        assert!(!credits.has(0));
        assert!(credits.has(1));
        credits.spend(1);
        credits.spend(1);
        assert!(!credits.has(1), "two frames spent two credits");
        credits.grant(key(1), u32::MAX).unwrap();
        credits.grant(key(1), 5).unwrap();
        assert_eq!(credits.left(1), u32::MAX, "grants saturate instead of wrapping to nothing");
    }

    #[test]
    fn credit_for_a_channel_the_connection_does_not_carry_is_an_error_naming_it() {
        let mut credits = SenderCredits::new(&[key(0)]);
        let error = credits.grant(key(9), 1).unwrap_err();
        assert!(error.contains("unknown channel"), "{error}");
        assert!(!credits.has(0));
    }

    #[test]
    fn a_receiver_coalesces_taken_frames_into_one_grant_per_channel() {
        let mut due = CreditsDue::default();
        for to in [2, 0, 2, 2] {
            due.taken(key(to));
        }
        assert_eq!(due.drain().collect::<Vec<_>>(), vec![(key(0), 1), (key(2), 3)]);
        assert_eq!(due.drain().count(), 0, "nothing is announced twice");
    }
}
