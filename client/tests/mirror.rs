//! `mk mirror` end to end: the real `mk` binary between real brokers over TCP on 127.0.0.1
//! (the `minikafka` binary, see `common/mod.rs`, and kfake, an independent Kafka-compatible
//! broker at `$KFAKE_RUNNER` or `../shared/peers/kfake/kfake-runner`; a missing broker FAILS
//! the test, nothing skips).
//!
//! Sizes: 100 000 records in the record-by-record tests; the documented 1 M run is
//! `MIRROR_RECORDS=1000000 cargo test -p minikafka-client --test mirror -- --nocapture`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use minikafka_client::configs::ConfigResource;
use minikafka_client::group::admin::{commit_offsets_checked, fetch_offsets, Committer};
use minikafka_client::{
    admin, Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, ConsumerRecord,
    GroupConfig, GroupConsumer, IsolationLevel, Offset, OffsetReset, OffsetSpec, Producer,
    ProducerConfig, ProducerRecord, SmolRuntime, TopicPartition,
};
use smol::net::TcpStream;

/// A kfake-runner process on an ephemeral port with its own data directory; killed on drop.
struct Kfake {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Kfake {
    fn start() -> Kfake {
        let bin = std::env::var_os("KFAKE_RUNNER")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../../shared/peers/kfake/kfake-runner")
            });
        assert!(bin.is_file(), "kfake-runner not found at {}", bin.display());
        let dir = tempfile::tempdir().expect("temp dir");
        let mut child = Command::new(&bin)
            .arg("-port")
            .arg("0")
            .arg("-data-dir")
            .arg(dir.path().join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) if line.trim().parse::<std::net::SocketAddr>().is_ok() => {
                    break line.trim().to_string()
                }
                Some(Ok(_)) => continue,
                _ => panic!("kfake exited before printing its address"),
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Kfake {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Kfake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn records_wanted() -> usize {
    std::env::var("MIRROR_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

async fn connection(addr: &str) -> Connection<TcpStream> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    Connection::connect(stream, ConnectionConfig::default())
        .await
        .expect("negotiate")
}

fn mk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mk"))
}

fn mirror_args(source: &str, target: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "mirror".to_string(),
        "--source".into(),
        source.into(),
        "--target".into(),
        target.into(),
        "--progress-secs".into(),
        "1".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs `mk mirror ... --once` to completion and returns its output, failing on a bad exit.
fn mirror_once(source: &str, target: &str, extra: &[&str]) -> Output {
    let mut args = mirror_args(source, target, extra);
    args.push("--once".into());
    let out = mk().args(&args).output().expect("run mk mirror");
    assert!(
        out.status.success(),
        "mk mirror failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The record `i` of a test stream: key, value, two headers (one null), a timestamp of its own.
fn record(topic: &str, partitions: i32, i: usize) -> ProducerRecord {
    let mut r = ProducerRecord::new(topic, format!("value-{i}"))
        .with_key(format!("key-{i}"))
        .with_partition(i as i32 % partitions)
        .with_header("seq", i.to_string())
        .with_timestamp_ms(1_700_000_000_000 + i as i64);
    r.headers.push(("null".into(), None));
    r
}

async fn produce(addr: &str, records: impl IntoIterator<Item = ProducerRecord>) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (producer, driver) = Producer::connect(stream, ProducerConfig::default(), SmolRuntime)
        .await
        .expect("producer");
    let task = smol::spawn(driver.run());
    let mut deliveries = Vec::new();
    for r in records {
        deliveries.push(producer.send(r).await.expect("send"));
    }
    producer.flush().await.expect("flush");
    for d in deliveries {
        d.await.expect("delivered");
    }
    drop(producer);
    task.await;
}

/// Every record of a partition up to its end (the last stable offset with read_committed).
async fn read_all(
    addr: &str,
    tp: &TopicPartition,
    isolation: IsolationLevel,
) -> Vec<ConsumerRecord> {
    let mut conn = connection(addr).await;
    let end = admin::list_offsets_at(
        &mut conn,
        &tp.topic,
        &[(tp.partition, OffsetSpec::Latest)],
        isolation.wire(),
    )
    .await
    .expect("end offset")[0]
        .offset
        .unwrap_or(Offset(0));
    let mut consumer = Consumer::new(
        conn,
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            max_wait: Duration::from_millis(100),
            isolation_level: isolation,
            ..ConsumerConfig::default()
        },
    );
    consumer.assign([tp.clone()]);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer.position(tp).await.expect("position") < end {
        assert!(Instant::now() < deadline, "{tp}: stuck below {end:?}");
        out.extend(consumer.poll().await.expect("poll"));
    }
    out
}

/// Key, value, headers and timestamp.
type Essence = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
    i64,
);

/// The parts of a record a mirror must keep.
fn essence(r: &ConsumerRecord) -> Essence {
    (
        r.key.as_ref().map(|b| b.to_vec()),
        r.value.as_ref().map(|b| b.to_vec()),
        r.headers
            .iter()
            .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
            .collect(),
        r.timestamp_ms,
    )
}

fn seq(r: &ConsumerRecord) -> usize {
    let h = r
        .headers
        .iter()
        .find(|h| h.key == "seq")
        .expect("seq header");
    std::str::from_utf8(h.value.as_ref().expect("seq value"))
        .expect("utf8")
        .parse()
        .expect("number")
}

/// Records + compacted topic + configs + group offsets, `--once`, into `target`.
async fn once_into(target: &str, source: &common::Broker) {
    let n = records_wanted();
    let partitions = 4;
    let mut src = source.admin().await;
    src.create_topic("events", partitions, &[])
        .await
        .expect("create events");
    let table_configs = [
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("retention.ms".to_string(), "604800001".to_string()),
    ];
    src.create_topic("table", 1, &table_configs)
        .await
        .expect("create table");
    produce(
        &source.addr,
        (0..n).map(|i| record("events", partitions, i)),
    )
    .await;
    // A compacted topic: 20 keys written 10 times each.
    produce(
        &source.addr,
        (0..200).map(|i| {
            ProducerRecord::new("table", format!("v{i}"))
                .with_key(format!("k{}", i % 20))
                .with_timestamp_ms(1_600_000_000_000 + i as i64)
        }),
    )
    .await;
    // A consumer group that read a third of each partition and all of the table.
    let mut committed = BTreeMap::new();
    for p in 0..partitions {
        committed.insert(
            TopicPartition::new("events", p),
            Offset((n / 4 / 3) as i64 + i64::from(p)),
        );
    }
    committed.insert(TopicPartition::new("table", 0), Offset(150));
    commit_offsets_checked(src.connection(), "readers", &Committer::admin(), &committed)
        .await
        .expect("commit on the source");

    let started = Instant::now();
    let out = mirror_once(&source.addr, target, &[]);
    let secs = started.elapsed().as_secs_f64();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("mirror --once of {n} records in {secs:.2} s:\n{report}");
    assert!(
        report.contains(&format!("copied {n} records of events")),
        "{report}"
    );
    assert!(report.contains("copied 200 records of table"), "{report}");
    assert!(report.contains("group readers synced"), "{report}");

    // Record by record: offsets, keys, values, headers, timestamps.
    for p in 0..partitions {
        let tp = TopicPartition::new("events", p);
        let a = read_all(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
        let b = read_all(target, &tp, IsolationLevel::ReadUncommitted).await;
        assert_eq!(a.len(), b.len(), "{tp}");
        assert_eq!(a.len(), n / 4, "{tp}");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.offset, y.offset, "{tp}");
            assert_eq!(essence(x), essence(y), "{tp} at {}", x.offset);
        }
    }
    let tp = TopicPartition::new("table", 0);
    let a = read_all(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
    let b = read_all(target, &tp, IsolationLevel::ReadUncommitted).await;
    assert_eq!(
        a.iter().map(|r| (r.offset, essence(r))).collect::<Vec<_>>(),
        b.iter().map(|r| (r.offset, essence(r))).collect::<Vec<_>>()
    );
    // The topic configs set on the source arrived (I83).
    let mut tgt = Admin::new(connection(target).await);
    let configs = tgt
        .describe_configs(&ConfigResource::Topic("table".into()))
        .await
        .expect("describe table on the target");
    for (k, v) in &table_configs {
        assert!(
            configs
                .iter()
                .any(|c| &c.name == k && c.value.as_deref() == Some(v.as_str())),
            "{k}={v} missing on the target: {configs:?}"
        );
    }
    let meta = admin::topic_metadata(tgt.connection(), "events", false)
        .await
        .expect("metadata");
    assert_eq!(meta.partition_count(), partitions);
    // The group resumes on the target at the translated position: same offsets here (an
    // identical layout), and the record there is the one it would have read next (I84).
    let on_target = fetch_offsets(tgt.connection(), "readers", None)
        .await
        .expect("fetch offsets");
    assert_eq!(on_target, committed);
    for (tp, offset) in &committed {
        let a = read_all(&source.addr, tp, IsolationLevel::ReadUncommitted).await;
        let b = read_all(target, tp, IsolationLevel::ReadUncommitted).await;
        let next_a = a
            .iter()
            .find(|r| r.offset >= *offset)
            .expect("source record");
        let next_b = b
            .iter()
            .find(|r| r.offset >= on_target[tp])
            .expect("target record");
        assert_eq!(essence(next_a), essence(next_b), "{tp}");
    }
}

#[test]
fn once_into_a_second_minikafka_copies_records_configs_and_groups() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    smol::block_on(once_into(&target.addr, &source));
}

#[test]
fn once_into_kfake_copies_records_configs_and_groups() {
    let source = common::Broker::start();
    let target = Kfake::start();
    smol::block_on(once_into(&target.addr, &source));
}

/// A transactional source (kfake serves transactions): only committed records arrive, the
/// offsets shift at each gap, and a group commit is translated exactly across the gaps. The
/// source topic carries a config minikafka refuses, which the report names.
#[test]
fn a_transactional_source_sends_only_committed_records_and_offsets_translate() {
    let source = Kfake::start();
    let target = common::Broker::start();
    smol::block_on(async {
        let mut src = Admin::new(connection(&source.addr).await);
        let configs = [("flush.messages".to_string(), "1".to_string())];
        src.create_topic("orders", 1, &configs)
            .await
            .expect("create");
        let stream = TcpStream::connect(&source.addr).await.expect("connect");
        let config = ProducerConfig {
            transactional_id: Some("orders-writer".into()),
            ..ProducerConfig::default()
        };
        let (producer, driver) = Producer::connect(stream, config, SmolRuntime)
            .await
            .expect("producer");
        let task = smol::spawn(driver.run());
        producer.init_transactions().await.expect("init");
        // Source offsets: 0..=9 committed, 10 marker, 11..=15 aborted, 16 marker, 17..=26
        // committed, 27 marker.
        for (txn, commit) in [(0, true), (1, false), (2, true)] {
            producer.begin_transaction().await.expect("begin");
            let count = if commit { 10 } else { 5 };
            for i in 0..count {
                let r = ProducerRecord::new("orders", format!("t{txn}-{i}"))
                    .with_partition(0)
                    .with_key(format!("k{i}"));
                drop(producer.send(r).await.expect("send"));
            }
            if commit {
                producer.commit_transaction().await.expect("commit");
            } else {
                producer.abort_transaction().await.expect("abort");
            }
        }
        drop(producer);
        task.await;
        let tp = TopicPartition::new("orders", 0);
        let source_records = read_all(&source.addr, &tp, IsolationLevel::ReadCommitted).await;
        assert_eq!(source_records.len(), 20);
        let third = &source_records[13]; // t2-3: the group read t2-0..=t2-2
        let committed = BTreeMap::from([(tp.clone(), third.offset)]);
        commit_offsets_checked(src.connection(), "billing", &Committer::admin(), &committed)
            .await
            .expect("commit on the source");

        let out = mirror_once(&source.addr, &target.addr, &[]);
        let report = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(report.contains("copied 20 records of orders"), "{report}");
        assert!(
            report.contains("config refused by the target: orders flush.messages=1"),
            "{report}"
        );
        let copied = read_all(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
        assert_eq!(
            copied.iter().map(essence).collect::<Vec<_>>(),
            source_records.iter().map(essence).collect::<Vec<_>>()
        );
        assert!(copied.iter().all(|r| !String::from_utf8_lossy(
            r.value.as_deref().unwrap_or_default()
        )
        .starts_with("t1")));
        // Source offset 20 (t2-3) is target offset 13: exact across the gaps (I84).
        let mut tgt = connection(&target.addr).await;
        let on_target = fetch_offsets(&mut tgt, "billing", None)
            .await
            .expect("fetch");
        assert_eq!(on_target[&tp], copied[13].offset, "{report}");
        assert_eq!(essence(&copied[13]), essence(third));
    });
}

/// Sums the target's end offsets of `topic`.
async fn target_end(addr: &str, topic: &str, partitions: i32) -> i64 {
    let mut conn = connection(addr).await;
    let queries: Vec<(i32, OffsetSpec)> =
        (0..partitions).map(|p| (p, OffsetSpec::Latest)).collect();
    match admin::list_offsets(&mut conn, topic, &queries).await {
        Ok(answers) => answers.iter().map(|a| a.offset.map_or(0, |o| o.0)).sum(),
        Err(_) => 0,
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a continuous mirror, waits until `at_least` offsets exist on the target, kills it
/// with SIGKILL, and returns how far the target had got.
async fn kill_mid_stream(
    source: &str,
    target: &str,
    topic: &str,
    partitions: i32,
    extra: &[&str],
    at_least: i64,
) -> i64 {
    let mut child = Running(
        mk().args(mirror_args(source, target, extra))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mk mirror"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let end = target_end(target, topic, partitions).await;
        if end >= at_least {
            child.0.kill().expect("kill -9"); // SIGKILL
            child.0.wait().expect("reap");
            return target_end(target, topic, partitions).await;
        }
        assert!(
            Instant::now() < deadline,
            "the mirror copied only {end} offsets"
        );
        smol::Timer::after(Duration::from_millis(5)).await;
    }
}

async fn produce_events(addr: &str, topic: &str, partitions: i32, n: usize) {
    let mut admin = Admin::new(connection(addr).await);
    admin
        .create_topic(topic, partitions, &[])
        .await
        .expect("create");
    produce(addr, (0..n).map(|i| record(topic, partitions, i))).await;
}

/// Kill -9 without --exactly-once: after a restart every record is there, in order, and the
/// duplicates are at most one window (`--batch-records`) (I86).
#[test]
fn kill_9_at_least_once_duplicates_at_most_one_window() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    let n = records_wanted();
    let window = 5_000;
    smol::block_on(async {
        produce_events(&source.addr, "events", 4, n).await;
        let batch = window.to_string();
        let extra = ["--batch-records", batch.as_str()];
        let at_kill = kill_mid_stream(
            &source.addr,
            &target.addr,
            "events",
            4,
            &extra,
            2 * window as i64,
        )
        .await;
        assert!(
            at_kill < n as i64,
            "the mirror finished before the kill: nothing tested"
        );
        mirror_once(&source.addr, &target.addr, &extra);
        let mut duplicates = 0;
        for p in 0..4 {
            let tp = TopicPartition::new("events", p);
            let want: Vec<usize> = read_all(&source.addr, &tp, IsolationLevel::ReadUncommitted)
                .await
                .iter()
                .map(seq)
                .collect();
            let got: Vec<usize> = read_all(&target.addr, &tp, IsolationLevel::ReadUncommitted)
                .await
                .iter()
                .map(seq)
                .collect();
            // `got` is `want` with runs copied again: each restart point goes back, never forward.
            let mut expected = 0;
            for s in got {
                let index = want
                    .iter()
                    .position(|w| *w == s)
                    .expect("a record the source has");
                assert!(
                    index <= expected,
                    "{tp}: record {s} came before the ones in between"
                );
                duplicates += expected - index;
                expected = index + 1;
            }
            assert_eq!(expected, want.len(), "{tp}: records missing at the end");
        }
        eprintln!("killed at {at_kill} offsets; {duplicates} duplicates");
        assert!(
            duplicates <= window,
            "{duplicates} duplicates, more than one window of {window}"
        );
    });
}

/// Kill -9 with --exactly-once into kfake (which serves transactions): the target's
/// read_committed view is the source, without a duplicate or a gap.
#[test]
fn kill_9_exactly_once_leaves_no_duplicate_in_the_committed_view() {
    let source = common::Broker::start();
    let target = Kfake::start();
    let n = records_wanted();
    smol::block_on(async {
        produce_events(&source.addr, "events", 4, n).await;
        let extra = [
            "--exactly-once",
            "--batch-records",
            "5000",
            "--target-config",
            "transaction.timeout.ms=3000",
        ];
        let at_kill =
            kill_mid_stream(&source.addr, &target.addr, "events", 4, &extra, 10_000).await;
        assert!(
            at_kill < n as i64,
            "the mirror finished before the kill: nothing tested"
        );
        mirror_once(&source.addr, &target.addr, &extra);
        // The killed mirror's open transaction ends (aborted by the target's timeout) before
        // the committed view reaches the end.
        let deadline = Instant::now() + Duration::from_secs(60);
        for p in 0..4 {
            let tp = TopicPartition::new("events", p);
            loop {
                let mut conn = connection(&target.addr).await;
                let q = [(p, OffsetSpec::Latest)];
                let lso = admin::list_offsets_at(&mut conn, "events", &q, 1)
                    .await
                    .expect("lso")[0]
                    .offset;
                let hwm = admin::list_offsets_at(&mut conn, "events", &q, 0)
                    .await
                    .expect("hwm")[0]
                    .offset;
                if lso == hwm {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{tp}: the last stable offset stays below the end"
                );
                smol::Timer::after(Duration::from_millis(200)).await;
            }
            let want: Vec<usize> = read_all(&source.addr, &tp, IsolationLevel::ReadUncommitted)
                .await
                .iter()
                .map(seq)
                .collect();
            let got: Vec<usize> = read_all(&target.addr, &tp, IsolationLevel::ReadCommitted)
                .await
                .iter()
                .map(seq)
                .collect();
            assert_eq!(got.len(), want.len(), "{tp}");
            assert!(
                got == want,
                "{tp}: the committed view differs from the source"
            );
        }
        eprintln!("killed at {at_kill} offsets; committed view identical");
    });
}

fn group_config(group: &str) -> GroupConfig {
    let mut config = GroupConfig::new(group, vec!["events".to_string()]);
    config.session_timeout = Duration::from_secs(10);
    config.rebalance_timeout = Duration::from_secs(20);
    config.heartbeat_interval = Duration::from_millis(300);
    config.auto_commit_interval = None;
    config.auto_offset_reset = OffsetReset::Earliest;
    config.consumer = ConsumerConfig {
        max_wait: Duration::from_millis(100),
        ..ConsumerConfig::default()
    };
    config
}

async fn group_consumer(addr: &str, group: &str) -> GroupConsumer<TcpStream, SmolRuntime> {
    let stream = || async {
        let s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s
    };
    GroupConsumer::connect(
        stream().await,
        stream().await,
        group_config(group),
        SmolRuntime,
    )
    .await
    .expect("group consumer")
}

/// The cut-over: a live consumer group commits on the source while the mirror runs
/// continuously and producers keep writing; the periodic sync carries its position; after
/// `--once` the same group on the target reads exactly the records it had not read on the
/// source (nothing lost, nothing read twice: the layout is identical) (I85). A group active on
/// the target is then left alone.
#[test]
fn cut_over_a_live_consumer_group_resumes_on_the_target() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    smol::block_on(async {
        produce_events(&source.addr, "events", 2, 4_000).await;
        let extra = ["--sync-group-secs", "1", "--batch-records", "500"];
        let mirror = Running(
            mk().args(mirror_args(&source.addr, &target.addr, &extra))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start mk mirror"),
        );
        // The application reads part of the stream on the source and commits.
        let mut app = group_consumer(&source.addr, "app").await;
        let mut read_on_source = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while read_on_source.len() < 2_500 {
            assert!(
                Instant::now() < deadline,
                "the source group read too little"
            );
            read_on_source.extend(app.poll().await.expect("poll").iter().map(seq));
        }
        app.commit_sync().await.expect("commit");
        let mut src = connection(&source.addr).await;
        let committed = fetch_offsets(&mut src, "app", None).await.expect("offsets");
        // Producers keep writing while the mirror runs.
        produce(&source.addr, (4_000..6_000).map(|i| record("events", 2, i))).await;
        // The continuous mirror syncs the (still active on the source) group.
        let mut tgt = connection(&target.addr).await;
        loop {
            let on_target = fetch_offsets(&mut tgt, "app", None)
                .await
                .unwrap_or_default();
            if on_target == committed {
                break;
            }
            assert!(
                Instant::now() < deadline + Duration::from_secs(30),
                "not synced: {on_target:?} vs {committed:?}"
            );
            smol::Timer::after(Duration::from_millis(200)).await;
        }
        // Cut-over: the application stops, the continuous mirror stops, `--once` finishes.
        app.close().await.expect("leave");
        drop(mirror);
        let out = mirror_once(&source.addr, &target.addr, &[]);
        let report = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(report.contains("group app synced"), "{report}");
        // The application restarts on the target.
        let mut app = group_consumer(&target.addr, "app").await;
        let mut read_on_target = Vec::new();
        let want = 6_000 - read_on_source.len();
        let deadline = Instant::now() + Duration::from_secs(30);
        while read_on_target.len() < want {
            assert!(
                Instant::now() < deadline,
                "only {} of {want} records on the target",
                read_on_target.len()
            );
            read_on_target.extend(app.poll().await.expect("poll").iter().map(seq));
        }
        // One more poll: nothing beyond.
        read_on_target.extend(app.poll().await.expect("poll").iter().map(seq));
        let mut all: Vec<usize> = read_on_source
            .iter()
            .chain(&read_on_target)
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..6_000).collect::<Vec<_>>(), "lost or read twice");
        app.commit_sync().await.expect("commit on the target");
        // The group is active on the target now: the mirror leaves it alone.
        let out = mirror_once(&source.addr, &target.addr, &[]);
        let report = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            report.contains("group app not synced: active on the target"),
            "{report}"
        );
        app.close().await.expect("leave");
    });
}

