//! Small files replaced atomically and read back with a size bound: topic metadata, the log
//! start offset checkpoint, the dynamic broker configuration.
//!
//! Contract:
//! - [`write_atomically`]: `<name>.tmp` is written, synced and closed, renamed over `<name>`,
//!   then the directory is synced. A crash at any point leaves the old file or the new one
//!   whole, never a mix (a leftover `.tmp` is the caller's to remove at startup); once it
//!   returns `Ok` the new contents survive a crash.
//! - [`read_bounded`]: the whole file, refused past a size limit (I10: the read is sized by
//!   the file, so bound it); `Ok(None)` when the file does not exist.
//! - Never: writes in place, or reads a file larger than the caller allows.

use std::io;
use std::path::{Path, PathBuf};

use minikafka_core::backend::{Backend, BackendFile, OpenMode};

use super::segment::TMP_SUFFIX;

/// The temporary path `path` is written at before the rename: `<path>.tmp`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{TMP_SUFFIX}"));
    PathBuf::from(name)
}

/// Replaces `path` (in directory `dir`) with `bytes`, durably: temp file + sync + rename +
/// directory sync.
pub async fn write_atomically<B: Backend>(
    backend: &B,
    dir: &Path,
    path: &Path,
    bytes: Vec<u8>,
) -> io::Result<()> {
    let tmp = tmp_path(path);
    let file = backend.open(&tmp, OpenMode::ReadWriteCreate).await?;
    file.truncate(0).await?;
    let (written, _) = file.write_at(bytes, 0).await;
    written?;
    file.sync_data().await?;
    file.close().await?;
    backend.rename(&tmp, path).await?;
    backend.sync_dir(dir).await
}

/// A file read by [`read_bounded`] was larger than allowed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is larger than the limit.
    #[error("{len_bytes} bytes is over the {max_bytes} limit")]
    TooLarge {
        /// The file's length.
        len_bytes: u64,
        /// The limit.
        max_bytes: u64,
    },
    /// The read itself failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

/// Reads all of `path` if it is at most `max_bytes` long; `Ok(None)` when it does not exist.
pub async fn read_bounded<B: Backend>(
    backend: &B,
    path: &Path,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, ReadError> {
    let file = match backend.open(path, OpenMode::ReadOnly).await {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let len_bytes = file.len().await?;
    if len_bytes > max_bytes {
        let _ = file.close().await;
        return Err(ReadError::TooLarge {
            len_bytes,
            max_bytes,
        });
    }
    let len = len_bytes as usize;
    let (read, bytes) = file.read_at(Vec::with_capacity(len), 0, len).await;
    let _ = file.close().await;
    read?;
    if bytes.len() != len {
        return Err(
            io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its length").into(),
        );
    }
    Ok(Some(bytes))
}
