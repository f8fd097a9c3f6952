//! The `mk` CLI end to end against the REAL broker binary (see `common`).

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::Broker;
use minikafka_client::partitioner::partition_for_key;

fn mk(addr: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mk"))
        .arg("-b")
        .arg(addr)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mk");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    child.wait_with_output().expect("mk output")
}

fn ok(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

#[test]
fn mk_produces_keyed_lines_with_headers_and_consumes_them_with_a_format() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    ok(
        &mk(
            addr,
            &["topics", "create", "cli", "--partitions", "3"],
            None,
        ),
        "topics create",
    );
    let listed = ok(&mk(addr, &["topics", "list"], None), "topics list");
    assert!(listed.lines().any(|l| l == "cli"), "{listed}");
    let described = ok(&mk(addr, &["topics", "describe", "cli"], None), "describe");
    assert!(described.contains("PartitionCount: 3"), "{described}");

    let input: String = (0..30).map(|i| format!("key{i}:value {i}\n")).collect();
    ok(
        &mk(
            addr,
            &[
                "produce",
                "cli",
                "--key-separator",
                ":",
                "--header",
                "src=test",
                "--header",
                "n=1",
                "--compression",
                "zstd",
            ],
            Some(&input),
        ),
        "produce",
    );

    let out = ok(
        &mk(
            addr,
            &["consume", "cli", "--format", "%k|%v|p%p|o%o|%h|%T"],
            None,
        ),
        "consume",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 30, "{out}");
    let mut seen = std::collections::BTreeMap::new();
    for line in &lines {
        let fields: Vec<&str> = line.split('|').collect();
        assert_eq!(fields.len(), 6, "{line}");
        let key = fields[0];
        let i: usize = key.trim_start_matches("key").parse().expect("key number");
        assert_eq!(fields[1], format!("value {i}"));
        // The CLI's producer put each key where the Java client would.
        assert_eq!(
            fields[2],
            format!("p{}", partition_for_key(key.as_bytes(), 3)),
            "{line}"
        );
        assert_eq!(fields[4], "src=test,n=1");
        assert!(fields[5].parse::<i64>().expect("timestamp") > 1_600_000_000_000);
        seen.insert(i, (fields[2].to_string(), fields[3].to_string()));
    }
    assert_eq!(seen.len(), 30);
    // Within a partition, offsets follow input order.
    for p in 0..3 {
        let offsets: Vec<i64> = seen
            .values()
            .filter(|(part, _)| *part == format!("p{p}"))
            .map(|(_, o)| o.trim_start_matches('o').parse().expect("offset"))
            .collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "partition {p}: {offsets:?}"
        );
    }

    // --partition, --from OFFSET and --count.
    let p0 = partition_for_key(b"key0", 3).to_string();
    let out = ok(
        &mk(
            addr,
            &[
                "consume",
                "cli",
                "--partition",
                &p0,
                "--from",
                "1",
                "--count",
                "2",
                "--format",
                "%o",
            ],
            None,
        ),
        "consume --from 1",
    );
    assert_eq!(out, "1\n2\n");

    // --from end prints nothing and exits.
    let out = ok(
        &mk(addr, &["consume", "cli", "--from", "end"], None),
        "consume --from end",
    );
    assert_eq!(out, "");

    let offsets = ok(&mk(addr, &["offsets", "cli"], None), "offsets");
    let rows: Vec<&str> = offsets.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{offsets}");
    let total: i64 = rows
        .iter()
        .map(|r| {
            let cols: Vec<&str> = r.split('\t').collect();
            assert_eq!(cols[1], "0", "{r}");
            cols[2].parse::<i64>().expect("latest")
        })
        .sum();
    assert_eq!(total, 30);

    ok(&mk(addr, &["topics", "delete", "cli"], None), "delete");
    let out = mk(addr, &["topics", "describe", "cli"], None);
    assert!(!out.status.success(), "describing a deleted topic fails");
}

#[test]
fn mk_plain_values_round_trip() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    ok(&mk(addr, &["topics", "create", "plain"], None), "create");
    ok(
        &mk(
            addr,
            &["produce", "plain", "--acks", "1"],
            Some("one\ntwo\nthree\n"),
        ),
        "produce",
    );
    let out = ok(&mk(addr, &["consume", "plain"], None), "consume");
    assert_eq!(out, "one\ntwo\nthree\n");
}

#[test]
fn mk_reports_errors_on_one_line_with_a_nonzero_exit() {
    // Nothing listens on port 1: the failure is one line on stderr, exit status 1.
    let out = mk("127.0.0.1:1", &["topics", "list"], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("mk: error: cannot connect to 127.0.0.1:1"),
        "{stderr}"
    );

    let broker = Broker::start();
    let out = mk(&broker.addr, &["consume", "missing-topic"], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let out = mk(&broker.addr, &["produce", "x", "--acks", "7"], Some("a\n"));
    assert_eq!(out.status.code(), Some(1));
}
