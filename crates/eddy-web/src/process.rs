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
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(super::cpu_seconds().is_some_and(|s| s > 0.0));
    }
}
