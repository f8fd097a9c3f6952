//! The key → latest-offset map of one cleaning pass, within a memory budget
//! (`log.cleaner.dedupe.buffer.size`).
//!
//! Contract:
//! - Inputs: the dirty batches in offset order, each as its records' `(offset, key)` pairs.
//! - Outputs: for each key seen, the latest offset; [`KeyOffsetMap::pass_end`], the offset
//!   after the last batch taken — the pass covers the dirty offsets below it.
//! - A batch is taken whole or not at all: [`KeyOffsetMap::add_batch`] refuses one whose new
//!   keys would pass the budget, and the pass ends before it (the next cleaning starts there:
//!   several passes when the budget is smaller than the key set). The first batch of a pass is
//!   always taken, so every pass makes progress; memory then exceeds the budget by at most
//!   that one batch's keys, which the batch's own bytes bound (I10).
//! - Keys are stored whole, not hashed: a collision could never drop a live record.
//! - Never: performs I/O; counts a key's memory twice.

use std::collections::HashMap;

use crate::types::Offset;

/// Bytes charged for each entry beyond its key: the offset, the map's bucket and the key's
/// heap header, rounded up.
pub const ENTRY_OVERHEAD_BYTES: usize = 48;

/// Bytes one key costs in the map.
pub fn entry_cost_bytes(key_len: usize) -> usize {
    key_len.saturating_add(ENTRY_OVERHEAD_BYTES)
}

/// The budget is full: this batch belongs to the next pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapFull;

/// The map of one pass. See the module contract.
#[derive(Debug)]
pub struct KeyOffsetMap {
    latest: HashMap<Vec<u8>, Offset>,
    budget_bytes: usize,
    used_bytes: usize,
    pass_start: Offset,
    pass_end: Offset,
    batches_count: u64,
}

impl KeyOffsetMap {
    /// An empty map for a pass starting at `pass_start` (the first dirty offset).
    pub fn new(budget_bytes: usize, pass_start: Offset) -> Self {
        KeyOffsetMap {
            latest: HashMap::new(),
            budget_bytes,
            used_bytes: 0,
            pass_start,
            pass_end: pass_start,
            batches_count: 0,
        }
    }

    /// Adds one batch's keyed records (`(offset, key)`, offsets increasing; keyless records
    /// are left out by the caller) and moves the pass end to `batch_next_offset`. Refuses the
    /// batch, changing nothing, when its new keys would pass the budget and the map already
    /// holds a batch.
    pub fn add_batch<'a, I>(&mut self, records: I, batch_next_offset: Offset) -> Result<(), MapFull>
    where
        I: IntoIterator<Item = (Offset, &'a [u8])> + Clone,
    {
        assert!(
            batch_next_offset >= self.pass_end,
            "batches are added in offset order"
        );
        // Conservative: a key repeated inside the batch is charged once per repeat here.
        let new_cost: usize = records
            .clone()
            .into_iter()
            .filter(|(_, key)| !self.latest.contains_key(*key))
            .map(|(_, key)| entry_cost_bytes(key.len()))
            .fold(0usize, usize::saturating_add);
        if self.batches_count > 0 && self.used_bytes.saturating_add(new_cost) > self.budget_bytes {
            return Err(MapFull);
        }
        for (offset, key) in records {
            match self.latest.get_mut(key) {
                Some(latest) => *latest = (*latest).max(offset),
                None => {
                    self.used_bytes += entry_cost_bytes(key.len());
                    self.latest.insert(key.to_vec(), offset);
                }
            }
        }
        self.pass_end = batch_next_offset;
        self.batches_count += 1;
        Ok(())
    }

    /// Moves the pass end over offsets holding no keyed record (a batch of keyless records
    /// or a control batch), without touching the map. Never moves it back: an offset below the
    /// pass end changes nothing.
    pub fn skip_to(&mut self, next_offset: Offset) {
        self.pass_end = self.pass_end.max(next_offset);
    }

    /// The latest offset of `key` in this pass, if the pass saw it.
    pub fn latest(&self, key: &[u8]) -> Option<Offset> {
        self.latest.get(key).copied()
    }

    /// Where the pass started (the first dirty offset).
    pub fn pass_start(&self) -> Offset {
        self.pass_start
    }

    /// The offset after the last batch taken: the pass covers `[pass_start, pass_end)`.
    pub fn pass_end(&self) -> Offset {
        self.pass_end
    }

    /// Distinct keys held.
    pub fn keys_count(&self) -> usize {
        self.latest.len()
    }

    /// Bytes charged so far.
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_wins_and_repeats_cost_once() {
        let mut map = KeyOffsetMap::new(1 << 20, Offset(0));
        let batch: [(Offset, &[u8]); 3] = [(Offset(0), b"a"), (Offset(1), b"b"), (Offset(2), b"a")];
        map.add_batch(batch, Offset(3)).expect("fits");
        assert_eq!(map.latest(b"a"), Some(Offset(2)));
        assert_eq!(map.latest(b"b"), Some(Offset(1)));
        assert_eq!(map.latest(b"c"), None);
        assert_eq!(map.used_bytes(), 2 * entry_cost_bytes(1));
        assert_eq!(map.pass_end(), Offset(3));
    }

    #[test]
    fn a_full_budget_ends_the_pass_before_the_batch() {
        let budget = 2 * entry_cost_bytes(1);
        let mut map = KeyOffsetMap::new(budget, Offset(10));
        map.add_batch([(Offset(10), &b"a"[..]), (Offset(11), b"b")], Offset(12))
            .expect("fits exactly");
        // An old key costs nothing more.
        map.add_batch([(Offset(12), &b"a"[..])], Offset(13))
            .expect("old key");
        assert_eq!(
            map.add_batch([(Offset(13), &b"c"[..])], Offset(14)),
            Err(MapFull)
        );
        assert_eq!(map.pass_end(), Offset(13), "unchanged by the refused batch");
        assert_eq!(map.latest(b"c"), None);
    }

    #[test]
    fn the_first_batch_is_always_taken() {
        let mut map = KeyOffsetMap::new(1, Offset(0));
        map.add_batch([(Offset(0), &b"big-key"[..])], Offset(1))
            .expect("progress");
        assert_eq!(map.pass_end(), Offset(1));
    }
}
