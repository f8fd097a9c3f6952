//! Newtypes that keep offsets, relative offsets and file positions apart.
//!
//! Contract: plain values, no I/O. Arithmetic that can overflow is checked by the caller
//! that knows the bound (a segment never exceeds `u32::MAX` bytes, invariant I6).

use std::fmt;

/// An absolute offset in a partition: the index of a record in the partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

/// An offset relative to a segment's base offset, as stored in the offset index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelativeOffset(pub u32);

/// A byte position inside one segment file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FilePos(pub u32);

impl Offset {
    /// The offset `delta` records after this one.
    pub fn plus(self, delta: i64) -> Offset {
        Offset(self.0 + delta)
    }

    /// This offset relative to `base`, if it fits the index's 32-bit field.
    pub fn relative_to(self, base: Offset) -> Option<RelativeOffset> {
        let delta = self.0.checked_sub(base.0)?;
        u32::try_from(delta).ok().map(RelativeOffset)
    }
}

impl FilePos {
    /// The position as a `usize` for slicing.
    pub fn as_usize(self) -> usize {
        self.0 as usize
    }

    /// The position as a `u64` for `read_at`/`write_at`.
    pub fn as_u64(self) -> u64 {
        u64::from(self.0)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for FilePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.0)
    }
}
