//! Operator state: declaration, snapshot, and redistribution for p → p'.

use eddy_state::operator::{redistribute, split_evenly};
use eddy_state::{ListStateDescriptor, MapStateDescriptor, OperatorStateSnapshot, OperatorStateStore};

fn offsets() -> ListStateDescriptor<u64> {
    ListStateDescriptor::new("offsets")
}
fn names() -> ListStateDescriptor<String> {
    ListStateDescriptor::new("names")
}
fn rules() -> MapStateDescriptor<String, u32> {
    MapStateDescriptor::new("rules")
}

/// Instance i of p holds offsets [i*10, i*10+i] (i+1 elements), one name, and the same rules.
fn snapshots(p: u64) -> Vec<OperatorStateSnapshot> {
    (0..p)
        .map(|i| {
            let mut store = OperatorStateStore::new();
            store.list_state(&offsets()).unwrap().add_all((0..=i).map(|j| i * 10 + j));
            store.union_list_state(&names()).unwrap().add(format!("n{i}"));
            let mut b = store.broadcast_state(&rules()).unwrap();
            b.put("x".into(), 1);
            b.put("y".into(), 2);
            store.snapshot().unwrap()
        })
        .collect()
}

fn restore(s: OperatorStateSnapshot) -> (Vec<u64>, Vec<String>, Vec<(String, u32)>) {
    let mut store = OperatorStateStore::restored_from(s);
    assert!(store.is_restored());
    let o = store.list_state(&offsets()).unwrap().get();
    let n = store.union_list_state(&names()).unwrap().get();
    let b = store.read_only_broadcast_state(&rules()).unwrap();
    let mut r: Vec<_> = b.entries().map(|(k, v)| (k.clone(), *v)).collect();
    r.sort();
    (o, n, r)
}

#[test]
fn split_evenly_gives_contiguous_parts_longer_first() {
    assert_eq!(split_evenly((0..7).collect(), 3), vec![vec![0, 1, 2], vec![3, 4], vec![5, 6]]);
    assert_eq!(split_evenly(vec![1], 3), vec![vec![1], vec![], vec![]]);
    assert_eq!(split_evenly(Vec::<u8>::new(), 2), vec![Vec::<u8>::new(), vec![]]);
}

#[test]
fn redistribution_for_every_p_to_p_prime_keeps_every_element_exactly_once() {
    for p in 1..=5u64 {
        let old = snapshots(p);
        let all_offsets: Vec<u64> = (0..p).flat_map(|i| (0..=i).map(move |j| i * 10 + j)).collect();
        let all_names: Vec<String> = (0..p).map(|i| format!("n{i}")).collect();
        for p2 in 1..=5usize {
            let new = redistribute(&old, p2).unwrap();
            assert_eq!(new.len(), p2);
            let restored: Vec<_> = new.into_iter().map(restore).collect();
            // Even-split: concatenation in order equals the old concatenation, sizes differ by ≤ 1.
            let concat: Vec<u64> = restored.iter().flat_map(|r| r.0.clone()).collect();
            assert_eq!(concat, all_offsets, "p={p} p'={p2}");
            let sizes: Vec<usize> = restored.iter().map(|r| r.0.len()).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
            for r in &restored {
                // Union: everything everywhere. Broadcast: the same map everywhere.
                assert_eq!(r.1, all_names);
                assert_eq!(r.2, vec![("x".to_string(), 1), ("y".to_string(), 2)]);
            }
        }
    }
}

#[test]
fn restored_state_not_declared_again_is_kept_in_the_next_snapshot() {
    let old = snapshots(1).remove(0);
    let store = OperatorStateStore::restored_from(old.clone());
    assert_eq!(store.snapshot().unwrap(), old);
}

#[test]
fn declaring_an_operator_state_twice_with_another_type_is_a_clear_error() {
    let mut store = OperatorStateStore::new();
    store.list_state(&offsets()).unwrap();
    let err = store.list_state(&ListStateDescriptor::<String>::new("offsets")).err().unwrap();
    assert!(err.to_string().contains("'offsets' is declared twice"), "{err}");
    let err = store.union_list_state(&offsets()).err().unwrap();
    assert!(err.to_string().contains("declared twice"), "{err}");
}

#[test]
fn mixing_distributions_of_one_name_across_instances_is_rejected() {
    let mut a = OperatorStateStore::new();
    a.list_state(&offsets()).unwrap().add(1);
    let mut b = OperatorStateStore::new();
    b.union_list_state(&offsets()).unwrap().add(2);
    let err = redistribute(&[a.snapshot().unwrap(), b.snapshot().unwrap()], 2).unwrap_err();
    assert!(err.to_string().contains("offsets"), "{err}");
}

/// Issue 18: operator state declared again as another type than its snapshot recorded is
/// refused at declaration, naming both types, after a rescale too.
#[test]
fn operator_state_declared_again_as_another_type_is_refused_naming_both_types() {
    for snapshot in [snapshots(2).swap_remove(0), redistribute(&snapshots(2), 3).unwrap().swap_remove(1)] {
        let mut store = OperatorStateStore::restored_from(snapshot.clone());
        let error = store.list_state(&ListStateDescriptor::<String>::new("offsets")).err().expect("another type");
        let message = error.to_string();
        assert!(
            message.contains("state 'offsets' was checkpointed as EvenSplit ListState<u64>")
                && message.contains("declared as EvenSplit ListState<String>"),
            "{message}"
        );
        let mut store = OperatorStateStore::restored_from(snapshot);
        let wrong = MapStateDescriptor::<String, u64>::new("rules");
        let message = store.broadcast_state(&wrong).err().expect("another type").to_string();
        assert!(message.contains("BroadcastState<(String, u32)>"), "{message}");
        assert!(message.contains("BroadcastState<(String, u64)>"), "{message}");
    }
}
