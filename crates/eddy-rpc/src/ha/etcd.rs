//! A small blocking client of etcd's v3 API through its JSON gateway (`POST /v3/...` on
//! the client port, keys and values in base64): what leader election and the job store
//! need (get, prefix range, put, delete, a create-if-absent transaction, leases and
//! their keep-alive). Plain HTTP/1.1 over a std `TcpStream`, one request per connection:
//! a gRPC client (tonic) would add about a minute to a cold build here, and these calls
//! are a few a second at most.

use crate::error::ClusterError;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long one request may take (connect, send, answer): well under a third of the
/// leader's lease, so that a leader learns it lost etcd before its lease is gone.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// The largest answer read: the job store's records are small.
const ANSWER_BYTES_MAX: usize = 16 << 20;

/// etcd at one or more client endpoints (`HOST:PORT`), tried in order.
#[derive(Debug, Clone)]
pub struct Etcd {
    endpoints: Vec<String>,
}

/// A lease: keys put with it go when it expires.
pub type LeaseId = i64;

impl Etcd {
    pub fn new(endpoints: Vec<String>) -> Self {
        Self { endpoints }
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The value of `key`, if it is there.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        let answer = self.call("/v3/kv/range", &json!({ "key": encode(key.as_bytes()) }))?;
        Ok(kvs(&answer)?.into_iter().next().map(|(_, value)| value))
    }

    /// Every key under `prefix`, with its value, in key order.
    pub fn get_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, ClusterError> {
        let answer = self.call(
            "/v3/kv/range",
            &json!({ "key": encode(prefix.as_bytes()), "range_end": encode(&prefix_end(prefix.as_bytes())) }),
        )?;
        kvs(&answer)
    }

    /// Puts `value` at `key`, bound to `lease` if given.
    pub fn put(&self, key: &str, value: &[u8], lease: Option<LeaseId>) -> Result<(), ClusterError> {
        let mut body = json!({ "key": encode(key.as_bytes()), "value": encode(value) });
        if let Some(lease) = lease {
            body["lease"] = json!(lease.to_string());
        }
        self.call("/v3/kv/put", &body).map(|_| ())
    }

    pub fn delete(&self, key: &str) -> Result<(), ClusterError> {
        self.call("/v3/kv/deleterange", &json!({ "key": encode(key.as_bytes()) })).map(|_| ())
    }

    /// Puts `value` at `key` with `lease` only if `key` is absent; whether it did.
    pub fn create(&self, key: &str, value: &[u8], lease: LeaseId) -> Result<bool, ClusterError> {
        let key = encode(key.as_bytes());
        let answer = self.call(
            "/v3/kv/txn",
            &json!({
                "compare": [{ "target": "CREATE", "key": key, "create_revision": "0" }],
                "success": [{ "request_put": { "key": key, "value": encode(value), "lease": lease.to_string() } }],
            }),
        )?;
        Ok(answer.get("succeeded").and_then(Value::as_bool).unwrap_or(false))
    }

    /// Puts `value` at `key` (or deletes `key`, for `None`) only while `guard` is held under
    /// `lease`; whether it did. A leader writes this way, so that one paused past its
    /// lease cannot overwrite what its successor wrote.
    pub fn write_if_held(
        &self,
        key: &str,
        value: Option<&[u8]>,
        guard: &str,
        lease: LeaseId,
    ) -> Result<bool, ClusterError> {
        let key = encode(key.as_bytes());
        let write = match value {
            Some(value) => json!({ "request_put": { "key": key, "value": encode(value) } }),
            None => json!({ "request_delete_range": { "key": key } }),
        };
        let answer = self.call(
            "/v3/kv/txn",
            &json!({
                "compare": [{ "target": "LEASE", "key": encode(guard.as_bytes()), "lease": lease.to_string() }],
                "success": [write],
            }),
        )?;
        Ok(answer.get("succeeded").and_then(Value::as_bool).unwrap_or(false))
    }

    /// A new lease of `ttl_s` seconds.
    pub fn grant(&self, ttl_s: u64) -> Result<LeaseId, ClusterError> {
        let answer = self.call("/v3/lease/grant", &json!({ "TTL": ttl_s.to_string() }))?;
        number(&answer, "ID").ok_or_else(|| protocol("a lease grant without an ID", &answer))
    }

    /// Keeps `lease` alive; the seconds it has left, 0 if it expired already.
    pub fn keep_alive(&self, lease: LeaseId) -> Result<u64, ClusterError> {
        let answer = self.call("/v3/lease/keepalive", &json!({ "ID": lease.to_string() }))?;
        let result = answer.get("result").unwrap_or(&answer);
        Ok(number(result, "TTL").map_or(0, |ttl| ttl.max(0) as u64))
    }

