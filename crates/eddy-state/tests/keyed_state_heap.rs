//! The keyed-state conformance suite on the heap backend.

use eddy_state::conformance::run_all;
use eddy_state::TableKeyedStateBackend;

#[test]
fn heap_backend_passes_the_conformance_suite() {
    run_all(&|range, max| Box::new(TableKeyedStateBackend::new(range, max)));
}

#[test]
fn heap_backend_expires_state_with_a_time_to_live() {
    use eddy_types::{KeyGroupRange, MaxParallelism};
    eddy_state::conformance::run_ttl(&|clock| {
        let max = MaxParallelism::default();
        Box::new(TableKeyedStateBackend::new(KeyGroupRange::all(max), max).with_clock(clock))
    });
}
