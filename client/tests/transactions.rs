//! Transactions end to end: the transactional producer and the read_committed consumer against a
//! real broker over TCP on 127.0.0.1 with real data files.
//!
//! TARGET: the broker is chosen by `MK_TXN_TARGET`: `minikafka` (the default: the real
//! `minikafka` binary, see `common/mod.rs`, which hosts the transaction coordinator) or
//! `kfake` (the peer, to tell a test's mistake from the broker's).
//!
//! kfake is `$KFAKE_RUNNER`, or `../shared/peers/kfake/kfake-runner` beside the checkout (where
//! CI has it). When it is absent the tests FAIL with a message saying so; they never skip.
//!
//! Two differences between the brokers are tested as such: a fenced producer's Produce gets
//! PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH) from Kafka but INVALID_TXN_STATE from kfake (the
//! client treats all three as fatal), and kfake's fencing InitProducerId does not abort the
//! fenced producer's open transaction (Kafka's does; checked with librdkafka on kfake too).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use minikafka_client::group::admin::fetch_offsets;
use minikafka_client::{
    Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, ConsumerGroupMetadata,
    ConsumerRecord, Error, GroupConfig, GroupConsumer, IsolationLevel, Offset, OffsetReset,
    OffsetSpec, Producer, ProducerConfig, ProducerRecord, SmolRuntime, TopicPartition,
};
use smol::net::TcpStream;

/// A kfake-runner process on an ephemeral port with its own data directory; killed on drop.
struct Kfake {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

fn kfake_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("KFAKE_RUNNER") {
        return PathBuf::from(bin);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/kfake/kfake-runner")
}

impl Kfake {
    fn start() -> Kfake {
        let bin = kfake_binary();
        assert!(
            bin.is_file(),
            "kfake-runner not found at {} (set KFAKE_RUNNER, or put it at \
             ../shared/peers/kfake/kfake-runner beside the checkout), or run with \
             MK_TXN_TARGET=minikafka",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        // Port 0: kfake binds an ephemeral port and prints the address as its first line.
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
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) if line.trim().parse::<std::net::SocketAddr>().is_ok() => {
                    break line.trim().to_string()
                }
                Some(Ok(_)) => continue,
                _ => {
                    let _ = child.kill();
                    panic!("kfake {} exited before printing its address", bin.display());
                }
            }
        };
        // Keep draining stdout so kfake never blocks on a full pipe.
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

/// The broker under test, per `MK_TXN_TARGET`.
enum Target {
    Kfake(Kfake),
    Minikafka(common::Broker),
}

impl Target {
    fn start() -> Target {
        match std::env::var("MK_TXN_TARGET").as_deref() {
            Ok("minikafka") | Err(_) => Target::Minikafka(common::Broker::start()),
            Ok("kfake") => Target::Kfake(Kfake::start()),
            Ok(other) => panic!("MK_TXN_TARGET must be kfake or minikafka, not {other:?}"),
        }
    }

    fn addr(&self) -> &str {
        match self {
            Target::Kfake(k) => &k.addr,
            Target::Minikafka(b) => &b.addr,
        }
    }

