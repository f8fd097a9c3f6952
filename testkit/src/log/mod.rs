//! The partition log suites: the behaviour
//! [`PartitionLog`](minikafka_broker::log::PartitionLog) must show on every backend, and the
//! fault suite that runs it on [`FaultyBackend`](crate::fault::FaultyBackend). One module per
//! suite: [`basics`], [`recovery`], [`coalescing`], [`compaction`], [`producers`], [`time_index`], [`start_offset`], [`faults`];
//! what they share is in `model`.
//!
//! Contract:
//! - Inputs: a backend instance (on a shard it runs) and a scratch directory; each check works
//!   in its own subdirectory. Time is a fixed value ([`NOW_MS`] and offsets from it).
//! - Outputs: each `check_*` returns `Err` with a message naming the step that failed;
//!   [`run_all`] and [`run_fault_suite`] run every check and panic listing all failures;
//!   [`log_suite_tests!`](crate::log_suite_tests) makes one `#[test]` per check.
//! - Files are touched through the backend only; a "crash" is dropping a log without
//!   [`PartitionLog::close`](minikafka_broker::log::PartitionLog::close), then reopening with `clean_shutdown = false` (on the plain
//!   backend when the crash was injected by a [`FaultPlan`](crate::fault::FaultPlan)).
//! - Every expectation is checked against a model built here (the batches appended, patched
//!   with the offsets they were acknowledged with), never against the log's own word.

mod model;

pub mod basics;
pub mod coalescing;
pub mod compaction;
pub mod faults;
pub mod fetch_reads;
pub mod producers;
pub mod recovery;
pub mod start_offset;
pub mod time_index;

pub use basics::*;
pub use coalescing::*;
pub use compaction::*;
pub use faults::*;
pub use fetch_reads::*;
pub use model::{producer_batch, test_batch, NOW_MS};
pub use producers::*;
pub use recovery::*;
pub use start_offset::*;
pub use time_index::*;

use std::path::Path;

use minikafka_core::backend::Backend;

use crate::check::{assert_none_failed, run_checks, run_on_one_shard};

/// The one list of log check names, handed to a callback macro: `checks` gives the
/// conformance checks, `fault_checks` the fault checks, each as `$callback! { args [names] }`.
/// Both [`run_all`]/[`run_fault_suite`] and [`log_suite_tests!`](crate::log_suite_tests)
/// take their lists from here, so a check cannot be run by one and missed by the other.
#[doc(hidden)]
#[macro_export]
macro_rules! log_check_names {
    (checks, {$($callback:tt)*}, {$($args:tt)*}) => {
        $($callback)*! { $($args)* [
            check_append_read_round_trip,
            check_fetch_reads_each_byte_once,
            check_invalid_batch_touches_nothing,
            check_segment_roll_at_segment_bytes,
            check_index_placement_small_batches,
            check_index_placement_huge_batches,
            check_reads_racing_appends,
            check_recovery_every_truncation_point,
            check_recovery_preallocated_tail,
            check_recovery_bit_flips_in_tail,
            check_sealed_index_rebuilt,
            check_failed_txnindex_append_makes_close_unclean,
            check_retention_by_size,
            check_retention_by_time,
            check_read_in_flight_survives_retention,
            check_group_commit_shares_syncs,
            check_coalesced_appends_share_writes,
            check_coalesced_refusal_stays_alone,
            check_interval_flush_ticks,
            check_clean_reopen_does_not_scan,
            check_unclean_reopen_keeps_whole_indexes,
            check_recovered_partitions_synced_together,
            check_topic_metadata_round_trip,
            check_offset_for_timestamp_matches_reference,
            check_time_index_rebuilt_after_crash,
            check_offset_for_timestamp_after_retention,
            check_producer_dedup_survives_clean_restart,
            check_producer_dedup_survives_crash,
            check_compaction_keeps_latest_per_key,
            check_compaction_drops_aborted_transactions_below_the_lso,
            check_compaction_removes_markers_past_the_delete_horizon,
            check_read_in_flight_survives_cleaning,
            check_cleaner_checkpoint_survives_restart,
            check_delete_records_moves_log_start,
            check_checkpoint_above_log_end_starts_empty,
            check_reconfigure_applies_to_the_live_log,
            check_checkpoint_file_is_kept_and_tmp_removed,
        ] }
    };
    (fault_checks, {$($callback:tt)*}, {$($args:tt)*}) => {
        $($callback)*! { $($args)* [
            check_fault_crash_after_every_op,
            check_fault_crash_after_every_op_coalesced,
            check_fault_torn_write,
            check_fault_enospc,
            check_fault_eio_on_sync_goes_offline,
            check_compaction_crash_at_every_step,
            check_marker_removal_crash_at_every_step,
            check_fault_crash_during_deletion,
        ] }
    };
}

fn run_list<B: Backend>(dir: &Path, fault: bool) {
    let failures = if fault {
        run_on_one_shard::<B, _, _>(dir, |backend, root| async move {
            crate::log_check_names!(fault_checks, {run_checks}, {backend, root,})
        })
    } else {
        run_on_one_shard::<B, _, _>(dir, |backend, root| async move {
            crate::log_check_names!(checks, {run_checks}, {backend, root,})
        })
    };
    assert_none_failed("log checks", &failures);
}

/// Runs every conformance check on one shard of `B`, each in its own subdirectory of `dir`.
///
/// # Panics
/// With the list of every failed check, if any failed.
pub fn run_all<B: Backend>(dir: &Path) {
    run_list::<B>(dir, false);
}

/// Runs every fault check (on [`FaultyBackend`]`<B>`, reopening on `B`) on one shard.
///
/// # Panics
/// With the list of every failed check, if any failed.
pub fn run_fault_suite<B: Backend>(dir: &Path) {
    run_list::<B>(dir, true);
}

/// Expands to one `#[test]` per log conformance and fault check, run on the backend type
/// given, each in a fresh scratch directory (removed when the check passes). A backend's test
/// file needs one line: `minikafka_testkit::log_suite_tests!(my_backend::MyBackend);`.
#[macro_export]
macro_rules! log_suite_tests {
    ($backend:ty) => {
        $crate::log_check_names!(checks, {$crate::log_suite_tests}, {@tests $backend;});
        $crate::log_check_names!(fault_checks, {$crate::log_suite_tests}, {@tests $backend;});
    };
    (@tests $backend:ty; [$($check:ident),* $(,)?]) => {
        $(
            #[test]
            fn $check() {
                let dir = $crate::check::scratch_dir(concat!("log-", stringify!($check)));
                let result = $crate::check::run_check::<$backend, _, _>(&dir, |backend, dir| async move {
                    $crate::log::$check(&backend, &dir).await
                });
                if let Err(e) = result {
                    panic!("{} failed: {e}", stringify!($check));
                }
                let _ = std::fs::remove_dir_all(&dir);
            }
        )*
    };
}
