//! The event generator of `shared/bench/WORKLOADS.md`, exactly as defined there.

/// splitmix64, all arithmetic wrapping.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The request method of an event, `["GET", "POST", "PUT", "DELETE"][h >> 62]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

const METHODS: [Method; 4] = [Method::Get, Method::Post, Method::Put, Method::Delete];

impl Method {
    /// As the request line spells it.
    #[allow(dead_code)]
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// Event `i` of stream `s`. Every field is generated as the workload defines it, even
/// those W1 and W2 do not read (the generation cost is part of the work compared).
#[allow(dead_code)]
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub i: u64,
    pub key: u64,
    pub method: Method,
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
        assert_eq!(e.method.as_str(), ["GET", "POST", "PUT", "DELETE"][(h >> 62) as usize]);
    }

    #[test]
    fn events_survive_the_network_codec() {
        let events: Vec<Event> = (0..100).map(|i| Event::generate(2, i, 1_000)).collect();
        let mut bytes = Vec::new();
        eddy::types::codec::encode_batch(&events, &mut bytes).unwrap();
        let back: Vec<Event> = eddy::types::codec::decode_batch(&bytes).unwrap();
        let fields = |e: &Event| (e.i, e.key, e.method, e.timestamp_ms, e.path.clone());
        assert_eq!(back.iter().map(fields).collect::<Vec<_>>(), events.iter().map(fields).collect::<Vec<_>>());
    }
}
