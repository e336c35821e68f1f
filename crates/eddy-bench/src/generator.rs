//! The event generator of `shared/bench/WORKLOADS.md`, exactly as defined there.

/// splitmix64, all arithmetic wrapping.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const METHODS: [&str; 4] = ["GET", "POST", "PUT", "DELETE"];

/// Event `i` of stream `s`. Every field is generated as the workload defines it, even
/// those W1 and W2 do not read (the generation cost is part of the work compared).
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Event {
    pub i: u64,
    pub key: u64,
    pub method: &'static str,
    pub timestamp_ms: u64,
    pub path: String,
}

impl Event {
    #[inline]
    pub fn generate(stream: u64, i: u64, keys: u64) -> Self {
        let h = splitmix64(i ^ stream.wrapping_mul(0x100_0000_01B3));
        let key = h % keys;
        Event { i, key, method: METHODS[(h >> 62) as usize], timestamp_ms: i, path: format!("/api/{key}") }
    }

    /// The key behind a path `"/api/<key>"`.
    pub fn key_of_path(path: &str) -> Option<u64> {
        path.strip_prefix("/api/")?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_follow_the_definition() {
        let e = Event::generate(1, 0, 10_000);
        let h = splitmix64(0x100_0000_01B3);
        assert_eq!(e.key, h % 10_000);
        assert_eq!(e.path, format!("/api/{}", e.key));
        assert_eq!(Event::key_of_path(&e.path), Some(e.key));
        assert_eq!(e.method, METHODS[(h >> 62) as usize]);
    }
}
