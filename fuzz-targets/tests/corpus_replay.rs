//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/`) through the same target
//! function the fuzzer runs, on stable, as part of `cargo test --workspace`. Seeds come from
//! captures of real clients (librdkafka via kcat, kafka-python) and real segment files; bugs
//! the fuzzer found are kept here as `regression-*` files next to them.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use minikafka_fuzz_targets::{alloc_meter, TARGETS};

#[global_allocator]
static ALLOCATOR: alloc_meter::MeteredAllocator = alloc_meter::MeteredAllocator;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus folder {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable corpus folder").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn the_allocation_meter_is_installed() {
    // Without it every decode-budget assertion would pass vacuously.
    assert!(alloc_meter::installed());
}

#[test]
fn every_corpus_file_keeps_its_target_contract() {
    let mut failures = Vec::new();
    for (name, target) in TARGETS {
        let files = corpus_files(name);
        assert!(
            !files.is_empty(),
            "{name} has no corpus under {}",
            corpus_dir(name).display()
        );
        for file in files {
            let bytes = std::fs::read(&file).expect("readable corpus file");
            if catch_unwind(AssertUnwindSafe(|| target(&bytes))).is_err() {
                failures.push(file.display().to_string());
            }
        }
    }
    assert!(failures.is_empty(), "contracts broken by: {failures:#?}");
}

#[test]
fn every_corpus_folder_names_a_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for entry in std::fs::read_dir(&root).expect("fuzz/corpus exists") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        assert!(
            TARGETS.iter().any(|(t, _)| *t == name),
            "fuzz/corpus/{name} has no target"
        );
    }
}

#[test]
fn frames_captured_from_real_clients_decode() {
    // The seeds named after their client (librdkafka via kcat, kafka-python) are requests those
    // clients really sent: each must pass the pre-check and decode, or the fuzzer would start
    // from refusals only (and the broker would refuse a real client).
    let mut checked = 0;
    for file in corpus_files("request_decode") {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !(name.starts_with("rdkafka-") || name.starts_with("kafka-python-")) {
            continue;
        }
        let frame = std::fs::read(&file).expect("readable");
        let decoded = minikafka_fuzz_targets::protocol::decode_checked(frame.into());
        assert!(decoded.is_ok(), "{name}: {:?}", decoded.err());
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} captured frames");
}

/// True for the files `write_group_seeds` writes: not a regression input
/// (`regression-<what>`) and not one libFuzzer added (named by its SHA-1, 40 hex digits).
fn is_encoder_seed(file: &std::path::Path) -> bool {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = name.unwrap_or_default();
    let fuzzer_named = name.len() == 40 && name.bytes().all(|b| b.is_ascii_hexdigit());
    !fuzzer_named && !name.starts_with("regression-")
}

#[test]
fn group_seeds_decode() {
    // The group seeds are encoder output: each must decode, so the fuzzer starts from
    // accepted records rather than refusals. (Regression and fuzzer-found inputs need not
    // decode; the contract test above replays them.)
    use minikafka_core::group::consumer_records::ConsumerGroupRecord;
    use minikafka_core::group::records::RecordKey;
    let seeds = |target| {
        corpus_files(target)
            .into_iter()
            .filter(|f| is_encoder_seed(f))
    };
    assert!(
        seeds("group_records").count() >= 5,
        "group_records seeds missing"
    );
    assert!(
        seeds("consumer_protocol").count() >= 8,
        "consumer_protocol seeds missing"
    );
    for file in seeds("group_records") {
        let bytes = std::fs::read(&file).expect("readable");
        let key_len = usize::from(u16::from_be_bytes([bytes[1], bytes[2]]));
        let (key, value) = bytes[3..].split_at(key_len);
        let value = (bytes[0] & 1 == 0).then_some(value);
        let classic = RecordKey::decode(key).is_ok();
        let consumer = ConsumerGroupRecord::decode(key, value).is_ok();
        assert!(classic || consumer, "{}", file.display());
    }
    for file in seeds("consumer_protocol") {
        let bytes = std::fs::read(&file).expect("readable");
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        use minikafka_client::group::member_metadata::{decode_assignment, decode_subscription};
        let ok = if name.starts_with("subscription") {
            decode_subscription(&bytes).is_ok()
        } else {
            decode_assignment(&bytes).is_ok()
        };
        assert!(ok, "{name}");
    }
}

