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

use minikafka_client::configs::{ConfigResource, ConfigSource};
use minikafka_client::group::admin::{commit_offsets_checked, fetch_offsets, Committer};
use minikafka_client::producer::BatchConfig;
use minikafka_client::{
    admin, Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, ConsumerGroupMetadata,
    ConsumerRecord, GroupConfig, GroupConsumer, IsolationLevel, Offset, OffsetReset, OffsetSpec,
    Producer, ProducerConfig, ProducerRecord, SmolRuntime, TopicPartition,
};
use minikafka_testkit::cluster_proxy::{ClusterProxy, ProxyPlan};
use smol::net::TcpStream;
use std::sync::atomic::Ordering::SeqCst;

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
/// Mirrors a stream, a compacted topic with three configs and a group with `--once`, and
/// checks it all arrived (I83). Neither target refuses a config here: kfake stores any topic
/// config at CreateTopics (even `flush.policy`, which a Kafka broker refuses as unknown), so
/// refusals are tested into minikafka, from kfake, below.
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
        // minikafka's own.
        ("flush.policy".to_string(), "fsync".to_string()),
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
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
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
    assert!(!report.contains("config refused"), "{report}");
    assert!(!stderr.contains("config refused"), "{stderr}");
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
        // Named in the report and on stderr as it happens; the topic is created without it.
        let refusal = "config refused by the target: orders flush.messages=1";
        assert!(report.contains(refusal), "{report}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(refusal), "{stderr}");
        let configs = Admin::new(connection(&target.addr).await)
            .describe_configs(&ConfigResource::Topic("orders".into()))
            .await
            .expect("describe orders on the target");
        assert!(
            configs
                .iter()
                .all(|c| c.name != "flush.messages" || c.source != ConfigSource::Topic),
            "{configs:?}"
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

impl Running {
    /// Sends SIGTERM (what a service manager, or Ctrl-C's SIGINT, asks a mirror to stop with)
    /// and waits up to a minute for the exit: `mk mirror` stops between windows (I198).
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", pid.as_str()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.0.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "mk mirror still running a minute after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The lines a mirror's stderr says it restarted a session (each re-copies at most a window).
fn restarts_logged(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains("restarting from the stored progress"))
        .count()
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
    wait_until_target_holds(target, topic, partitions, at_least).await;
    child.0.kill().expect("kill -9"); // SIGKILL
    child.0.wait().expect("reap");
    target_end(target, topic, partitions).await
}

/// Waits (at most a minute) until the target's `topic` holds at least `at_least` offsets
/// over its `partitions`.
async fn wait_until_target_holds(target: &str, topic: &str, partitions: i32, at_least: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let end = target_end(target, topic, partitions).await;
        if end >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the mirror copied only {end} of {at_least} offsets"
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
            let want = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let got = seqs(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
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
            let want = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let got = seqs(&target.addr, &tp, IsolationLevel::ReadCommitted).await;
            assert_eq!(got.len(), want.len(), "{tp}");
            assert!(
                got == want,
                "{tp}: the committed view differs from the source"
            );
        }
        eprintln!("killed at {at_kill} offsets; committed view identical");
    });
}

