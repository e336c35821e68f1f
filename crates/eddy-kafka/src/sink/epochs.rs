//! The exactly-once sink's write-ahead log: each epoch's records (between two
//! checkpoint barriers), packed into one buffer, kept in the sink's operator state until
//! Kafka has them.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Epoch number of the records after the end of input (the task's last snapshot,
/// committed when the job finishes).
pub(crate) const END_OF_INPUT: u64 = u64::MAX;

/// One epoch's records: `[flags: u8][key length: u32 LE][key][value length: u32 LE][value]`
/// each; flag 1 says the record has a key, flag 2 that it has no value (a tombstone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Epoch {
    pub(crate) epoch: u64,
    pub(crate) records: u64,
    pub(crate) bytes: Vec<u8>,
}

impl Epoch {
    #[inline]
    pub(crate) fn push(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.bytes.push(u8::from(key.is_some()) | (u8::from(value.is_none()) << 1));
        let key = key.unwrap_or_default();
        let value = value.unwrap_or_default();
        self.bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(value);
        self.records += 1;
    }

    /// The records in order; `Err` names the byte where a restored buffer is broken.
    pub(crate) fn records(&self) -> impl Iterator<Item = Result<BufferedRecord<'_>, String>> {
        let mut at = 0usize;
        let bytes = &self.bytes;
        std::iter::from_fn(move || {
            if at >= bytes.len() {
                return None;
            }
            let start = at;
            let mut take = |n: usize| -> Option<&[u8]> {
                let slice = bytes.get(at..at.checked_add(n)?)?;
                at += n;
                Some(slice)
            };
            let record = (|| {
                let flags = take(1)?[0];
                let (has_key, tombstone) = (flags & 1 == 1, flags & 2 == 2);
                let key_len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
                let key = take(key_len)?;
                let value_len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
                let value = take(value_len)?;
                Some((has_key.then_some(key), (!tombstone).then_some(value)))
            })();
            Some(record.ok_or_else(|| {
                at = bytes.len();
                format!("the sink's buffered records are cut short at byte {start} of {}", bytes.len())
            }))
        })
    }
}

/// A buffered record's key and value (either may be absent).
pub(crate) type BufferedRecord<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The epochs of a running slot: the one being written, and those sealed by a checkpoint
/// barrier but not yet known to be in Kafka, in order (shared with the committer thread).
#[derive(Debug, Default)]
pub(crate) struct PendingEpochs {
    pub(crate) current: Epoch,
    pub(crate) sealed: Vec<Arc<Epoch>>,
}

impl PendingEpochs {
    /// A barrier (`Some(checkpoint)`) or the end of input (`None`) seals the current
    /// epoch; returns the epoch number the snapshot stands for. After the end of input
    /// nothing more is sealed: the final epoch stays last, and every later snapshot (a
    /// finished task's, repeated at each checkpoint) stands for the end of input.
    pub(crate) fn seal(&mut self, checkpoint: Option<u64>) -> u64 {
        if self.sealed.last().is_some_and(|e| e.epoch == END_OF_INPUT) {
            return END_OF_INPUT;
        }
        let epoch = checkpoint.unwrap_or(END_OF_INPUT);
        let mut sealed = std::mem::take(&mut self.current);
        sealed.epoch = epoch;
        self.sealed.push(Arc::new(sealed));
        epoch
    }

    /// How many sealed epochs a completed checkpoint `last` (or the job's end,
    /// [`END_OF_INPUT`]) makes due, from the front.
    pub(crate) fn due(&self, last: u64) -> usize {
        self.sealed.iter().take_while(|e| e.epoch <= last).count()
    }
}

impl SlotState {
    /// What a restored slot sends again, given the last epoch its marker says Kafka has
    /// (`None`: none of this lineage): the epochs after it. A marker beyond the snapshot
    /// means an older checkpoint is being restored, whose records Kafka already has.
    pub(crate) fn to_resend(&self, committed: Option<u64>) -> Result<Vec<Epoch>, u64> {
        match committed {
            Some(committed) if committed > self.snapshot_epoch => Err(committed),
            Some(committed) => Ok(self.epochs.iter().filter(|e| e.epoch > committed).cloned().collect()),
            None => Ok(self.epochs.clone()),
        }
    }
}

