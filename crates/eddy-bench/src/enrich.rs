//! `async-enrich`: each event of stream 1 is enriched by an HTTP request to a loopback
//! service through async I/O (`AsyncDataStream`), `--capacity` requests in flight per
//! subtask, `--ordered` or not; emits `(i, value)`, where the service answers `value = 3i
//! + 1`. `checksum = Σ splitmix64(i ^ value)`.
//!
//! The service (`enrich-service`, or one started in-process without `--service`) answers
//! after 10 ms; every 50th id (i mod 50 = 7) after 200 ms; the first request for every
//! 13th id with HTTP 503, which the job retries (fixed delay, up to 5 times); with
//! `--steady`, every answer after 10 ms. `GET
//! /requests` tells how many requests it answered and for how many distinct ids, so that a
//! test sees each record requested at least once.

use crate::checksum::{checksum_of_job, ChecksumSink};
use crate::generator::splitmix64;
use crate::{Args, Report};
use anyhow::Context;
use eddy::async_io::{async_function, AsyncDataStream, AsyncRetryStrategy};
use eddy::prelude::*;
use eddy::sink::ExactlyOnceFileSink;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone, clap::Args)]
pub struct EnrichArgs {
    /// async-enrich: the enrichment service's address (default: one started in-process).
    #[arg(long)]
    pub service: Option<SocketAddr>,
    /// async-enrich: requests in flight per subtask (Flink's capacity).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub capacity: u64,
    /// async-enrich: results in the order of their records.
    #[arg(long)]
    pub ordered: bool,
    /// async-enrich / enrich-service: the service answers every request after 10 ms, with
    /// neither slow answers nor errors (for the throughput ceiling, capacity / 10 ms).
    #[arg(long)]
    pub steady: bool,
}

/// Requests per id the service answered.
type Requests = Arc<Mutex<HashMap<u64, u64>>>;

/// The service's state: the requests so far, and whether it is steady.
#[derive(Clone)]
struct Service {
    requests: Requests,
    steady: bool,
}

async fn enrich(
    axum::extract::State(Service { requests, steady }): axum::extract::State<Service>,
    axum::extract::Path(id): axum::extract::Path<u64>,
) -> (axum::http::StatusCode, String) {
    let first = {
        let mut requests = requests.lock().unwrap_or_else(|e| e.into_inner());
        let count = requests.entry(id).or_insert(0);
        *count += 1;
        *count == 1
    };
    let delay = if id % 50 == 7 && !steady { 200 } else { 10 };
    tokio::time::sleep(Duration::from_millis(delay)).await;
    if first && id.is_multiple_of(13) && !steady {
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "try again".to_string());
    }
    (axum::http::StatusCode::OK, (3 * id + 1).to_string())
}

async fn stats(axum::extract::State(Service { requests, .. }): axum::extract::State<Service>) -> String {
    let requests = requests.lock().unwrap_or_else(|e| e.into_inner());
    format!("requests={} distinct={}\n", requests.values().sum::<u64>(), requests.len())
}

/// Starts the service on a free loopback port, on a thread of its own.
pub fn start_service(steady: bool) -> anyhow::Result<SocketAddr> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let address = listener.local_addr()?;
    let requests: Requests = Arc::default();
    let app = axum::Router::new()
        .route("/enrich/{id}", axum::routing::get(enrich))
        .route("/requests", axum::routing::get(stats))
        .with_state(Service { requests, steady });
    std::thread::Builder::new().name("enrich-service".into()).spawn(move || {
        if let Err(e) = runtime.block_on(async { axum::serve(listener, app).await }) {
            eprintln!("enrich-service stopped: {e}");
        }
    })?;
    Ok(address)
}

/// `enrich-service`: runs the service until killed.
pub fn serve(args: &Args) -> anyhow::Result<Report> {
    let address = start_service(args.enrich.steady)?;
    println!("service={address}");
    loop {
        std::thread::park();
    }
}

/// One plain HTTP/1.1 GET over a new connection: the status and the body.
pub async fn http_get(address: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not an HTTP response: {response:?}"));
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).ok_or_else(bad)?;
    Ok((status, body))
}

pub fn term(&(i, value): &(u64, u64)) -> Result<u64, String> {
    Ok(splitmix64(i ^ value))
}

pub fn run(args: &Args) -> anyhow::Result<Report> {
    let enrich_args = &args.enrich;
    let address = match enrich_args.service {
        Some(address) => address,
        None => start_service(enrich_args.steady)?,
    };
    let env = Env::new();
    args.configure(&env)?;
    let lookup = async_function(move |i: u64| async move {
        let (status, body) = http_get(address, &format!("/enrich/{i}")).await?;
        if status != 200 {
            return Err(format!("HTTP {status} for id {i}: {body}").into());
        }
        let value: u64 = body.trim().parse().map_err(|_| format!("id {i}: the service answered '{body}'"))?;
        Ok(vec![(i, value)])
    });
    let retry =
        AsyncRetryStrategy::fixed_delay(5, Duration::from_millis(20)).if_error(|e| e.to_string().contains("HTTP 503"));
    let events = env.from_sequence(0, args.events - 1).name("events").uid("events");
    let (timeout, capacity) = (Duration::from_secs(10), enrich_args.capacity as usize);
    let enriched = if enrich_args.ordered {
        AsyncDataStream::ordered_wait_with_retry(&events, lookup, timeout, capacity, retry)
    } else {
        AsyncDataStream::unordered_wait_with_retry(&events, lookup, timeout, capacity, retry)
    }
    .uid("enrich");
    enriched.add_sink(ChecksumSink::new(term)).name("checksum").uid("checksum");
    if let Some(dir) = &args.checkpoints.output {
        enriched
            .map(|(i, value)| format!("{i} {value}"))
            .name("format")
            .uid("format")
            .add_sink(ExactlyOnceFileSink::<String>::new_in(dir))
            .name("exactly-once file sink")
            .uid("file-sink");
    }
    let result = env.execute("async-enrich").context("running async-enrich")?;
    Ok(Report {
        elsewhere: result.elsewhere(),
        events: args.events,
        seconds: result.duration.as_secs_f64(),
        checksum: checksum_of_job(&result),
        extra: args.checkpoints.report(&result),
    })
}
