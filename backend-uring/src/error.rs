//! Converts glommio's errors into `std::io::Error` without losing the OS error code.
//!
//! Contract:
//! - Input: a [`glommio::GlommioError`].
//! - Output: the `io::Error` the OS returned when there was one (so `raw_os_error()` still
//!   says `ENOSPC` or `EIO`), else glommio's own conversion.
//! - Never: wraps an OS error in a new `io::Error` (that would drop its errno; glommio's
//!   `From` impl does exactly that for `EnhancedIoError`, which is why this module exists).

use std::io;

use glommio::GlommioError;

/// Returns the OS error inside `err` unchanged, or glommio's conversion for non-OS errors.
pub(crate) fn os_error<T>(err: GlommioError<T>) -> io::Error {
    match err {
        GlommioError::IoError(source) | GlommioError::EnhancedIoError { source, .. } => source,
        other => io::Error::from(other),
    }
}