/// What a sink slot keeps in a checkpoint: the epochs Kafka may not have yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SlotState {
    /// The sink subtask index that wrote these epochs; its transactional id.
    pub(crate) slot: u32,
    /// Random, drawn when the slot started without state: markers of another lineage
    /// (an earlier job with the same prefix) say nothing about these epochs.
    pub(crate) lineage: u64,
    /// The checkpoint this state was taken for ([`END_OF_INPUT`] after the input ended).
    pub(crate) snapshot_epoch: u64,
    pub(crate) epochs: Vec<Epoch>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch_numbers<E: std::borrow::Borrow<Epoch>>(epochs: &[E]) -> Vec<u64> {
        epochs.iter().map(|e| e.borrow().epoch).collect()
    }

    #[test]
    fn after_the_end_of_input_later_snapshots_seal_nothing_and_stand_for_the_end() {
        let mut pending = PendingEpochs::default();
        pending.current.push(None, Some(b"a"));
        assert_eq!(pending.seal(Some(3)), 3);
        pending.current.push(None, Some(b"b"));
        assert_eq!(pending.seal(None), END_OF_INPUT);
        // A finished task's state is taken again at checkpoints 4 and 5.
        assert_eq!(pending.seal(Some(4)), END_OF_INPUT);
        assert_eq!(pending.seal(Some(5)), END_OF_INPUT);
        assert_eq!(epoch_numbers(&pending.sealed), vec![3, END_OF_INPUT]);
        assert_eq!(pending.due(5), 1, "checkpoint 5 completes epoch 3 only");
        assert_eq!(pending.due(END_OF_INPUT), 2, "the job's end completes all");
    }

    #[test]
    fn a_restored_slot_resends_exactly_the_epochs_after_its_marker() {
        let epoch = |n| Epoch { epoch: n, records: 0, bytes: Vec::new() };
        let state = SlotState { slot: 0, lineage: 1, snapshot_epoch: 7, epochs: vec![epoch(6), epoch(7)] };
        assert_eq!(epoch_numbers(&state.to_resend(None).unwrap()), vec![6, 7]);
        assert_eq!(epoch_numbers(&state.to_resend(Some(5)).unwrap()), vec![6, 7]);
        assert_eq!(epoch_numbers(&state.to_resend(Some(6)).unwrap()), vec![7]);
        assert!(state.to_resend(Some(7)).unwrap().is_empty());
        assert_eq!(state.to_resend(Some(8)), Err(8), "an older checkpoint than Kafka's marker");
        let ended = SlotState { snapshot_epoch: END_OF_INPUT, epochs: vec![epoch(7), epoch(END_OF_INPUT)], ..state };
        assert!(ended.to_resend(Some(END_OF_INPUT)).unwrap().is_empty());
        assert_eq!(epoch_numbers(&ended.to_resend(Some(7)).unwrap()), vec![END_OF_INPUT]);
    }

    #[test]
    fn records_come_back_in_order_and_a_cut_buffer_is_named() {
        let mut epoch = Epoch::default();
        epoch.push(Some(b"k1"), Some(b"v1"));
        epoch.push(None, Some(b""));
        epoch.push(Some(b""), Some(b"v3"));
        epoch.push(Some(b"k4"), None);
        let back: Vec<_> = epoch.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            back,
            vec![
                (Some(&b"k1"[..]), Some(&b"v1"[..])),
                (None, Some(&b""[..])),
                (Some(&b""[..]), Some(&b"v3"[..])),
                (Some(&b"k4"[..]), None)
            ]
        );
        assert_eq!(epoch.records, 4);
        for cut in 1..epoch.bytes.len() {
            let mut broken = epoch.clone();
            broken.bytes.truncate(cut);
            let results: Vec<_> = broken.records().collect();
            if let Some(Err(message)) = results.last() {
                assert!(message.contains("cut short"), "{message}");
            } else {
                // A cut exactly between records leaves fewer, whole records.
                assert!(results.iter().all(Result::is_ok) && results.len() < 4, "cut at {cut}");
            }
        }
    }
}
