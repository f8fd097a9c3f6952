//! Writes the seed corpus of the `txn_records` target (`fuzz/corpus/txn_records/`):
//! `__transaction_state` records as the transaction coordinator encodes them, at both value
//! versions and in every stored state, plus a tombstone. The broker does not serve
//! transactions yet, so these stand in for records read back from a real log.
//! Run: `cargo run -p minikafka-fuzz-targets --example write_txn_seeds`.

use std::path::Path;

use minikafka_core::txn::records::{TopicPartitions, TxnLogKey, TxnLogValue};
use minikafka_core::txn::TxnState;

/// `[flags][key length: u16][key][value]`, the `txn_records` input layout.
fn record_input(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut out = vec![u8::from(value.is_none())];
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value.unwrap_or_default());
    out
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/txn_records");
    std::fs::create_dir_all(&dir).expect("corpus folder");
    let key = TxnLogKey {
        transactional_id: "orders-tx-1".into(),
    }
    .encode();
    let partitions = Some(vec![
        TopicPartitions {
            topic: "orders".into(),
            partitions: vec![0, 3],
        },
        TopicPartitions {
            topic: "__consumer_offsets".into(),
            partitions: vec![17],
        },
    ]);
    let base = TxnLogValue {
        producer_id: 4_000,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: 3,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: partitions.clone(),
        last_update_ms: 1_700_000_000_500,
        start_ms: 1_700_000_000_000,
        client_transaction_version: 0,
    };
    let states = [
        ("empty", TxnState::Empty),
        ("ongoing", TxnState::Ongoing),
        ("prepare-commit", TxnState::PrepareCommit),
        ("prepare-abort", TxnState::PrepareAbort),
        ("complete-commit", TxnState::CompleteCommit),
        ("complete-abort", TxnState::CompleteAbort),
    ];
    for (name, state) in states {
        let mut v = base.clone();
        v.state = state;
        if state == TxnState::Empty {
            v.partitions = None;
            v.start_ms = -1;
        }
        if matches!(state, TxnState::CompleteCommit | TxnState::CompleteAbort) {
            v.partitions = Some(Vec::new());
        }
        for version in [0, 1] {
            let bytes = record_input(&key, Some(&v.encode_version(version)));
            std::fs::write(dir.join(format!("{name}-v{version}")), bytes).expect("seed");
        }
    }
    // KIP-890 fields: a rotation in progress (next producer id) and after one (previous).
    let mut kip890 = base.clone();
    kip890.state = TxnState::PrepareCommit;
    kip890.producer_epoch = i16::MAX;
    kip890.next_producer_id = 4_001;
    kip890.client_transaction_version = 2;
    std::fs::write(
        dir.join("prepare-commit-next-producer-id"),
        record_input(&key, Some(&kip890.encode())),
    )
    .expect("seed");
    let mut rotated = base;
    rotated.state = TxnState::CompleteCommit;
    rotated.partitions = Some(Vec::new());
    rotated.producer_id = 4_001;
    rotated.producer_epoch = 0;
    rotated.previous_producer_id = 4_000;
    rotated.client_transaction_version = 2;
    std::fs::write(
        dir.join("complete-commit-previous-producer-id"),
        record_input(&key, Some(&rotated.encode())),
    )
    .expect("seed");
    std::fs::write(dir.join("tombstone"), record_input(&key, None)).expect("seed");
}
