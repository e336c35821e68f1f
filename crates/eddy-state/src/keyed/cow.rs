//! Copy on write by key group: [`Group`] holds one key group's table, the task thread's
//! own or shared with a snapshot being written, and [`Spares`] keeps the memory of the
//! copies a snapshot let go, for the next copies.
//!
//! Generic over the table, so that every structure a snapshot takes by key group (a
//! state's hash tables today) shares it the same way: taken in O(1) at the barrier, copied
//! on the first change after it only if the snapshot still reads it.

use std::sync::{Arc, Mutex};

/// One key group's table: the owner's, or shared with a snapshot being written (copy on
/// write, as Flink's `CopyOnWriteStateMap`: a snapshot takes every group in O(1), and the
/// first change after it takes the group back, copying it only if the snapshot still
/// reads it). So the task thread never copies a whole state at a barrier.
pub(super) enum Group<T> {
    Owned(T),
    Shared(Arc<T>),
}

impl<T: Clone + Default> Group<T> {
    #[inline]
    pub(super) fn get(&self) -> &T {
        match self {
            Group::Owned(table) => table,
            Group::Shared(table) => table,
        }
    }

    /// The group for a change: owned again first if a snapshot shared it. A copy of a
    /// hash table keeps every entry in its bucket, so bucket indexes stay valid.
    #[inline]
    pub(super) fn get_mut(&mut self, spares: &Spares<T>) -> &mut T {
        if let Group::Shared(_) = self {
            self.unshare(spares);
        }
        match self {
            Group::Owned(table) => table,
            Group::Shared(_) => unreachable!("unshared above"),
        }
    }

    #[cold]
    fn unshare(&mut self, spares: &Spares<T>) {
        if let Group::Shared(shared) = std::mem::replace(self, Group::Owned(T::default())) {
            *self = Group::Owned(Arc::try_unwrap(shared).unwrap_or_else(|shared| spares.copy_of(&shared)));
        }
    }

    /// The group for a snapshot, shared from now on.
    pub(super) fn share(&mut self) -> Arc<T> {
        if let Group::Owned(table) = self {
            *self = Group::Shared(Arc::new(std::mem::take(table)));
        }
        match self {
            Group::Shared(table) => Arc::clone(table),
            Group::Owned(_) => unreachable!("shared above"),
        }
    }
}

/// The memory of key groups that a snapshot let go after the task thread had copied
/// them: the next copies are made into it. Fresh memory for every copy cost the task
/// thread a page fault per 4 KB (W4 on the heap with 1 s checkpoints copies its whole
/// state each second: `clear_page_erms` was 9-17 % of its samples), and freeing it off the
/// task thread handed it back to the system only to be asked for again.
///
/// One pool for all key groups, not a spare per group: a table let go early in a
/// snapshot takes a copy made later in the same one, so a state that is copied holds
/// about one copy of itself beside it, as before (a spare per group kept a third copy
/// idle until the next checkpoint: W4's peak RSS +80-100 MB). hashbrown's `clone_from`
/// reuses a spare's memory when its size is the source's, and frees it otherwise (so with
/// skewed key groups a hot group's old table does not linger: the next copy of another
/// size frees it). Taking a spare of the same size first measured slower on W4, whose
/// groups sit on both sides of a table size. At most one table per key group is kept,
/// with its entries: their memory is freed by the copy into it, on the task thread, where
/// it goes straight to the copy's own allocations (emptied on the snapshot's thread, it
/// was freed across threads and W4's copies took fresh pages again).
pub(super) struct Spares<T> {
    tables: Arc<Mutex<Vec<T>>>,
    max: usize,
}

impl<T> Clone for Spares<T> {
    fn clone(&self) -> Self {
        Self { tables: Arc::clone(&self.tables), max: self.max }
    }
}

impl<T: Clone> Spares<T> {
    pub(super) fn new(group_count: usize) -> Self {
        Self { tables: Arc::default(), max: group_count }
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        // A panic while holding it left at worst a spare missing.
        self.tables.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of `shared`, in a spare's memory if there is one.
    fn copy_of(&self, shared: &T) -> T {
        let spare = self.tables().pop();
        match spare {
            Some(mut table) => {
                table.clone_from(shared);
                table
            }
            None => shared.clone(),
        }
    }

    /// A snapshot is done with `shared`: kept as a spare if the task thread copied it
    /// meanwhile (then nobody else holds it), otherwise let go (the task thread takes it
    /// back without a copy).
    pub(super) fn give_back(&self, shared: Arc<T>) {
        if let Ok(table) = Arc::try_unwrap(shared) {
            let mut tables = self.tables();
            if tables.len() < self.max {
                tables.push(table);
            }
        }
    }

    /// The spares, for a test to look at.
    #[cfg(test)]
    pub(super) fn held(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.tables()
    }
}
