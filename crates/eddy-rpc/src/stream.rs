//! A cluster connection's bytes: plain TCP, or TLS over it (rustls). A [`Stream`] is a
//! cheap handle that one thread reads from while others write to it, as every eddy
//! connection needs (a data connection carries records one way and credits the other).
//!
//! rustls keeps one state for both directions, so a TLS stream keeps it behind a lock
//! that is never held while waiting on the network: a reader waits for bytes on the
//! socket unlocked, then decrypts under the lock; a writer encrypts under the lock, then
//! writes the ciphertext holding only the socket's write lock (taken before the state
//! lock is released, so records go out in the order they were sealed).

use crate::error::ClusterError;
use crate::tls::TlsConfig;
use rustls::Connection as TlsConnection;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 32 * 1024;

/// One connection's byte stream; clones share it.
#[derive(Clone)]
pub struct Stream {
    inner: Arc<Inner>,
    peer: Arc<str>,
}

enum Inner {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

struct TlsStream {
    /// The socket a reader waits on (a clone of the writer's).
    socket: TcpStream,
    writer: Mutex<TcpStream>,
    state: Mutex<TlsState>,
    /// Where the reader takes ciphertext off the socket, kept between reads (one reader
    /// per connection: never contended).
    chunk: Mutex<Vec<u8>>,
}

struct TlsState {
    connection: TlsConnection,
    /// Ciphertext read but not yet taken by rustls (its plaintext buffer was full).
    pending: Vec<u8>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Stream {
    /// Connects to `address`, with TLS when `tls` is given (the server's certificate
    /// must name the host of `address`).
    pub fn connect(address: &str, tls: Option<&TlsConfig>, context: &str) -> Result<Stream, ClusterError> {
        let socket = TcpStream::connect(address).map_err(|e| ClusterError::io(address, context, e))?;
        Stream::client(socket, address, tls)
    }

    /// The client's side of a connection made to `address`.
    pub fn client(socket: TcpStream, address: &str, tls: Option<&TlsConfig>) -> Result<Stream, ClusterError> {
        let _ = socket.set_nodelay(true);
        match tls {
            None => Ok(Stream::plain(socket)),
            Some(tls) => {
                let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
                let connection = tls.client(host).map_err(|e| ClusterError::Refused(format!("{address}: {e}")))?;
                Stream::secure(socket, TlsConnection::Client(connection))
            }
        }
    }

    /// The server's side of an accepted connection.
    pub fn accept(socket: TcpStream, tls: Option<&TlsConfig>) -> Result<Stream, ClusterError> {
        let _ = socket.set_nodelay(true);
        match tls {
            None => Ok(Stream::plain(socket)),
            Some(tls) => {
                let connection = tls.server().map_err(|e| ClusterError::Config(eddy_types::chain(&e)))?;
                Stream::secure(socket, TlsConnection::Server(connection))
            }
        }
    }

    fn plain(socket: TcpStream) -> Stream {
        let peer = peer_of(&socket);
        Stream { inner: Arc::new(Inner::Plain(socket)), peer }
    }

    fn secure(mut socket: TcpStream, mut connection: TlsConnection) -> Result<Stream, ClusterError> {
        let peer = peer_of(&socket);
        connection.set_buffer_limit(None);
        let _ = socket.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
        while connection.is_handshaking() {
            if let Err(e) = connection.complete_io(&mut socket) {
                let refusal = format!("TLS handshake failed: {e}", e = eddy_types::chain(&e));
                tracing::warn!(peer = %peer, reason = %refusal, "connection refused");
                return Err(ClusterError::Refused(format!("{peer}: {refusal}")));
            }
        }
        let _ = socket.set_read_timeout(None);
        let writer = socket.try_clone().map_err(|e| ClusterError::io(&peer, "opening the connection", e))?;
        let tls = TlsStream {
            socket,
            writer: Mutex::new(writer),
            state: Mutex::new(TlsState { connection, pending: Vec::new() }),
            chunk: Mutex::new(vec![0u8; READ_CHUNK]),
        };
        Ok(Stream { inner: Arc::new(Inner::Tls(Box::new(tls))), peer })
    }

    /// The peer's address, for messages.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// This end's address (a listener for peers binds the same interface).
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        let socket = match &*self.inner {
            Inner::Plain(socket) => socket,
            Inner::Tls(tls) => &tls.socket,
        };
        socket.local_addr().ok().map(|a| a.ip())
    }