    async fn stream(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr())
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr()));
        stream.set_nodelay(true).expect("nodelay");
        stream
    }

    async fn connection(&self) -> Connection<TcpStream> {
        Connection::connect(self.stream().await, ConnectionConfig::default())
            .await
            .expect("ApiVersions negotiation")
    }

    async fn create_topic(&self, topic: &str, partitions: i32) {
        self.create_topic_with(topic, partitions, &[]).await;
    }

    async fn create_topic_with(&self, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
        let configs: Vec<(String, String)> = configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Admin::new(self.connection().await)
            .create_topic(topic, partitions, &configs)
            .await
            .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    }

    /// A producer, transactional when `transactional_id` is given, its driver spawned.
    async fn producer(&self, transactional_id: Option<&str>) -> Producer {
        let config = ProducerConfig {
            transactional_id: transactional_id.map(str::to_string),
            max_block: Duration::from_secs(30),
            ..ProducerConfig::default()
        };
        let (producer, driver) = Producer::connect(self.stream().await, config, SmolRuntime)
            .await
            .expect("producer connect");
        smol::spawn(driver.run()).detach();
        producer
    }

    /// A consumer from the earliest offset of `partitions` at `isolation`.
    async fn consumer(
        &self,
        isolation: IsolationLevel,
        partitions: &[TopicPartition],
    ) -> Consumer<TcpStream> {
        let config = ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            max_wait: Duration::from_millis(200),
            isolation_level: isolation,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::connect(self.stream().await, config)
            .await
            .expect("consumer connect");
        consumer.assign(partitions.iter().cloned());
        consumer
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn values(records: &[ConsumerRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

fn offsets(records: &[ConsumerRecord]) -> Vec<i64> {
    records.iter().map(|r| r.offset.0).collect()
}

/// Sends `values` to `topic`/`partition` and waits for each delivery.
async fn send_all(producer: &Producer, topic: &str, partition: i32, values: &[&str]) {
    let mut deliveries = Vec::new();
    for v in values {
        let record = ProducerRecord::new(topic, v.as_bytes()).with_partition(partition);
        deliveries.push(producer.send(record).await.expect("queue"));
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
}

/// Polls until the consumer's position of `tp` reaches `end` (every record and marker before it
/// was fetched), returning what came back. Fails after 20 s.
async fn poll_to(
    consumer: &mut Consumer<TcpStream>,
    tp: &TopicPartition,
    end: i64,
) -> Vec<ConsumerRecord> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while consumer.position(tp).await.expect("position").0 < end {
        assert!(
            std::time::Instant::now() < deadline,
            "position of {tp} stuck at {:?} (want {end}); got {:?}",
            consumer.position(tp).await,
            values(&out)
        );
        out.extend(consumer.poll().await.expect("poll"));
    }
    out
}

#[test]
fn a_committed_transaction_is_seen_whole_and_its_marker_takes_an_offset() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("t", 2).await;
        let producer = broker.producer(Some("tx-commit")).await;
        producer.init_transactions().await.expect("init");
        producer.begin_transaction().await.expect("begin");
        send_all(&producer, "t", 0, &["a", "b", "c"]).await;
        send_all(&producer, "t", 1, &["d"]).await;
        producer.commit_transaction().await.expect("commit");

        let mut rc = broker
            .consumer(IsolationLevel::ReadCommitted, &[tp("t", 0), tp("t", 1)])
            .await;
        // Three records at 0..2, the COMMIT marker at 3: position 4, no marker surfaced.
        let got = poll_to(&mut rc, &tp("t", 0), 4).await;
        let p0: Vec<_> = got.iter().filter(|r| r.partition == 0).cloned().collect();
        assert_eq!(values(&p0), ["a", "b", "c"]);
        assert_eq!(offsets(&p0), [0, 1, 2]);
        let more = poll_to(&mut rc, &tp("t", 1), 2).await;
        let p1: Vec<_> = got
            .iter()
            .chain(more.iter())
            .filter(|r| r.partition == 1)
            .cloned()
            .collect();
        assert_eq!(values(&p1), ["d"]);
        assert_eq!(rc.high_watermark(&tp("t", 0)), Some(Offset(4)));
    });
}

#[test]
fn an_aborted_transaction_is_hidden_from_read_committed_only() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("t", 1).await;
        let producer = broker.producer(Some("tx-abort")).await;
        producer.init_transactions().await.expect("init");
        producer.begin_transaction().await.expect("begin");
        send_all(&producer, "t", 0, &["x1", "x2", "x3"]).await;
        producer.abort_transaction().await.expect("abort");
        // The producer goes on: a committed transaction after the aborted one.
        producer.begin_transaction().await.expect("begin again");
        send_all(&producer, "t", 0, &["ok"]).await;
        producer.commit_transaction().await.expect("commit");

        // 0..2 aborted, ABORT marker at 3, "ok" at 4, COMMIT marker at 5.
        let mut ru = broker
            .consumer(IsolationLevel::ReadUncommitted, &[tp("t", 0)])
            .await;
        let got = poll_to(&mut ru, &tp("t", 0), 6).await;
        assert_eq!(values(&got), ["x1", "x2", "x3", "ok"]);
        assert_eq!(offsets(&got), [0, 1, 2, 4], "markers take offsets 3 and 5");

        let mut rc = broker
            .consumer(IsolationLevel::ReadCommitted, &[tp("t", 0)])
            .await;
        let got = poll_to(&mut rc, &tp("t", 0), 6).await;
        assert_eq!(values(&got), ["ok"]);
        assert_eq!(offsets(&got), [4]);
    });
}

