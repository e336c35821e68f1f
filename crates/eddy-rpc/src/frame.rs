//! Control messages on the wire: a little-endian `u32` length, then the message in
//! postcard. Control traffic is small and rare (deployments, checkpoint acknowledgements,
//! heartbeats), so one lock per connection for writers is fine here; records travel on
//! the runtime's data plane instead. Each kind of connection has its own message enum
//! ([`crate::messages`], and the runtime's for task executors): [`Connection::send`] and
//! [`Reader::receive`] take whichever the connection carries.

use crate::error::ClusterError;
use crate::stream::Stream;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A control message larger than this is refused as corrupt (checkpoint metadata of a
/// job with thousands of subtasks stays far below it).
pub const MESSAGE_BYTES_MAX: usize = 256 << 20;

/// Whether `message` fits one control frame: its encoded size when it does not.
pub fn oversized<T: Serialize>(message: &T) -> Option<usize> {
    postcard::to_allocvec(message).map(|body| body.len()).ok().filter(|&len| len > MESSAGE_BYTES_MAX)
}

/// Writes any serializable value as one frame.
pub fn write_value<T: Serialize>(stream: &mut impl Write, message: &T) -> std::io::Result<()> {
    let body = postcard::to_allocvec(message).map_err(|e| std::io::Error::other(eddy_types::chain(&e)))?;
    // The reader's limit, enforced here too: a message it would refuse is an error at
    // its source, naming its size, not a peer that calls it "not an eddy message".
    if body.len() > MESSAGE_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a control message of {} bytes, more than the {MESSAGE_BYTES_MAX} a connection carries (state kept in \
                    the JobManager's memory that outgrew it? use a checkpoint directory)",
                body.len()
            ),
        ));
    }
    let length = u32::try_from(body.len()).map_err(|_| std::io::Error::other("a control message too long to frame"))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&length.to_le_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;
    stream.flush()
}

/// Reads one frame written by [`write_value`]; `Ok(None)` at a clean end.
pub fn read_value<T: DeserializeOwned>(stream: &mut impl Read) -> std::io::Result<Option<T>> {
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = u32::from_le_bytes(length) as usize;
    if length > MESSAGE_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a message of {length} bytes (more than {MESSAGE_BYTES_MAX}): not an eddy message"),
        ));
    }
    // Read as the bytes come, so that a length alone reserves nothing.
    let mut body = Vec::new();
    stream.take(length as u64).read_to_end(&mut body)?;
    if body.len() < length {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "a message cut short"));
    }
    postcard::from_bytes(&body).map(Some).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("an unreadable message: {e}", e = eddy_types::chain(&e)),
        )
    })
}

/// One authenticated control connection: a reader for one thread, and a writer any
/// thread may use.
#[derive(Clone)]
pub struct Connection {
    writer: Arc<Mutex<Stream>>,
    peer: String,
}

impl Connection {
    /// Splits `stream` into this writer and a reader. `read_timeout`: how long the reader
    /// waits for anything (heartbeats included) before it calls the peer lost.
    pub fn new(stream: Stream, read_timeout: Option<Duration>) -> Result<(Self, Reader), ClusterError> {
        let peer = stream.peer().to_string();
        stream.set_read_timeout(read_timeout).map_err(|e| ClusterError::io(&peer, "setting a read timeout", e))?;
        let reader = stream.clone();
        Ok((
            Self { writer: Arc::new(Mutex::new(stream)), peer: peer.clone() },
            Reader { stream: BufReader::new(reader), peer },
        ))
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Sends one message of the kind this connection carries.
    pub fn send<M: Serialize>(&self, message: &M) -> Result<(), ClusterError> {
        let mut stream = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        write_value(&mut *stream, message).map_err(|e| ClusterError::io(&self.peer, "sending", e))
    }

    /// Closes both directions: the peer's reader sees the end, and so does ours.
    pub fn close(&self) {
        let stream = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        stream.shutdown();
    }
}

/// The reading half of a [`Connection`].
pub struct Reader {
    stream: BufReader<Stream>,
    peer: String,
}

impl Reader {
    /// The next message. The end of the connection, a read timeout (no heartbeat) and
    /// garbage are all errors that name the peer.
    pub fn receive<M: DeserializeOwned>(&mut self) -> Result<M, ClusterError> {
        match read_value(&mut self.stream) {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err(ClusterError::broken(
                &self.peer,
                "reading",
                eddy_types::Cause::message("the connection was closed"),
            )),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                let timeout = eddy_types::Cause::message("heartbeat timeout");
                Err(ClusterError::broken(&self.peer, "waiting for a heartbeat", timeout))
            }
            Err(e) => Err(ClusterError::io(&self.peer, "reading", e)),
        }
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// How long it waits for anything before calling the peer lost.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> Result<(), ClusterError> {
        self.stream
            .get_ref()
            .set_read_timeout(timeout)
            .map_err(|e| ClusterError::io(&self.peer, "setting a read timeout", e))
    }
}
