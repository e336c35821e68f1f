//! The `_metadata` of a checkpoint, and the framing every checkpoint file carries:
//!
//! ```text
//! magic "EDDYCKPT" | format version: u32 LE | payload length: u64 LE | payload | CRC-32 of payload: u32 LE
//! ```
//!
//! so that a truncated file (length), a corrupt file (checksum) and a file from a newer
//! eddy (version) are each told apart and named.

use crate::error::CheckpointError;
use crate::snapshot::{CheckpointId, OperatorSnapshot, SnapshotKind};
use serde::{Deserialize, Serialize};

pub const METADATA_FILE: &str = "_metadata";
/// The format this eddy writes. 2: keyed and operator state record each state's declared
/// type. 3: `_metadata` holds the state of the operators' coordinators (split enumerators).
/// 4: `_metadata` marks the subtasks that had finished their input
/// ([`TaskStateEntry::finished`]).
pub const FORMAT_VERSION: u32 = 4;
/// The oldest format this eddy reads: task state of format 1 reads with its types unknown
/// (`legacy.rs`); `_metadata` before format 3 reads with no coordinator state, before
/// format 4 with no subtask marked finished.
pub const FORMAT_VERSION_OLDEST: u32 = 1;
const MAGIC: &[u8; 8] = b"EDDYCKPT";
const HEADER_BYTES: usize = 8 + 4 + 8;

/// Where one task's state is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StateHandle {
    /// A file beside `_metadata` (relative name, so the directory can move).
    File { name: String, bytes: u64, crc32: u32 },
    /// Kept in the metadata itself (JobManager memory storage).
    Inline { payload: Vec<u8> },
}

impl StateHandle {
    /// Size of the state it points at.
    pub fn bytes(&self) -> u64 {
        match self {
            StateHandle::File { bytes, .. } => *bytes,
            StateHandle::Inline { payload } => payload.len() as u64,
        }
    }

    /// For listings: the file's name or location, or `inline`.
    pub fn describe(&self) -> String {
        match self {
            StateHandle::File { name, .. } => name.clone(),
            StateHandle::Inline { .. } => "inline".into(),
        }
    }
}

/// One operator of a task, as listed in the metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorEntry {
    pub uid: String,
    pub name: String,
    pub parallelism: u32,
}

/// The state of one subtask of one chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStateEntry {
    pub task: String,
    pub subtask: u32,
    pub operators: Vec<OperatorEntry>,
    pub handle: StateHandle,
    /// The subtask had finished its input when it was snapshotted (Flink's finished
    /// subtasks of FLIP-147): its state is its final state. An operator whose every subtask
    /// finished is not run again by a restore (a source reads nothing more).
    pub finished: bool,
}

/// A task's entry as formats 1 to 3 wrote it: no finished mark.
#[derive(Serialize, Deserialize)]
struct TaskStateEntryV3 {
    task: String,
    subtask: u32,
    operators: Vec<OperatorEntry>,
    handle: StateHandle,
}

impl From<TaskStateEntryV3> for TaskStateEntry {
    fn from(old: TaskStateEntryV3) -> Self {
        TaskStateEntry {
            task: old.task,
            subtask: old.subtask,
            operators: old.operators,
            handle: old.handle,
            finished: false,
        }
    }
}

/// The state of one operator's coordinator (Flink's `OperatorCoordinator`: a source's
/// split enumerator), taken by the JobMaster when the checkpoint was triggered. Small, so
/// kept in `_metadata` itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorStateEntry {
    /// The operator's uid.
    pub uid: String,
    pub state: Vec<u8>,
}

/// A completed checkpoint or savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    pub checkpoint_id: CheckpointId,
    pub kind: SnapshotKind,
    pub job_name: String,
    pub max_parallelism: u32,
    /// Wall-clock time the checkpoint was triggered, ms since the Unix epoch.
    pub timestamp_ms: u64,
    pub tasks: Vec<TaskStateEntry>,
    /// The state of every operator coordinator; `None` in a checkpoint written before eddy
    /// checkpointed coordinators (formats 1 and 2).
    pub coordinators: Option<Vec<CoordinatorStateEntry>>,
}

impl CheckpointMetadata {
    /// Whether every subtask of operator `uid` had finished its input when the checkpoint
    /// was taken (false for an operator the checkpoint holds nothing of).
    pub fn is_finished(&self, uid: &str) -> bool {
        let mut holding = self.tasks.iter().filter(|t| t.operators.iter().any(|o| o.uid == uid)).peekable();
        holding.peek().is_some() && holding.all(|t| t.finished)
    }

    /// The state of the coordinator of operator `uid`, if the checkpoint holds one.
    pub fn coordinator_state(&self, uid: &str) -> Option<&[u8]> {
        self.coordinators.as_deref()?.iter().find(|c| c.uid == uid).map(|c| c.state.as_slice())
    }
}

/// `_metadata` as formats 1 and 2 wrote it: no coordinator state.
#[derive(Serialize, Deserialize)]
struct CheckpointMetadataV2 {
    checkpoint_id: CheckpointId,
    kind: SnapshotKind,
    job_name: String,
    max_parallelism: u32,
    timestamp_ms: u64,
    tasks: Vec<TaskStateEntryV3>,
}

