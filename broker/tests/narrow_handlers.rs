//! A narrowed request handler sees only the shard traits it uses (I150).
//!
//! Every file under `server/handlers/`, the dispatcher `mod.rs` included, takes
//! `server::shard_context` traits (`TopicCatalogue`, `BrokerIdentity`, `PartitionOps`,
//! `GroupOps`, `TxnOps`, `ConfigLookup`, `ShardClock`, `TopicAdmin`, `TxnVerification`,
//! `ProducerIds`, `SecurityStores`, `Authorizer`, `QuotaLedger`, `ApiMetrics`, or all of
//! them as `ShardContext`), never the whole `ShardState`. This test reads each of them
//! (comments, literals and `#[cfg(test)]` items removed by the scanner shared with
//! `no_clock.rs`) and fails if one names `ShardState` or
//! the `shard` module, so a handler cannot widen its context again unnoticed. It also checks
//! that `shard_context.rs` names neither the shard nor a handler: both import it, so it must
//! import neither (I60). The folder is scanned whole, so a new handler is covered at once;
//! [`NARROWED`] is the lower bound the scan must find, and the routing modules the handlers
//! call (`NARROWED_ROUTES`) are scanned too; the lists only grow.

#[path = "../../core/tests/source_scan/mod.rs"]
mod source_scan;

use std::path::{Path, PathBuf};

/// Handler modules (under `server/handlers/`) that take only shard-context traits: the
/// lower bound of what the folder scan below finds, so a renamed folder or a scanner that
/// reads nothing fails instead of passing.
const NARROWED: &[&str] = &[
    "acls.rs",
    "add_offsets_to_txn.rs",
    "add_partitions_to_txn.rs",
    "alter_configs.rs",
    "api_versions.rs",
    "authorize.rs",
    "client_quotas.rs",
    "create_partitions.rs",
    "create_topics.rs",
    "delete_records.rs",
    "delete_topics.rs",
    "describe_cluster.rs",
    "describe_configs.rs",
    "describe_log_dirs.rs",
    "describe_producers.rs",
    "describe_topic_partitions.rs",
    "describe_transactions.rs",
    "end_txn.rs",
    "error_codes.rs",
    "fetch.rs",
    "find_coordinator.rs",
    "group_consumer.rs",
    "group_membership.rs",
    "group_offsets.rs",
    "groups.rs",
    "init_producer_id.rs",
    "list_offsets.rs",
    "list_transactions.rs",
    "metadata.rs",
    "mod.rs",
    "offset_for_leader_epoch.rs",
    "produce.rs",
    "scram_credentials.rs",
    "throttle.rs",
    "txn_offset_commit.rs",
    "txn_shared.rs",
    "write_txn_markers.rs",
];

/// Routing modules (under `server/`) the handlers call, on the same traits.
const NARROWED_ROUTES: &[&str] = &["groups/route.rs", "txns/route.rs"];

fn server_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server")
}

/// What in `src` (cleaned) reaches for the whole shard.
fn shard_mentions(src: &str) -> Vec<&'static str> {
    let code = source_scan::clean(src);
    ["ShardState", "shard::", "shard ::"]
        .into_iter()
        .filter(|token| code.contains(token))
        .collect()
}

/// Every `.rs` file under `server/handlers/` (the dispatcher `mod.rs` included), by its path
/// relative to `server/`.
fn handler_files() -> Vec<String> {
    let dir = server_dir().join("handlers");
    let mut found = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(folder) = pending.pop() {
        let entries =
            std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        for entry in entries {
            let path = entry.expect("read a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(server_dir()).expect("under server/");
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_handler_file_is_scanned() {
    let found = handler_files();
    for name in NARROWED {
        let path = format!("handlers/{name}");
        assert!(found.contains(&path), "{path} not found by the folder scan");
    }
}

#[test]
fn narrowed_handlers_name_no_shard_state() {
    let mut failures = Vec::new();
    let routes = NARROWED_ROUTES.iter().map(|name| name.to_string());
    for name in handler_files().into_iter().chain(routes) {
        let path = server_dir().join(&name);
        let src = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let hits = shard_mentions(&src);
        if !hits.is_empty() {
            failures.push(format!("{name}: {hits:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "these handlers reach past the shard_context traits (I150):\n{}",
        failures.join("\n")
    );
}

#[test]
fn shard_context_imports_neither_the_shard_nor_a_handler() {
    let src = std::fs::read_to_string(server_dir().join("shard_context.rs")).expect("read");
    let code = source_scan::clean(&src);
    assert!(
        code.contains("trait PartitionOps"),
        "scanned the wrong file"
    );
    for token in ["shard::", "handlers", "ShardState<"] {
        assert!(!code.contains(token), "shard_context.rs names {token}");
    }
}

#[test]
fn scanner_catches_the_shard_and_ignores_tests_and_comments() {
    for planted in [
        "use crate::server::shard::ShardState;",
        "pub fn handle<B: Backend>(state: &Rc<ShardState<B>>) {}",
        "fn f() { let _ = super::super::shard::sleep_or_stop; }",
    ] {
        assert!(!shard_mentions(planted).is_empty(), "missed: {planted}");
    }
    for clean in [
        "use crate::server::shard_context::{PartitionOps, TopicCatalogue};",
        "// takes the whole ShardState\nfn f() {}",
        "#[cfg(test)]\nmod tests { use crate::server::shard::ShardState; }",
    ] {
        assert!(shard_mentions(clean).is_empty(), "false positive: {clean}");
    }
}
