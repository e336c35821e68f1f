//! Evictors: drop elements of a firing window before or after the window function sees
//! them (Flink's `Evictor`, `CountEvictor`, `TimeEvictor`). A window with an evictor keeps
//! every element with its timestamp.

/// Removes elements (with their timestamps, in arrival order) of a firing window.
pub trait Evictor<T, W>: Send + Sync + 'static {
    fn evict_before(&self, elements: &mut Vec<(i64, T)>, window: &W);
    fn evict_after(&self, elements: &mut Vec<(i64, T)>, window: &W);
}

/// Keeps the last `max_count` elements.
#[derive(Debug, Clone, Copy)]
pub struct CountEvictor {
    max_count: usize,
    after: bool,
}

impl CountEvictor {
    /// Evicts before the window function.
    pub fn of(max_count: usize) -> Self {
        Self { max_count, after: false }
    }

    /// Evicts after the window function when `after`.
    pub fn of_after(max_count: usize, after: bool) -> Self {
        Self { max_count, after }
    }

    fn evict<T>(&self, elements: &mut Vec<(i64, T)>) {
        if elements.len() > self.max_count {
            elements.drain(..elements.len() - self.max_count);
        }
    }
}

impl<T, W> Evictor<T, W> for CountEvictor {
    fn evict_before(&self, elements: &mut Vec<(i64, T)>, _: &W) {
        if !self.after {
            self.evict(elements)
        }
    }
    fn evict_after(&self, elements: &mut Vec<(i64, T)>, _: &W) {
        if self.after {
            self.evict(elements)
        }
    }
}

/// Keeps the elements within `window_size` of the newest element's timestamp.
#[derive(Debug, Clone, Copy)]
pub struct TimeEvictor {
    window_size: i64,
    after: bool,
}

impl TimeEvictor {
    pub fn of(window_size: std::time::Duration) -> Self {
        Self { window_size: window_size.as_millis() as i64, after: false }
    }

    pub fn of_after(window_size: std::time::Duration, after: bool) -> Self {
        Self { window_size: window_size.as_millis() as i64, after }
    }

    fn evict<T>(&self, elements: &mut Vec<(i64, T)>) {
        let Some(newest) = elements.iter().map(|(t, _)| *t).max() else { return };
        let cutoff = newest - self.window_size;
        elements.retain(|(t, _)| *t > cutoff);
    }
}

impl<T, W> Evictor<T, W> for TimeEvictor {
    fn evict_before(&self, elements: &mut Vec<(i64, T)>, _: &W) {
        if !self.after {
            self.evict(elements)
        }
    }
    fn evict_after(&self, elements: &mut Vec<(i64, T)>, _: &W) {
        if self.after {
            self.evict(elements)
        }
    }
}
