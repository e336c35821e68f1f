//! Checkpoints in an object store (S3 and S3-compatible servers), through the
//! `object_store` crate: the same files and layout as a local checkpoint directory
//! (`eddy_checkpoint::storage::FileCheckpointStorage`), in a bucket.
//!
//! A leaf crate: `object_store`, its S3 client and the tokio runtime its calls need stay
//! out of `eddy-checkpoint` (the protocol, the formats and local directories) and of the
//! runtime, which open storage through [`OpenStorage`] ([`ObjectStorageOpener`] here). A
//! job has it through the `eddy` facade's `object-store` feature.

// Only eddy-state holds `unsafe` (one audited prefetch); nothing else may.
#![forbid(unsafe_code)]

use eddy_checkpoint::storage::{
    io, open_checkpoint_dir, CheckpointStorage, DirectoryOpener, FileCheckpointStorage, Files, OpenStorage,
};
use eddy_checkpoint::CheckpointError;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};
use std::path::Path;
use std::sync::Arc;

/// Checkpoints in an object store.
pub type ObjectCheckpointStorage = FileCheckpointStorage<ObjectFiles>;

/// The files of an object store, under a root.
pub struct ObjectFiles {
    store: Arc<dyn ObjectStore>,
    /// Drives the store's async calls; the coordinator itself is synchronous.
    runtime: tokio::runtime::Runtime,
    /// Human-readable root, also the prefix of returned locations.
    root: String,
}

impl ObjectFiles {
    /// The files of any object store (an S3 client, say), shown under `root`.
    pub fn new(store: Arc<dyn ObjectStore>, root: impl Into<String>) -> Result<Self, CheckpointError> {
        let root = root.into();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| io(&root, e))?;
        Ok(Self { store, runtime, root })
    }

    /// The files at `s3://bucket/prefix`, an S3-compatible store (endpoint, region and
    /// credentials from the usual `AWS_*` environment variables, e.g. `AWS_ENDPOINT`,
    /// `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`).
    pub fn open(location: &str) -> Result<Self, CheckpointError> {
        let invalid = |message: String| CheckpointError::InvalidLocation { location: location.to_string(), message };
        let Some(rest) = location.strip_prefix("s3://") else {
            return Err(invalid("not an object store location (s3://bucket/path)".into()));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid("no bucket name".into()));
        }
        let s3 = object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        let store: Arc<dyn ObjectStore> = match prefix.trim_matches('/') {
            "" => Arc::new(s3),
            prefix => Arc::new(object_store::prefix::PrefixStore::new(s3, prefix)),
        };
        Self::new(store, location.trim_end_matches('/'))
    }

    fn full(&self, relative: &str) -> String {
        format!("{}/{relative}", self.root)
    }
}

impl Files for ObjectFiles {
    fn root(&self) -> &str {
        &self.root
    }

    fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<(), CheckpointError> {
        self.runtime
            .block_on(self.store.put(&ObjectPath::from(relative), PutPayload::from(bytes)))
            .map_err(|e| io(&self.full(relative), e))?;
        Ok(())
    }

    fn get(&self, relative: &str) -> Result<Option<Vec<u8>>, CheckpointError> {
        let path = ObjectPath::from(relative);
        match self.runtime.block_on(async { self.store.get(&path).await?.bytes().await }) {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(io(&self.full(relative), e)),
        }
    }

    fn exists(&self, relative: &str) -> Result<bool, CheckpointError> {
        match self.runtime.block_on(self.store.head(&ObjectPath::from(relative))) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(io(&self.full(relative), e)),
        }
    }

    fn delete(&self, relative: &str) -> Result<(), CheckpointError> {
        match self.runtime.block_on(self.store.delete(&ObjectPath::from(relative))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io(&self.full(relative), e)),
        }
    }

    fn delete_dir(&self, dir: &str) -> Result<(), CheckpointError> {
        let prefix = ObjectPath::from(dir);
        let objects: Vec<_> = self.runtime.block_on(self.store.list(Some(&prefix)).collect::<Vec<_>>());
        for object in objects {
            let object = object.map_err(|e| io(&self.full(dir), e))?;
            self.delete(object.location.as_ref())?;
        }
        Ok(())
    }

    fn directories(&self) -> Result<Vec<String>, CheckpointError> {
        let listing = self.runtime.block_on(self.store.list_with_delimiter(None)).map_err(|e| io(&self.root, e))?;
        Ok(listing.common_prefixes.iter().map(|p| p.as_ref().to_string()).collect())
    }
}

/// Storage rooted at the parent of a checkpoint or savepoint directory (local or
/// `s3://bucket/…/chk-7`), and the directory's location in it: what a restore reads from.
fn open_any_checkpoint_dir(dir: &Path) -> Result<(Arc<dyn CheckpointStorage>, String), CheckpointError> {
    let shown = dir.to_string_lossy().into_owned();
    refuse_other_schemes(&shown)?;
    if !shown.starts_with("s3://") {
        let (storage, location) = open_checkpoint_dir(dir)?;
        return Ok((Arc::new(storage), location));
    }
    let trimmed = shown.trim_end_matches('/');
    let (parent, name) = trimmed.rsplit_once('/').ok_or_else(|| CheckpointError::InvalidLocation {
        location: shown.clone(),
        message: "expected s3://bucket/path/chk-N".into(),
    })?;
    let storage = FileCheckpointStorage::new(ObjectFiles::open(parent)?);
    let location = storage.full(name);
    Ok((Arc::new(storage), location))
}

/// A location of a scheme neither this crate nor a local directory reads (`gs://`, …).
fn refuse_other_schemes(location: &str) -> Result<(), CheckpointError> {
    let other = location.contains("://") && !location.starts_with("s3://") && !location.starts_with("file://");
    if other {
        let message = "eddy stores checkpoints in local directories (a path or file://) and S3 (s3://)".into();
        return Err(CheckpointError::InvalidLocation { location: location.to_string(), message });
    }
    Ok(())
}

/// Opens `s3://` locations in an object store, and local directories as
/// [`DirectoryOpener`] does.
#[derive(Debug, Clone, Copy, Default)]
pub struct ObjectStorageOpener;

impl OpenStorage for ObjectStorageOpener {
    fn open(&self, location: &str) -> Result<Arc<dyn CheckpointStorage>, CheckpointError> {
        if location.starts_with("s3://") {
            return Ok(Arc::new(FileCheckpointStorage::new(ObjectFiles::open(location)?)));
        }
        refuse_other_schemes(location)?;
        DirectoryOpener.open(location)
    }

    fn open_checkpoint_dir(&self, dir: &Path) -> Result<(Arc<dyn CheckpointStorage>, String), CheckpointError> {
        open_any_checkpoint_dir(dir)
    }
}
