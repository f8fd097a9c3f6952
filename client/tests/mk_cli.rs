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
        // mk may exit (refusing its arguments) before reading stdin: a broken pipe then.
        match pipe.write_all(input.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.expect("write stdin"),
        }
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
    run_ok(addr, &["topics", "create", "cli", "--partitions", "3"]);
    let listed = run_ok(addr, &["topics", "list"]);
    assert!(listed.lines().any(|l| l == "cli"), "{listed}");
    let described = run_ok(addr, &["topics", "describe", "cli"]);
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

    let out = run_ok(addr, &["consume", "cli", "--format", "%k|%v|p%p|o%o|%h|%T"]);
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
    let out = run_ok(
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
    );
    assert_eq!(out, "1\n2\n");

    // --from end prints nothing and exits.
    let out = run_ok(addr, &["consume", "cli", "--from", "end"]);
    assert_eq!(out, "");

    let offsets = run_ok(addr, &["offsets", "cli"]);
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

    run_ok(addr, &["topics", "delete", "cli"]);
    let out = mk(addr, &["topics", "describe", "cli"], None);
    assert!(!out.status.success(), "describing a deleted topic fails");
}

#[test]
fn mk_plain_values_round_trip() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    run_ok(addr, &["topics", "create", "plain"]);
    ok(
        &mk(
            addr,
            &["produce", "plain", "--acks", "1"],
            Some("one\ntwo\nthree\n"),
        ),
        "produce",
    );
    let out = run_ok(addr, &["consume", "plain"]);
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

/// `mk` exits 1 with one stderr line that contains each of `needles`.
/// Runs `mk` with `args` and no input; its standard output when it succeeded.
fn run_ok(addr: &str, args: &[&str]) -> String {
    ok(&mk(addr, args, None), &args.join(" "))
}

fn fails_with(output: &Output, what: &str, needles: &[&str]) {
    assert_eq!(output.status.code(), Some(1), "{what} did not fail");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{what}: {needle:?} not in {stderr}"
        );
    }
}

/// The `name=value (SOURCE…)` line of `name` in a `configs describe` output.
fn config_line<'a>(described: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}=");
    described
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{name} not in {described}"))
}

