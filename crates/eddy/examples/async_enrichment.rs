//! Enriching each record through an HTTP call without blocking the task: Flink's async
//! I/O (`AsyncDataStream::unordered_wait`). Every order asks a customer service for its
//! customer's name; up to 50 requests per subtask are in flight at once, so a 10 ms
//! service gives about 5,000 records a second per subtask instead of 100. A failed request
//! (HTTP 503) is retried after 50 ms, up to three times.
//!
//! The example starts its own customer service on a loopback port (a plain blocking HTTP
//! server, standing in for a real one).
//!
//! ```text
//! cargo run --release --example async_enrichment
//! ```

use eddy::async_io::{async_function, AsyncDataStream, AsyncRetryStrategy};
use eddy::prelude::*;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The customer service: `GET /customer/<id>` answers `name-<id>` after 10 ms; the first
/// request for every 17th id answers 503.
pub fn start_customer_service() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let refused = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    std::thread::spawn(move || {
        for connection in listener.incoming().flatten() {
            let refused = refused.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(&connection).read_line(&mut line);
                let id: u64 = line.split('/').nth(2).and_then(|s| s.split(' ').next()?.parse().ok()).unwrap_or(0);
                std::thread::sleep(Duration::from_millis(10));
                let first = refused.lock().unwrap().insert(id);
                let (status, body) = if first && id.is_multiple_of(17) {
                    ("503 Service Unavailable", String::new())
                } else {
                    ("200 OK", format!("name-{id}"))
                };
                let mut connection = connection;
                let _ = write!(
                    connection,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Ok(address)
}

/// `GET path` over a new connection: the status code and the body.
async fn get(address: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// `(order id, customer name)` for orders `0..n`, whose customer is `order % 100`.
pub fn job(env: &Env, service: SocketAddr, n: u64, sink: CollectSink<(u64, String)>) {
    let orders = env.from_sequence(0, n - 1).name("orders");
    let lookup = async_function(move |order: u64| async move {
        let customer = order % 100;
        let (status, name) = get(service, &format!("/customer/{customer}")).await?;
        if status != 200 {
            return Err(format!("HTTP {status} for customer {customer}").into());
        }
        Ok(vec![(order, name)])
    });
    let retry =
        AsyncRetryStrategy::fixed_delay(3, Duration::from_millis(50)).if_error(|e| e.to_string().contains("HTTP 503"));
    AsyncDataStream::unordered_wait_with_retry(&orders, lookup, Duration::from_secs(5), 50, retry)
        .name("customer names")
        .uid("customer-names")
        .add_sink(sink);
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    eddy::cluster::serve_role();
    eddy::log_to_stderr();
    let env = Env::new();
    eddy::cluster::SubmitArgs::from_process_args().apply_to(&env)?;
    let service = start_customer_service()?;
    let sink = CollectSink::new();
    job(&env, service, 5_000, sink.clone());
    let result = env.execute("async enrichment")?;
    if result.elsewhere() {
        return Ok(()); // a task executor, or submitted detached: the JobMaster reports the job
    }
    println!(
        "enriched {} orders through a 10 ms service in {:.2} s at parallelism {}",
        sink.take().len(),
        result.duration.as_secs_f64(),
        env.parallelism()
    );
    Ok(())
}
