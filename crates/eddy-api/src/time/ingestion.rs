//! Ingestion time: a record's event time is when it entered the job, by the clock of the
//! subtask that stamped it (Flink 1's `TimeCharacteristic.IngestionTime`; Flink 2 offers it
//! as a watermark strategy with its `IngestionTimeAssigner`).
//!
//! eddy's records carry no timestamp field (see the module above), so the stamp is kept
//! beside the record: [`crate::DataStream::with_ingestion_time`] wraps each record in
//! [`Ingested`], stamped with the machine's wall clock in epoch ms (as Flink's
//! `IngestionTimeAssigner` reads `System.currentTimeMillis`; not the simulated clock of
//! `--simulate`), never going back within a subtask, and makes watermarks that follow the
//! stamps. Like Flink 2's, the watermark moves with records only: a source that goes quiet
//! leaves its last window open until it emits again or ends (or `with_idleness` on a
//! strategy of your own over `Ingested` lets others go on). Apply it right after the source,
//! at the source's parallelism, so that it runs in the source's task and the stamps are
//! the source's clock (downstream of an exchange, records would be stamped when they
//! arrive there).

use super::WatermarkStrategy;
use crate::stream::DataStream;
use crate::Data;
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// A record with the time it was ingested (epoch ms), its event time from then on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ingested<T> {
    pub timestamp: i64,
    pub value: T,
}

impl<T: 'static> WatermarkStrategy<Ingested<T>> {
    /// Watermarks for ingestion-time stamps: they only rise, so the watermark follows
    /// them (the stamps are made by [`crate::DataStream::with_ingestion_time`]).
    pub fn for_ingestion_time() -> Self {
        WatermarkStrategy::for_monotonous_timestamps().with_timestamp_assigner(|r: &Ingested<T>| r.timestamp)
    }
}

/// The wall clock in epoch ms, never below `last`.
fn stamp(last: &mut i64) -> i64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    *last = now.max(*last);
    *last
}

impl<T: Data> DataStream<T> {
    /// Stamps every record with the time it passes here and makes watermarks from the
    /// stamps (ingestion time; see [`crate::time::Ingested`]): windows and timers after it
    /// follow the clock of the subtasks that stamped, whatever the records say.
    pub fn with_ingestion_time(&self) -> DataStream<Ingested<T>> {
        let mut last = i64::MIN;
        // At the parallelism of the operator before, so that both run in its task.
        let upstream = match self.inputs[..] {
            [(node, _)] => self.env.inner.borrow().nodes[node.0 as usize].parallelism,
            _ => None,
        };
        let mut stamped = self.map(move |value| Ingested { timestamp: stamp(&mut last), value }).name("Ingestion Time");
        if let Some(parallelism) = upstream {
            stamped = stamped.set_parallelism(parallelism);
        }
        let mut timed = stamped.assign_timestamps_and_watermarks(WatermarkStrategy::for_ingestion_time());
        if let Some(parallelism) = upstream {
            timed = timed.set_parallelism(parallelism);
        }
        timed
    }
}