/// `topics alter` and `configs alter` change settings with IncrementalAlterConfigs (SET and
/// DELETE keep the other settings), refusals carry Kafka's codes and name the key, and
/// `configs describe` shows each value's source; `--broker-default` is the cluster default.
#[test]
fn mk_alters_and_describes_topic_and_broker_configs() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    run_ok(
        addr,
        &["topics", "create", "conf", "--config", "retention.ms=60000"],
    );
    let out = run_ok(
        addr,
        &["topics", "alter", "conf", "--config", "segment.bytes=4096"],
    );
    assert!(out.contains("altered 1 setting(s) of topic conf"), "{out}");
    let described = run_ok(addr, &["configs", "describe", "--topic", "conf"]);
    assert_eq!(
        config_line(&described, "segment.bytes"),
        "segment.bytes=4096 (DYNAMIC_TOPIC_CONFIG)"
    );
    assert_eq!(
        config_line(&described, "retention.ms"),
        "retention.ms=60000 (DYNAMIC_TOPIC_CONFIG)",
        "an incremental SET dropped another setting"
    );
    run_ok(
        addr,
        &["topics", "alter", "conf", "--delete-config", "retention.ms"],
    );
    let described = run_ok(addr, &["configs", "describe", "--topic", "conf"]);
    assert_eq!(
        config_line(&described, "retention.ms"),
        "retention.ms=604800000 (DEFAULT_CONFIG)"
    );
    // validate-only changes nothing.
    run_ok(
        addr,
        &[
            "topics",
            "alter",
            "conf",
            "--config",
            "retention.ms=1",
            "--validate-only",
        ],
    );
    let described = run_ok(addr, &["configs", "describe", "--topic", "conf"]);
    assert!(config_line(&described, "retention.ms").starts_with("retention.ms=604800000"));
    let refused = [
        (
            vec!["topics", "alter", "conf", "--config", "retention.msec=1"],
            "retention.msec",
            "error code 40",
        ),
        (
            vec![
                "topics",
                "alter",
                "conf",
                "--config",
                "cleanup.policy=compactt",
            ],
            "cleanup.policy",
            "error code 40",
        ),
        (
            vec!["topics", "alter", "missing", "--config", "retention.ms=1"],
            "missing",
            "unknown topic or partition",
        ),
        (
            vec![
                "configs",
                "alter",
                "--broker",
                "0",
                "--config",
                "log.dirs=/x",
            ],
            "log.dirs",
            "error code 42",
        ),
        (
            vec![
                "configs",
                "alter",
                "--broker",
                "0",
                "--config",
                "log.retention.msec=1",
            ],
            "log.retention.msec",
            "error code 40",
        ),
        (
            vec![
                "configs",
                "alter",
                "--broker",
                "7",
                "--config",
                "log.retention.ms=1",
            ],
            "node 0",
            "error code 42",
        ),
    ];
    for (args, key, code) in refused {
        fails_with(&mk(addr, &args, None), &args.join(" "), &[key, code]);
    }
    run_ok(
        addr,
        &[
            "configs",
            "alter",
            "--broker",
            "0",
            "--config",
            "log.retention.ms=5000",
        ],
    );
    run_ok(
        addr,
        &[
            "configs",
            "alter",
            "--broker-default",
            "--config",
            "log.segment.bytes=8192",
        ],
    );
    let node = run_ok(addr, &["configs", "describe", "--broker", "0"]);
    assert_eq!(
        config_line(&node, "log.retention.ms"),
        "log.retention.ms=5000 (DYNAMIC_BROKER_CONFIG)"
    );
    assert_eq!(
        config_line(&node, "log.segment.bytes"),
        "log.segment.bytes=8192 (DYNAMIC_DEFAULT_BROKER_CONFIG)"
    );
    assert!(config_line(&node, "log.dirs").ends_with("(STATIC_BROKER_CONFIG, read-only)"));
    let described = run_ok(addr, &["configs", "describe", "--topic", "conf"]);
    assert_eq!(
        config_line(&described, "retention.ms"),
        "retention.ms=5000 (DYNAMIC_BROKER_CONFIG)"
    );
    assert_eq!(
        config_line(&described, "segment.bytes"),
        "segment.bytes=4096 (DYNAMIC_TOPIC_CONFIG)"
    );
}

/// `records delete` moves the log start offset (`end`: the high watermark), `offsets`
/// shows it, a consumer from the beginning starts there, and an offset past the end is
/// refused with OFFSET_OUT_OF_RANGE.
#[test]
fn mk_deletes_records_below_an_offset() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    run_ok(addr, &["topics", "create", "trim"]);
    let input: String = (0..10).map(|i| format!("v{i}\n")).collect();
    ok(&mk(addr, &["produce", "trim"], Some(&input)), "produce");
    let out = run_ok(
        addr,
        &[
            "records",
            "delete",
            "trim",
            "--partition",
            "0",
            "--before",
            "4",
        ],
    );
    assert!(out.contains("log start offset 4"), "{out}");
    let offsets = run_ok(addr, &["offsets", "trim"]);
    assert!(offsets.contains('4') && offsets.contains("10"), "{offsets}");
    let consumed = run_ok(addr, &["consume", "trim", "--format", "%o:%v"]);
    assert_eq!(consumed.lines().next(), Some("4:v4"), "{consumed}");
    assert_eq!(consumed.lines().count(), 6, "{consumed}");
    fails_with(
        &mk(
            addr,
            &[
                "records",
                "delete",
                "trim",
                "--partition",
                "0",
                "--before",
                "11",
            ],
            None,
        ),
        "past the end",
        &["trim-0", "OffsetOutOfRange"],
    );
    let out = run_ok(
        addr,
        &[
            "records",
            "delete",
            "trim",
            "--partition",
            "0",
            "--before",
            "end",
        ],
    );
    assert!(out.contains("log start offset 10"), "{out}");
}

