//! The keyed-state conformance suite on the heap backend.

use eddy_state::conformance::run_all;
use eddy_state::HeapKeyedStateBackend;

#[test]
fn heap_backend_passes_the_conformance_suite() {
    run_all(&|range, max| Box::new(HeapKeyedStateBackend::new(range, max)));
}
