//! This process's resident memory and CPU time, from Linux's `/proc` (nothing elsewhere).

/// Bytes resident in memory (`VmRSS`), if `/proc` says.
pub(crate) fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Seconds of CPU this process used (user and system), if `/proc` says.
pub(crate) fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name is in parentheses and may hold spaces: count fields after it.
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line (11 and 12 after the name).
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ: 100 on every Linux architecture eddy builds for.
    Some(ticks as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_memory_and_cpu() {
        assert!(super::resident_bytes().is_some_and(|b| b > 1 << 20));
        // Burn CPU until /proc counts a tick (10 ms), for at most two seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut x = 0u64;
        while super::cpu_seconds() == Some(0.0) && std::time::Instant::now() < deadline {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        assert!(super::cpu_seconds().is_some_and(|s| s > 0.0));
    }
}