    pub fn is_tls(&self) -> bool {
        matches!(*self.inner, Inner::Tls(_))
    }

    /// How long a read waits for bytes before it fails with `WouldBlock`/`TimedOut`.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match &*self.inner {
            Inner::Plain(socket) => socket.set_read_timeout(timeout),
            Inner::Tls(tls) => tls.socket.set_read_timeout(timeout),
        }
    }

    /// Closes both directions (with TLS, after telling the peer).
    pub fn shutdown(&self) {
        match &*self.inner {
            Inner::Plain(socket) => {
                let _ = socket.shutdown(Shutdown::Both);
            }
            Inner::Tls(tls) => {
                {
                    let mut state = lock(&tls.state);
                    state.connection.send_close_notify();
                    let mut out = Vec::new();
                    while state.connection.wants_write() {
                        if state.connection.write_tls(&mut out).is_err() {
                            break;
                        }
                    }
                    let mut writer = lock(&tls.writer);
                    drop(state);
                    let _ = writer.write_all(&out);
                }
                let _ = tls.socket.shutdown(Shutdown::Both);
            }
        }
    }

    /// Closes the writing direction only: the peer reads to its end.
    pub fn shutdown_write(&self) {
        match &*self.inner {
            Inner::Plain(socket) => {
                let _ = socket.shutdown(Shutdown::Write);
            }
            Inner::Tls(_) => self.shutdown(),
        }
    }
}

fn peer_of(socket: &TcpStream) -> Arc<str> {
    socket.peer_addr().map_or_else(|_| "an unknown peer".to_string(), |a| a.to_string()).into()
}

impl TlsStream {
    fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut chunk = lock(&self.chunk);
        loop {
            {
                let mut state = lock(&self.state);
                match state.connection.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    // The peer closed without a close_notify: the end of the stream, as
                    // a plain socket's would be.
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
                if !state.pending.is_empty() {
                    let TlsState { connection, pending } = &mut *state;
                    let mut unread = &pending[..];
                    let taken = connection.read_tls(&mut unread)?;
                    pending.drain(..taken);
                    connection
                        .process_new_packets()
                        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                    self.send_pending(state)?;
                    continue;
                }
            }
            let n = (&self.socket).read(&mut chunk[..])?;
            if n == 0 {
                return Ok(0);
            }
            lock(&self.state).pending.extend_from_slice(&chunk[..n]);
        }
    }

    /// Writes what rustls has to send (records, or answers to the peer's), in order.
    fn send_pending(&self, mut state: std::sync::MutexGuard<'_, TlsState>) -> std::io::Result<()> {
        if !state.connection.wants_write() {
            return Ok(());
        }
        let mut out = Vec::new();
        while state.connection.wants_write() {
            state.connection.write_tls(&mut out)?;
        }
        let mut writer = lock(&self.writer);
        drop(state);
        writer.write_all(&out)
    }

    fn write(&self, data: &[u8]) -> std::io::Result<()> {
        let mut state = lock(&self.state);
        state.connection.writer().write_all(data)?;
        self.send_pending(state)
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &*self.inner {
            Inner::Plain(socket) => (&*socket).read(buf),
            Inner::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &*self.inner {
            Inner::Plain(socket) => (&*socket).write(buf),
            Inner::Tls(tls) => tls.write(buf).map(|()| buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
