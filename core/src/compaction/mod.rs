//! Log compaction (`cleanup.policy=compact`): what to clean and what to keep, as pure functions.
//!
//! Contract:
//! - Inputs: facts about a partition's segments (sizes, offsets, timestamps), the cleaner's
//!   checkpoint (the first dirty offset), the topic's compaction settings, `now_ms` as a value,
//!   and record batches as bytes (decompressed by the caller's codec when compressed).
//! - Outputs: a [`choose::CleanPlan`] (or why there is nothing to clean), a
//!   [`offset_map::KeyOffsetMap`] built within a memory budget, a keep/drop verdict per record
//!   ([`retain`]), a rewritten batch ([`rewrite`]), and the recovery action for a half-done
//!   segment swap ([`swap`]).
//! - Never: performs I/O, reads a clock, renumbers or reorders a record (I1), or allocates a
//!   size read from the input before checking it against the bytes present (I10).
//!
//! Kafka's semantics, kept: only sealed segments are cleaned; a cleaning covers the log from
//! its start up to the first uncleanable offset and builds its key map from the dirty part
//! (from the checkpoint on); for every key the record at the latest offset survives; a
//! tombstone (null value) survives until `delete.retention.ms` has passed; surviving records
//! keep their offsets, so the batch keeps its base offset, its `lastOffsetDelta`, its producer
//! id, epoch and base sequence (I23).
//!
//! The steps a cleaner takes, each a function here, the broker doing the reads and writes:
//! 1. [`choose::choose`]: is this partition due, and over which offsets?
//! 2. [`offset_map::KeyOffsetMap`]: one pass over the dirty batches, until the budget is full
//!    ([`offset_map::KeyOffsetMap::add_batch`] refuses a batch that does not fit); the pass
//!    ends at that batch, and the next cleaning starts there (several passes when the budget
//!    is smaller than the key set).
//! 3. [`rewrite::filter_batch`] for every batch below the pass end, deciding with
//!    [`retain::keep_record`]; the survivors go to new segment files.
//! 4. [`swap`]: the new files replace the old ones by renames (I24); recovery finishes or
//!    discards a half-done swap.
//!
//! Transaction markers follow [`markers`]: kept while their transaction has data, then
//! stamped with a delete horizon, then removed once it has passed (I154).

pub mod choose;
pub mod markers;
pub mod offset_map;
pub mod policy;
pub mod retain;
pub mod rewrite;
pub mod swap;