/// `_metadata` as format 3 wrote it: no finished mark.
#[derive(Serialize, Deserialize)]
struct CheckpointMetadataV3 {
    checkpoint_id: CheckpointId,
    kind: SnapshotKind,
    job_name: String,
    max_parallelism: u32,
    timestamp_ms: u64,
    tasks: Vec<TaskStateEntryV3>,
    coordinators: Option<Vec<CoordinatorStateEntry>>,
}

/// Reads a framed `_metadata` file of any format this eddy reads; `path` names it in errors.
pub fn decode_metadata(path: &str, bytes: &[u8]) -> Result<CheckpointMetadata, CheckpointError> {
    let (version, payload) = unframe_versioned(path, bytes)?;
    if version >= 4 {
        return decode(path, payload);
    }
    if version == 3 {
        let old: CheckpointMetadataV3 = decode(path, payload)?;
        return Ok(CheckpointMetadata {
            checkpoint_id: old.checkpoint_id,
            kind: old.kind,
            job_name: old.job_name,
            max_parallelism: old.max_parallelism,
            timestamp_ms: old.timestamp_ms,
            tasks: old.tasks.into_iter().map(TaskStateEntry::from).collect(),
            coordinators: old.coordinators,
        });
    }
    let old: CheckpointMetadataV2 = decode(path, payload)?;
    Ok(CheckpointMetadata {
        checkpoint_id: old.checkpoint_id,
        kind: old.kind,
        job_name: old.job_name,
        max_parallelism: old.max_parallelism,
        timestamp_ms: old.timestamp_ms,
        tasks: old.tasks.into_iter().map(TaskStateEntry::from).collect(),
        coordinators: None,
    })
}

/// Frames a payload with magic, version, length and checksum.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out
}

/// Checks a framed file and returns its payload; `path` names it in errors.
pub fn unframe<'a>(path: &str, bytes: &'a [u8]) -> Result<&'a [u8], CheckpointError> {
    unframe_versioned(path, bytes).map(|(_, payload)| payload)
}

