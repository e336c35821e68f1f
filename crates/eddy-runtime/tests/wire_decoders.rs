//! No panic from any byte read from the network: control frames, data frames and record
//! batches over random and mutated inputs each decode or fail with an error.

use eddy_runtime::cluster::data::{InboundChannel, TypedInbound};
use eddy_runtime::cluster::frame::{read_value, write_value};
use eddy_runtime::cluster::Message;
use proptest::prelude::*;

fn messages() -> Vec<Message> {
    vec![
        Message::Heartbeat,
        Message::Refused("no".into()),
        Message::RegisterTaskManager { slots: 4, binary: "/bin/x".into(), pid: 7, data_host: "127.0.0.1".into() },
        Message::SubmitJob { name: "job".into(), parallelism: 2, args: vec!["--events".into(), "10".into()] },
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_control_frames_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = read_value::<Message>(&mut bytes.as_slice());
    }

    #[test]
    fn mutated_control_messages_decode_or_fail(which in 0..4usize, flips in proptest::collection::vec((any::<usize>(), 1..=255u8), 1..4), cut in any::<usize>()) {
        let mut bytes = Vec::new();
        write_value(&mut bytes, &messages()[which]).unwrap();
        for (at, xor) in flips {
            let at = at % bytes.len();
            bytes[at] ^= xor;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = read_value::<Message>(&mut bytes.as_slice());
    }

    #[test]
    fn random_data_frames_are_refused_without_a_panic(kind in 0..10u8, value in any::<u32>(), payload in proptest::collection::vec(any::<u8>(), 0..256)) {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut inbound = TypedInbound::<(u64, String)>::new(tx);
        let _ = inbound.deliver(kind, value, &payload);
    }

    #[test]
    fn random_record_batches_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = eddy_types::codec::decode_batch::<(u64, String, Vec<i32>)>(&bytes);
        let _ = eddy_types::decode_whole_key::<(String, u64)>(&bytes);
    }
}