/// A minikafka process that can be killed with SIGKILL and started again on the same port and
/// data directory.
struct Node {
    child: Option<Child>,
    addr: String,
    dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let mut node = Node {
            child: None,
            addr: format!("127.0.0.1:{}", common::free_port()),
            dir: tempfile::tempdir().expect("temp dir"),
        };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        let mut child = Command::new(common::broker_binary())
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://{}", self.addr))
            .arg("--override")
            .arg(format!(
                "log.dirs={}",
                self.dir.path().join("data").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start minikafka");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        self.child = Some(child);
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("listening on") => break,
                Some(Ok(_)) => continue,
                _ => panic!("minikafka exited before listening"),
            }
        }
        std::thread::spawn(move || for _ in lines {});
    }

    fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("reap");
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill_9();
    }
}

/// Kill -9 the SOURCE broker mid-stream and start it again: the mirror restarts its session
/// from the stored progress and finishes; every record is on the target, in order, with at
/// most one window copied twice (I86).
#[test]
fn kill_9_of_the_source_broker_is_survived() {
    let mut source = Node::start();
    let target = common::Broker::start();
    let n = records_wanted();
    let window = 5_000;
    smol::block_on(async {
        produce_events(&source.addr, "events", 4, n).await;
        let batch = window.to_string();
        let mut mirror = Running(
            mk().args(mirror_args(
                &source.addr,
                &target.addr,
                &["--batch-records", &batch],
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mk mirror"),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while target_end(&target.addr, "events", 4).await < 2 * window as i64 {
            assert!(Instant::now() < deadline, "the mirror does not copy");
            smol::Timer::after(Duration::from_millis(5)).await;
        }
        source.kill_9();
        let at_kill = target_end(&target.addr, "events", 4).await;
        assert!(
            at_kill < n as i64,
            "the mirror finished before the kill: nothing tested"
        );
        smol::Timer::after(Duration::from_millis(500)).await;
        source.spawn();
        // The mirror (the same process) catches up.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut want = Vec::new();
        for p in 0..4 {
            let tp = TopicPartition::new("events", p);
            want.push(
                read_all(&source.addr, &tp, IsolationLevel::ReadUncommitted)
                    .await
                    .iter()
                    .map(seq)
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(
            want.iter().map(Vec::len).sum::<usize>(),
            n,
            "the source lost records"
        );
        loop {
            assert!(
                mirror.0.try_wait().expect("try_wait").is_none(),
                "the mirror exited"
            );
            let mut caught_up = true;
            for p in 0..4 {
                let tp = TopicPartition::new("events", p);
                let got = read_all(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
                if got.last().map(seq) != want[p as usize].last().copied() {
                    caught_up = false;
                }
            }
            if caught_up {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the mirror did not catch up after the source restarted"
            );
            smol::Timer::after(Duration::from_millis(500)).await;
        }
        let mut duplicates = 0;
        for p in 0..4 {
            let tp = TopicPartition::new("events", p);
            let got: Vec<usize> = read_all(&target.addr, &tp, IsolationLevel::ReadUncommitted)
                .await
                .iter()
                .map(seq)
                .collect();
            let want = &want[p as usize];
            let mut expected = 0;
            for s in got {
                let index = want
                    .iter()
                    .position(|w| *w == s)
                    .expect("a record the source has");
                assert!(
                    index <= expected,
                    "{tp}: record {s} came before the ones in between"
                );
                duplicates += expected - index;
                expected = index + 1;
            }
            assert_eq!(expected, want.len(), "{tp}: records missing at the end");
        }
        eprintln!("source killed at {at_kill} offsets on the target; {duplicates} duplicates");
        assert!(
            duplicates <= window,
            "{duplicates} duplicates, more than one window of {window}"
        );
    });
}
