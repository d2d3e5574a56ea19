//! A read-only view of an index directory. tantivy's `MmapDirectory` creates lock files
//! (`.tantivy-meta.lock`) when a reader opens an index and never removes them; a
//! segment's directory is immutable (and may be read-only), so searching must write
//! nothing there. The only writer of an index is [`crate::write_index`], which holds
//! the directory alone, so readers need no lock.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr};
use tantivy::Directory;

#[derive(Debug, Clone)]
pub(crate) struct ReadOnlyDirectory(MmapDirectory);

impl ReadOnlyDirectory {
    pub fn open(path: &Path) -> crate::Result<ReadOnlyDirectory> {
        MmapDirectory::open(path).map(ReadOnlyDirectory).map_err(|e| crate::Error::index(path, e))
    }
}

fn read_only() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, "the index is opened read-only")
}

impl Directory for ReadOnlyDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.0.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError { io_error: Arc::new(read_only()), filepath: path.to_path_buf() })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.0.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::wrap_io_error(read_only(), path.to_path_buf()))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.0.atomic_read(path)
    }

    fn atomic_write(&self, _path: &Path, _data: &[u8]) -> io::Result<()> {
        Err(read_only())
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }

    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, _watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}