/// SIGTERM mid-stream without --exactly-once: the mirror stops between windows, exits 0 with
/// the window in flight copied and its progress stored (its report counts exactly what the
/// target holds), and `--once` copies the rest without one duplicate (I198); a kill -9 at the
/// same point repeats up to a window (I86, above).
#[test]
fn sigterm_stops_between_windows_and_leaves_nothing_to_copy_again() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    let n = 40_000;
    let window = 2_000;
    smol::block_on(async {
        produce_events(&source.addr, "events", 4, n).await;
        let batch = window.to_string();
        let extra = ["--batch-records", batch.as_str()];
        let logs = tempfile::tempdir().expect("temp dir");
        let out_path = logs.path().join("mirror.stdout");
        let err_path = logs.path().join("mirror.stderr");
        let mirror = Running(
            mk().args(mirror_args(&source.addr, &target.addr, &extra))
                .stdout(std::fs::File::create(&out_path).expect("stdout file"))
                .stderr(std::fs::File::create(&err_path).expect("stderr file"))
                .spawn()
                .expect("start mk mirror"),
        );
        wait_until_target_holds(&target.addr, "events", 4, 2 * window as i64).await;
        let status = mirror.stop();
        let stdout = std::fs::read_to_string(&out_path).expect("stdout");
        let stderr = std::fs::read_to_string(&err_path).expect("stderr");
        assert!(status.success(), "mk mirror exited {status}: {stderr}");
        let at_stop = target_end(&target.addr, "events", 4).await;
        assert!(
            at_stop < n as i64,
            "the mirror finished before the stop: nothing tested"
        );
        let restarts = restarts_logged(&stderr);
        if restarts == 0 {
            assert!(
                stdout.contains(&format!("copied {at_stop} records of events")),
                "the report does not count the {at_stop} records on the target: {stdout}"
            );
        }
        let once = mirror_once(&source.addr, &target.addr, &extra);
        let restarts = restarts + restarts_logged(&String::from_utf8_lossy(&once.stderr));
        let mut duplicates = 0;
        for p in 0..4 {
            let tp = TopicPartition::new("events", p);
            let want = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let got = seqs(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
            if restarts == 0 {
                assert!(got == want, "{tp}: the target differs from the source");
            }
            duplicates += duplicates_of_in_order(&want, &got);
        }
        eprintln!("stopped at {at_stop} offsets; {duplicates} duplicates, {restarts} restarts");
        assert!(
            duplicates <= restarts * window,
            "{duplicates} duplicates after a stop and {restarts} restarts: {stderr}"
        );
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
/// continuously and producers keep writing; the periodic sync carries its position; the
/// continuous mirror is stopped with SIGTERM (between windows, progress stored: I198) and
/// after `--once` the same group on the target reads exactly the records it had not read on
/// the source (nothing lost, nothing read twice: the layout is identical) (I85). Only a logged
/// session restart may add repeats, at most a window each (I86). A group active on the target
/// is then left alone.
///
/// (It used to stop the mirror with SIGKILL, and to take any lag-0 line as caught up, even one
/// printed before the last 2 000 records were written (there was always one; 1 run in 6 killed
/// the mirror 1 500 records behind): a kill after a window's records were acknowledged and
/// before its progress was stored has `--once` copy that window again, the likely cause of
/// 280 records read twice in a loaded CI run of 2026-12-06.)
#[test]
fn cut_over_a_live_consumer_group_resumes_on_the_target() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    smol::block_on(async {
        produce_events(&source.addr, "events", 2, 4_000).await;
        let extra = ["--sync-group-secs", "1", "--batch-records", "500"];
        let logs = tempfile::tempdir().expect("temp dir");
        let stderr_path = logs.path().join("mirror.stderr");
        let stderr_file = std::fs::File::create(&stderr_path).expect("stderr file");
        let mirror = Running(
            mk().args(mirror_args(&source.addr, &target.addr, &extra))
                .stdout(Stdio::null())
                .stderr(stderr_file)
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
        // Only lines begun after the last record was written can say the mirror caught up
        // with it (one written before, while the first 4 000 were copied, says nothing).
        let seen = std::fs::read_to_string(&stderr_path)
            .unwrap_or_default()
            .len();
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
        // The progress lines on stderr (every `--progress-secs 1`) reach a lag of zero on
        // each partition once the mirror has caught up with the producers.
        let caught_up = "lag events-0=0 events-1=0 (total 0)";
        loop {
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let since = stderr.get(seen..).unwrap_or_default();
            // A line unfinished at `seen` began before: skip its rest.
            let since = match stderr.get(..seen) {
                Some(before) if !before.is_empty() && !before.ends_with('\n') => {
                    since.split_once('\n').map_or("", |(_, rest)| rest)
                }
                _ => since,
            };
            if since
                .lines()
                .any(|l| l.contains("records/s;") && l.ends_with(caught_up))
            {
                break;
            }
            assert!(
                Instant::now() < deadline + Duration::from_secs(60),
                "no progress line with `{caught_up}`: {stderr}"
            );
            smol::Timer::after(Duration::from_millis(200)).await;
        }
        // Cut-over: the application stops, the continuous mirror is stopped (SIGTERM: it
        // stops between windows with its progress stored, I198), `--once` finishes.
        app.close().await.expect("leave");
        let stopped = mirror.stop();
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        assert!(stopped.success(), "mk mirror exited {stopped}: {stderr}");
        let out = mirror_once(&source.addr, &target.addr, &extra[2..]);
        let report = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(report.contains("group app synced"), "{report}");
        // The application restarts on the target.
        let mut app = group_consumer(&target.addr, "app").await;
        let mut read_on_target = Vec::new();
        let want = 6_000 - read_on_source.len();
        let deadline = Instant::now() + Duration::from_secs(30);
        let distinct = |read: &[usize]| {
            let mut read = read.to_vec();
            read.sort_unstable();
            read.dedup();
            read.len()
        };
        // Until every record not read on the source has come (or 30 s say some never will).
        while distinct(&read_on_target) < want && Instant::now() < deadline {
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
        // Exactly once, unless a session restarted: each restart re-copies from the stored
        // progress, at most one window (`--batch-records 500`) of at-least-once repeats (I86).
        // The stop itself repeats nothing (I198); nothing is ever lost.
        let restarts =
            restarts_logged(&stderr) + restarts_logged(&String::from_utf8_lossy(&out.stderr));
        let mut once = all.clone();
        once.dedup();
        let repeated: Vec<usize> = all
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        let missing: Vec<usize> = (0..6_000)
            .filter(|i| once.binary_search(i).is_err())
            .collect();
        assert!(
            missing.is_empty() && repeated.len() <= 500 * restarts,
            "lost or read twice: {} read twice ({:?}..{:?}), {} missing ({:?}), {restarts} \
             session restarts logged; {} read on the source, {} on the target; the continuous \
             mirror's stderr:\n{stderr}\n`--once`'s stderr:\n{}",
            repeated.len(),
            repeated.first(),
            repeated.last(),
            missing.len(),
            missing.iter().take(10).collect::<Vec<_>>(),
            read_on_source.len(),
            read_on_target.len(),
            String::from_utf8_lossy(&out.stderr),
        );
        if restarts > 0 {
            eprintln!(
                "{restarts} session restarts; {} records read twice",
                repeated.len()
            );
        }
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
        wait_until_target_holds(&target.addr, "events", 4, 2 * window as i64).await;
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
            let got = seqs(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
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

/// A CA, a broker certificate for 127.0.0.1 and a client certificate `CN=mirror`, as PEM files
/// in `dir` (`ca.crt`, `<name>.crt`, `<name>.key`, and `<name>.pem`: key then chain, as
/// `ssl.keystore.location` holds them). Made at test time: no key material is committed.
fn make_pki(dir: &std::path::Path) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "mirror test CA");
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let ca = params.self_signed(&ca_key).expect("CA");
    std::fs::write(dir.join("ca.crt"), ca.pem()).expect("write");
    for (name, sans) in [
        ("broker", vec!["127.0.0.1".to_string()]),
        ("mirror", vec![]),
    ] {
        let mut params = rcgen::CertificateParams::new(sans).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
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

/// Runs `mk` with `args` and waits for it; a run still going after `limit` is killed and the
/// test FAILS (a refusal must end the run, not hang it).
fn mk_bounded(args: &[String], limit: Duration) -> Output {
    let child = mk()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mk");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("mk output"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("mk {args:?} still running after {limit:?}");
        }
    }
}

/// Security on both sides (I121): the source serves SSL and requires a client certificate, the
/// target serves SASL_SSL with SCRAM-SHA-512; `--source-config`/`--target-config` carry
/// librdkafka's settings and every record arrives. A wrong password, a CA that does not vouch
/// for the broker and a missing setting each end the run with an error that says so.
#[test]
fn security_on_both_sides_ssl_with_a_client_certificate_into_sasl_ssl_scram() {
    let pki = tempfile::tempdir().expect("tempdir");
    make_pki(pki.path());
    let file = |name: &str| pki.path().join(name).to_string_lossy().into_owned();
    let ssl_port = common::free_port();
    let source = common::Broker::start_with(&[
        (
            "listeners",
            &format!("PLAINTEXT://127.0.0.1:{{port}},SSL://127.0.0.1:{ssl_port}"),
        ),
        ("ssl.keystore.location", &file("broker.pem")),
        ("ssl.truststore.location", &file("ca.crt")),
        ("listener.name.ssl.ssl.client.auth", "required"),
    ]);
    let sasl_ssl_port = common::free_port();
    let target = common::Broker::start_with(&[
        (
            "listeners",
            &format!("PLAINTEXT://127.0.0.1:{{port}},SASL_SSL://127.0.0.1:{sasl_ssl_port}"),
        ),
        ("ssl.keystore.location", &file("broker.pem")),
        (
            "listener.name.sasl_ssl.sasl.enabled.mechanisms",
            "SCRAM-SHA-512",
        ),
    ]);
    let added = mk()
        .args([
            "-b",
            target.addr.as_str(),
            "users",
            "add",
            "mirror",
            "--password",
            "s3cret",
        ])
        .output()
        .expect("mk users add");
    assert!(added.status.success(), "{added:?}");
    let n = 2_000;
    smol::block_on(async {
        source
            .admin()
            .await
            .create_topic("secure", 2, &[])
            .await
            .expect("create");
        produce(&source.addr, (0..n).map(|i| record("secure", 2, i))).await;
    });
    let ssl = format!("127.0.0.1:{ssl_port}");
    let sasl_ssl = format!("127.0.0.1:{sasl_ssl_port}");
    let args = |password: &str, ca: &str, with_cert: bool| {
        let mut extra = vec![
            "--source-config".to_string(),
            "security.protocol=SSL".into(),
            "--source-config".into(),
            format!("ssl.ca.location={}", file("ca.crt")),
            "--target-config".into(),
            "security.protocol=SASL_SSL".into(),
            "--target-config".into(),
            "sasl.mechanism=SCRAM-SHA-512".into(),
            "--target-config".into(),
            "sasl.username=mirror".into(),
            "--target-config".into(),
            format!("sasl.password={password}"),
            "--target-config".into(),
            format!("ssl.ca.location={ca}"),
            "--once".into(),
        ];
        if with_cert {
            extra.extend([
                "--source-config".to_string(),
                format!("ssl.certificate.location={}", file("mirror.crt")),
                "--source-config".into(),
                format!("ssl.key.location={}", file("mirror.key")),
            ]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        mirror_args(&ssl, &sasl_ssl, &extra)
    };
    let limit = Duration::from_secs(60);
    let out = mk_bounded(&args("s3cret", &file("ca.crt"), true), limit);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains(&format!("copied {n} records of secure")),
        "{report}"
    );
    smol::block_on(async {
        for p in 0..2 {
            let tp = TopicPartition::new("secure", p);
            let a = read_all(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let b = read_all(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
            assert_eq!(a.len(), n / 2, "{tp}");
            assert_eq!(
                a.iter().map(essence).collect::<Vec<_>>(),
                b.iter().map(essence).collect::<Vec<_>>(),
                "{tp}"
            );
        }
    });
    // The global flags are for the other commands: refused, not silently ignored.
    let mut global = vec![
        "--security-protocol".to_string(),
        "SASL_PLAINTEXT".into(),
        "--sasl-username".into(),
        "mirror".into(),
        "--sasl-password".into(),
        "s3cret".into(),
    ];
    global.extend(mirror_args(&source.addr, &target.addr, &["--once"]));
    let out = mk_bounded(&global, limit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("not the global"), "{stderr}");
    // Refusals end the run at once with what went wrong; none is retried as if transient.
    let wrong_ca = tempfile::tempdir().expect("tempdir");
    make_pki(wrong_ca.path());
    let other_ca = wrong_ca
        .path()
        .join("ca.crt")
        .to_string_lossy()
        .into_owned();
    for (what, args, expect) in [
        (
            "a wrong password",
            args("wrong", &file("ca.crt"), true),
            "SASL authentication",
        ),
        (
            "a CA that did not sign the broker's certificate",
            args("s3cret", &other_ca, true),
            "TLS handshake with the target",
        ),
        (
            "no client certificate where the source requires one",
            args("s3cret", &file("ca.crt"), false),
            "with the source",
        ),
    ] {
        let out = mk_bounded(&args, limit);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{what}: {stderr}");
        assert!(!out.status.success(), "{what}: {stderr}");
        assert!(stderr.contains(expect), "{what}: {stderr}");
        assert!(
            !stderr.contains("restarting"),
            "{what} was retried: {stderr}"
        );
    }
}

/// Runs `mk mirror` with `args` (killed after `limit`), checks that it succeeded, prints and
/// returns its report and stderr.
fn mirror_ok(args: &[String], limit: Duration) -> (String, String) {
    let out = mk_bounded(args, limit);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{report}\n{stderr}");
    eprintln!("{report}{stderr}");
    (report, stderr)
}

/// The `seq` header of every record of `tp` at `addr`, as `isolation` reads it.
async fn seqs(addr: &str, tp: &TopicPartition, isolation: IsolationLevel) -> Vec<usize> {
    read_all(addr, tp, isolation)
        .await
        .iter()
        .map(seq)
        .collect()
}

/// Is `target` the source's records once each, in order, with runs repeated (at-least-once
/// re-copies after a restart)? Returns the number of repeated records.
fn duplicates_of_in_order(source: &[usize], target: &[usize]) -> usize {
    let mut next = 0;
    let mut repeated = 0;
    for &s in target {
        if next < source.len() && s == source[next] {
            next += 1;
        } else {
            assert!(
                source[..next].contains(&s),
                "{s} on the target out of order (expected {:?})",
                source.get(next)
            );
            repeated += 1;
        }
    }
    assert_eq!(next, source.len(), "records missing on the target");
    repeated
}

/// A target of two brokers (the test kit's `ClusterProxy` in front of one minikafka, since no
/// multi-broker Kafka exists here): the at-least-once mirror sends each partition to its leader
/// over its own connection (no Produce reaches a non-leader while leaders stay put), leaders
/// that move mid-stream answer NOT_LEADER_OR_FOLLOWER and are followed in place (I163), and
/// when every connection is cut mid-stream the producer opens new ones and re-sends what they
/// carried (I182) instead of restarting the session (a restart, should another of the mirror's
/// target connections be needed before the end, is still allowed); nothing is lost, order is
/// kept and repeats are bounded by one window per restart (I86), none without one.
#[test]
fn a_target_of_two_brokers_routing_moved_leaders_and_cut_connections_lose_nothing() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    let proxy = ClusterProxy::start(
        &target.addr,
        ProxyPlan {
            move_leaders_at: Some(8),
            cut_connections_at: Some(40),
            ..ProxyPlan::new(2)
        },
    )
    .expect("proxy");
    let (n, partitions, window) = (20_000, 4, 500);
    smol::block_on(produce_events(&source.addr, "spread", partitions, n));
    let window_arg = window.to_string();
    let limit = Duration::from_secs(120);
    let args = mirror_args(
        &source.addr,
        &proxy.addrs[0],
        &["--once", "--batch-records", &window_arg],
    );
    let (report, stderr) = mirror_ok(&args, limit);
    let s = proxy.counters();
    assert_eq!(s.not_leader_before_move.load(SeqCst), 0, "{stderr}");
    assert!(
        s.not_leader.load(SeqCst) > 0,
        "the leaders never moved: {stderr}"
    );
    assert_eq!(s.cuts.load(SeqCst), 1, "the connections were never cut");
    assert_eq!(s.reads_not_leader_before_move.load(SeqCst), 0, "{stderr}");
    for (node, accepted) in s.produces_forwarded.iter().enumerate() {
        assert!(accepted.load(SeqCst) > 0, "broker {node} led nothing");
    }
    // The report names restarts only when there were some.
    let restarts: usize = report
        .lines()
        .find_map(|l| l.strip_prefix("restarts after retriable errors: "))
        .map(|n| n.trim().parse().expect("a count"))
        .unwrap_or(0);
    smol::block_on(async {
        for p in 0..partitions {
            let tp = TopicPartition::new("spread", p);
            let a = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let b = seqs(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
            assert_eq!(a.len(), n / partitions as usize);
            let repeated = duplicates_of_in_order(&a, &b);
            assert!(
                repeated <= restarts * window,
                "{tp}: {repeated} repeats after {restarts} restarts"
            );
        }
    });
}

/// At-least-once into a target of three brokers whose leaders all move mid-stream (the test
/// kit's `ClusterProxy` in front of one minikafka): the mirror's one routed, idempotent
/// producer meets NOT_LEADER_OR_FOLLOWER, asks Metadata again and re-sends the batch to the new
/// leader with the same producer id, epoch and sequence, without restarting the session
/// (I163). So the target holds every source record exactly once, in order: no window is
/// copied twice by a restart.
#[test]
fn at_least_once_follows_a_moved_leader_without_a_restart_or_a_duplicate() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    let proxy = ClusterProxy::start(
        &target.addr,
        ProxyPlan {
            move_leaders_at: Some(12),
            ..ProxyPlan::new(3)
        },
    )
    .expect("proxy");
    let (n, partitions) = (9_000, 3);
    smol::block_on(produce_events(&source.addr, "moved", partitions, n));
    let args = mirror_args(
        &source.addr,
        &proxy.addrs[0],
        &["--once", "--batch-records", "500"],
    );
    let (report, stderr) = mirror_ok(&args, Duration::from_secs(120));
    let c = proxy.counters();
    let produced: Vec<usize> = c
        .produces_forwarded
        .iter()
        .map(|a| a.load(SeqCst))
        .collect();
    let summary = format!(
        "produce per broker {produced:?}, not_leader {}, moves {}",
        c.not_leader.load(SeqCst),
        c.leader_moves.load(SeqCst)
    );
    eprintln!("{summary}");
    assert_eq!(c.leader_moves.load(SeqCst), 1, "{summary}");
    assert!(
        c.not_leader.load(SeqCst) > 0,
        "the move was never met: {summary}"
    );
    assert_eq!(c.not_leader_before_move.load(SeqCst), 0, "{summary}");
    assert!(produced.iter().all(|&p| p > 0), "{summary}");
    // The producer is idempotent: its InitProducerId (no transactional id) went to the
    // bootstrap broker, the only transactional-API request at-least-once sends.
    let init: Vec<usize> = c.txn_forwarded.iter().map(|a| a.load(SeqCst)).collect();
    assert!(init[0] >= 1, "no InitProducerId: {init:?}");
    smol::block_on(async {
        for p in 0..partitions {
            let tp = TopicPartition::new("moved", p);
            let a = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let b = seqs(&target.addr, &tp, IsolationLevel::ReadUncommitted).await;
            assert_eq!(a.len(), n / partitions as usize);
            assert_eq!(duplicates_of_in_order(&a, &b), 0, "{tp}: {summary}");
            assert_eq!(b, a, "{tp}");
        }
    });
    assert!(
        !report.contains("restarts after retriable errors") && !stderr.contains("restarting"),
        "a moved leader is retried in place, not by a restart: {report}{stderr}"
    );
}

/// `--exactly-once` into a target of three brokers (the test kit's `ClusterProxy` in front of
/// one minikafka): the one transactional producer sends each partition's records to its leader
/// and the transactional requests to the transaction coordinator (a third broker), each over
/// its own connection (nothing reaches a wrong broker while nothing moves); when every leader
/// moves mid-transaction and then both coordinators move, NOT_LEADER_OR_FOLLOWER and
/// NOT_COORDINATOR are retried inside the transaction, without a restart. The progress is read
/// from its leader and the group's offsets are synced at its coordinator. The target's
/// read_committed view is the source's records exactly once, in order, and a source group's
/// position arrives translated onto the same record (I162, I84).
#[test]
fn exactly_once_into_three_brokers_follows_moved_leaders_and_coordinators() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    let proxy = ClusterProxy::start(
        &target.addr,
        ProxyPlan {
            // The progress topic is led by broker 1, not the bootstrap broker 0; both
            // coordinators are broker 1, then broker 2.
            leader_shift: 1,
            group_coordinator: 1,
            move_leaders_at: Some(10),
            move_coordinators_at: Some(4),
            ..ProxyPlan::new(3)
        },
    )
    .expect("proxy");
    let (n, partitions) = (6_000, 3);
    let tp1 = TopicPartition::new("eos3", 1);
    smol::block_on(async {
        produce_events(&source.addr, "eos3", partitions, n).await;
        let mut src = connection(&source.addr).await;
        let committed = BTreeMap::from([(tp1.clone(), Offset(700))]);
        commit_offsets_checked(&mut src, "readers", &Committer::admin(), &committed)
            .await
            .expect("commit on the source");
    });
    let args = mirror_args(
        &source.addr,
        &proxy.addrs[0],
        &["--once", "--exactly-once", "--batch-records", "500"],
    );
    let (report, stderr) = mirror_ok(&args, Duration::from_secs(120));
    // The report names restarts only when there were some; stderr says each.
    assert!(
        !report.contains("restarts after retriable errors") && !stderr.contains("restarting"),
        "moves are retried inside the transaction, not by a restart: {report}{stderr}"
    );
    let c = proxy.counters();
    let load = |v: &[std::sync::atomic::AtomicUsize]| -> Vec<usize> {
        v.iter().map(|a| a.load(SeqCst)).collect()
    };
    let (produced, txn) = (load(&c.produces_forwarded), load(&c.txn_forwarded));
    let (reads, group) = (load(&c.reads_forwarded), load(&c.group_offsets_forwarded));
    let summary = format!(
        "produce per broker {produced:?}, txn per broker {txn:?}, reads per broker {reads:?}, \
         group offsets per broker {group:?}, \
         not_leader {}, not_coordinator {}, reads not_leader {}",
        c.not_leader.load(SeqCst),
        c.not_coordinator.load(SeqCst),
        c.reads_not_leader.load(SeqCst)
    );
    eprintln!("{summary}");
    assert_eq!(c.not_leader_before_move.load(SeqCst), 0, "{summary}");
    assert_eq!(c.not_coordinator_before_move.load(SeqCst), 0, "{summary}");
    // The progress was read from its leader, broker 1; no read reached a wrong broker.
    assert_eq!(c.reads_not_leader.load(SeqCst), 0, "{summary}");
    assert!(reads[1] > 0, "{summary}");
    // The group's offsets were fetched and committed at its coordinator, broker 2 by then.
    assert_eq!(group[0], 0, "{summary}");
    assert!(group[2] > 0, "{summary}");
    assert_eq!(c.leader_moves.load(SeqCst), 1, "{summary}");
    assert_eq!(c.coordinator_moves.load(SeqCst), 1, "{summary}");
    assert!(c.not_leader.load(SeqCst) > 0, "{summary}");
    assert!(c.not_coordinator.load(SeqCst) > 0, "{summary}");
    assert!(produced.iter().all(|&p| p > 0), "{summary}");
    // The transaction coordinator was broker 1, then broker 2; never the bootstrap broker 0.
    assert_eq!(txn[0], 0, "{summary}");
    assert!(txn[1] > 0 && txn[2] > 0, "{summary}");
    assert_eq!(c.refused_frames.load(SeqCst), 0, "{summary}");
    smol::block_on(async {
        for p in 0..partitions {
            let tp = TopicPartition::new("eos3", p);
            let a = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
            let b = read_all(&target.addr, &tp, IsolationLevel::ReadCommitted).await;
            assert_eq!(a.len(), n / partitions as usize);
            assert_eq!(b.iter().map(seq).collect::<Vec<_>>(), a, "{tp}");
            if p == 1 {
                // Source offset 700 is seq 2101; the translated target offset names it.
                let mut tgt = connection(&target.addr).await;
                let on_target = fetch_offsets(&mut tgt, "readers", None)
                    .await
                    .expect("fetch on the target");
                let at = on_target[&tp1];
                let record = b.iter().find(|r| r.offset == at).expect("a record there");
                assert_eq!(seq(record), a[700], "{report}");
            }
        }
    });
}

/// The routed transactional producer through the client API (I162): TxnOffsetCommit goes to
/// the group coordinator (a broker of its own), the other transactional requests to the
/// transaction coordinator, Produce to the leaders; after leaders and coordinators move
/// between two transactions, the next one meets NOT_LEADER_OR_FOLLOWER and NOT_COORDINATOR,
/// follows them and commits. Records and the group's offset arrive once each.
#[test]
fn a_routed_transactional_producer_commits_offsets_at_the_group_coordinator() {
    let target = common::Broker::start();
    let proxy = ClusterProxy::start(&target.addr, ProxyPlan::new(3)).expect("proxy");
    let input = TopicPartition::new("in", 0);
    smol::block_on(async {
        let mut admin = Admin::new(connection(&target.addr).await);
        admin.create_topic("in", 1, &[]).await.expect("create in");
        admin.create_topic("out", 3, &[]).await.expect("create out");
        let config = ProducerConfig {
            transactional_id: Some("routed-1".into()),
            ..ProducerConfig::default()
        };
        let (producer, task) = routed_producer(&proxy, config).await;
        producer.init_transactions().await.expect("init");
        let rounds = 4;
        for round in 0..rounds {
            if round == 2 {
                proxy.move_leaders();
                proxy.move_coordinators();
            }
            producer.begin_transaction().await.expect("begin");
            let mut sent = Vec::new();
            for i in 0..30 {
                let r = ProducerRecord::new("out", format!("{round}-{i}")).with_partition(i % 3);
                sent.push(producer.send(r).await.expect("send"));
            }
            let offsets = BTreeMap::from([(input.clone(), Offset(10 * (round + 1)))]);
            producer
                .send_offsets_to_transaction(offsets, ConsumerGroupMetadata::new("g"))
                .await
                .expect("send offsets");
            producer.commit_transaction().await.expect("commit");
            for d in sent {
                d.await.expect("delivered");
            }
        }
        drop(producer);
        task.await;
        let c = proxy.counters();
        let summary =
            format!(
            "produce {:?}, txn {:?}, txn offset commits {:?}, not_leader {}, not_coordinator {}",
            c.produces_forwarded, c.txn_forwarded, c.txn_offset_commits_forwarded,
            c.not_leader.load(SeqCst), c.not_coordinator.load(SeqCst)
        );
        assert_eq!(c.not_leader_before_move.load(SeqCst), 0, "{summary}");
        assert_eq!(c.not_coordinator_before_move.load(SeqCst), 0, "{summary}");
        assert!(c.not_leader.load(SeqCst) > 0, "{summary}");
        assert!(c.not_coordinator.load(SeqCst) > 0, "{summary}");
        // The group coordinator was broker 2, then broker 0.
        let commits: Vec<usize> = c
            .txn_offset_commits_forwarded
            .iter()
            .map(|a| a.load(SeqCst))
            .collect();
        assert_eq!(commits, vec![2, 0, 2], "{summary}");
        let mut tgt = connection(&target.addr).await;
        let on_target = fetch_offsets(&mut tgt, "g", None).await.expect("fetch");
        assert_eq!(on_target[&input], Offset(10 * rounds), "{summary}");
        for p in 0..3 {
            let tp = TopicPartition::new("out", p);
            let got = read_all(&target.addr, &tp, IsolationLevel::ReadCommitted).await;
            let mut want = Vec::new();
            for round in 0..rounds {
                for i in (p..30).step_by(3) {
                    want.push(format!("{round}-{i}"));
                }
            }
            let got: Vec<String> = got
                .iter()
                .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into())
                .collect();
            assert_eq!(got, want, "{tp}");
        }
    });
}

/// A routed producer through `proxy`'s first broker, its driver spawned.
async fn routed_producer(
    proxy: &ClusterProxy,
    config: ProducerConfig,
) -> (Producer, smol::Task<()>) {
    let connector: minikafka_client::Connector<TcpStream> =
        Box::new(|addr: String| Box::pin(async move { Ok(connection(&addr).await) }));
    let (producer, driver) = Producer::new_routed(
        connection(&proxy.addrs[0]).await,
        connector,
        config,
        SmolRuntime,
    )
    .expect("producer");
    (producer, smol::spawn(driver.run()))
}

/// Sends `"0"..n` to `topic`, record `i` to partition `i % partitions`, in transactions of
/// `per_txn` records when the producer is transactional; returns each partition's delivered
/// offsets in send order.
async fn send_numbered(
    producer: &Producer,
    topic: &str,
    partitions: i32,
    n: usize,
    per_txn: Option<usize>,
) -> BTreeMap<i32, Vec<i64>> {
    let mut delivered: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    let mut start = 0;
    while start < n {
        let end = per_txn.map_or(n, |t| (start + t).min(n));
        if per_txn.is_some() {
            producer.begin_transaction().await.expect("begin");
        }
        let mut sent = Vec::new();
        for i in start..end {
            let r = ProducerRecord::new(topic, i.to_string()).with_partition(i as i32 % partitions);
            sent.push(producer.send(r).await.expect("send"));
        }
        if per_txn.is_some() {
            producer.commit_transaction().await.expect("commit");
        }
        for d in sent {
            let d = d.await.expect("delivered despite the lost connections");
            let offset = d.offset.expect("an offset with acks=all").0;
            delivered.entry(d.partition).or_default().push(offset);
        }
        start = end;
    }
    delivered
}

/// Checks that each partition of `topic` holds record `i` (for `i % partitions` = the
/// partition) exactly once and in order, at the offsets its delivery said.
async fn assert_numbered_once(
    addr: &str,
    topic: &str,
    partitions: i32,
    n: usize,
    delivered: &BTreeMap<i32, Vec<i64>>,
    isolation: IsolationLevel,
) {
    for p in 0..partitions {
        let tp = TopicPartition::new(topic, p);
        let got = read_all(addr, &tp, isolation).await;
        let values: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into())
            .collect();
        let want: Vec<String> = (p as usize..n)
            .step_by(partitions as usize)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(values, want, "{tp}: every record once, in order");
        let offsets: Vec<i64> = got.iter().map(|r| r.offset.0).collect();
        assert_eq!(delivered.get(&p), Some(&offsets), "{tp}: delivered offsets");
    }
}

/// Sends 4 000 numbered records over 4 partitions through a routed producer with `config`
/// (in 50-record batches; with a transactional id, in transactions of `per_txn` records) into a
/// target whose test kit `ClusterProxy` forwards the `lose.0`-th Produce and every `lose.1`-th
/// after, drops the broker's answer and cuts that connection; checks that connections were
/// cut and that `topic` holds every record exactly once, in order, at its delivered offset,
/// as `isolation` reads it.
fn produce_through_lost_answers(
    topic: &str,
    config: ProducerConfig,
    lose: (usize, usize),
    per_txn: Option<usize>,
    isolation: IsolationLevel,
) {
    let target = common::Broker::start();
    let proxy = ClusterProxy::start(
        &target.addr,
        ProxyPlan {
            lose_answers_at: Some(lose.0),
            lose_answers_every: Some(lose.1),
            ..ProxyPlan::new(2)
        },
    )
    .expect("proxy");
    let (n, partitions) = (4_000, 4);
    let config = ProducerConfig {
        batch: BatchConfig {
            max_records: 50,
            ..BatchConfig::default()
        },
        ..config
    };
    let transactional = config.transactional_id.is_some();
    smol::block_on(async {
        let mut admin = Admin::new(connection(&target.addr).await);
        admin
            .create_topic(topic, partitions, &[])
            .await
            .expect("create");
        let (producer, task) = routed_producer(&proxy, config).await;
        if transactional {
            producer.init_transactions().await.expect("init");
        }
        let delivered = send_numbered(&producer, topic, partitions, n, per_txn).await;
        drop(producer);
        task.await;
        let lost = proxy.counters().lost_answers.load(SeqCst);
        assert!(lost >= 3, "only {lost} connections were cut");
        assert_numbered_once(&target.addr, topic, partitions, n, &delivered, isolation).await;
    });
}

/// A routed idempotent producer whose connection is cut after the broker wrote a Produce but
/// before its answer arrived, again and again, re-sends what that connection carried over a
/// new one, with the same producer id, epoch and sequences: the broker recognises the written
/// batches and answers their first offsets, so every record is stored exactly once, in order,
/// and every delivery names its record's offset (I182).
#[test]
fn a_routed_idempotent_producer_resends_over_a_new_connection_once_each() {
    let config = ProducerConfig {
        enable_idempotence: true,
        ..ProducerConfig::default()
    };
    produce_through_lost_answers(
        "lost",
        config,
        (3, 10),
        None,
        IsolationLevel::ReadUncommitted,
    );
}

/// The same with five batches of a partition in flight at once (Kafka's most for an
/// idempotent producer): every request the lost connection carried is re-sent, in sequence
/// order, over the new one, and the broker, which remembers a producer's last five batches,
/// keeps one copy of each (I182).
#[test]
fn a_routed_idempotent_producer_with_five_batches_in_flight_resends_once_each() {
    let config = ProducerConfig {
        enable_idempotence: true,
        max_in_flight_per_partition: 5,
        ..ProducerConfig::default()
    };
    produce_through_lost_answers(
        "lost-5",
        config,
        (4, 9),
        None,
        IsolationLevel::ReadUncommitted,
    );
}

/// The same cuts under a routed transactional producer: the lost batches are re-sent inside
/// the open transaction (and its coordinator's connection, cut with them when it is the same
/// broker, is opened again); every transaction commits and the read_committed view holds
/// every record exactly once, in order (I182).
#[test]
fn a_routed_transactional_producer_resends_within_the_transaction_once_each() {
    let config = ProducerConfig {
        transactional_id: Some("lost-txn".into()),
        ..ProducerConfig::default()
    };
    produce_through_lost_answers(
        "lost-txn",
        config,
        (2, 7),
        Some(1_000),
        IsolationLevel::ReadCommitted,
    );
}

/// The mirror, both modes, into a target whose Produce connections are cut again and again
/// after the broker wrote the records (answers dropped by the test kit's `ClusterProxy`): its
/// routed producer re-sends over new connections (I182), so the session never restarts and
/// the target holds every source record exactly once, in order (read_committed with
/// `--exactly-once`).
#[test]
fn the_mirror_keeps_its_session_when_produce_connections_are_lost() {
    let source = common::Broker::start();
    let (n, partitions) = (6_000, 3);
    smol::block_on(produce_events(&source.addr, "cut", partitions, n));
    for (mode, extra, isolation) in [
        ("at-least-once", None, IsolationLevel::ReadUncommitted),
        (
            "exactly-once",
            Some("--exactly-once"),
            IsolationLevel::ReadCommitted,
        ),
    ] {
        let target = common::Broker::start();
        let proxy = ClusterProxy::start(
            &target.addr,
            ProxyPlan {
                lose_answers_at: Some(4),
                lose_answers_every: Some(6),
                ..ProxyPlan::new(2)
            },
        )
        .expect("proxy");
        let mut flags = vec!["--once", "--batch-records", "500"];
        flags.extend(extra);
        let args = mirror_args(&source.addr, &proxy.addrs[0], &flags);
        let (report, stderr) = mirror_ok(&args, Duration::from_secs(120));
        let lost = proxy.counters().lost_answers.load(SeqCst);
        eprintln!("{mode}: {lost} Produce connections cut");
        assert!(lost >= 2, "{mode}: only {lost} connections were cut");
        assert!(
            !report.contains("restarts after retriable errors") && !stderr.contains("restarting"),
            "{mode}: a lost connection restarted the session: {report}{stderr}"
        );
        smol::block_on(async {
            for p in 0..partitions {
                let tp = TopicPartition::new("cut", p);
                let a = seqs(&source.addr, &tp, IsolationLevel::ReadUncommitted).await;
                let b = seqs(&target.addr, &tp, isolation).await;
                assert_eq!(a.len(), n / partitions as usize);
                assert_eq!(b, a, "{mode} {tp}: every record once, in order");
            }
        });
    }
}

/// Fetches `GET path` from the metrics endpoint: the status line and the body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// A topic created on the source while the mirror runs is created on the target and mirrored
/// after the next topic refresh (`--refresh-topics-s`, I121's neighbour in MirrorMaker 2:
/// refresh.topics.interval.seconds); the metrics endpoint shows the copy (I122).
#[test]
fn new_source_topics_are_mirrored_while_running_and_metrics_are_served() {
    let source = common::Broker::start();
    let target = common::Broker::start();
    let metrics = format!("127.0.0.1:{}", common::free_port());
    smol::block_on(produce_events(&source.addr, "first", 1, 100));
    let _mirror = Running(
        mk().args(mirror_args(
            &source.addr,
            &target.addr,
            &["--refresh-topics-s", "1", "--metrics-listener", &metrics],
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mk mirror"),
    );
    let wait_for = |topic: &str, partitions: i32, want: i64| {
        smol::block_on(async {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let end = target_end(&target.addr, topic, partitions).await;
                if end >= want {
                    return end;
                }
                assert!(
                    Instant::now() < deadline,
                    "{topic}: {end} of {want} arrived"
                );
                smol::Timer::after(Duration::from_millis(50)).await;
            }
        })
    };
    assert_eq!(wait_for("first", 1, 100), 100);
    smol::block_on(produce_events(&source.addr, "second", 2, 50));
    assert_eq!(wait_for("second", 2, 50), 50);
    // The counters move once the window's progress is stored, just after the records land.
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let (status, page) = http_get(&metrics, "/metrics");
        assert!(status.contains("200"), "{status}");
        if page.contains("mk_mirror_records_copied_total{topic=\"second\"} 50") {
            break page;
        }
        assert!(Instant::now() < deadline, "second never counted:\n{page}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for line in [
        "mk_mirror_records_copied_total{topic=\"first\"} 100",
        "mk_mirror_records_copied_total{topic=\"second\"} 50",
        "mk_mirror_topic_refreshes_total 1",
        "mk_mirror_restarts_total 0",
        "# TYPE mk_mirror_lag_records gauge",
        "mk_mirror_lag_records{topic=\"second\",partition=\"1\"} ",
    ] {
        assert!(page.contains(line), "{line} missing:\n{page}");
    }
    assert!(http_get(&metrics, "/").0.contains("404"));
}
