//! The exactly-once sink's write-ahead log: each epoch's records (between two
//! checkpoint barriers), packed into one buffer, kept in the sink's operator state until
//! Kafka has them.

use serde::{Deserialize, Serialize};

/// Epoch number of the records after the end of input (the task's last snapshot,
/// committed when the job finishes).
pub(crate) const END_OF_INPUT: u64 = u64::MAX;

/// One epoch's records: `[has key: u8][key length: u32 LE][key][value length: u32 LE][value]` each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Epoch {
    pub(crate) epoch: u64,
    pub(crate) records: u64,
    pub(crate) bytes: Vec<u8>,
}

impl Epoch {
    #[inline]
    pub(crate) fn push(&mut self, key: Option<&[u8]>, value: &[u8]) {
        self.bytes.push(u8::from(key.is_some()));
        let key = key.unwrap_or_default();
        self.bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(value);
        self.records += 1;
    }

    /// The records in order; `Err` names the byte where a restored buffer is broken.
    pub(crate) fn records(&self) -> impl Iterator<Item = Result<(Option<&[u8]>, &[u8]), String>> {
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
                let has_key = take(1)?[0] == 1;
                let key_len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
                let key = take(key_len)?;
                let value_len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
                let value = take(value_len)?;
                Some((has_key.then_some(key), value))
            })();
            Some(record.ok_or_else(|| {
                at = bytes.len();
                format!("the sink's buffered records are cut short at byte {start} of {}", bytes.len())
            }))
        })
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

    #[test]
    fn records_come_back_in_order_and_a_cut_buffer_is_named() {
        let mut epoch = Epoch::default();
        epoch.push(Some(b"k1"), b"v1");
        epoch.push(None, b"");
        epoch.push(Some(b""), b"v3");
        let back: Vec<_> = epoch.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, vec![(Some(&b"k1"[..]), &b"v1"[..]), (None, &b""[..]), (Some(&b""[..]), &b"v3"[..])]);
        assert_eq!(epoch.records, 3);
        for cut in 1..epoch.bytes.len() {
            let mut broken = epoch.clone();
            broken.bytes.truncate(cut);
            let results: Vec<_> = broken.records().collect();
            if let Some(Err(message)) = results.last() {
                assert!(message.contains("cut short"), "{message}");
            } else {
                // A cut exactly between records leaves fewer, whole records.
                assert!(results.iter().all(Result::is_ok) && results.len() < 3, "cut at {cut}");
            }
        }
    }
}
