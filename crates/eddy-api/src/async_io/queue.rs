//! The queue of an async I/O operator (Flink's `StreamElementQueue`): records whose
//! requests are in flight, and the watermarks between them, in arrival order.
//!
//! Ordered mode emits a record's results only when every record before it was emitted.
//! Unordered mode emits results as they complete, but never across a watermark: the
//! records between two watermarks form a segment, a segment's results wait until every
//! earlier segment is emitted, and a watermark goes out once everything before it did.
//! So no result is ever emitted behind a watermark it came before.

use std::collections::VecDeque;

/// One element of the queue.
enum Element<I, R> {
    Record { id: u64, input: I, result: Option<R> },
    Watermark(i64),
}

/// What the queue gives out, in emission order.
pub(crate) enum Emit<I, R> {
    /// A record's outcome, with the input it was for.
    Result(I, R),
    Watermark(i64),
}

pub(crate) struct ElementQueue<I, R> {
    elements: VecDeque<Element<I, R>>,
    ordered: bool,
    /// Records in the queue (watermarks do not count against the capacity).
    records: usize,
    next_id: u64,
}

impl<I: Clone, R> ElementQueue<I, R> {
    pub(crate) fn new(ordered: bool) -> Self {
        Self { elements: VecDeque::new(), ordered, records: 0, next_id: 0 }
    }

    /// Records in flight or waiting to be emitted.
    pub(crate) fn records(&self) -> usize {
        self.records
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    /// Adds a record; its id names its outcome in [`ElementQueue::complete`].
    pub(crate) fn push_record(&mut self, input: I) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.elements.push_back(Element::Record { id, input, result: None });
        self.records += 1;
        id
    }

    /// Adds a watermark, unless nothing waits before it: then it goes out at once
    /// (`Some`). A watermark right after another replaces it: with no record between them
    /// the later one says all, and a slow request does not pile watermarks up.
    pub(crate) fn push_watermark(&mut self, watermark: i64) -> Option<i64> {
        match self.elements.back_mut() {
            None => Some(watermark),
            Some(Element::Watermark(last)) => {
                *last = watermark;
                None
            }
            Some(Element::Record { .. }) => {
                self.elements.push_back(Element::Watermark(watermark));
                None
            }
        }
    }

    /// Record `id`'s outcome arrived. Ids of records no longer queued are ignored.
    pub(crate) fn complete(&mut self, id: u64, outcome: R) {
        let found = self.elements.iter_mut().find_map(|element| match element {
            Element::Record { id: queued, result, .. } if *queued == id => Some(result),
            _ => None,
        });
        if let Some(result) = found {
            *result = Some(outcome);
        }
    }

    /// Takes out what may be emitted now, in order.
    pub(crate) fn drain_ready(&mut self, out: &mut Vec<Emit<I, R>>) {
        loop {
            match self.elements.front() {
                None => return,
                Some(Element::Watermark(watermark)) => {
                    out.push(Emit::Watermark(*watermark));
                    self.elements.pop_front();
                }
                Some(Element::Record { result: Some(_), .. }) => {
                    if let Some(Element::Record { input, result: Some(result), .. }) = self.elements.pop_front() {
                        self.records -= 1;
                        out.push(Emit::Result(input, result));
                    }
                }
                Some(Element::Record { result: None, .. }) if self.ordered => return,
                Some(Element::Record { result: None, .. }) => {
                    // The head waits: take the completed ones of its segment, up to the
                    // first watermark, and stop there.
                    let segment_end = self
                        .elements
                        .iter()
                        .position(|e| matches!(e, Element::Watermark(_)))
                        .unwrap_or(self.elements.len());
                    let mut index = 1;
                    let mut end = segment_end;
                    while index < end {
                        if matches!(self.elements[index], Element::Record { result: Some(_), .. }) {
                            if let Some(Element::Record { input, result: Some(result), .. }) =
                                self.elements.remove(index)
                            {
                                self.records -= 1;
                                out.push(Emit::Result(input, result));
                            }
                            end -= 1;
                        } else {
                            index += 1;
                        }
                    }
                    return;
                }
            }
        }
    }

    /// What a checkpoint keeps: every queued record's input, in order, completed ones
    /// too (their results were not emitted yet). Watermarks are not kept: after a restore
    /// upstream makes them anew.
    pub(crate) fn snapshot(&self) -> Vec<I> {
        self.elements
            .iter()
            .filter_map(|element| match element {
                Element::Record { input, .. } => Some(input.clone()),
                Element::Watermark(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drained(queue: &mut ElementQueue<&'static str, u32>) -> Vec<String> {
        let mut out = Vec::new();
        queue.drain_ready(&mut out);
        out.into_iter()
            .map(|e| match e {
                Emit::Result(input, result) => format!("{input}={result}"),
                Emit::Watermark(w) => format!("W{w}"),
            })
            .collect()
    }

    #[test]
    fn ordered_mode_emits_in_arrival_order_with_watermarks_in_place() {
        let mut queue = ElementQueue::new(true);
        let a = queue.push_record("a");
        assert_eq!(queue.push_watermark(5), None);
        let b = queue.push_record("b");
        queue.complete(b, 2);
        assert!(drained(&mut queue).is_empty(), "b waits for a");
        queue.complete(a, 1);
        assert_eq!(drained(&mut queue), ["a=1", "W5", "b=2"]);
        assert!(queue.is_empty());
        assert_eq!(queue.push_watermark(6), Some(6), "nothing waits: at once");
    }

    #[test]
    fn a_watermark_right_after_another_replaces_it() {
        let mut queue = ElementQueue::new(true);
        let a = queue.push_record("a");
        queue.push_watermark(5);
        queue.push_watermark(6);
        queue.push_watermark(7);
        queue.complete(a, 1);
        assert_eq!(drained(&mut queue), ["a=1", "W7"]);
    }

    #[test]
    fn unordered_mode_emits_as_completed_but_never_across_a_watermark() {
        let mut queue = ElementQueue::new(false);
        let a = queue.push_record("a");
        let b = queue.push_record("b");
        queue.push_watermark(10);
        let c = queue.push_record("c");
        let d = queue.push_record("d");
        queue.complete(b, 2);
        queue.complete(d, 4);
        assert_eq!(drained(&mut queue), ["b=2"], "d is behind watermark 10");
        assert_eq!(queue.records(), 3);
        queue.complete(a, 1);
        assert_eq!(drained(&mut queue), ["a=1", "W10", "d=4"]);
        queue.complete(c, 3);
        assert_eq!(drained(&mut queue), ["c=3"]);
        assert_eq!(queue.records(), 0);
    }

    #[test]
    fn a_snapshot_holds_every_queued_record_in_order() {
        let mut queue = ElementQueue::new(false);
        let a = queue.push_record("a");
        queue.push_watermark(3);
        queue.push_record("b");
        queue.complete(a, 1);
        assert_eq!(
            queue.snapshot(),
            vec!["a", "b"],
            "a completed but was not emitted: it is requested again after a restore"
        );
    }
}