#[test]
fn an_open_transaction_hides_later_records_from_read_committed_until_it_commits() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("t", 1).await;
        let txn = broker.producer(Some("tx-open")).await;
        txn.init_transactions().await.expect("init");
        txn.begin_transaction().await.expect("begin");
        send_all(&txn, "t", 0, &["t1", "t2"]).await;
        // A plain producer writes after the open transaction's records.
        let plain = broker.producer(None).await;
        send_all(&plain, "t", 0, &["plain"]).await;

        let mut ru = broker
            .consumer(IsolationLevel::ReadUncommitted, &[tp("t", 0)])
            .await;
        let got = poll_to(&mut ru, &tp("t", 0), 3).await;
        assert_eq!(values(&got), ["t1", "t2", "plain"]);

        // read_committed stops at the last stable offset: the open transaction's first record.
        let mut rc = broker
            .consumer(IsolationLevel::ReadCommitted, &[tp("t", 0)])
            .await;
        for _ in 0..5 {
            let got = rc.poll().await.expect("poll");
            assert!(got.is_empty(), "read_committed saw {:?}", values(&got));
        }
        assert_eq!(rc.position(&tp("t", 0)).await.expect("position"), Offset(0));

        txn.commit_transaction().await.expect("commit");
        // t1 0, t2 1, plain 2, COMMIT marker 3.
        let got = poll_to(&mut rc, &tp("t", 0), 4).await;
        assert_eq!(values(&got), ["t1", "t2", "plain"]);
        assert_eq!(offsets(&got), [0, 1, 2]);
    });
}

#[test]
fn a_failed_record_makes_the_transaction_abortable_and_the_producer_goes_on_after_abort() {
    smol::block_on(async {
        let broker = Target::start();
        // Batches over 1000 bytes are refused with MESSAGE_TOO_LARGE: an abortable error.
        broker
            .create_topic_with("t", 1, &[("max.message.bytes", "1000")])
            .await;
        let producer = broker.producer(Some("tx-abortable")).await;
        producer.init_transactions().await.expect("init");
        producer.begin_transaction().await.expect("begin");
        send_all(&producer, "t", 0, &["before"]).await;
        let big = ProducerRecord::new("t", vec![b'x'; 4000]).with_partition(0);
        let err = producer
            .send(big)
            .await
            .expect("queue")
            .await
            .expect_err("a record over max.message.bytes fails");
        assert!(err.is_abortable_transaction_error(), "{err}");
        let commit = producer
            .commit_transaction()
            .await
            .expect_err("no commit after a failed record");
        assert!(commit.is_abortable_transaction_error(), "{commit}");
        let send = producer
            .send(ProducerRecord::new("t", &b"more"[..]).with_partition(0))
            .await
            .expect("queue")
            .await
            .expect_err("nothing more goes into an abortable transaction");
        assert!(send.is_abortable_transaction_error(), "{send}");
        producer.abort_transaction().await.expect("abort");

        // After the abort (and the epoch bump that resets sequences) the producer goes on.
        producer.begin_transaction().await.expect("begin again");
        send_all(&producer, "t", 0, &["after"]).await;
        producer.commit_transaction().await.expect("commit");

        let mut rc = broker
            .consumer(IsolationLevel::ReadCommitted, &[tp("t", 0)])
            .await;
        let end = log_end(&broker, &tp("t", 0)).await;
        let got = poll_to(&mut rc, &tp("t", 0), end).await;
        assert_eq!(values(&got), ["after"]);
    });
}

