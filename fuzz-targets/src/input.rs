//! Reading a fuzz input as parameters followed by a payload.
//!
//! Targets take their knobs (a window size, a version pick) from the first bytes so that the
//! fuzzer can mutate them like anything else; a short input reads as zeros, never a panic.

/// A cursor over a fuzz input.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Input { bytes }
    }

    /// The next byte, or 0 once the input is used up.
    pub fn u8(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((first, rest)) => {
                self.bytes = rest;
                *first
            }
            None => 0,
        }
    }

    /// The next two bytes, big-endian (zeros past the end).
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// The next four bytes, big-endian (zeros past the end).
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Everything not read yet.
    pub fn rest(self) -> &'a [u8] {
        self.bytes
    }
}

/// A small deterministic sequence (xorshift) for chunk and window sizes chosen by one seed byte.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    state: u32,
}

impl Sizes {
    /// A sequence seeded with `seed`.
    pub fn new(seed: u32) -> Self {
        Sizes {
            state: seed | 1, // xorshift has a fixed point at 0
        }
    }

    /// The next size in `1..=max`.
    pub fn next(&mut self, max: usize) -> usize {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.state = x;
        1 + (x as usize) % max.max(1)
    }
}