/// [`unframe`], with the format version the file was written in.
pub fn unframe_versioned<'a>(path: &str, bytes: &'a [u8]) -> Result<(u32, &'a [u8]), CheckpointError> {
    let corrupt = |message: String| CheckpointError::Corrupt { path: path.to_string(), message };
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err(corrupt("not an eddy checkpoint file (bad magic or too short)".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if !(FORMAT_VERSION_OLDEST..=FORMAT_VERSION).contains(&version) {
        return Err(CheckpointError::UnsupportedVersion {
            path: path.to_string(),
            found: version,
            oldest: FORMAT_VERSION_OLDEST,
            supported: FORMAT_VERSION,
        });
    }
    // The length is the file's word: checked before any arithmetic on it.
    let length = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let expected = usize::try_from(length).ok().and_then(|l| l.checked_add(HEADER_BYTES + 4));
    let Some(expected) = expected.filter(|&e| e == bytes.len()) else {
        return Err(corrupt(format!(
            "truncated or padded: {} bytes, its header announces a payload of {length}",
            bytes.len()
        )));
    };
    let length = expected - HEADER_BYTES - 4;
    let payload = &bytes[HEADER_BYTES..HEADER_BYTES + length];
    let stored = u32::from_le_bytes(bytes[expected - 4..].try_into().expect("4 bytes"));
    let actual = crc32fast::hash(payload);
    if stored != actual {
        return Err(corrupt(format!("checksum mismatch: stored {stored:08x}, computed {actual:08x}")));
    }
    Ok((version, payload))
}

/// One task's state from the payload of a file of format `version`.
pub fn decode_task_state(path: &str, version: u32, payload: &[u8]) -> Result<Vec<OperatorSnapshot>, CheckpointError> {
    match version {
        1 => crate::legacy::decode_task_state_v1(path, payload),
        _ => decode(path, payload),
    }
}

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CheckpointError> {
    postcard::to_allocvec(value).map_err(|e| CheckpointError::Encode(eddy_types::Cause::new(e)))
}

pub fn decode<T: serde::de::DeserializeOwned>(path: &str, payload: &[u8]) -> Result<T, CheckpointError> {
    postcard::from_bytes(payload)
        .map_err(|e| CheckpointError::Corrupt { path: path.to_string(), message: eddy_types::chain(&e) })
}

/// Encodes `value` straight into a framed buffer: the same bytes as
/// `frame(&encode(value)?)` without a second copy of the payload, which for a task's state
/// is most of the memory a checkpoint takes.
pub fn encode_framed<T: Serialize>(value: &T) -> Result<Vec<u8>, CheckpointError> {
    let mut out = Vec::with_capacity(HEADER_BYTES + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    let mut out = postcard::to_extend(value, out).map_err(|e| CheckpointError::Encode(eddy_types::Cause::new(e)))?;
    let length = (out.len() - HEADER_BYTES) as u64;
    out[12..HEADER_BYTES].copy_from_slice(&length.to_le_bytes());
    let crc = crc32fast::hash(&out[HEADER_BYTES..]);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The framed bytes of one task's state.
pub fn encode_task_state(operators: &[OperatorSnapshot]) -> Result<Vec<u8>, CheckpointError> {
    encode_framed(&operators)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_3_metadata_reads_with_no_subtask_finished_and_format_4_keeps_the_mark() {
        let entry = |subtask, finished| TaskStateEntry {
            task: "source".into(),
            subtask,
            operators: vec![OperatorEntry { uid: "src".into(), name: "source".into(), parallelism: 2 }],
            handle: StateHandle::Inline { payload: vec![1, 2, 3] },
            finished,
        };
        let metadata = CheckpointMetadata {
            checkpoint_id: CheckpointId(7),
            kind: SnapshotKind::Checkpoint,
            job_name: "j".into(),
            max_parallelism: 128,
            timestamp_ms: 1,
            tasks: vec![entry(0, true), entry(1, true)],
            coordinators: Some(Vec::new()),
        };
        let framed = frame(&encode(&metadata).unwrap());
        let read = decode_metadata("m", &framed).unwrap();
        assert_eq!(read, metadata);
        assert!(read.is_finished("src") && !read.is_finished("absent"));
        let mut partly = metadata.clone();
        partly.tasks[1].finished = false;
        assert!(!partly.is_finished("src"), "one subtask still ran: the operator runs again");

        // As format 3 wrote it: the same fields but the mark.
        let old = CheckpointMetadataV3 {
            checkpoint_id: CheckpointId(7),
            kind: SnapshotKind::Checkpoint,
            job_name: "j".into(),
            max_parallelism: 128,
            timestamp_ms: 1,
            tasks: metadata
                .tasks
                .iter()
                .map(|t| TaskStateEntryV3 {
                    task: t.task.clone(),
                    subtask: t.subtask,
                    operators: t.operators.clone(),
                    handle: t.handle.clone(),
                })
                .collect(),
            coordinators: Some(Vec::new()),
        };
        let mut framed = frame(&encode(&old).unwrap());
        framed[8..12].copy_from_slice(&3u32.to_le_bytes());
        let read = decode_metadata("m", &framed).unwrap();
        assert_eq!(read.tasks.len(), 2);
        assert!(read.tasks.iter().all(|t| !t.finished) && !read.is_finished("src"));
        assert_eq!(read.coordinators, Some(Vec::new()));
    }

    #[test]
    fn metadata_of_format_2_reads_with_no_coordinator_state() {
        let old = CheckpointMetadataV2 {
            checkpoint_id: CheckpointId(4),
            kind: SnapshotKind::Savepoint,
            job_name: "job".into(),
            max_parallelism: 128,
            timestamp_ms: 9,
            tasks: Vec::new(),
        };
        let mut bytes = frame(&encode(&old).unwrap());
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        let read = decode_metadata("_metadata", &bytes).unwrap();
        assert_eq!(
            (read.checkpoint_id, read.job_name.as_str(), read.coordinators.is_none()),
            (CheckpointId(4), "job", true)
        );
        let new = CheckpointMetadata {
            coordinators: Some(vec![CoordinatorStateEntry { uid: "source".into(), state: vec![1, 2] }]),
            ..read
        };
        let again = decode_metadata("_metadata", &frame(&encode(&new).unwrap())).unwrap();
        assert_eq!(again.coordinator_state("source"), Some(&[1u8, 2][..]));
    }

    #[test]
    fn encoding_straight_into_a_frame_gives_the_framed_encoding() {
        let value = (7u32, "state".to_string(), vec![1u64, 2, 3]);
        assert_eq!(encode_framed(&value).unwrap(), frame(&encode(&value).unwrap()));
    }

    #[test]
    fn framing_detects_truncation_corruption_and_newer_versions() {
        let framed = frame(b"hello state");
        assert_eq!(unframe("f", &framed).unwrap(), b"hello state");
        let err = unframe("dir/f", &framed[..framed.len() - 3]).unwrap_err().to_string();
        assert!(err.contains("'dir/f' is corrupt: truncated"), "{err}");
        let mut flipped = framed.clone();
        flipped[HEADER_BYTES + 2] ^= 1;
        assert!(unframe("f", &flipped).unwrap_err().to_string().contains("checksum mismatch"));
        let mut newer = framed.clone();
        newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let err = unframe("f", &newer).unwrap_err().to_string();
        assert!(err.contains(&format!("format version {}", FORMAT_VERSION + 1)), "{err}");
        let mut older = framed.clone();
        older[8..12].copy_from_slice(&(FORMAT_VERSION_OLDEST - 1).to_le_bytes());
        let err = unframe("f", &older).unwrap_err().to_string();
        assert!(err.contains(&format!("reads versions {FORMAT_VERSION_OLDEST} to {FORMAT_VERSION}")), "{err}");
        assert!(unframe("f", b"garbage").unwrap_err().to_string().contains("bad magic"));
    }
}
