//! Checkpoint storage in an object store: a local one, wrapped to refuse what a test asks.

use eddy_checkpoint::storage::{CheckpointStorage, FileCheckpointStorage};
use eddy_checkpoint::{CheckpointId, SnapshotKind};
use eddy_checkpoint_object::ObjectFiles;

#[path = "../../eddy-checkpoint/tests/common/mod.rs"]
mod common;
use common::{temp_dir, write_checkpoint};

/// A real local store whose deletes of `_metadata` fail: the one fault discarding must not
/// step over (as root, file permissions cannot make a delete fail).
#[derive(Debug)]
struct MetadataDeletesFail(object_store::local::LocalFileSystem);

impl std::fmt::Display for MetadataDeletesFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetadataDeletesFail({})", self.0)
    }
}

#[async_trait::async_trait]
impl object_store::ObjectStore for MetadataDeletesFail {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.0.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.0.get_opts(location, options).await
    }
    async fn delete(&self, location: &object_store::path::Path) -> object_store::Result<()> {
        if location.as_ref().ends_with("_metadata") {
            return Err(object_store::Error::Generic { store: "test", source: "injected: delete refused".into() });
        }
        self.0.delete(location).await
    }
    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.0.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.0.list_with_delimiter(prefix).await
    }
    async fn copy(&self, from: &object_store::path::Path, to: &object_store::path::Path) -> object_store::Result<()> {
        self.0.copy(from, to).await
    }
    async fn copy_if_not_exists(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
    ) -> object_store::Result<()> {
        self.0.copy_if_not_exists(from, to).await
    }
}

#[test]
fn a_checkpoint_whose_metadata_cannot_be_deleted_is_kept_whole() {
    let dir = temp_dir("discard-fails");
    std::fs::create_dir_all(&dir).unwrap();
    let local = object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap();
    let files = ObjectFiles::new(std::sync::Arc::new(MetadataDeletesFail(local)), "test-store").unwrap();
    let storage = FileCheckpointStorage::new(files);
    write_checkpoint(&storage, 1, 7);
    let error = eddy_types::chain(&storage.discard(CheckpointId(1), SnapshotKind::Checkpoint).unwrap_err());
    assert!(error.contains("chk-1/_metadata") && error.contains("delete refused"), "{error}");
    // Still complete and readable: nothing behind `_metadata` was deleted.
    assert_eq!(storage.completed().unwrap().len(), 1);
    let files = std::fs::read_dir(dir.join("chk-1")).unwrap().count();
    assert_eq!(files, 3, "_metadata and both task state files remain");
    let _ = std::fs::remove_dir_all(&dir);
}