#[test]
fn mk_lists_gets_registers_tests_and_deletes_schemas_in_the_broker_registry() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    assert!(
        broker.registry.starts_with("http://127.0.0.1:"),
        "{}",
        broker.registry
    );
    let schemas = |args: &[&str]| {
        let mut all = vec!["schemas", "--registry", broker.registry.as_str()];
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect::<Vec<String>>()
    };
    let run = |args: &[&str], stdin: Option<&str>| {
        let args = schemas(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mk(addr, &args, stdin)
    };
    let v1 = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
    let v2 = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
    let breaking = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}"#;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write schema");
        path.display().to_string()
    };
    let (v1_file, v2_file) = (file("v1.avsc", v1), file("v2.avsc", v2));

    assert_eq!(
        ok(
            &run(&["register", "users value", &v1_file], None),
            "register"
        ),
        "id 1\n"
    );
    assert_eq!(
        ok(
            &run(&["register", "users value", "-"], Some(v2)),
            "register stdin"
        ),
        "id 2\n"
    );
    assert_eq!(ok(&run(&["list"], None), "list"), "users value\n");
    assert_eq!(
        ok(&run(&["get", "users value", "--version", "1"], None), "get"),
        format!("{v1}\n")
    );
    assert_eq!(
        ok(&run(&["get", "--id", "2"], None), "get --id"),
        format!("{v2}\n")
    );
    assert_eq!(
        ok(&run(&["compat", "users value", &v2_file], None), "compat"),
        "compatible\n"
    );
    fails_with(
        &run(&["compat", "users value", "-"], Some(breaking)),
        "compat breaking",
        &["incompatible", "email"],
    );
    fails_with(
        &run(&["register", "users value", "-"], Some(breaking)),
        "register breaking",
        &["409", "incompatible"],
    );
    fails_with(
        &run(&["delete", "users value", "--permanent"], None),
        "permanent first",
        &["40405"],
    );
    assert_eq!(
        ok(
            &run(&["delete", "users value", "--version", "1"], None),
            "delete version"
        ),
        "deleted users value versions 1\n"
    );
    assert_eq!(
        ok(&run(&["delete", "users value"], None), "delete subject"),
        "deleted users value versions 2\n"
    );
    assert_eq!(ok(&run(&["list"], None), "list after"), "");
    assert_eq!(
        ok(&run(&["list", "--deleted"], None), "list deleted"),
        "users value\n"
    );
    assert_eq!(
        ok(
            &run(&["delete", "users value", "--permanent"], None),
            "delete permanent"
        ),
        "deleted users value versions 1,2\n"
    );
    fails_with(&run(&["get", "nobody"], None), "get missing", &["40401"]);
}

