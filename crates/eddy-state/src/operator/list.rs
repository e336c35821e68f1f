//! A list state of one operator instance.

/// Flink's operator `ListState`: the list is this instance's share of the state.
pub struct OperatorListState<'a, T> {
    values: &'a mut Vec<T>,
}

impl<'a, T: Clone> OperatorListState<'a, T> {
    pub(crate) fn new(values: &'a mut Vec<T>) -> Self {
        Self { values }
    }

    pub fn get(&self) -> Vec<T> {
        self.values.clone()
    }

    /// The list without copying it.
    pub fn as_slice(&self) -> &[T] {
        self.values
    }

    pub fn add(&mut self, value: T) {
        self.values.push(value);
    }

    pub fn add_all(&mut self, values: impl IntoIterator<Item = T>) {
        self.values.extend(values);
    }

    pub fn update(&mut self, values: Vec<T>) {
        *self.values = values;
    }

    pub fn clear(&mut self) {
        self.values.clear();
    }
}
