//! The mailbox loop driven one step at a time, without threads.

use eddy_checkpoint::{CheckpointId, OperatorSnapshot, SnapshotKind};
use eddy_runtime::channel::{
    batch_channel, BatchReceiver, BatchSender, CheckpointBarrier, CheckpointEvent, StreamMessage,
};
use eddy_runtime::output::{Lifecycle, Output};
use eddy_runtime::task::{
    mailbox, Control, DeclineCause, OneInputDriver, StepResult, TaskDriver, TaskShared, TwoInputDriver,
    TwoInputOperator,
};
use eddy_runtime::TaskError;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Records what reaches the end of the chain.
#[derive(Clone, Default)]
struct Probe(Rc<RefCell<Vec<String>>>);

impl Output<u32> for Probe {
    fn collect(&mut self, record: u32) {
        self.0.borrow_mut().push(format!("record {record}"));
    }
    /// As the default, plus the hash of each record's key if the batch came with them.
    fn collect_batch(
        &mut self,
        records: &mut std::vec::Drain<'_, u32>,
        hashes: &[eddy_types::KeyHash],
        stop: &mut dyn FnMut(usize) -> bool,
    ) {
        let mut handed = 0;
        for record in records.by_ref() {
            match hashes.get(handed) {
                Some(hash) => self.0.borrow_mut().push(format!("record {record} hash {}", hash.0)),
                None => self.collect(record),
            }
            handed += 1;
            if stop(handed) {
                break;
            }
        }
    }
}

impl Lifecycle for Probe {
    fn open(&mut self) -> Result<(), TaskError> {
        self.0.borrow_mut().push("open".into());
        Ok(())
    }
    fn flush(&mut self) -> Result<(), TaskError> {
        self.0.borrow_mut().push("flush".into());
        Ok(())
    }
    fn end_input(&mut self) -> Result<(), TaskError> {
        self.0.borrow_mut().push("end".into());
        Ok(())
    }
    fn close(&mut self) {
        self.0.borrow_mut().push("close".into());
    }
    fn snapshot(
        &mut self,
        barrier: &CheckpointBarrier,
        _snapshots: &mut Vec<OperatorSnapshot>,
    ) -> Result<(), TaskError> {
        self.0.borrow_mut().push(format!("snapshot {}", barrier.id));
        Ok(())
    }
    fn notify_checkpoint(&mut self, event: CheckpointEvent) -> Result<(), TaskError> {
        self.0.borrow_mut().push(format!("{event:?}"));
        Ok(())
    }
    fn on_watermark(&mut self, watermark: eddy_types::Watermark) -> Result<(), TaskError> {
        self.0.borrow_mut().push(format!("watermark {watermark}"));
        Ok(())
    }
    fn on_watermark_status(&mut self, status: eddy_types::WatermarkStatus) -> Result<(), TaskError> {
        self.0.borrow_mut().push(format!("{status:?}"));
        Ok(())
    }
    fn on_processing_time(&mut self, now_ms: i64) -> Result<(), TaskError> {
        self.0.borrow_mut().push(format!("processing time {now_ms}"));
        Ok(())
    }
}

fn records(values: &[u32]) -> StreamMessage<u32> {
    StreamMessage::Records(values.to_vec())
}

fn end() -> StreamMessage<u32> {
    StreamMessage::EndOfInput
}

fn barrier(id: u64) -> StreamMessage<u32> {
    StreamMessage::Barrier(CheckpointBarrier { id: CheckpointId(id), kind: SnapshotKind::Checkpoint })
}

/// `n` producer channels of `capacity` batches each.
fn channels(n: usize, capacity: usize) -> (Vec<BatchSender<u32>>, Vec<BatchReceiver<u32>>) {
    (0..n).map(|_| batch_channel::<u32>(capacity)).unzip()
}