/// `mk acls add|list|remove` against a broker with the authorizer on (ANONYMOUS may manage
/// ACLs: no ACL names the cluster and allow.everyone.if.no.acl.found is set); a DENY added
/// with `mk` is enforced; without an authorizer the broker's SECURITY_DISABLED is the error.
#[test]
fn mk_adds_lists_and_removes_acls() {
    let broker = Broker::start_with(&[
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("allow.everyone.if.no.acl.found", "true"),
    ]);
    let addr = broker.addr.as_str();
    run_ok(addr, &["topics", "create", "guarded"]);
    let added = run_ok(
        addr,
        &[
            "acls",
            "add",
            "--topic",
            "guarded",
            "--principal",
            "User:ANONYMOUS",
            "--operation",
            "write",
            "--permission",
            "deny",
        ],
    );
    assert!(
        added.contains("added Topic:Literal:guarded User:ANONYMOUS Deny Write from *"),
        "{added}"
    );
    run_ok(
        addr,
        &[
            "acls",
            "add",
            "--group",
            "app",
            "--prefixed",
            "--principal",
            "User:alice",
            "--operation",
            "describe-configs",
        ],
    );
    let listed = run_ok(addr, &["acls", "list"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.contains("Group:Prefixed:app User:alice Allow DescribeConfigs from *"),
        "{listed}"
    );
    let only_topics = run_ok(addr, &["acls", "list", "--topic", "guarded"]);
    assert_eq!(only_topics.lines().count(), 1, "{only_topics}");

    // The DENY is enforced: a produce to "guarded" fails with Kafka's code.
    let denied = mk(addr, &["produce", "guarded"], Some("v\n"));
    fails_with(
        &denied,
        "produce to a denied topic",
        &["TopicAuthorizationFailed"],
    );

    let removed = run_ok(addr, &["acls", "remove", "--topic", "guarded"]);
    assert!(
        removed.starts_with("removed Topic:Literal:guarded"),
        "{removed}"
    );
    assert_eq!(run_ok(addr, &["acls", "list"]).lines().count(), 1);
    fails_with(
        &mk(
            addr,
            &[
                "acls",
                "add",
                "--topic",
                "t",
                "--principal",
                "User:a",
                "--operation",
                "reed",
            ],
            None,
        ),
        "a bad operation",
        &["reed"],
    );

    let plain = Broker::start();
    fails_with(
        &mk(plain.addr.as_str(), &["acls", "list"], None),
        "acls list without an authorizer",
        &["No Authorizer is configured"],
    );
}

/// `mk users`: a SCRAM user added with a password read from stdin is stored as the broker
/// stores Kafka's credentials (the keys of that password under the salt mk drew, never the
/// password), listed with its iterations, refused below 4096 iterations, and deleted.
#[test]
fn mk_users_adds_lists_and_deletes_scram_users() {
    use minikafka_core::auth::scram::{ScramCredential, ScramMechanism};
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    let added = ok(
        &mk(
            addr,
            &["users", "add", "alice", "--password", "-"],
            Some("s3cret pw\n"),
        ),
        "users add",
    );
    assert!(added.contains("SCRAM-SHA-512 set"), "{added}");
    let listed = run_ok(addr, &["users", "list"]);
    assert_eq!(listed, "alice\tSCRAM-SHA-512(iterations=4096)\n");

    let stored = std::fs::read_to_string(broker.data_dir().join("scram-credentials"))
        .expect("credentials file");
    assert!(!stored.contains("s3cret"), "{stored}");
    let line = stored
        .lines()
        .find(|l| l.ends_with(" alice"))
        .expect("alice's line");
    let text = line.split(' ').nth(1).expect("credential text");
    let credential =
        ScramCredential::from_kafka_string(ScramMechanism::Sha512, text).expect("parses");
    let expected =
        ScramCredential::from_password(ScramMechanism::Sha512, "s3cret pw", &credential.salt, 4096)
            .expect("derives");
    assert_eq!(
        credential, expected,
        "the stored keys are those of the password"
    );

    let weak = mk(
        addr,
        &[
            "users",
            "add",
            "bob",
            "--password",
            "x",
            "--iterations",
            "100",
        ],
        None,
    );
    assert!(!weak.status.success());
    assert!(String::from_utf8_lossy(&weak.stderr).contains("bob"));
    run_ok(addr, &["users", "delete", "alice"]);
    assert_eq!(run_ok(addr, &["users", "list"]), "");
    let again = mk(addr, &["users", "delete", "alice"], None);
    assert!(!again.status.success());
}

/// `mk quotas`: set, described, removed as `kafka-configs.sh --entity-type users/clients`
/// does; `--validate-only` changes nothing; a key the broker does not enforce is refused with
/// the broker's reason.
#[test]
fn mk_quotas_alters_and_describes_client_quotas() {
    let broker = Broker::start();
    let addr = broker.addr.as_str();
    let set = "producer_byte_rate=1048576,consumer_byte_rate=2097152";
    let altered = run_ok(
        addr,
        &["quotas", "alter", "--user", "alice", "--add-config", set],
    );
    assert_eq!(altered, "quotas of user=alice: altered\n");
    run_ok(
        addr,
        &[
            "quotas",
            "alter",
            "--user-default",
            "--client",
            "app",
            "--add-config",
            "producer_byte_rate=524288",
        ],
    );
    let valid = run_ok(
        addr,
        &[
            "quotas",
            "alter",
            "--client-default",
            "--add-config",
            "consumer_byte_rate=1",
            "--validate-only",
        ],
    );
    assert_eq!(valid, "quotas of client-id=<default>: valid\n");
    fails_with(
        &mk(
            addr,
            &[
                "quotas",
                "alter",
                "--client-default",
                "--add-config",
                "controller_mutation_rate=5",
            ],
            None,
        ),
        "a quota minikafka does not enforce",
        &["controller_mutation_rate", "not enforced"],
    );
    run_ok(
        addr,
        &[
            "quotas",
            "alter",
            "--user",
            "alice",
            "--delete-config",
            "consumer_byte_rate",
        ],
    );
    assert_eq!(
        run_ok(addr, &["quotas", "describe"]),
        "user=<default> client-id=app\tproducer_byte_rate=524288\n\
         user=alice\tproducer_byte_rate=1048576\n"
    );
    assert_eq!(
        run_ok(addr, &["quotas", "describe", "--user", "alice"]),
        "user=alice\tproducer_byte_rate=1048576\n"
    );
    assert_eq!(
        run_ok(addr, &["quotas", "describe", "--client-default"]),
        ""
    );
}

/// mk with Kafka's client settings over SASL_PLAINTEXT: a SCRAM-SHA-512 user made with
/// `mk users add` and a PLAIN user from the broker's JAAS line produce and consume; a wrong
/// password is refused.
#[test]
fn mk_speaks_sasl_plain_and_scram() {
    let sasl_port = common::free_port();
    let listeners =
        format!("PLAINTEXT://127.0.0.1:{{port}},SASL_PLAINTEXT://127.0.0.1:{sasl_port}");
    let broker = Broker::start_with(&[
        ("listeners", &listeners),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";"#,
        ),
    ]);
    let sasl = format!("127.0.0.1:{sasl_port}");
    run_ok(
        &broker.addr,
        &["users", "add", "alice", "--password", "s3cret"],
    );
    let as_user =
        |mechanism: &str, user: &str, password: &str, args: &[&str], stdin: Option<&str>| {
            let mut all = vec![
                "--security-protocol",
                "SASL_PLAINTEXT",
                "--sasl-mechanism",
                mechanism,
                "--sasl-username",
                user,
                "--sasl-password",
                password,
            ];
            all.extend_from_slice(args);
            mk(&sasl, &all, stdin)
        };
    ok(
        &as_user(
            "SCRAM-SHA-512",
            "alice",
            "s3cret",
            &["topics", "create", "sec"],
            None,
        ),
        "create over SCRAM",
    );
    ok(
        &as_user(
            "PLAIN",
            "bob",
            "bob-secret",
            &["produce", "sec"],
            Some("one\ntwo\n"),
        ),
        "produce over PLAIN",
    );
    let read = ok(
        &as_user(
            "SCRAM-SHA-512",
            "alice",
            "s3cret",
            &["consume", "sec", "--count", "2"],
            None,
        ),
        "consume over SCRAM",
    );
    assert_eq!(read, "one\ntwo\n");
    let wrong = as_user("SCRAM-SHA-512", "alice", "nope", &["topics", "list"], None);
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(stderr.contains("Invalid username or password"), "{stderr}");
}

