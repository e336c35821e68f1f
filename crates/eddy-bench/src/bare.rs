//! `--bare`: a workload's work in one plain loop on one thread, without the engine, so
//! that every measurement shows the engine's share of what the hardware does.
//!
//! The loop calls the same event generator and folds the same checksum as the job's
//! functions do; its state is what a plain program would use, a `std` `HashMap` keyed
//! like the job's state. Events follow one another in stream order (W2 alternates the
//! two streams), which the checksums do not depend on.

use crate::api_count::checksum_of;
use crate::generator::{splitmix64, Event};
use crate::{Args, Report};
use std::collections::HashMap;
use std::time::Instant;

/// Refuses flags that only mean something to the engine.
fn check(args: &Args, workload: &str) -> anyhow::Result<()> {
    let c = &args.checkpoints;
    let engine_only = [
        (args.parallelism != 1, "--parallelism"),
        (args.rate != 0, "--rate"),
        (args.incremental, "--incremental"),
        (args.backend == Some(crate::Backend::Rocksdb), "--backend rocksdb"),
        (c.checkpoint_ms != 0 || c.checkpoint_dir.is_some(), "--checkpoint-ms/--checkpoint-dir"),
        (c.output.is_some(), "--output"),
        (args.cluster.restore.is_some() || args.cluster.from_savepoint.is_some(), "--restore/--from-savepoint"),
        (c.savepoint_dir.is_some(), "--savepoint-dir"),
    ];
    match engine_only.iter().find(|(set, _)| *set) {
        Some((_, flag)) => {
            anyhow::bail!("{workload} --bare is one plain loop on one thread without the engine: {flag} does not apply")
        }
        None => Ok(()),
    }
}

/// W1: count per path, emit `(path, count)`, fold the checksum of what is emitted.
pub fn api_count(args: &Args) -> anyhow::Result<Report> {
    check(args, "api-count")?;
    let keys = args.keys();
    let started = Instant::now();
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut checksum = 0u64;
    for i in 0..args.events {
        let event = Event::generate(1, i, keys);
        let count = match counts.get_mut(event.path.as_str()) {
            Some(count) => {
                *count += 1;
                *count
            }
            None => {
                counts.insert(event.path.clone(), 1);
                1
            }
        };
        checksum = checksum.wrapping_add(checksum_of(&event.path, count).map_err(anyhow::Error::msg)?);
    }
    Ok(Report::bare(args.events, started, checksum))
}

/// W2: the last `i` of each stream per key; a join is emitted when the other side is set.
pub fn join(args: &Args) -> anyhow::Result<Report> {
    check(args, "join")?;
    let keys = args.keys();
    let started = Instant::now();
    let mut last: HashMap<u64, [Option<u64>; 2]> = HashMap::new();
    let (mut checksum, mut emitted) = (0u64, 0u64);
    for i in 0..args.events {
        for side in 0..2 {
            let event = Event::generate(side as u64 + 1, i, keys);
            checksum = checksum.wrapping_add(splitmix64(event.key));
            let sides = last.entry(event.key).or_default();
            sides[side] = Some(event.i);
            if sides[1 - side].is_some() {
                emitted += 1;
            }
        }
    }
    let mut report = Report::bare(2 * args.events, started, checksum);
    report.extra.push(("emitted".to_string(), emitted.to_string()));
    Ok(report)
}

/// W3: a count per key for the current window; the window's counts are emitted when an
/// event of a later window comes (the timestamps only rise: the watermark's work), and
/// the last window's at the end.
pub fn window(args: &Args) -> anyhow::Result<Report> {
    check(args, "window")?;
    let keys = args.keys();
    let size = args.window_ms as i64;
    let started = Instant::now();
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let mut current_start = i64::MIN;
    let mut checksum = 0u64;
    let mut emit = |start: i64, counts: &mut HashMap<u64, u64>| {
        for (key, count) in counts.drain() {
            checksum = checksum.wrapping_add(splitmix64(key ^ start as u64).wrapping_mul(count));
        }
    };
    for i in 0..args.events {
        let event = Event::generate(1, i, keys);
        let timestamp = event.timestamp_ms as i64;
        let start = timestamp - timestamp.rem_euclid(size);
        if start != current_start {
            emit(current_start, &mut counts);
            current_start = start;
        }
        *counts.entry(event.key).or_insert(0) += 1;
    }
    emit(current_start, &mut counts);
    Ok(Report::bare(args.events, started, checksum))
}

/// W6: per key, each stream's indices of the last `--interval-ms`; a new event pairs with
/// the other stream's (the streams alternate, so everything older can never pair again
/// and is dropped: the watermark's work).
pub fn interval_join(args: &Args) -> anyhow::Result<Report> {
    check(args, "interval-join")?;
    let keys = args.keys();
    let bound = args.interval_ms;
    let started = Instant::now();
    let mut waiting: HashMap<u64, [std::collections::VecDeque<u64>; 2]> = HashMap::new();
    let (mut checksum, mut emitted) = (0u64, 0u64);
    for i in 0..args.events {
        for side in 0..2 {
            let event = Event::generate(side as u64 + 1, i, keys);
            let sides = waiting.entry(event.key).or_default();
            for queue in sides.iter_mut() {
                while queue.front().is_some_and(|&t| t + bound < i) {
                    queue.pop_front();
                }
            }
            for &other in &sides[1 - side] {
                let (a, b) = if side == 0 { (i, other) } else { (other, i) };
                checksum =
                    checksum.wrapping_add(crate::time_join::pair_term(&(event.key, a, b)).map_err(anyhow::Error::msg)?);
                emitted += 1;
            }
            sides[side].push_back(i);
        }
    }
    let mut report = Report::bare(2 * args.events, started, checksum);
    report.extra.push(("emitted".to_string(), emitted.to_string()));
    Ok(report)
}

/// W7: per key, each stream's indices in the current window; at the window's end every
/// pair of a key is emitted.
pub fn window_join(args: &Args) -> anyhow::Result<Report> {
    check(args, "window-join")?;
    let keys = args.keys();
    let size = args.window_ms;
    let started = Instant::now();
    let mut window: HashMap<u64, [Vec<u64>; 2]> = HashMap::new();
    let mut current_start = 0u64;
    let (mut checksum, mut emitted) = (0u64, 0u64);
    let mut fire = |window: &mut HashMap<u64, [Vec<u64>; 2]>| -> anyhow::Result<()> {
        for (key, [lefts, rights]) in window.drain() {
            for &a in &lefts {
                for &b in &rights {
                    checksum =
                        checksum.wrapping_add(crate::time_join::pair_term(&(key, a, b)).map_err(anyhow::Error::msg)?);
                    emitted += 1;
                }
            }
        }
        Ok(())
    };
    for i in 0..args.events {
        let start = i - i % size;
        if start != current_start {
            fire(&mut window)?;
            current_start = start;
        }
        for side in 0..2 {
            let event = Event::generate(side as u64 + 1, i, keys);
            window.entry(event.key).or_default()[side].push(i);
        }
    }
    fire(&mut window)?;
    let mut report = Report::bare(2 * args.events, started, checksum);
    report.extra.push(("emitted".to_string(), emitted.to_string()));
    Ok(report)
}