#[test]
fn consume_transform_produce_commits_the_members_offsets_with_its_output() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("in", 1).await;
        broker.create_topic("out", 1).await;
        let plain = broker.producer(None).await;
        send_all(&plain, "in", 0, &["1", "2", "3"]).await;

        let mut config = GroupConfig::new("ctp", vec!["in".to_string()]);
        config.auto_offset_reset = OffsetReset::Earliest;
        config.auto_commit_interval = None;
        config.consumer.isolation_level = IsolationLevel::ReadCommitted;
        let mut consumer = GroupConsumer::connect(
            broker.stream().await,
            broker.stream().await,
            config,
            SmolRuntime,
        )
        .await
        .expect("join the group");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut input = Vec::new();
        while input.len() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "only {input:?} arrived"
            );
            input.extend(consumer.poll().await.expect("poll"));
        }
        let group = consumer.group_metadata();
        assert!(
            group.generation_id >= 0 && !group.member_id.is_empty(),
            "{group:?}"
        );

        let producer = broker.producer(Some("tx-ctp")).await;
        producer.init_transactions().await.expect("init");
        producer.begin_transaction().await.expect("begin");
        let doubled: Vec<String> = values(&input).iter().map(|v| format!("{v}{v}")).collect();
        let doubled: Vec<&str> = doubled.iter().map(String::as_str).collect();
        send_all(&producer, "out", 0, &doubled).await;
        let next = consumer.position(&tp("in", 0)).await.expect("position");
        producer
            .send_offsets_to_transaction(BTreeMap::from([(tp("in", 0), next)]), group)
            .await
            .expect("send the member's offsets");
        producer.commit_transaction().await.expect("commit");

        assert_eq!(
            stable_committed(&broker, "ctp", &tp("in", 0)).await,
            Some(Offset(3))
        );
        let mut rc = broker
            .consumer(IsolationLevel::ReadCommitted, &[tp("out", 0)])
            .await;
        let got = poll_to(&mut rc, &tp("out", 0), 4).await;
        assert_eq!(values(&got), ["11", "22", "33"]);

        // KIP-447: offsets from a generation the group has left behind are refused, and the
        // transaction must then be aborted.
        let mut zombie = consumer.group_metadata();
        zombie.generation_id += 1;
        producer.begin_transaction().await.expect("begin");
        let err = producer
            .send_offsets_to_transaction(BTreeMap::from([(tp("in", 0), Offset(1))]), zombie)
            .await
            .expect_err("a wrong generation is refused");
        assert!(err.is_abortable_transaction_error(), "{err}");
        assert_eq!(err.kafka_code(), Some(22), "ILLEGAL_GENERATION: {err}");
        producer.abort_transaction().await.expect("abort");
        assert_eq!(
            stable_committed(&broker, "ctp", &tp("in", 0)).await,
            Some(Offset(3))
        );
        consumer.close().await.expect("leave the group");
    });
}

/// The group's committed offset of `tp`, `None` when there is none or it is still pending
/// (a broker may answer UNSTABLE_OFFSET_COMMIT while a transaction holds one, or, like kfake,
/// GROUP_ID_NOT_FOUND before the group has any committed offset).
async fn committed(broker: &Target, group: &str, tp: &TopicPartition) -> Option<Offset> {
    let mut conn = broker.connection().await;
    match fetch_offsets(&mut conn, group, Some(std::slice::from_ref(tp))).await {
        Ok(offsets) => offsets.get(tp).copied().filter(|o| o.0 >= 0),
        Err(err) if matches!(err.kafka_code(), Some(69 | 88)) => None,
        Err(err) => panic!("fetch offsets of {group}: {err}"),
    }
}

/// The committed offset once no transaction's offsets are pending for it. EndTxn is answered
/// when PrepareCommit/PrepareAbort is durable and the markers follow (as in Kafka), so an
/// OffsetFetch with `require_stable` right after it may still get UNSTABLE_OFFSET_COMMIT (88):
/// retried, as Kafka's clients retry it, for at most 10 s.
async fn stable_committed(broker: &Target, group: &str, tp: &TopicPartition) -> Option<Offset> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut conn = broker.connection().await;
        match fetch_offsets(&mut conn, group, Some(std::slice::from_ref(tp))).await {
            Ok(offsets) => return offsets.get(tp).copied().filter(|o| o.0 >= 0),
            Err(err) if err.kafka_code() == Some(88) && std::time::Instant::now() < deadline => {
                smol::Timer::after(Duration::from_millis(50)).await;
            }
            Err(err) if err.kafka_code() == Some(69) => return None,
            Err(err) => panic!("fetch offsets of {group}: {err}"),
        }
    }
}

#[test]
fn offsets_sent_to_a_transaction_count_only_when_it_commits() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("in", 1).await;
        broker.create_topic("out", 1).await;
        let input = tp("in", 0);
        let producer = broker.producer(Some("tx-offsets")).await;
        producer.init_transactions().await.expect("init");

        producer.begin_transaction().await.expect("begin");
        send_all(&producer, "out", 0, &["r"]).await;
        let group = ConsumerGroupMetadata::new("g");
        producer
            .send_offsets_to_transaction(
                BTreeMap::from([(input.clone(), Offset(5))]),
                group.clone(),
            )
            .await
            .expect("send offsets");
        assert_eq!(committed(&broker, "g", &input).await, None, "before commit");
        producer.commit_transaction().await.expect("commit");
        assert_eq!(
            stable_committed(&broker, "g", &input).await,
            Some(Offset(5))
        );

        // An aborted transaction's offsets are dropped.
        producer.begin_transaction().await.expect("begin");
        producer
            .send_offsets_to_transaction(BTreeMap::from([(input.clone(), Offset(9))]), group)
            .await
            .expect("send offsets");
        producer.abort_transaction().await.expect("abort");
        assert_eq!(
            stable_committed(&broker, "g", &input).await,
            Some(Offset(5))
        );
    });
}