#[test]
fn txn_seeds_decode() {
    // The `txn_records` seeds are encoder output (`write_txn_seeds`): each key and value must
    // decode, so the fuzzer starts from accepted records.
    use minikafka_core::txn::records::{TxnLogKey, TxnLogValue};
    let seeds: Vec<_> = corpus_files("txn_records")
        .into_iter()
        .filter(|f| is_encoder_seed(f))
        .collect();
    assert!(seeds.len() >= 10, "txn_records seeds missing");
    for file in seeds {
        let bytes = std::fs::read(&file).expect("readable");
        let key_len = usize::from(u16::from_be_bytes([bytes[1], bytes[2]]));
        let (key, value) = bytes[3..].split_at(key_len);
        assert!(TxnLogKey::decode(key).is_ok(), "{}", file.display());
        if bytes[0] & 1 == 0 {
            assert!(TxnLogValue::decode(value).is_ok(), "{}", file.display());
        }
    }
}

#[test]
fn valid_scram_seeds_authenticate() {
    // The `seed-*-valid` SCRAM seeds are whole exchanges a client with the password would send
    // (written by a Python SCRAM client): they must authenticate, so the fuzzer starts with the
    // success path covered and its proof check asserted.
    use minikafka_core::auth::scram::{ScramCredential, ScramMechanism, ScramOutput, ScramServer};
    let mut checked = 0;
    for file in corpus_files("scram") {
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !(name.starts_with("seed-") && name.ends_with("-valid")) {
            continue;
        }
        let bytes = std::fs::read(&file).expect("readable");
        let mechanism = ScramMechanism::ALL[usize::from(bytes[0] & 1)];
        let rest = &bytes[1..];
        let at = rest
            .iter()
            .position(|&b| b == 0)
            .expect("a NUL between the messages");
        let credential =
            ScramCredential::from_password(mechanism, "pencil", b"fuzz-salt", 4096).expect("cred");
        let mut server = ScramServer::new(mechanism, "fuzzserver").expect("server");
        server.handle_message(&rest[..at]).expect("client-first");
        server.poll_output();
        server
            .handle_credential(Some(&credential))
            .expect("credential");
        server.poll_output();
        server
            .handle_message(&rest[at + 1..])
            .expect("client-final");
        assert!(server.is_complete(), "{name}");
        assert!(matches!(server.poll_output(), Some(ScramOutput::Send(_))));
        checked += 1;
    }
    assert_eq!(checked, 2, "the SHA-256 and SHA-512 seeds");
}

#[test]
fn schema_seeds_decode() {
    // The `schema_records` seeds are records in the Confluent registry's format
    // (`write_schema_seeds`): each must decode, so the fuzzer starts from accepted records.
    use minikafka_schema::records::RegistryRecord;
    let seeds: Vec<_> = corpus_files("schema_records")
        .into_iter()
        .filter(|f| is_encoder_seed(f))
        .collect();
    assert!(seeds.len() >= 10, "schema_records seeds missing");
    for file in seeds {
        let bytes = std::fs::read(&file).expect("readable");
        let key_len = usize::from(u16::from_be_bytes([bytes[1], bytes[2]]));
        let (key, value) = bytes[3..].split_at(key_len);
        let value = (bytes[0] & 1 == 0).then_some(value);
        assert!(
            RegistryRecord::decode(key, value).is_ok(),
            "{}",
            file.display()
        );
    }
}

#[test]
fn schema_http_seeds_are_requests_the_registry_answers() {
    // The `schema_http` seeds are hand-written requests of every REST path, all complete
    // heads, so the fuzzer starts past the HTTP parser; one has a chunked body (I128).
    use minikafka_schema::http::{parse_head, HeadParse};
    let seeds = corpus_files("schema_http");
    assert!(seeds.len() >= 15, "schema_http seeds missing");
    let heads: Vec<_> = seeds
        .iter()
        .filter_map(|f| match parse_head(&std::fs::read(f).expect("readable")) {
            HeadParse::Complete(head) => Some(head),
            _ => None,
        })
        .collect();
    assert_eq!(heads.len(), seeds.len());
    assert!(heads.iter().any(|head| head.chunked));
}
