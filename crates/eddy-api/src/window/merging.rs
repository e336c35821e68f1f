//! The session windows of one key and the state window each keeps its contents in
//! (Flink's `MergingWindowSet`). When windows merge, the merged window keeps the state
//! window of one of them, so that most of the contents never move; the others' contents
//! are merged into it. Kept per key in keyed state, outside any window's namespace.

use super::assigner::WindowAssigner;
use super::Window;
use crate::function::FunctionResult;
use eddy_state::{StateError, ValueState};

/// The callback for one merge: (merged window, the windows merged into it, its state
/// window, the state windows whose contents move into that one).
pub(crate) type MergeFunction<'a, W> = dyn FnMut(&W, &[W], &W, &[W]) -> FunctionResult + 'a;

/// Where a key's set is kept: each in-flight window and its state window.
pub(crate) type MergingState<W> = ValueState<Vec<(W, W)>>;

pub(crate) struct MergingWindowSet<W> {
    /// Each in-flight window and its state window.
    mapping: Vec<(W, W)>,
    changed: bool,
}

impl<W: Window> MergingWindowSet<W> {
    /// The current key's set (its own namespace must be current).
    pub(crate) fn load(state: &MergingState<W>) -> Result<Self, StateError> {
        Ok(Self { mapping: state.value()?.unwrap_or_default(), changed: false })
    }

    /// Writes the set back if it changed (its own namespace must be current).
    pub(crate) fn persist(&self, state: &MergingState<W>) -> Result<(), StateError> {
        match (self.changed, self.mapping.is_empty()) {
            (false, _) => Ok(()),
            (true, true) => state.clear(),
            (true, false) => state.update(self.mapping.clone()),
        }
    }

    fn get(&self, window: &W) -> Option<&W> {
        self.mapping.iter().find(|(w, _)| w == window).map(|(_, s)| s)
    }

    fn remove(&mut self, window: &W) -> Option<W> {
        let position = self.mapping.iter().position(|(w, _)| w == window)?;
        self.changed = true;
        Some(self.mapping.swap_remove(position).1)
    }

    fn insert(&mut self, window: W, state_window: W) {
        self.changed = true;
        match self.mapping.iter_mut().find(|(w, _)| *w == window) {
            Some(entry) => entry.1 = state_window,
            None => self.mapping.push((window, state_window)),
        }
    }

    /// Where `window`'s contents are kept; `None` if it is not in flight.
    pub(crate) fn state_window(&self, window: &W) -> Option<W> {
        self.get(window).cloned()
    }

    /// `window` is done (cleaned up, or late).
    pub(crate) fn retire(&mut self, window: &W) -> FunctionResult {
        match self.remove(window) {
            Some(_) => Ok(()),
            None => Err(format!("window {window:?} is not in the in-flight window set").into()),
        }
    }

    /// Adds `new` and merges what overlaps it; returns the window `new` ended up in.
    pub(crate) fn add_window<A: WindowAssigner<W = W>>(
        &mut self,
        new: W,
        assigner: &A,
        merge: &mut MergeFunction<'_, W>,
    ) -> FunctionResult<W> {
        let mut windows: Vec<W> = self.mapping.iter().map(|(w, _)| w.clone()).collect();
        windows.push(new.clone());
        let mut merges: Vec<(W, Vec<W>)> = Vec::new();
        assigner.merge_windows(&windows, &mut |members, result| merges.push((result, members)));
        let mut result_window = new.clone();
        let mut merged_new = false;
        let no_merges = merges.is_empty();
        for (merge_result, mut merged_windows) in merges {
            if let Some(position) = merged_windows.iter().position(|w| *w == new) {
                merged_windows.remove(position);
                merged_new = true;
                result_window = merge_result.clone();
            }
            let Some(first) = merged_windows.first() else { continue };
            let target_state_window =
                self.get(first).cloned().ok_or_else(|| format!("merged window {first:?} has no state window"))?;
            let mut merged_state_windows: Vec<W> = merged_windows.iter().filter_map(|w| self.remove(w)).collect();
            self.insert(merge_result.clone(), target_state_window.clone());
            merged_state_windows.retain(|w| *w != target_state_window);
            // A window merged only into itself (the new window lies inside it) moves nothing.
            if !(merged_windows.len() == 1 && merged_windows[0] == merge_result) {
                merge(&merge_result, &merged_windows, &target_state_window, &merged_state_windows)?;
            }
        }
        if no_merges || (result_window == new && !merged_new) {
            self.insert(result_window.clone(), result_window.clone());
        }
        Ok(result_window)
    }
}