#[test]
fn a_second_producer_with_the_same_id_fences_the_first() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("t", 1).await;
        let old = broker.producer(Some("tx-fence")).await;
        old.init_transactions().await.expect("init old");
        old.begin_transaction().await.expect("begin old");
        send_all(&old, "t", 0, &["zombie"]).await;

        // The new producer's InitProducerId bumps the epoch and aborts the old transaction.
        let new = broker.producer(Some("tx-fence")).await;
        new.init_transactions().await.expect("init new");

        // Kafka answers the fenced producer with PRODUCER_FENCED / INVALID_PRODUCER_EPOCH;
        // kfake answers its Produce with INVALID_TXN_STATE. All are fatal.
        let record = ProducerRecord::new("t", &b"late"[..]).with_partition(0);
        let err = old
            .send(record)
            .await
            .expect("queue")
            .await
            .expect_err("a fenced producer cannot produce");
        assert!(err.is_fatal_transaction_error(), "{err}");
        assert!(
            matches!(err.kafka_code(), Some(47 | 48 | 90)),
            "fenced with {err}"
        );
        let commit = old
            .commit_transaction()
            .await
            .expect_err("no commit after fencing");
        assert!(commit.is_fatal_transaction_error(), "{commit}");
        let begin = old
            .begin_transaction()
            .await
            .expect_err("fatal is for good");
        assert!(
            matches!(begin, Error::Transaction { fatal: true, .. }),
            "{begin}"
        );

        new.begin_transaction().await.expect("begin new");
        send_all(&new, "t", 0, &["fresh"]).await;
        new.commit_transaction().await.expect("commit new");

        let mut rc = broker
            .consumer(IsolationLevel::ReadCommitted, &[tp("t", 0)])
            .await;
        let end = log_end(&broker, &tp("t", 0)).await;
        let got = poll_to(&mut rc, &tp("t", 0), end).await;
        match broker {
            // Kafka (and KIP-98): the fencing InitProducerId aborts the old transaction.
            Target::Minikafka(_) => assert_eq!(values(&got), ["fresh"], "zombie aborted"),
            // kfake does not abort it: the zombie's record stays in the transactional id's
            // open transaction and the new producer's commit commits it (librdkafka's
            // read_committed consumer sees the same two records on kfake). The fenced
            // producer's later record never lands either way.
            Target::Kfake(_) => assert_eq!(values(&got), ["zombie", "fresh"]),
        }
    });
}

/// The log end offset of `tp` (read_uncommitted: markers included).
async fn log_end(broker: &Target, tp: &TopicPartition) -> i64 {
    let answers = Admin::new(broker.connection().await)
        .list_offsets(&tp.topic, OffsetSpec::Latest)
        .await
        .expect("list offsets");
    answers
        .iter()
        .find(|a| a.partition == tp.partition)
        .and_then(|a| a.offset)
        .expect("a log end offset")
        .0
}

