//! The cluster's secret and the handshake that proves it, before anything else crosses a
//! connection: every process (JobManager, TaskManager, JobMaster, CLI, task executor,
//! data connection) shows it holds the secret without sending it.
//!
//! 1. The connecting side sends `EDDY`, the protocol version, its role and a nonce.
//! 2. The accepting side answers with its nonce and `HMAC(secret, "server" | both nonces
//!    | role)`: the client learns it talks to the cluster, not to an impostor.
//! 3. The client answers with `HMAC(secret, "client" | both nonces | role)`, and the
//!    server says whether it is in.
//!
//! Nonces are fresh per connection, so a recorded handshake cannot be replayed, and the
//! MACs are compared in constant time (ring's `verify`).

use crate::error::ClusterError;
use crate::stream::Stream;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use std::io::{Read, Write};
use std::path::Path;

/// Bumped whenever a message changes shape: processes of different versions refuse each
/// other with a clear error instead of misreading bytes.
pub const PROTOCOL_VERSION: u16 = 4;
const MAGIC: &[u8; 4] = b"EDDY";
const NONCE_BYTES: usize = 16;
const MAC_BYTES: usize = 32;
/// Shorter secrets are refused: a guessable secret is no secret.
const SECRET_BYTES_MIN: usize = 16;
/// How long either side waits for the other's part of the handshake: a peer that
/// connects and says nothing must not hold a thread forever.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Who is connecting, so the accepting side knows what to expect next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PeerRole {
    TaskManager = 1,
    /// A job's binary: submits its job and coordinates it (its JobMaster).
    JobMaster = 2,
    /// The `eddy` CLI: list, status, savepoint, stop, cancel.
    Cli = 3,
    /// A TaskManager's process running one job's subtasks, to that job's JobMaster.
    TaskExecutor = 4,
    /// A data connection between two task executors.
    Data = 5,
}

impl PeerRole {
    fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => PeerRole::TaskManager,
            2 => PeerRole::JobMaster,
            3 => PeerRole::Cli,
            4 => PeerRole::TaskExecutor,
            5 => PeerRole::Data,
            _ => return None,
        })
    }
}

