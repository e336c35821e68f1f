//! What a running job logs while it runs. In a test binary of its own: `tracing` caches
//! per call site whether anyone listens, so a test of another thread hitting a call site
//! first, with no subscriber, could hide events from the subscriber of this one.

use eddy::checkpoint::restart::RestartStrategy;
use eddy::prelude::*;

/// What a running job says as it goes: start, checkpoints, the failure and its cause, the
/// restart and where it restores from, the end.
#[test]
fn a_running_job_logs_its_checkpoints_failures_and_restarts_as_they_happen() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let env = Env::new();
    env.set_seed(7);
    env.set_parallelism(1);
    env.enable_checkpointing(10);
    env.set_restart_strategy(RestartStrategy::FixedDelay { attempts: 3, delay_ms: 1 });
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    env.from_sequence(0, 19_999)
        .uid("numbers")
        .map(move |i| {
            // Fails once, after checkpoints had time to complete.
            if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 10_000
                && !failed.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                panic!("injected failure");
            }
            if i.is_multiple_of(100) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            i
        })
        .uid("flaky")
        .add_sink(CollectSink::new())
        .uid("sink");
    let result = tracing::subscriber::with_default(subscriber, || env.execute("logged").unwrap());
    assert_eq!(result.restarts, 1);
    let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let position = |what: &str| log.find(what).unwrap_or_else(|| panic!("no '{what}' in:\n{log}"));
    let started = position("job starting");
    position("seed=0000000000000007");
    let checkpoint = position("checkpoint completed checkpoint=");
    let failed = position("task failed; cancelling the attempt operator=");
    let restart = position("restarting job=logged restart=1");
    let finished = position("job finished job=logged");
    assert!(started < checkpoint && checkpoint < failed && failed < restart && restart < finished, "{log}");
    assert!(log[restart..].contains("injected failure") && log[restart..].contains("from="), "{log}");
}
