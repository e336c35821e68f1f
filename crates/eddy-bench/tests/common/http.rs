//! A plain HTTP/1.1 client for the REST tests: one request per connection, the status
//! and the body.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `method` `url` (`http://HOST:PORT/path`) with an optional bearer token and JSON body:
/// the status and the body.
pub fn request(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    request_as(method, url, None, token, body)
}

/// As [`request`], naming `host` in the `Host` header instead of the URL's.
pub fn request_as(
    method: &str,
    url: &str,
    host: Option<&str>,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (address, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut stream = TcpStream::connect(address).unwrap_or_else(|e| panic!("{url}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let host = host.unwrap_or(address);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8(answer).expect("UTF-8");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status");
    assert!(!head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "chunked: {head}");
    (status, body.to_string())
}

pub fn get(url: &str, token: Option<&str>) -> (u16, String) {
    request("GET", url, token, None)
}

/// GET, expecting 200 and JSON.
pub fn get_json(url: &str, token: Option<&str>) -> serde_json::Value {
    let (status, body) = get(url, token);
    assert_eq!(status, 200, "GET {url}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: not JSON ({e}): {body}"))
}

/// A `/metrics` text as Prometheus parses it.
pub fn scrape(url: &str, token: Option<&str>) -> prometheus_parse::Scrape {
    let (status, body) = get(url, token);
    assert_eq!(status, 200, "GET {url}: {body}");
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// The values of metric `name` whose labels include every pair of `labels`.
pub fn values(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
        .collect()
}