/// The cluster's shared secret (`--secret-file`).
#[derive(Clone)]
pub struct Secret {
    key: hmac::Key,
    /// The bytes, to hand on to a task executor this process starts.
    bytes: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret in `path`: its contents without surrounding whitespace.
    pub fn from_file(path: &Path) -> Result<Self, ClusterError> {
        let contents = std::fs::read(path).map_err(|e| {
            ClusterError::Secret(format!(
                "cannot read the secret file {}: {e}",
                path.display(),
                e = eddy_types::chain(&e)
            ))
        })?;
        Self::from_bytes(contents.trim_ascii()).map_err(|e| match e {
            ClusterError::Secret(m) => ClusterError::Secret(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ClusterError> {
        if bytes.len() < SECRET_BYTES_MIN {
            return Err(ClusterError::Secret(format!(
                "the secret has {} bytes; at least {SECRET_BYTES_MIN} are needed",
                bytes.len()
            )));
        }
        Ok(Self { key: hmac::Key::new(hmac::HMAC_SHA256, bytes), bytes: bytes.to_vec() })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn mac(&self, side: &[u8], client_nonce: &[u8], server_nonce: &[u8], role: u8) -> hmac::Tag {
        hmac::sign(&self.key, &signed(side, client_nonce, server_nonce, role))
    }

    /// Whether `tag` is [`Secret::mac`] of the same, compared in constant time.
    fn verify(&self, side: &[u8], client_nonce: &[u8], server_nonce: &[u8], role: u8, tag: &[u8]) -> bool {
        hmac::verify(&self.key, &signed(side, client_nonce, server_nonce, role), tag).is_ok()
    }
}

/// What a handshake's MAC covers: which side, both nonces, the role.
fn signed(side: &[u8], client_nonce: &[u8], server_nonce: &[u8], role: u8) -> Vec<u8> {
    let mut message = Vec::with_capacity(side.len() + 2 * NONCE_BYTES + 1);
    message.extend_from_slice(side);
    message.extend_from_slice(client_nonce);
    message.extend_from_slice(server_nonce);
    message.push(role);
    message
}

fn nonce() -> Result<[u8; NONCE_BYTES], ClusterError> {
    let mut nonce = [0u8; NONCE_BYTES];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| ClusterError::Secret("the system has no random numbers for a nonce".into()))?;
    Ok(nonce)
}

const ACCEPTED: u8 = 1;
const REFUSED: u8 = 0;

/// The connecting side's handshake as `role`.
pub fn authenticate_client(stream: &Stream, secret: &Secret, role: PeerRole) -> Result<(), ClusterError> {
    let _ = stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let outcome = client_handshake(&mut &*stream, stream.peer(), secret, role);
    let _ = stream.set_read_timeout(None);
    outcome
}

fn client_handshake(
    stream: &mut (impl Read + Write),
    peer: &str,
    secret: &Secret,
    role: PeerRole,
) -> Result<(), ClusterError> {
    let peer = peer.to_string();
    let client_nonce = nonce()?;
    let mut hello = Vec::with_capacity(4 + 2 + 1 + NONCE_BYTES);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    hello.push(role as u8);
    hello.extend_from_slice(&client_nonce);
    stream.write_all(&hello).map_err(|e| ClusterError::io(&peer, "sending the handshake", e))?;
    let mut answer = [0u8; 2 + NONCE_BYTES + MAC_BYTES];
    stream.read_exact(&mut answer).map_err(|e| ClusterError::io(&peer, "reading the handshake's answer", e))?;
    let version = u16::from_le_bytes([answer[0], answer[1]]);
    if version != PROTOCOL_VERSION {
        return Err(ClusterError::Refused(format!(
            "{peer} speaks protocol version {version}, this process {PROTOCOL_VERSION}: run the same eddy version \
                everywhere"
        )));
    }
    let server_nonce = &answer[2..2 + NONCE_BYTES];
    // Our part goes even when theirs is wrong, so that the server logs the refusal too.
    let tag = secret.mac(b"client", &client_nonce, server_nonce, role as u8);
    stream.write_all(tag.as_ref()).map_err(|e| ClusterError::io(&peer, "sending the handshake", e))?;
    if !secret.verify(b"server", &client_nonce, server_nonce, role as u8, &answer[2 + NONCE_BYTES..]) {
        return Err(ClusterError::Refused(format!(
            "{peer} does not hold this process's secret: the secrets differ (check --secret-file)"
        )));
    }
    let mut verdict = [0u8; 1];
    match stream.read_exact(&mut verdict) {
        Ok(()) if verdict[0] == ACCEPTED => Ok(()),
        Ok(()) | Err(_) => Err(ClusterError::Refused(format!(
            "{peer} refused this process: its secret differs from the cluster's (check --secret-file)"
        ))),
    }
}

/// The accepting side's handshake: the role the peer connects as, once it proved it holds
/// the secret. A refusal is logged with the peer's address.
pub fn authenticate_server(stream: &Stream, secret: &Secret) -> Result<PeerRole, ClusterError> {
    let _ = stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let outcome = server_handshake(&mut &*stream, stream.peer(), secret);
    let _ = stream.set_read_timeout(None);
    outcome
}

fn server_handshake(stream: &mut (impl Read + Write), peer: &str, secret: &Secret) -> Result<PeerRole, ClusterError> {
    let peer = peer.to_string();
    let refuse = |why: String| {
        tracing::warn!(peer = %peer, reason = %why, "connection refused");
        ClusterError::Refused(format!("{peer}: {why}"))
    };
    let mut hello = [0u8; 4 + 2 + 1 + NONCE_BYTES];
    stream
        .read_exact(&mut hello)
        .map_err(|e| refuse(format!("no complete handshake: {e}", e = eddy_types::chain(&e))))?;
    if &hello[..4] != MAGIC {
        return Err(refuse("not an eddy process (no handshake)".into()));
    }
    let version = u16::from_le_bytes([hello[4], hello[5]]);
    let Some(role) = PeerRole::from_byte(hello[6]) else {
        return Err(refuse(format!("unknown role {}", hello[6])));
    };
    let client_nonce = &hello[7..];
    let server_nonce = nonce()?;
    let mut answer = Vec::with_capacity(2 + NONCE_BYTES + MAC_BYTES);
    answer.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    answer.extend_from_slice(&server_nonce);
    answer.extend_from_slice(secret.mac(b"server", client_nonce, &server_nonce, role as u8).as_ref());
    stream.write_all(&answer).map_err(|e| ClusterError::io(&peer, "answering the handshake", e))?;
    if version != PROTOCOL_VERSION {
        return Err(refuse(format!("protocol version {version}, this process speaks {PROTOCOL_VERSION}")));
    }
    let mut tag = [0u8; MAC_BYTES];
    stream
        .read_exact(&mut tag)
        .map_err(|e| refuse(format!("no complete handshake: {e}", e = eddy_types::chain(&e))))?;
    if !secret.verify(b"client", client_nonce, &server_nonce, role as u8, &tag) {
        let _ = stream.write_all(&[REFUSED]);
        return Err(refuse(format!("wrong secret (as {role:?})")));
    }
    stream.write_all(&[ACCEPTED]).map_err(|e| ClusterError::io(&peer, "answering the handshake", e))?;
    Ok(role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair(
        server_secret: &'static [u8],
        client_secret: &'static [u8],
    ) -> (Result<PeerRole, ClusterError>, Result<(), ClusterError>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            let stream = Stream::accept(socket, None).unwrap();
            authenticate_server(&stream, &Secret::from_bytes(server_secret).unwrap())
        });
        let stream = Stream::accept(TcpStream::connect(addr).unwrap(), None).unwrap();
        let client = authenticate_client(&stream, &Secret::from_bytes(client_secret).unwrap(), PeerRole::Cli);
        stream.shutdown();
        drop(stream);
        (server.join().unwrap(), client)
    }

    #[test]
    fn the_same_secret_lets_a_peer_in_and_names_its_role() {
        let (server, client) = pair(b"0123456789abcdef-one", b"0123456789abcdef-one");
        assert_eq!(server.unwrap(), PeerRole::Cli);
        client.unwrap();
    }

    #[test]
    fn another_secret_is_refused_on_both_sides() {
        let (server, client) = pair(b"0123456789abcdef-one", b"0123456789abcdef-two");
        assert!(matches!(server, Err(ClusterError::Refused(m)) if m.contains("wrong secret")));
        assert!(matches!(client, Err(ClusterError::Refused(m)) if m.contains("secret")));
    }

    /// A peer that says `input` and hears whatever the other side writes.
    struct Scripted {
        input: std::io::Cursor<Vec<u8>>,
        heard: Vec<u8>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.heard.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 1_000, ..Default::default() })]

        /// Random bytes where a handshake is expected, on either side: refused, no panic.
        #[test]
        fn random_bytes_never_pass_a_handshake(
            input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let secret = Secret::from_bytes(b"0123456789abcdef-one").unwrap();
            let mut peer = Scripted { input: std::io::Cursor::new(input.clone()), heard: Vec::new() };
            proptest::prop_assert!(server_handshake(&mut peer, "fuzz", &secret).is_err());
            let mut peer = Scripted { input: std::io::Cursor::new(input), heard: Vec::new() };
            proptest::prop_assert!(client_handshake(&mut peer, "fuzz", &secret, PeerRole::Cli).is_err());
        }
    }

    #[test]
    fn a_short_secret_is_refused() {
        assert!(matches!(Secret::from_bytes(b"short"), Err(ClusterError::Secret(_))));
    }
}
