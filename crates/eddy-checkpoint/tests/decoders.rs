//! No panic from any byte of a checkpoint file: the framing and the decoders of metadata
//! and task state over random and mutated inputs.

use eddy_checkpoint::metadata::{
    decode, decode_metadata, encode_framed, frame, unframe, CheckpointMetadata, CoordinatorStateEntry,
};
use eddy_checkpoint::{CheckpointId, OperatorSnapshot, SnapshotKind};
use proptest::prelude::*;

fn metadata() -> CheckpointMetadata {
    CheckpointMetadata {
        checkpoint_id: CheckpointId(7),
        kind: SnapshotKind::Savepoint,
        job_name: "decoders".into(),
        max_parallelism: 128,
        timestamp_ms: 1_700_000_000_000,
        tasks: Vec::new(),
        coordinators: Some(vec![CoordinatorStateEntry { uid: "source".into(), state: vec![3, 1, 4] }]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = unframe("random", &bytes);
        let _ = decode::<CheckpointMetadata>("random", &bytes);
        let _ = decode_metadata("random", &bytes);
        let _ = decode::<Vec<OperatorSnapshot>>("random", &bytes);
    }

    #[test]
    fn any_length_in_a_header_is_refused_unless_true(
        length in any::<u64>(),
        tail in proptest::collection::vec(any::<u8>(), 0..32),
    ) {
        let mut bytes = frame(b"payload");
        bytes[12..20].copy_from_slice(&length.to_le_bytes());
        bytes.extend_from_slice(&tail);
        let error = unframe("header", &bytes);
        if length != 7 || !tail.is_empty() {
            prop_assert!(error.is_err());
        }
    }

    #[test]
    fn a_mutated_metadata_file_is_caught(
        flips in proptest::collection::vec((any::<usize>(), 1..=255u8), 1..4),
        cut in any::<usize>(),
    ) {
        let original = encode_framed(&metadata()).unwrap();
        let mut bytes = original.clone();
        for (at, xor) in flips {
            let at = at % bytes.len();
            bytes[at] ^= xor;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let read = decode_metadata("_metadata", &bytes);
        if bytes != original {
            prop_assert!(read.is_err(), "a changed file is refused");
        }
    }
}
