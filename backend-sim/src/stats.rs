//! The simulation's counters: what the world did and which faults it injected. Their own
//! module because the world keeps them and the disk's crash model adds to them, and the
//! world owns the disk.

/// What the world has done so far (since [`crate::install`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Task polls.
    pub polls: u64,
    /// Crashes applied to the disk.
    pub crashes: u64,
    /// Unsynced writes a crash kept whole.
    pub writes_kept: u64,
    /// Unsynced writes a crash dropped.
    pub writes_dropped: u64,
    /// Unsynced writes a crash tore at a 512 B or 4 KiB boundary.
    pub writes_torn: u64,
    /// Unsynced directory changes a crash kept.
    pub dir_changes_kept: u64,
    /// Unsynced directory changes a crash lost.
    pub dir_changes_lost: u64,
    /// EIO injected on reads.
    pub read_eio: u64,
    /// EIO injected on writes.
    pub write_eio: u64,
    /// ENOSPC injected on writes.
    pub write_enospc: u64,
    /// EIO injected on syncs.
    pub sync_eio: u64,
    /// Latency spikes injected.
    pub latency_spikes: u64,
    /// Connections reset.
    pub connection_resets: u64,
    /// Bits flipped in sealed segments.
    pub bit_flips: u64,
    /// `preallocate` calls (each grows the simulated file with zeros, I190).
    pub preallocations: u64,
}

impl SimStats {
    /// Every fault injected (crashes not included).
    pub fn faults(&self) -> u64 {
        self.read_eio
            + self.write_eio
            + self.write_enospc
            + self.sync_eio
            + self.latency_spikes
            + self.connection_resets
            + self.bit_flips
    }
}