    /// Ends `lease` now: its keys go.
    pub fn revoke(&self, lease: LeaseId) -> Result<(), ClusterError> {
        self.call("/v3/lease/revoke", &json!({ "ID": lease.to_string() })).map(|_| ())
    }

    /// One request, to the first endpoint that answers.
    fn call(&self, path: &str, body: &Value) -> Result<Value, ClusterError> {
        let mut last = None;
        for endpoint in &self.endpoints {
            match post(endpoint, path, body) {
                Ok(answer) => return Ok(answer),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClusterError::Config("no etcd endpoint given".into())))
    }
}

/// `POST path` with a JSON body; the JSON answer, or what went wrong.
fn post(endpoint: &str, path: &str, body: &Value) -> Result<Value, ClusterError> {
    let io = |context: &str, e: std::io::Error| ClusterError::io(endpoint, &format!("{context} etcd"), e);
    let address = std::net::ToSocketAddrs::to_socket_addrs(endpoint)
        .map_err(|e| io("resolving", e))?
        .next()
        .ok_or_else(|| ClusterError::Config(format!("etcd endpoint {endpoint} names no address")))?;
    let stream = TcpStream::connect_timeout(&address, REQUEST_TIMEOUT).map_err(|e| io("connecting to", e))?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(|e| io("setting up", e))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT)).map_err(|e| io("setting up", e))?;
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\nContent-Length: \
            {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    (&stream).write_all(request.as_bytes()).map_err(|e| io("writing to", e))?;
    let mut reader = BufReader::new(stream.take(ANSWER_BYTES_MAX as u64));
    let mut status = String::new();
    reader.read_line(&mut status).map_err(|e| io("reading from", e))?;
    let code: u16 = status.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (mut length, mut chunked) = (None, false);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).map_err(|e| io("reading from", e))? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse::<usize>().ok(),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let mut bytes = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).map_err(|e| io("reading from", e))?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| ClusterError::Protocol(format!("etcd at {endpoint} sent a bad chunk size")))?;
            if size == 0 {
                break;
            }
            if size > ANSWER_BYTES_MAX - bytes.len() {
                return Err(ClusterError::Protocol(format!(
                    "etcd at {endpoint} sent more than {ANSWER_BYTES_MAX} bytes"
                )));
            }
            let start = bytes.len();
            bytes.resize(start + size, 0);
            reader.read_exact(&mut bytes[start..]).map_err(|e| io("reading from", e))?;
            let mut end = String::new();
            reader.read_line(&mut end).map_err(|e| io("reading from", e))?;
        }
    } else if let Some(length) = length {
        bytes.resize(length.min(ANSWER_BYTES_MAX), 0);
        reader.read_exact(&mut bytes).map_err(|e| io("reading from", e))?;
    } else {
        reader.read_to_end(&mut bytes).map_err(|e| io("reading from", e))?;
    }
    // A streamed answer (keep-alive) may hold several objects: the first is the one.
    let answer: Value = serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<Value>()
        .next()
        .ok_or_else(|| ClusterError::Protocol(format!("etcd at {endpoint} answered {path} with nothing")))?
        .map_err(|e| {
            ClusterError::Protocol(format!(
                "etcd at {endpoint} answered {path} with bad JSON: {e}",
                e = eddy_types::chain(&e)
            ))
        })?;
    if code != 200 {
        return Err(ClusterError::Protocol(format!("etcd at {endpoint} refused {path} (HTTP {code}): {answer}")));
    }
    if let Some(error) = answer.get("error") {
        return Err(ClusterError::Protocol(format!("etcd at {endpoint} refused {path}: {error}")));
    }
    Ok(answer)
}

fn protocol(what: &str, answer: &Value) -> ClusterError {
    ClusterError::Protocol(format!("etcd sent {what}: {answer}"))
}

fn encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// A number etcd sends as a JSON string (int64) or a number.
fn number(value: &Value, field: &str) -> Option<i64> {
    match value.get(field)? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// The key-value pairs of a range answer (none: `kvs` absent).
fn kvs(answer: &Value) -> Result<Vec<(String, Vec<u8>)>, ClusterError> {
    let Some(kvs) = answer.get("kvs").and_then(Value::as_array) else { return Ok(Vec::new()) };
    let field = |kv: &Value, name: &str| -> Result<Vec<u8>, ClusterError> {
        match kv.get(name).and_then(Value::as_str) {
            None => Ok(Vec::new()),
            Some(text) => BASE64.decode(text).map_err(|_| protocol("a key or value that is not base64", kv)),
        }
    };
    kvs.iter().map(|kv| Ok((String::from_utf8_lossy(&field(kv, "key")?).into_owned(), field(kv, "value")?))).collect()
}

/// The end of the range of keys that start with `prefix` (etcd's `range_end`).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff: to the end of the keyspace.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_every_key_that_starts_with_it() {
        assert_eq!(prefix_end(b"eddy/jobs/"), b"eddy/jobs0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