/// Runs the `mk` binary against `addr` with `stdin`, failing on a non-zero exit.
fn mk(addr: &str, args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_mk"))
        .arg("-b")
        .arg(addr)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mk");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("mk output");
    assert!(
        out.status.success(),
        "mk {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn mk_produces_transactions_and_consumes_at_either_isolation_level() {
    smol::block_on(async {
        let broker = Target::start();
        broker.create_topic("t", 1).await;
        let addr = broker.addr().to_string();
        mk(
            &addr,
            &["produce", "t", "--transactional-id", "mk-tx", "--abort"],
            "a\nb\n",
        );
        mk(
            &addr,
            &["produce", "t", "--transactional-id", "mk-tx"],
            "c\n",
        );
        let all = mk(&addr, &["consume", "t", "--format", "%o %v"], "");
        assert_eq!(all, "0 a\n1 b\n3 c\n", "the ABORT marker holds offset 2");
        let committed = mk(
            &addr,
            &[
                "consume",
                "t",
                "--isolation",
                "read_committed",
                "--format",
                "%o %v",
            ],
            "",
        );
        assert_eq!(committed, "3 c\n");
    });
}

/// Runs `mk -b ADDR ARGS`; (success, stdout, stderr).
fn mk_run(addr: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mk"))
        .arg("-b")
        .arg(addr)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run mk");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mk_ok(addr: &str, args: &[&str]) -> String {
    let (ok, stdout, stderr) = mk_run(addr, args);
    assert!(ok, "mk {args:?} failed: {stderr}");
    stdout
}

/// `mk offsets`' row of partition 0: (earliest, latest, lso).
fn offsets_row(addr: &str, topic: &str) -> (String, String, String) {
    let out = mk_ok(addr, &["offsets", topic]);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("partition\tearliest\tlatest\tlso"),
        "{out}"
    );
    let cols: Vec<&str> = lines
        .next()
        .expect("partition 0's row")
        .split('\t')
        .collect();
    assert_eq!(cols.len(), 4, "{out}");
    assert_eq!(cols[0], "0");
    (cols[1].into(), cols[2].into(), cols[3].into())
}

#[test]
fn mk_lists_describes_and_aborts_a_hanging_transaction_and_shows_the_lso() {
    smol::block_on(async {
        let broker = Target::start();
        let addr = broker.addr().to_string();
        broker.create_topic("hang", 1).await;
        let producer = broker.producer(Some("mk-hanging")).await;
        producer.init_transactions().await.expect("init");
        producer.begin_transaction().await.expect("begin");
        send_all(&producer, "hang", 0, &["h0", "h1", "h2"]).await;
        // The open transaction holds the LSO at its first record.
        assert_eq!(
            offsets_row(&addr, "hang"),
            ("0".into(), "3".into(), "0".into())
        );

        let listed = mk_ok(&addr, &["transactions", "list"]);
        let row = listed
            .lines()
            .find(|l| l.starts_with("mk-hanging\t"))
            .unwrap_or_else(|| panic!("mk-hanging not listed: {listed}"));
        let cols: Vec<&str> = row.split('\t').collect();
        assert_eq!(cols[2], "Ongoing", "{row}");
        let pid = cols[1].to_string();
        let ongoing = mk_ok(&addr, &["transactions", "list", "--state", "Ongoing"]);
        assert!(ongoing.contains("mk-hanging"), "{ongoing}");
        let by_pid = mk_ok(&addr, &["transactions", "list", "--producer-id", &pid]);
        assert_eq!(by_pid.lines().count(), 2, "header and one row: {by_pid}");
        let empty = mk_ok(
            &addr,
            &["transactions", "list", "--state", "CompleteCommit"],
        );
        assert!(!empty.contains("mk-hanging"), "{empty}");

        let described = mk_ok(&addr, &["transactions", "describe", "mk-hanging"]);
        let row = described.lines().nth(1).expect("a row");
        let cols: Vec<&str> = row.split('\t').collect();
        assert_eq!(cols.len(), 7, "{described}");
        assert_eq!(
            (cols[0], cols[1], cols[3]),
            ("mk-hanging", pid.as_str(), "Ongoing")
        );
        assert_eq!(cols[6], "hang-0", "{row}");
        let epoch = cols[2].to_string();

        // The producer goes away without ending it: abort it in its partition, as
        // kafka-transactions.sh abort does.
        drop(producer);
        let (ok, _, stderr) = mk_run(&addr, &["transactions", "describe", "no-such-id"]);
        assert!(!ok && !stderr.is_empty(), "describing an unknown id fails");
        let aborted = mk_ok(
            &addr,
            &[
                "transactions",
                "abort",
                "--topic",
                "hang",
                "--partition",
                "0",
                "--producer-id",
                &pid,
                "--producer-epoch",
                &epoch,
                "--coordinator-epoch",
                "0",
            ],
        );
        assert!(aborted.contains("Aborted"), "{aborted}");
        // The ABORT marker took offset 3; the LSO is the high watermark again and a
        // read_committed reader sees nothing of the transaction.
        assert_eq!(
            offsets_row(&addr, "hang"),
            ("0".into(), "4".into(), "4".into())
        );
        let committed = mk_ok(&addr, &["consume", "hang", "--isolation", "read_committed"]);
        assert_eq!(committed, "", "aborted records are not read committed");
        let all = mk_ok(&addr, &["consume", "hang"]);
        assert_eq!(all, "h0\nh1\nh2\n");
    });
}
