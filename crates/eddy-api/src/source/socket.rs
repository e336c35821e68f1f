//! Lines from a TCP socket (Flink's `socketTextStream`).

use crate::function::{FunctionResult, RichFunction, RuntimeContext, SourceFunction, SourceStep};
use eddy_runtime::Collector;
use std::io::{BufRead, BufReader, ErrorKind};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long a read waits before the source lets the task loop take control messages.
const READ_WAIT_MS: u64 = 50;
const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// Reads newline-separated lines until the peer closes the connection. Not replayable: a
/// socket cannot be rewound.
#[derive(Debug)]
pub struct SocketTextSource {
    host: String,
    port: u16,
    reader: Option<BufReader<TcpStream>>,
    pending: Vec<u8>,
}

impl Clone for SocketTextSource {
    fn clone(&self) -> Self {
        Self::new(&self.host, self.port)
    }
}

impl SocketTextSource {
    pub fn new(host: &str, port: u16) -> Self {
        Self { host: host.to_string(), port, reader: None, pending: Vec::new() }
    }

    fn take_line(&mut self) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl RichFunction for SocketTextSource {
    fn open(&mut self, _ctx: &mut RuntimeContext<'_>) -> FunctionResult {
        let address = format!("{}:{}", self.host, self.port);
        let what = |e: std::io::Error| format!("cannot connect to socket {address}: {e}", e = eddy_types::chain(&e));
        let resolved =
            address.to_socket_addrs().map_err(what)?.next().ok_or_else(|| format!("cannot resolve {address}"))?;
        let stream = TcpStream::connect_timeout(&resolved, Duration::from_millis(CONNECT_TIMEOUT_MS)).map_err(what)?;
        stream.set_read_timeout(Some(Duration::from_millis(READ_WAIT_MS))).map_err(what)?;
        self.reader = Some(BufReader::new(stream));
        Ok(())
    }
}

impl SourceFunction<String> for SocketTextSource {
    fn emit_batch(&mut self, max_records: usize, out: &mut Collector<'_, String>) -> FunctionResult<SourceStep> {
        for emitted in 0..max_records {
            let reader = self.reader.as_mut().ok_or("socket source used before open")?;
            match reader.read_until(b'\n', &mut self.pending) {
                Ok(0) => {
                    if !self.pending.is_empty() {
                        out.collect(self.take_line());
                    }
                    return Ok(SourceStep::Finished);
                }
                Ok(_) if self.pending.last() == Some(&b'\n') => out.collect(self.take_line()),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    return Ok(if emitted == 0 { SourceStep::Idle } else { SourceStep::More });
                }
                Err(e) => {
                    return Err(
                        format!("reading socket {}:{}: {e}", self.host, self.port, e = eddy_types::chain(&e)).into()
                    )
                }
            }
        }
        Ok(SourceStep::More)
    }
}