/// A CA, a broker certificate for 127.0.0.1 and a client certificate `CN=a,O=test`, as PEM
/// files in `dir`: ca.crt, broker.pem (key then chain), a.crt, a.key.
fn make_pki(dir: &std::path::Path) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "mk test CA");
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let ca = params.self_signed(&ca_key).expect("CA");
    std::fs::write(dir.join("ca.crt"), ca.pem()).expect("write");
    for (name, sans) in [("broker", vec!["127.0.0.1".to_string()]), ("a", vec![])] {
        let mut params = rcgen::CertificateParams::new(sans).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "test");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &ca, &ca_key).expect("sign");
        let (cert, key) = (cert.pem(), key.serialize_pem());
        std::fs::write(dir.join(format!("{name}.crt")), &cert).expect("write");
        std::fs::write(dir.join(format!("{name}.key")), &key).expect("write");
        std::fs::write(dir.join(format!("{name}.pem")), format!("{key}{cert}")).expect("write");
    }
}

/// `mk --security-protocol SSL` with a client certificate (the listener requires one) and
/// `SASL_SSL` with SCRAM produce and consume; each missing piece is refused.
#[test]
fn mk_speaks_ssl_with_a_client_certificate_and_sasl_ssl() {
    let pki = tempfile::tempdir().expect("tempdir");
    make_pki(pki.path());
    let file = |name: &str| pki.path().join(name).to_string_lossy().into_owned();
    let (ssl_port, sasl_ssl_port) = (common::free_port(), common::free_port());
    let listeners = format!(
        "PLAINTEXT://127.0.0.1:{{port}},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port}"
    );
    let broker = Broker::start_with(&[
        ("listeners", &listeners),
        ("ssl.keystore.location", &file("broker.pem")),
        ("ssl.truststore.location", &file("ca.crt")),
        ("listener.name.ssl.ssl.client.auth", "required"),
        (
            "listener.name.sasl_ssl.sasl.enabled.mechanisms",
            "SCRAM-SHA-512",
        ),
    ]);
    run_ok(
        &broker.addr,
        &["users", "add", "alice", "--password", "s3cret"],
    );
    let (ca, cert, key) = (file("ca.crt"), file("a.crt"), file("a.key"));
    let ssl = format!("127.0.0.1:{ssl_port}");
    let with_cert = |args: &[&str], stdin: Option<&str>| {
        let mut all = vec![
            "--security-protocol",
            "SSL",
            "--ssl-ca-location",
            &ca,
            "--ssl-certificate-location",
            &cert,
            "--ssl-key-location",
            &key,
        ];
        all.extend_from_slice(args);
        mk(&ssl, &all, stdin)
    };
    ok(
        &with_cert(&["topics", "create", "tls"], None),
        "create over SSL",
    );
    ok(
        &with_cert(&["produce", "tls"], Some("one\ntwo\n")),
        "produce over SSL",
    );
    let sasl_ssl = format!("127.0.0.1:{sasl_ssl_port}");
    let read = ok(
        &mk(
            &sasl_ssl,
            &[
                "--security-protocol",
                "SASL_SSL",
                "--ssl-ca-location",
                &ca,
                "--sasl-mechanism",
                "SCRAM-SHA-512",
                "--sasl-username",
                "alice",
                "--sasl-password",
                "s3cret",
                "consume",
                "tls",
                "--count",
                "2",
            ],
            None,
        ),
        "consume over SASL_SSL",
    );
    assert_eq!(read, "one\ntwo\n");
    fails_with(
        &mk(
            &ssl,
            &["--security-protocol", "SSL", "topics", "list"],
            None,
        ),
        "SSL without a CA",
        &["needs --ssl-ca-location"],
    );
    let no_cert = mk(
        &ssl,
        &[
            "--security-protocol",
            "SSL",
            "--ssl-ca-location",
            &ca,
            "topics",
            "list",
        ],
        None,
    );
    assert!(
        !no_cert.status.success(),
        "a listener requiring a client certificate served mk without one"
    );
}
