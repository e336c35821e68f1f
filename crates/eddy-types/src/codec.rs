//! The form records take when they leave the process (to a subtask in another
//! TaskManager): postcard, compact and self-delimiting, one batch at a time, as records
//! travel in batches. Within a process records are passed as values and never come here.

use crate::error::TypesError;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Appends a batch of records to `out`.
pub fn encode_batch<T: Serialize>(records: &[T], out: &mut Vec<u8>) -> Result<(), TypesError> {
    let bytes = postcard::to_extend(records, std::mem::take(out)).map_err(|e| TypesError::Codec {
        type_name: std::any::type_name::<T>(),
        message: format!("cannot encode a batch of {} records: {e}", records.len()),
    })?;
    *out = bytes;
    Ok(())
}

/// The batch of records that [`encode_batch`] wrote into exactly `bytes`.
pub fn decode_batch<T: DeserializeOwned>(bytes: &[u8]) -> Result<Vec<T>, TypesError> {
    let corrupt = |message: String| TypesError::Codec { type_name: std::any::type_name::<T>(), message };
    let (records, rest): (Vec<T>, &[u8]) = postcard::take_from_bytes(bytes)
        .map_err(|e| corrupt(format!("cannot decode a batch of {} bytes: {e}", bytes.len())))?;
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes left after a batch of {} records", rest.len(), records.len())));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_and_a_damaged_one_is_named() {
        let batch = vec![("/api/7".to_string(), 3u64), ("/api/1234".to_string(), u64::MAX)];
        let mut bytes = Vec::new();
        encode_batch(&batch, &mut bytes).unwrap();
        assert_eq!(decode_batch::<(String, u64)>(&bytes).unwrap(), batch);
        let truncated = decode_batch::<(String, u64)>(&bytes[..bytes.len() - 3]).unwrap_err().to_string();
        assert!(
            truncated.contains("(alloc::string::String, u64)") && truncated.contains("cannot decode"),
            "{truncated}"
        );
        bytes.push(0);
        let trailing = decode_batch::<(String, u64)>(&bytes).unwrap_err().to_string();
        assert!(trailing.contains("1 bytes left after a batch of 2 records"), "{trailing}");
    }
}
