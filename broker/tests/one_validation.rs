//! Each produced batch is validated once on the produce path (issue 20 item 5): the log's
//! `log::produced_batch::validate_produced` is the only validation, and
//! `PartitionLog::batch_validations` counts its calls (`tests/append_copies.rs` checks one per
//! batch). This test keeps the other half true: nothing else on the produce path — the
//! connection, the handlers (`broker/src/server/handlers`), the shard and its partition
//! operations — validates or decodes a batch's records itself. The Produce handler applies
//! only the framing rule (`check_single_batch`, a length field). (Reading batches back, as the
//! group coordinators' replay of `__consumer_offsets` does, is not on the produce path.)
//!
//! Comments, literals and `#[cfg(test)]` items are not read (the scanner shared with
//! `no_clock.rs`).

#[path = "../../core/tests/source_scan/mod.rs"]
mod source_scan;

use std::path::Path;

use source_scan::{forbidden_uses, scan_sources, Rules};

/// Calls that validate a batch or decode its records: only the log (and its cleaner) make them.
const VALIDATIONS: &[&str] = &[
    "validate_batch_with",
    "validate_batch(",
    "validate_produced",
    "batch_records",
    "failing_records",
    "filter_batch",
    "BatchIter",
];

const RULES: Rules = Rules {
    forbidden_std_paths: &[],
    allowed_std_paths: &[],
    forbidden_tokens: VALIDATIONS,
};

/// The produce path's files outside `handlers/`.
const PRODUCE_PATH: &[&str] = &[
    "connection.rs",
    "shard.rs",
    "partition_ops.rs",
    "routing.rs",
];

#[test]
fn the_server_validates_no_batch_itself() {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server");
    let mut failures = scan_sources(&server.join("handlers"), "handlers/produce.rs", &RULES);
    for file in PRODUCE_PATH {
        let src = std::fs::read_to_string(server.join(file)).expect("a produce-path source file");
        for hit in forbidden_uses(&src, &RULES) {
            failures.push(format!("{file}: {hit}"));
        }
    }
    assert!(
        failures.is_empty(),
        "the log validates a produced batch, once (log::produced_batch); the server must not:\n{}",
        failures.join("\n")
    );
}

#[test]
fn scanner_catches_a_second_validation() {
    let src = "use minikafka_core::record::validate_batch_with;\n\
               fn handle(records: &[u8]) { let _ = validate_batch_with(records, opts); }";
    assert!(!forbidden_uses(src, &RULES).is_empty());
    let framing_only = "fn handle(records: &[u8]) { let _ = check_single_batch(records); }";
    assert!(forbidden_uses(framing_only, &RULES).is_empty());
}
