//! The data plane's frames: a 16-byte header (payload length, kind, channel key, a value)
//! and a payload.

use std::io::Read;

/// Bytes of records a frame holds before it is sent (Flink's 32 KiB memory segments).
/// A batch is never split: a frame ends after the batch that reaches this size.
pub const NETWORK_BUFFER_BYTES: usize = 32 * 1024;
pub(super) const HEADER_BYTES: usize = 16;
/// A frame larger than this is refused as corrupt.
pub(super) const FRAME_BYTES_MAX: usize = 64 << 20;
/// How often an idle sender looks at the cancel flag.
pub(super) const IDLE_WAIT_MS: u64 = 100;

pub(super) mod kind {
    pub const RECORDS: u8 = 1;
    pub const BARRIER: u8 = 2;
    pub const WATERMARK: u8 = 3;
    pub const WATERMARK_STATUS: u8 = 4;
    pub const END_OF_INPUT: u8 = 5;
    pub const CREDIT: u8 = 6;
    /// The producer cannot send the channel's records (a record that does not
    /// serialize): the payload says why, and the consumer fails with it.
    pub const UNSENDABLE: u8 = 7;
    /// An unaligned checkpoint's barrier is coming on this channel, ahead of what the
    /// producer queued: the consumer starts the checkpoint (snapshots, unless it aligns
    /// toward a timeout) and reads the channel ahead to it. The payload is the barrier's,
    /// as in [`BARRIER`].
    pub const ANNOUNCE: u8 = 8;
    /// A copy of records the coming barrier overtook at the producer (value: their count):
    /// in flight for the consumer's checkpoint, sent for real behind the barrier.
    pub const OVERTAKEN: u8 = 9;
    /// A copy of a watermark the coming barrier overtook among those records (payload as
    /// in [`WATERMARK`]), at its place among the copies; sent for real behind the barrier.
    pub const OVERTAKEN_WATERMARK: u8 = 10;
}

/// One channel on a connection: edge index, producer subtask, consumer subtask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelKey {
    pub edge: u16,
    pub from: u16,
    pub to: u16,
}

impl std::fmt::Display for ChannelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (from, to) = (u32::from(self.from) + 1, u32::from(self.to) + 1);
        write!(f, "edge {} from subtask {from} to subtask {to}", self.edge)
    }
}

pub(super) struct Header {
    pub(super) payload: u32,
    pub(super) kind: u8,
    pub(super) key: ChannelKey,
    pub(super) value: u32,
}

pub(super) fn encode_header(header: &Header) -> [u8; HEADER_BYTES] {
    let mut bytes = [0u8; HEADER_BYTES];
    bytes[0..4].copy_from_slice(&header.payload.to_le_bytes());
    bytes[4] = header.kind;
    bytes[6..8].copy_from_slice(&header.key.edge.to_le_bytes());
    bytes[8..10].copy_from_slice(&header.key.from.to_le_bytes());
    bytes[10..12].copy_from_slice(&header.key.to.to_le_bytes());
    bytes[12..16].copy_from_slice(&header.value.to_le_bytes());
    bytes
}

pub(super) fn decode_header(bytes: &[u8; HEADER_BYTES]) -> Header {
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    Header {
        payload: u32_at(0),
        kind: bytes[4],
        key: ChannelKey { edge: u16_at(6), from: u16_at(8), to: u16_at(10) },
        value: u32_at(12),
    }
}

/// Reads one frame into `payload`; `Ok(None)` at a clean end of the connection.
pub(super) fn read_frame(stream: &mut impl Read, payload: &mut Vec<u8>) -> std::io::Result<Option<Header>> {
    let mut bytes = [0u8; HEADER_BYTES];
    match stream.read_exact(&mut bytes) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let header = decode_header(&bytes);
    let length = header.payload as usize;
    if length > FRAME_BYTES_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a frame of {length} bytes")));
    }
    payload.clear();
    payload.resize(length, 0);
    stream.read_exact(payload)?;
    Ok(Some(header))
}
