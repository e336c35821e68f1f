//! Redistribution of operator state when an operator's parallelism changes from p to p'.

use super::store::{ListDistribution, ListSnapshot, OperatorStateSnapshot};
use crate::error::{StateError, StateErrorKind};

/// Cuts `items` into `parts` contiguous pieces whose lengths differ by at most one, the
/// longer ones first (the split Flink uses for even-split list state).
pub fn split_evenly<E>(items: Vec<E>, parts: usize) -> Vec<Vec<E>> {
    assert!(parts >= 1, "cannot split into zero parts");
    let base = items.len() / parts;
    let longer = items.len() % parts;
    let mut iter = items.into_iter();
    (0..parts).map(|i| iter.by_ref().take(base + usize::from(i < longer)).collect()).collect()
}

/// Redistributes the operator state of the `old.len()` instances of an operator over
/// `new_parallelism` instances: even-split lists are concatenated in instance order and cut
/// evenly, union lists go whole to every instance, broadcast state is copied (new instance
/// `i` takes old instance `i mod p`, all of which are equal).
pub fn redistribute(
    old: &[OperatorStateSnapshot],
    new_parallelism: usize,
) -> Result<Vec<OperatorStateSnapshot>, StateError> {
    if new_parallelism == 0 {
        return Err(StateError::from(StateErrorKind::Redistribution("new parallelism must be at least 1".into())));
    }
    let mut new = vec![OperatorStateSnapshot::default(); new_parallelism];

    let mut names: Vec<(&str, ListDistribution, &str)> = Vec::new();
    for list in old.iter().flat_map(|s| &s.lists) {
        match names.iter().find(|(n, _, _)| *n == list.name) {
            Some((_, d, _)) if *d != list.distribution => {
                return Err(StateError::from(StateErrorKind::Redistribution(format!(
                    "list state '{}' is {:?} in one instance and {:?} in another",
                    list.name, d, list.distribution
                ))))
            }
            Some(_) => {}
            None => names.push((&list.name, list.distribution, &list.element_type)),
        }
    }
    for (name, distribution, element_type) in names {
        let all: Vec<Vec<u8>> = old
            .iter()
            .flat_map(|s| s.lists.iter().filter(|l| l.name == name))
            .flat_map(|l| l.elements.iter().cloned())
            .collect();
        let parts = match distribution {
            ListDistribution::EvenSplit => split_evenly(all, new_parallelism),
            ListDistribution::Union => vec![all; new_parallelism],
        };
        for (instance, elements) in new.iter_mut().zip(parts) {
            let element_type = element_type.to_string();
            instance.lists.push(ListSnapshot { name: name.to_string(), distribution, element_type, elements });
        }
    }

    if !old.is_empty() {
        for (i, instance) in new.iter_mut().enumerate() {
            let source = &old[i % old.len()];
            instance.broadcasts.extend(source.broadcasts.iter().cloned());
        }
    }
    Ok(new)
}
