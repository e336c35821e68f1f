//! No panic from any byte read from the network: control frames, data frames and record
//! batches over random and mutated inputs each decode or fail with an error.

use eddy_rpc::frame::{read_value, write_value};
use eddy_rpc::messages::{CliMessage, JobCommand, JobMasterMessage, TaskManagerMessage};
use eddy_rpc::{AttemptId, ExecutorIndex, JobId};
use eddy_runtime::cluster::executor_link::ExecutorMessage;
use eddy_runtime::network::{InboundChannel, TypedInbound};
use proptest::prelude::*;

/// One message of every kind of connection, encoded.
fn messages() -> Vec<Vec<u8>> {
    let mut encoded = Vec::new();
    let mut put = |write: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = Vec::new();
        write(&mut bytes);
        encoded.push(bytes);
    };
    put(&|b| {
        let m = TaskManagerMessage::Register {
            slots: 4,
            binary: "/bin/x".into(),
            pid: 7,
            data_host: "127.0.0.1".into(),
            metrics_address: Some("127.0.0.1:9249".into()),
        };
        write_value(b, &m).unwrap()
    });
    put(&|b| {
        let m = TaskManagerMessage::ExecutorExited {
            job: JobId(3),
            attempt: AttemptId(1),
            executor: ExecutorIndex(0),
            status: "exit 1".into(),
        };
        write_value(b, &m).unwrap()
    });
    put(&|b| {
        let m = JobMasterMessage::Submit {
            name: "job".into(),
            parallelism: 2,
            args: vec!["--events".into()],
            exclusive_resources: vec!["the Kafka transactional id prefix 'p' on b:9092".into()],
            binary: "job".into(),
        };
        write_value(b, &m).unwrap()
    });
    put(&|b| {
        let m = CliMessage::JobCommand { job: "job".into(), command: JobCommand::Savepoint { dir: "/tmp/sp".into() } };
        write_value(b, &m).unwrap()
    });
    put(&|b| write_value(b, &ExecutorMessage::SavepointTarget { id: 9, dir: "/tmp/sp".into() }).unwrap());
    encoded
}

/// Decodes `bytes` as every kind of connection's message: each decodes or fails.
fn decode_all(bytes: &[u8]) {
    let _ = read_value::<TaskManagerMessage>(&mut &bytes[..]);
    let _ = read_value::<JobMasterMessage>(&mut &bytes[..]);
    let _ = read_value::<CliMessage>(&mut &bytes[..]);
    let _ = read_value::<ExecutorMessage>(&mut &bytes[..]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn random_control_frames_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        decode_all(&bytes);
    }

    #[test]
    fn mutated_control_messages_decode_or_fail(
        which in 0..5usize,
        flips in proptest::collection::vec((any::<usize>(), 1..=255u8), 1..4),
        cut in any::<usize>(),
    ) {
        let mut bytes = messages().swap_remove(which);
        for (at, xor) in flips {
            let at = at % bytes.len();
            bytes[at] ^= xor;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        decode_all(&bytes);
    }

    #[test]
    fn random_data_frames_are_refused_without_a_panic(
        kind in 0..10u8,
        value in any::<u32>(),
        payload in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let (tx, _rx) = eddy_runtime::channel::ChannelCapacity::Unbounded.channel::<(u64, String)>();
        let mut inbound = TypedInbound::<(u64, String)>::new(tx);
        let _ = inbound.deliver(kind, value, &payload);
    }

    #[test]
    fn random_record_batches_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = eddy_types::codec::decode_batch::<(u64, String, Vec<i32>)>(&bytes);
        let _ = eddy_types::decode_whole_key::<(String, u64)>(&bytes);
    }
}