#[test]
fn a_task_finishes_only_after_every_producer_ended() {
    let (tx, rx) = channels(2, 8);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    driver.open().unwrap();
    tx[0].send(records(&[1, 2])).unwrap();
    tx[0].send(end()).unwrap();
    tx[1].send(records(&[3])).unwrap();
    assert_eq!(driver.step().unwrap(), StepResult::Continue);
    assert_eq!(driver.step().unwrap(), StepResult::Continue, "one of two producers ended");
    assert_eq!(driver.step().unwrap(), StepResult::Continue);
    tx[1].send(end()).unwrap();
    assert_eq!(driver.step().unwrap(), StepResult::Finished);
    driver.close();
    assert_eq!(*probe.0.borrow(), vec!["open", "record 1", "record 2", "record 3", "watermark MAX", "end", "close"]);
}

#[test]
fn control_messages_are_taken_between_batches() {
    let (tx, rx) = channels(1, 8);
    let (mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    driver.open().unwrap();
    tx[0].send(records(&[1])).unwrap();
    tx[0].send(records(&[2])).unwrap();
    assert_eq!(driver.step().unwrap(), StepResult::Continue);
    mailbox_tx.send(Control::Cancel).unwrap();
    assert_eq!(driver.step().unwrap_err(), TaskError::Cancelled);
    assert_eq!(*probe.0.borrow(), vec!["open", "record 1"], "the second batch waits behind the control message");
}

#[test]
fn a_failure_recorded_during_a_batch_ends_the_step_with_it() {
    let (tx, rx) = channels(1, 8);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let index = shared.register_operator("validator");
    let mut driver = OneInputDriver::new(rx, Box::new(Probe::default()), mailbox_rx, shared.clone());
    tx[0].send(records(&[1])).unwrap();
    shared.fail(index, "bad record".into());
    let error = driver.step().unwrap_err();
    assert_eq!(error, TaskError::Operator { operator: "validator".into(), message: "bad record".into() });
}

#[test]
fn producers_gone_without_end_of_input_mean_cancellation() {
    let (tx, rx) = channels(1, 8);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = OneInputDriver::new(rx, Box::new(Probe::default()), mailbox_rx, shared);
    drop(tx);
    assert_eq!(driver.step().unwrap_err(), TaskError::Cancelled);
}

#[test]
fn partial_batches_are_flushed_once_the_flush_interval_passed() {
    use eddy_runtime::channel::DEFAULT_BUFFER_TIMEOUT_MS as FLUSH_INTERVAL_MS;
    use eddy_types::ManualClock;
    let (tx, rx) = channels(1, 8);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let clock = ManualClock::new(0);
    let probe = Probe::default();
    let shared = TaskShared::with_clock(Arc::new(AtomicBool::new(false)), Arc::new(clock.clone()));
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    for batch in 0..3 {
        tx[0].send(records(&[batch])).unwrap();
    }
    driver.step().unwrap();
    clock.advance_ms(FLUSH_INTERVAL_MS - 1);
    driver.step().unwrap();
    clock.advance_ms(1);
    driver.step().unwrap();
    assert_eq!(*probe.0.borrow(), vec!["record 0", "record 1", "record 2", "flush"]);
}

#[test]
fn exactly_once_alignment_holds_back_records_behind_a_barrier() {
    let (tx, rx) = channels(2, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    for message in [records(&[1]), barrier(1), records(&[2])] {
        tx[0].send(message).unwrap();
    }
    for message in [records(&[3]), barrier(1), records(&[4])] {
        tx[1].send(message).unwrap();
    }
    for _ in 0..6 {
        driver.step().unwrap();
    }
    // Record 2 came after channel 0's barrier: it waits until the snapshot, record 3 does not.
    let seen = probe.0.borrow().clone();
    assert_eq!(seen[..3], ["record 1", "record 3", "snapshot 1"], "{seen:?}");
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen[3..].contains(&"record 2".to_string()) && seen[3..].contains(&"record 4".to_string()));
}

/// Alignment holds a channel by not reading it: what waits behind the barrier stays in
/// that channel, which fills up and makes its producer wait, instead of piling up in the
/// task.
#[test]
fn a_channel_held_by_alignment_fills_up_and_pushes_back_on_its_producer() {
    let (tx, rx) = channels(2, 2);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    tx[0].send(barrier(1)).unwrap();
    driver.step().unwrap();
    for value in 0..2 {
        tx[0].try_send(records(&[value])).expect("room in the channel");
    }
    for _ in 0..4 {
        assert!(matches!(driver.step().unwrap(), StepResult::Idle { .. }), "the held channel is not read");
    }
    assert!(tx[0].try_send(records(&[9])).is_err(), "full: the producer must wait");
    tx[1].send(barrier(1)).unwrap();
    for _ in 0..3 {
        driver.step().unwrap();
    }
    let seen: Vec<String> = probe.0.borrow().iter().filter(|e| *e != "flush").cloned().collect();
    assert_eq!(seen, vec!["snapshot 1", "record 0", "record 1"]);
    assert!(tx[0].try_send(records(&[9])).is_ok(), "read again after the snapshot");
}

#[test]
fn at_least_once_lets_records_overtake_the_barrier() {
    let (tx, rx) = channels(2, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    shared.set_checkpointing_mode(eddy_checkpoint::CheckpointingMode::AtLeastOnce);
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    tx[0].send(barrier(1)).unwrap();
    tx[0].send(records(&[2])).unwrap();
    driver.step().unwrap();
    driver.step().unwrap();
    tx[1].send(barrier(1)).unwrap();
    driver.step().unwrap();
    assert_eq!(*probe.0.borrow(), vec!["record 2", "snapshot 1"]);
}

/// A two-input head that logs which input each record came from.
impl TwoInputOperator<u32, u32> for Probe {
    fn process1(&mut self, record: u32) {
        self.0.borrow_mut().push(format!("in1 {record}"));
    }
    fn process2(&mut self, record: u32) {
        self.0.borrow_mut().push(format!("in2 {record}"));
    }
}

#[test]
fn two_inputs_take_turns_so_a_busy_one_starves_neither() {
    let (tx1, rx1) = channels(1, 16);
    let (tx2, rx2) = channels(1, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = TwoInputDriver::new(rx1, rx2, Box::new(probe.clone()), mailbox_rx, shared, false);
    for value in 0..8 {
        tx1[0].send(records(&[value])).unwrap();
    }
    tx2[0].send(records(&[100])).unwrap();
    driver.step().unwrap();
    driver.step().unwrap();
    assert!(probe.0.borrow().contains(&"in2 100".to_string()), "{:?}", probe.0.borrow());
}

/// A task gives each batch's buffer back to the producer of its channel once it took the
/// records out: one- and two-input tasks, each input to its own producer.
#[test]
fn a_task_gives_each_batch_buffer_back_to_the_producer_it_came_from() {
    let sent = |tx: &BatchSender<u32>, values: &[u32]| {
        let mut batch = tx.fresh_batch(values.len());
        batch.extend_from_slice(values);
        let at = batch.as_ptr();
        tx.send(StreamMessage::Records(batch)).unwrap();
        at
    };

    let (tx, rx) = channels(2, 8);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let probe = Probe::default();
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    driver.open().unwrap();
    let at = sent(&tx[1], &[1, 2, 3]);
    assert_eq!(driver.step().unwrap(), StepResult::Continue);
    assert_eq!(*probe.0.borrow(), ["open", "record 1", "record 2", "record 3"]);
    assert_eq!((tx[0].buffers_given_back(), tx[1].buffers_given_back()), (0, 1));
    let next = tx[1].fresh_batch(3);
    assert_eq!(next.as_ptr(), at, "back to its producer");

    let (tx1, rx1) = channels(1, 8);
    let (tx2, rx2) = channels(1, 8);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let probe = Probe::default();
    let mut driver = TwoInputDriver::new(rx1, rx2, Box::new(probe.clone()), mailbox_rx, shared, false);
    let (at1, at2) = (sent(&tx1[0], &[1, 2]), sent(&tx2[0], &[3, 4]));
    driver.step().unwrap();
    driver.step().unwrap();
    let mut seen = probe.0.borrow().clone();
    seen.sort();
    assert_eq!(seen, ["in1 1", "in1 2", "in2 3", "in2 4"]);
    assert_eq!((tx1[0].buffers_given_back(), tx2[0].buffers_given_back()), (1, 1));
    let (next1, next2) = (tx1[0].fresh_batch(2), tx2[0].fresh_batch(2));
    assert_eq!(next1.as_ptr(), at1, "input 1's back to its producer");
    assert_eq!(next2.as_ptr(), at2, "input 2's back to its producer");
}

/// Reading input 2 to its end first (broadcast first): input 1 is not read, so a
/// checkpoint that needs its barrier cannot be aligned; the task declines it, without it
/// counting as a failure, and input 1 still waits for the end of input 2.
#[test]
fn reading_input_2_first_declines_a_checkpoint_rather_than_read_input_1_early() {
    use eddy_checkpoint::storage::{MemoryCheckpointStorage, TaskStateWriter};
    use eddy_runtime::task::{QueuedWork, TaskCheckpointing, TaskReport};
    let (tx1, rx1) = channels(1, 16);
    let (tx2, rx2) = channels(1, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let (reports_tx, reports_rx) = crossbeam_channel::unbounded();
    let writer = TaskStateWriter::new(
        Arc::new(MemoryCheckpointStorage::new(1 << 20)),
        None,
        Arc::new(eddy_types::ManualClock::new(0)),
        "join".into(),
        0,
        "join",
    );
    shared.set_checkpointing(TaskCheckpointing {
        task: 0,
        reports: reports_tx,
        writer: Arc::new(writer),
        work: Arc::new(QueuedWork::default()),
    });
    let mut driver = TwoInputDriver::new(rx1, rx2, Box::new(probe.clone()), mailbox_rx, shared, true);
    tx1[0].send(records(&[1])).unwrap();
    tx1[0].send(barrier(1)).unwrap();
    for message in [records(&[100]), barrier(1), records(&[101]), end()] {
        tx2[0].send(message).unwrap();
    }
    for _ in 0..8 {
        driver.step().unwrap();
    }
    let seen: Vec<String> = probe.0.borrow().iter().filter(|e| *e != "flush").cloned().collect();
    assert_eq!(seen, vec!["in2 100", "in2 101", "in1 1"], "input 1 only after input 2 ended, no snapshot");
    match reports_rx.try_recv() {
        Ok(TaskReport::Declined { checkpoint, cause, .. }) => {
            assert_eq!((checkpoint, cause), (CheckpointId(1), DeclineCause::NotReady));
        }
        other => panic!("expected a decline, got {other:?}"),
    }
}

/// Watermarks flow in band: the task's watermark is the minimum over its channels, it
/// reaches the chain only when that minimum rises, and an ended input holds nothing back.
#[test]
fn a_task_passes_on_the_minimum_watermark_of_its_channels() {
    use eddy_types::Watermark;
    let (tx, rx) = channels(2, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    tx[0].send(StreamMessage::Watermark(Watermark(10))).unwrap();
    tx[1].send(StreamMessage::Watermark(Watermark(4))).unwrap();
    tx[1].send(StreamMessage::Watermark(Watermark(12))).unwrap();
    for _ in 0..4 {
        driver.step().unwrap();
    }
    let seen = || -> Vec<String> { probe.0.borrow().iter().filter(|e| *e != "flush").cloned().collect() };
    assert_eq!(seen(), vec!["watermark 4", "watermark 10"], "channel 0 holds it at 10");
    tx[0].send(end()).unwrap();
    driver.step().unwrap();
    assert_eq!(seen()[2..], ["watermark 12"], "once channel 0 ended, channel 1 alone decides");
    tx[1].send(end()).unwrap();
    while driver.step().unwrap() != StepResult::Finished {}
    assert_eq!(seen()[3..], ["watermark MAX", "end"], "the end of input is the end of event time");
}

/// A task with unaligned checkpoints on, its inputs of `inputs` channels each from
/// in-process producers: where those announce barriers.
fn unaligned_task(
    inputs: &[usize],
    replay: Vec<eddy_runtime::task::in_flight::ReplayChannel>,
) -> (Rc<TaskShared>, Vec<crossbeam_channel::Sender<eddy_runtime::task::in_flight::Announcement>>) {
    use eddy_runtime::task::in_flight::{Backlog, ChannelLayout, ChannelOrigin, InputLayout};
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    shared.set_unaligned(eddy_runtime::task::UnalignedPolicy { enabled: true, aligned_timeout: None });
    let mut announce = Vec::new();
    let inputs = inputs
        .iter()
        .map(|&channels| {
            let (tx, rx) = crossbeam_channel::unbounded();
            announce.push(tx.clone());
            InputLayout {
                origins: (0..channels)
                    .map(|p| ChannelOrigin {
                        from_uid: "src".into(),
                        from_port: 0,
                        nth: 0,
                        producer: p as u32,
                        producers: channels as u32,
                    })
                    .collect(),
                keep_open: tx,
                backlogs: (0..channels).map(|_| Backlog::default()).collect(),
                announcements: rx,
            }
        })
        .collect();
    let layout =
        ChannelLayout { head_uid: "h".into(), head_name: "H".into(), subtask: 0, parallelism: 1, inputs, replay };
    shared.set_channel_layout(layout);
    (shared, announce)
}

fn in_flight_bytes(shared: &TaskShared) -> u64 {
    shared.long_counter(eddy_runtime::task::IN_FLIGHT_BYTES).load(std::sync::atomic::Ordering::Relaxed)
}

/// Unaligned: the snapshot comes with the first barrier, records of the other channel keep
/// flowing, and what that channel delivers before its barrier is stored as in-flight data.
/// A newer checkpoint that overtakes one still recording stores none of what its own
/// snapshot already holds.
#[test]
fn an_unaligned_checkpoint_stores_only_what_its_snapshot_does_not_hold() {
    let (tx, rx) = channels(2, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let (shared, _announce) = unaligned_task(&[2], Vec::new());
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared.clone());
    driver.open().unwrap();
    tx[0].send(barrier(1)).unwrap();
    driver.step().unwrap();
    tx[1].send(records(&[10, 11])).unwrap();
    tx[1].send(barrier(1)).unwrap();
    for _ in 0..3 {
        driver.step().unwrap();
    }
    let seen: Vec<String> = probe.0.borrow().iter().filter(|e| *e != "flush" && *e != "open").cloned().collect();
    assert_eq!(seen, vec!["snapshot 1", "record 10", "record 11"], "no channel blocked");
    let stored = in_flight_bytes(&shared);
    assert!(stored > 0, "records 10 and 11 came before channel 1's barrier: in flight");

    tx[0].send(barrier(2)).unwrap();
    driver.step().unwrap();
    tx[1].send(records(&[12])).unwrap();
    driver.step().unwrap();
    // Checkpoint 3 overtakes 2 (concurrent checkpoints, or 2's abort not read yet): 2
    // cannot complete here any more, and 3's snapshot holds record 12.
    tx[0].send(barrier(3)).unwrap();
    driver.step().unwrap();
    tx[1].send(barrier(2)).unwrap();
    tx[1].send(barrier(3)).unwrap();
    for _ in 0..4 {
        driver.step().unwrap();
    }
    assert!(probe.0.borrow().contains(&"snapshot 3".to_string()));
    assert_eq!(in_flight_bytes(&shared), stored, "checkpoint 3's snapshot holds record 12: nothing more stored");
}

/// Reading input 2 to its end first, announced barriers are declined like in-band ones:
/// no snapshot, and input 1 is not read early. A restored task replays its in-flight
/// records before any input.
#[test]
fn a_task_reading_input_2_first_declines_announced_barriers_and_replays_before_input() {
    use eddy_runtime::task::in_flight::{Announcement, ReplayChannel};
    let (tx1, rx1) = channels(1, 16);
    let (tx2, rx2) = channels(1, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let replayed = postcard::to_allocvec(&vec![7u32]).unwrap();
    let replay =
        vec![ReplayChannel { input: 1, records: replayed, key_filter: None, watermarks: Vec::new(), channel: 0 }];
    let (shared, announce) = unaligned_task(&[1, 1], replay);
    let mut driver = TwoInputDriver::new(rx1, rx2, Box::new(probe.clone()), mailbox_rx, shared, true);
    driver.open().unwrap();
    let one = CheckpointBarrier { id: CheckpointId(1), kind: SnapshotKind::Checkpoint };
    tx1[0].send(records(&[1])).unwrap();
    announce[0].send(Announcement { channel: 0, barrier: one }).unwrap();
    tx1[0].send(barrier(1)).unwrap();
    announce[1].send(Announcement { channel: 0, barrier: one }).unwrap();
    for message in [records(&[100]), barrier(1), end()] {
        tx2[0].send(message).unwrap();
    }
    for _ in 0..8 {
        driver.step().unwrap();
    }
    let seen: Vec<String> = probe.0.borrow().iter().filter(|e| *e != "flush").cloned().collect();
    assert_eq!(seen, vec!["open", "in2 7", "in2 100", "in1 1"], "replay first; input 1 after input 2; no snapshot");
}

/// A restored task replays each channel's in-flight watermarks at their places among its
/// records, through the watermark valve, the channels interleaved in the order of their
/// watermarks: a watermark counts once every channel reached it.
#[test]
fn a_restored_task_replays_in_flight_watermarks_among_the_records_through_its_valve() {
    use eddy_runtime::task::in_flight::{InFlightWatermark, ReplayChannel};
    let mark = |after, watermark| InFlightWatermark { after, watermark };
    let encoded = |values: &[u32]| postcard::to_allocvec(&values.to_vec()).unwrap();
    let replay = vec![
        ReplayChannel {
            input: 0,
            records: encoded(&[10, 11]),
            key_filter: None,
            watermarks: vec![mark(0, 4), mark(1, 8), mark(2, 20)],
            channel: 1,
        },
        ReplayChannel {
            input: 0,
            records: encoded(&[1, 2, 3]),
            key_filter: None,
            watermarks: vec![mark(0, 5), mark(2, 9), mark(3, 30)],
            channel: 0,
        },
    ];
    let (tx, rx) = channels(2, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let (shared, _announce) = unaligned_task(&[2], replay);
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    driver.open().unwrap();
    let seen: Vec<String> = probe.0.borrow().clone();
    let expected = [
        "open",
        "record 10",
        "watermark 4",
        "record 1",
        "record 2",
        "watermark 5",
        "record 11",
        "watermark 8",
        "record 3",
        "watermark 9",
        "watermark 20",
    ];
    assert_eq!(seen, expected);
    // What the producers send next goes through the same valve: a lower watermark of the
    // restored producer changes nothing, a higher one counts.
    tx[0].send(StreamMessage::Watermark(eddy_types::Watermark(25))).unwrap();
    tx[1].send(StreamMessage::Watermark(eddy_types::Watermark(40))).unwrap();
    for _ in 0..4 {
        driver.step().unwrap();
    }
    let after: Vec<String> = probe.0.borrow()[expected.len()..].iter().filter(|e| *e != "flush").cloned().collect();
    assert_eq!(after, vec!["watermark 30"], "channel 0 stays at 30 from its replay; channel 1 at 40");
}

/// A two-input task's second input's watermarks replay into its own channels of the
/// valve (after the first input's), and the two inputs' records interleave by them.
#[test]
fn a_restored_two_input_task_replays_each_inputs_watermarks_into_its_own_channels() {
    use eddy_runtime::task::in_flight::{InFlightWatermark, ReplayChannel};
    let mark = |after, watermark| InFlightWatermark { after, watermark };
    let encoded = |values: &[u32]| postcard::to_allocvec(&values.to_vec()).unwrap();
    let replay = vec![
        ReplayChannel {
            input: 0,
            records: encoded(&[1]),
            key_filter: None,
            watermarks: vec![mark(0, 5), mark(1, 5)],
            channel: 0,
        },
        ReplayChannel {
            input: 1,
            records: encoded(&[7]),
            key_filter: None,
            watermarks: vec![mark(0, 3), mark(1, 6)],
            channel: 0,
        },
    ];
    let (_tx1, rx1) = channels(1, 16);
    let (_tx2, rx2) = channels(1, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let (shared, _announce) = unaligned_task(&[1, 1], replay);
    let mut driver = TwoInputDriver::new(rx1, rx2, Box::new(probe.clone()), mailbox_rx, shared, false);
    driver.open().unwrap();
    let seen: Vec<String> = probe.0.borrow().clone();
    assert_eq!(seen, vec!["open", "in2 7", "watermark 3", "in1 1", "watermark 5"]);
}

/// A watermark stored past the end of its channel's records is corrupt data: the
/// restore fails naming it, before anything is replayed.
#[test]
fn a_watermark_stored_past_its_channels_records_fails_the_restore_clearly() {
    use eddy_runtime::task::in_flight::{InFlightWatermark, ReplayChannel};
    let replay = vec![ReplayChannel {
        input: 0,
        records: postcard::to_allocvec(&vec![1u32]).unwrap(),
        key_filter: None,
        watermarks: vec![InFlightWatermark { after: 5, watermark: 9 }],
        channel: 0,
    }];
    let (_tx, rx) = channels(1, 16);
    let (_mailbox_tx, mailbox_rx) = mailbox();
    let probe = Probe::default();
    let (shared, _announce) = unaligned_task(&[1], replay);
    let mut driver = OneInputDriver::new(rx, Box::new(probe.clone()), mailbox_rx, shared);
    let error = driver.open().unwrap_err().to_string();
    assert!(error.contains("corrupt in-flight data: a watermark after record 5 of a channel that holds 1"), "{error}");
    assert_eq!(*probe.0.borrow(), vec!["open"], "nothing replayed");
}

/// A barrier that overtook a watermark and no record at a network producer, read by a
/// task that takes checkpoints aligned: the checkpoint completes here (an aligned
/// checkpoint stores no watermark), where one whose barrier overtook records is declined.
#[test]
fn an_aligned_task_declines_a_barrier_that_overtook_records_but_not_one_that_overtook_a_watermark() {
    use eddy_checkpoint::storage::{MemoryCheckpointStorage, TaskStateWriter};
    use eddy_runtime::network::{ChannelKey, LostReason, Overtaken, RemoteInputChannel};
    use eddy_runtime::task::{InputChannel, QueuedWork, TaskCheckpointing, TaskReport};
    for overtook_records in [false, true] {
        let (tx, rx) = batch_channel::<u32>(16);
        let (credit_tx, _credit_rx) = crossbeam_channel::unbounded();
        let (overtaken_tx, overtaken_rx) = crossbeam_channel::unbounded();
        let key = ChannelKey { edge: 0, from: 0, to: 0 };
        let remote = RemoteInputChannel::new(rx, key, credit_tx, LostReason::default()).with_overtaken(overtaken_rx);
        let (_mailbox_tx, mailbox_rx) = mailbox();
        let probe = Probe::default();
        let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
        let (reports_tx, reports_rx) = crossbeam_channel::unbounded();
        let clock = Arc::new(eddy_types::ManualClock::new(0));
        let storage = Arc::new(MemoryCheckpointStorage::new(1 << 20));
        let writer = TaskStateWriter::new(storage, None, clock, "map".into(), 0, "map");
        let work = Arc::new(QueuedWork::default());
        shared.set_checkpointing(TaskCheckpointing { task: 0, reports: reports_tx, writer: Arc::new(writer), work });
        let channels = vec![Box::new(remote) as Box<dyn InputChannel<u32>>];
        let mut driver = OneInputDriver::from_channels(channels, Box::new(probe.clone()), mailbox_rx, shared);
        driver.open().unwrap();
        let id = CheckpointId(1);
        overtaken_tx.send((id, Overtaken::Watermark(eddy_types::Watermark(7)))).unwrap();
        if overtook_records {
            overtaken_tx.send((id, Overtaken::Records(vec![5]))).unwrap();
        }
        tx.send(records(&[1])).unwrap();
        tx.send(barrier(1)).unwrap();
        for _ in 0..4 {
            driver.step().unwrap();
        }
        let snapshotted = probe.0.borrow().contains(&"snapshot 1".to_string());
        let declined = std::iter::from_fn(|| reports_rx.try_recv().ok())
            .any(|report| matches!(report, TaskReport::Declined { checkpoint, .. } if checkpoint == id));
        assert_eq!(
            (snapshotted, declined),
            (!overtook_records, overtook_records),
            "overtook records: {overtook_records}"
        );
    }
}

/// Hashes a record's value as its key (a `key_by(|v| *v)`).
struct ValueKey;

impl eddy_runtime::writer::KeySelector<u32> for ValueKey {
    fn key_hash(&mut self, record: &u32) -> eddy_types::KeyHash {
        eddy_types::stable_hash(&record.to_le_bytes())
    }
}

/// The writer of a key-partitioned edge sends each record to the subtask of its key group
/// with the hash it computed for that, and the consumer's head gets the hashes with the
/// batch: exactly the stable hashes of the keys, in the records' order.
#[test]
fn a_key_partitioned_writer_sends_its_key_hashes_with_each_batch_to_the_head() {
    use eddy_runtime::writer::{Partitioner, RecordWriter};
    use eddy_types::{assign_to_key_group, operator_index_for_key_group, MaxParallelism};
    let max = MaxParallelism::default();
    let (tx, rx) = channels(2, 64);
    let shared = TaskShared::new(Arc::new(AtomicBool::new(false)));
    let partitioner = Partitioner::KeyGroups { selector: Box::new(ValueKey), max_parallelism: max };
    let mut writer = RecordWriter::new(tx, &[], partitioner, shared.clone());
    (0..3000u32).for_each(|value| writer.collect(value));
    writer.end_input().unwrap();
    let mut total = 0;
    for (target, rx) in rx.into_iter().enumerate() {
        let (_mailbox_tx, mailbox_rx) = mailbox();
        let probe = Probe::default();
        let mut driver = OneInputDriver::new(vec![rx], Box::new(probe.clone()), mailbox_rx, shared.clone());
        driver.open().unwrap();
        while driver.step().unwrap() != StepResult::Finished {}
        let lines = probe.0.borrow();
        // "record VALUE hash HASH", or "record VALUE" without a hash.
        let seen: Vec<(u32, Option<u64>)> = lines
            .iter()
            .filter_map(|line| line.strip_prefix("record "))
            .map(|rest| {
                let mut words = rest.split(" hash ");
                let value = words.next().unwrap().parse().unwrap();
                (value, words.next().map(|hash| hash.parse().unwrap()))
            })
            .collect();
        assert!(!seen.is_empty(), "target {target} got records");
        total += seen.len();
        for &(value, hash) in seen.iter() {
            let expected = eddy_types::stable_hash(&value.to_le_bytes());
            assert_eq!(hash, Some(expected.0), "record {value}'s hash came with it");
            let key_group = assign_to_key_group(expected, max);
            assert_eq!(operator_index_for_key_group(max, 2, key_group) as usize, target, "record {value}'s subtask");
        }
    }
    assert_eq!(total, 3000, "every record once");
}
