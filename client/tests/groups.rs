//! Consumer groups end to end over real TCP: our group consumer and `mk groups` against the
//! broker under test (`group_broker`: minikafka by default, kfake with `MK_GROUP_BROKER=kfake`).

mod common;
mod group_broker;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use group_broker::{wait_until, GroupBroker};
use minikafka_client::group::admin::{self, Committer};
use minikafka_client::group::MemberEvent;
use minikafka_client::{
    Assignor, ConsumerConfig, GroupConfig, GroupConsumer, GroupProtocol, Offset, OffsetReset,
    Producer, ProducerConfig, ProducerRecord, SmolRuntime, TopicPartition,
};

/// Writes `per_partition` records to each of `partitions` partitions of `topic`.
fn produce(broker: &GroupBroker, topic: &str, partitions: i32, per_partition: usize, tag: &str) {
    smol::block_on(async {
        let (producer, driver) = Producer::connect(
            broker.stream().await,
            ProducerConfig::default(),
            SmolRuntime,
        )
        .await
        .expect("producer");
        let driver = smol::spawn(driver.run());
        let mut pending = Vec::new();
        for p in 0..partitions {
            for i in 0..per_partition {
                let record = ProducerRecord::new(topic, format!("{tag}-{p}-{i}")).with_partition(p);
                pending.push(producer.send(record).await.expect("send"));
            }
        }
        for delivery in pending {
            delivery.await.expect("delivered");
        }
        drop(producer);
        driver.await;
    });
}

fn group_config(group: &str, topic: &str, assignor: Assignor) -> GroupConfig {
    let mut config = GroupConfig::new(group, vec![topic.to_string()]);
    config.assignors = vec![assignor];
    config.session_timeout = Duration::from_secs(10);
    config.rebalance_timeout = Duration::from_secs(20);
    config.heartbeat_interval = Duration::from_millis(300);
    config.auto_commit_interval = Some(Duration::from_millis(200));
    config.auto_offset_reset = OffsetReset::Earliest;
    config.consumer = ConsumerConfig {
        max_wait: Duration::from_millis(100),
        ..ConsumerConfig::default()
    };
    config
}

/// What a member thread reports.
#[derive(Default)]
struct Seen {
    assignment: Vec<TopicPartition>,
    generation: i32,
    member_id: String,
    records: Vec<(TopicPartition, i64)>,
    events: Vec<MemberEvent>,
    error: Option<String>,
}

enum Cmd {
    CommitAndClose,
    Close,
}

/// A group member polling on its own thread.
struct Member {
    seen: Arc<Mutex<Seen>>,
    cmd: mpsc::Sender<Cmd>,
    thread: Option<JoinHandle<()>>,
}

/// Rebalance events of several members in the order they happened.
type EventLog = Arc<Mutex<Vec<(&'static str, MemberEvent)>>>;

impl Member {
    fn start(broker: &GroupBroker, config: GroupConfig) -> Member {
        Member::start_logged(broker, config, "", EventLog::default())
    }

    fn start_logged(
        broker: &GroupBroker,
        config: GroupConfig,
        name: &'static str,
        log: EventLog,
    ) -> Member {
        let addr = broker.addr().to_string();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (cmd, rx) = mpsc::channel();
        let shared = seen.clone();
        let thread = std::thread::spawn(move || {
            smol::block_on(async move {
                let connect = || async {
                    let s = smol::net::TcpStream::connect(&addr).await.expect("connect");
                    s.set_nodelay(true).expect("nodelay");
                    s
                };
                let events = shared.clone();
                let consumer =
                    GroupConsumer::connect(connect().await, connect().await, config, SmolRuntime)
                        .await;
                let mut consumer = match consumer {
                    Ok(c) => c.with_listener(move |e: &MemberEvent| {
                        events.lock().expect("lock").events.push(e.clone());
                        log.lock().expect("lock").push((name, e.clone()));
                    }),
                    Err(e) => {
                        shared.lock().expect("lock").error = Some(e.to_string());
                        return;
                    }
                };
                loop {
                    match rx.try_recv() {
                        Ok(Cmd::Close) | Err(mpsc::TryRecvError::Disconnected) => {
                            let result = consumer.close().await;
                            if let Err(e) = result {
                                shared.lock().expect("lock").error = Some(e.to_string());
                            }
                            return;
                        }
                        Ok(Cmd::CommitAndClose) => {
                            let mut s = shared.lock().expect("lock").error.take();
                            if let Err(e) = consumer.commit_sync().await {
                                s = Some(format!("commit: {e}"));
                            }
                            if let Err(e) = consumer.close().await {
                                s = s.or(Some(format!("close: {e}")));
                            }
                            shared.lock().expect("lock").error = s;
                            return;
                        }
                        Err(mpsc::TryRecvError::Empty) => {}
                    }
                    match consumer.poll().await {
                        Ok(records) => {
                            let mut s = shared.lock().expect("lock");
                            s.records.extend(records.iter().map(|r| {
                                (TopicPartition::new(&*r.topic, r.partition), r.offset.0)
                            }));
                            s.assignment = consumer.assignment();
                            s.generation = consumer.generation();
                            s.member_id = consumer.member_id().to_string();
                        }
                        Err(e) => {
                            shared.lock().expect("lock").error = Some(e.to_string());
                            return;
                        }
                    }
                }
            })
        });
        Member {
            seen,
            cmd,
            thread: Some(thread),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        let seen = self.seen.lock().expect("lock");
        assert!(seen.error.is_none(), "member failed: {:?}", seen.error);
        f(&seen)
    }

    fn assignment(&self) -> BTreeSet<TopicPartition> {
        self.with(|s| s.assignment.iter().cloned().collect())
    }

    /// Stops the member; returns every record it consumed.
    fn finish(mut self, cmd: Cmd) -> Vec<(TopicPartition, i64)> {
        let _ = self.cmd.send(cmd);
        if let Some(t) = self.thread.take() {
            t.join().expect("member thread");
        }
        let mut seen = self.seen.lock().expect("lock");
        assert!(seen.error.is_none(), "member failed: {:?}", seen.error);
        std::mem::take(&mut seen.records)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.cmd.send(Cmd::Close);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn all_partitions(topic: &str, n: i32) -> BTreeSet<TopicPartition> {
    (0..n).map(|p| TopicPartition::new(topic, p)).collect()
}

fn committed(broker: &GroupBroker, group: &str) -> BTreeMap<TopicPartition, Offset> {
    smol::block_on(async {
        let mut conn = broker.connection().await;
        admin::fetch_offsets(&mut conn, group, None)
            .await
            .expect("offset fetch")
    })
}

#[test]
fn two_members_split_six_partitions_and_the_survivor_takes_all_when_one_leaves() {
    let broker = GroupBroker::start();
    smol::block_on(broker.create_topic("split", 6));
    produce(&broker, "split", 6, 10, "r");
    let config = group_config("split-group", "split", Assignor::Range);
    let a = Member::start(&broker, config.clone());
    let b = Member::start(&broker, config);
    wait_until("the two members split the topic 3/3", || {
        let (x, y) = (a.assignment(), b.assignment());
        x.len() == 3 && y.len() == 3 && x.is_disjoint(&y)
    });
    let union: BTreeSet<_> = a.assignment().union(&b.assignment()).cloned().collect();
    assert_eq!(union, all_partitions("split", 6));
    let from_a = a.finish(Cmd::Close);
    wait_until("the survivor owns all six", || {
        b.assignment() == all_partitions("split", 6)
    });
    // Every record was delivered to one of them at least once.
    wait_until("all 60 records consumed", || {
        let mut all: BTreeSet<(TopicPartition, i64)> = from_a.iter().cloned().collect();
        all.extend(b.with(|s| s.records.clone()));
        all.len() == 60
    });
    b.finish(Cmd::Close);
}

#[test]
fn a_new_member_resumes_after_the_committed_offsets() {
    let broker = GroupBroker::start();
    smol::block_on(broker.create_topic("resume", 3));
    produce(&broker, "resume", 3, 4, "old");
    let mut config = group_config("resume-group", "resume", Assignor::Range);
    config.auto_commit_interval = None;
    let first = Member::start(&broker, config.clone());
    wait_until("the first member read all 12", || {
        first.with(|s| s.records.len()) >= 12
    });
    first.finish(Cmd::CommitAndClose);
    let after = committed(&broker, "resume-group");
    assert_eq!(
        after.values().map(|o| o.0).collect::<Vec<_>>(),
        vec![4, 4, 4],
        "{after:?}"
    );

    produce(&broker, "resume", 3, 2, "new");
    let second = Member::start(&broker, config);
    wait_until("the second member read the 6 new records", || {
        second.with(|s| s.records.len()) >= 6
    });
    // Let it poll a little more: nothing before the committed offsets comes back.
    std::thread::sleep(Duration::from_millis(500));
    let records = second.with(|s| s.records.clone());
    assert_eq!(records.len(), 6, "{records:?}");
    assert!(records.iter().all(|(_, o)| *o >= 4), "{records:?}");
    second.finish(Cmd::Close);
}

#[test]
fn closing_with_auto_commit_commits_what_was_consumed() {
    let broker = GroupBroker::start();
    smol::block_on(broker.create_topic("close", 3));
    produce(&broker, "close", 3, 5, "r");
    let mut config = group_config("close-group", "close", Assignor::CooperativeSticky);
    // Longer than the test: only the commit on close (of the revoked partitions) can land.
    config.auto_commit_interval = Some(Duration::from_secs(600));
    let member = Member::start(&broker, config);
    wait_until("all 15 consumed", || member.with(|s| s.records.len()) >= 15);
    member.finish(Cmd::Close);
    let after = committed(&broker, "close-group");
    assert_eq!(
        after.values().map(|o| o.0).collect::<Vec<_>>(),
        vec![5, 5, 5],
        "{after:?}"
    );
}

#[test]
fn cooperative_sticky_keeps_unmoved_partitions_through_a_rebalance() {
    let broker = GroupBroker::start();
    smol::block_on(broker.create_topic("sticky", 6));
    let config = group_config("sticky-group", "sticky", Assignor::CooperativeSticky);
    let log = EventLog::default();
    let a = Member::start_logged(&broker, config.clone(), "a", log.clone());
    wait_until("the first member owns all six", || {
        a.assignment() == all_partitions("sticky", 6)
    });
    let b = Member::start_logged(&broker, config, "b", log.clone());
    wait_until("the members split 3/3", || {
        let (x, y) = (a.assignment(), b.assignment());
        x.len() == 3 && y.len() == 3 && x.is_disjoint(&y)
    });
    let kept = a.assignment();
    let moved = b.assignment();
    let events = a.with(|s| s.events.clone());
    // a was assigned all six once, revoked only what moved to b, and never lost anything.
    assert_eq!(
        events.first(),
        Some(&MemberEvent::Assigned(
            all_partitions("sticky", 6).into_iter().collect()
        ))
    );
    let mut revoked = BTreeSet::new();
    for e in &events[1..] {
        match e {
            MemberEvent::Revoked(parts) => revoked.extend(parts.iter().cloned()),
            other => panic!("unexpected event for the first member: {other:?} in {events:?}"),
        }
    }
    assert_eq!(revoked, moved, "{events:?}");
    assert!(revoked.is_disjoint(&kept));
    // No partition had two owners: b was given each moved partition only after a revoked it
    // (the cooperative two-phase rebalance, not an eager hand-over).
    let log = log.lock().expect("lock").clone();
    for tp in &moved {
        let position = |who: &str, revoke: bool| {
            log.iter().position(|(name, e)| {
                *name == who
                    && match e {
                        MemberEvent::Revoked(p) if revoke => p.contains(tp),
                        MemberEvent::Assigned(p) if !revoke => p.contains(tp),
                        _ => false,
                    }
            })
        };
        let (revoked_at, assigned_at) = (position("a", true), position("b", false));
        assert!(
            revoked_at.is_some() && revoked_at < assigned_at,
            "{tp}: a revoked at {revoked_at:?}, b assigned at {assigned_at:?}: {log:?}"
        );
    }
    a.finish(Cmd::Close);
    b.finish(Cmd::Close);
}

#[test]
fn a_stale_generation_commit_gets_illegal_generation_and_moves_nothing() {
    let broker = GroupBroker::start();
    smol::block_on(broker.create_topic("fence", 2));
    produce(&broker, "fence", 2, 3, "r");
    let mut config = group_config("fence-group", "fence", Assignor::Range);
    config.auto_commit_interval = None;
    let a = Member::start(&broker, config.clone());
    wait_until("the first member owns both partitions", || {
        a.assignment().len() == 2
    });
    let (old_generation, member_id) = a.with(|s| (s.generation, s.member_id.clone()));
    let b = Member::start(&broker, config);
    wait_until("a new generation with both members", || {
        a.with(|s| s.generation) > old_generation && b.assignment().len() == 1
    });
    let codes = smol::block_on(async {
        let mut conn = broker.connection().await;
        let offsets = BTreeMap::from([(TopicPartition::new("fence", 0), Offset(2))]);
        let stale = Committer {
            generation_or_epoch: old_generation,
            member_id: member_id.clone(),
            group_instance_id: None,
        };
        admin::commit_offsets(&mut conn, "fence-group", &stale, &offsets)
            .await
            .expect("commit answered")
    });
    assert_eq!(
        codes.get(&TopicPartition::new("fence", 0)),
        Some(&22),
        "ILLEGAL_GENERATION expected: {codes:?}"
    );
    assert!(committed(&broker, "fence-group").is_empty());
    a.finish(Cmd::Close);
    b.finish(Cmd::Close);
}

#[test]
fn consumer_protocol_members_split_a_topic() {
    let broker = GroupBroker::start();
    smol::block_on(broker.create_topic("kip848", 6));
    produce(&broker, "kip848", 6, 2, "r");
    let mut config = group_config("kip848-group", "kip848", Assignor::Range);
    config.protocol = GroupProtocol::Consumer;
    let a = Member::start(&broker, config.clone());
    wait_until("the first member owns all six", || {
        a.assignment() == all_partitions("kip848", 6)
    });
    wait_until("the first member read all 12", || {
        a.with(|s| s.records.len()) >= 12
    });
    let b = Member::start(&broker, config);
    wait_until("the members split the topic", || {
        let (x, y) = (a.assignment(), b.assignment());
        x.len() == 3 && y.len() == 3 && x.is_disjoint(&y)
    });
    a.finish(Cmd::Close);
    wait_until("the survivor owns all six", || {
        b.assignment() == all_partitions("kip848", 6)
    });
    b.finish(Cmd::Close);
}

fn mk(addr: &str, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mk"))
        .arg("-b")
        .arg(addr)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mk");
    drop(child.stdin.take());
    let _ = std::io::stdout().flush();
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

/// `mk groups describe` rows: partition → (current offset, log end, lag).
fn describe_rows(text: &str) -> BTreeMap<i32, (String, String, String)> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .by_ref()
        .find(|l| l.starts_with("GROUP"))
        .expect("header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        vec![
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID"
        ]
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 9, "{l}");
            (
                f[2].parse().expect("partition"),
                (f[3].to_string(), f[4].to_string(), f[5].to_string()),
            )
        })
        .collect()
}

#[test]
fn mk_groups_describe_shows_lag_and_reset_offsets_moves_it_unless_dry_run() {
    let broker = GroupBroker::start();
    let addr = broker.addr().to_string();
    smol::block_on(broker.create_topic("lag", 3));
    produce(&broker, "lag", 3, 4, "old");
    let out = ok(
        &mk(&addr, &["consume", "lag", "--group", "lag-group"]),
        "consume",
    );
    assert_eq!(out.lines().count(), 12, "{out}");
    // A second run in the same group reads nothing new.
    let again = ok(
        &mk(&addr, &["consume", "lag", "--group", "lag-group"]),
        "consume",
    );
    assert_eq!(again.lines().count(), 0, "{again}");
    produce(&broker, "lag", 3, 1, "new");

    let listed = ok(&mk(&addr, &["groups", "list"]), "groups list");
    assert!(listed.lines().any(|l| l == "lag-group"), "{listed}");
    let described = ok(&mk(&addr, &["groups", "describe", "lag-group"]), "describe");
    let rows = describe_rows(&described);
    for p in 0..3 {
        assert_eq!(
            rows[&p],
            ("4".into(), "5".into(), "1".into()),
            "{described}"
        );
    }

    // `mk groups reset-offsets lag-group --topic TOPIC HOW…` and the group's rows after it.
    let reset = |topic: &str, how: &[&str]| {
        let args = [
            &["groups", "reset-offsets", "lag-group", "--topic", topic][..],
            how,
        ]
        .concat();
        ok(&mk(&addr, &args), &format!("reset-offsets {how:?}"))
    };
    let lag_rows = || {
        describe_rows(&ok(
            &mk(&addr, &["groups", "describe", "lag-group"]),
            "describe",
        ))
    };

    let dry = reset("lag", &["--to-earliest", "--dry-run"]);
    assert!(dry.contains("NEW-OFFSET"), "{dry}");
    let rows = lag_rows();
    assert!(
        rows.values().all(|r| r.0 == "4"),
        "dry run moved offsets: {rows:?}"
    );

    reset("lag", &["--to-earliest"]);
    let rows = lag_rows();
    for p in 0..3 {
        assert_eq!(rows[&p], ("0".into(), "5".into(), "5".into()));
    }
    reset("lag", &["--shift-by", "3"]);
    reset("lag:1", &["--to-offset", "1"]);
    let rows = lag_rows();
    assert_eq!(rows[&0].0, "3");
    assert_eq!(rows[&1].0, "1");
    reset("lag", &["--to-latest"]);
    let rows = lag_rows();
    assert!(rows.values().all(|r| r.2 == "0"), "{rows:?}");
    // Far in the past: the first offset of each partition.
    reset("lag", &["--to-datetime", "2001-01-01T00:00:00.000"]);
    let rows = lag_rows();
    assert!(rows.values().all(|r| r.0 == "0"), "{rows:?}");

    ok(&mk(&addr, &["groups", "delete", "lag-group"]), "delete");
    let listed = ok(&mk(&addr, &["groups", "list"]), "groups list");
    assert!(!listed.lines().any(|l| l == "lag-group"), "{listed}");
}

/// A group the broker does not know, which DescribeGroups v6 answers GROUP_ID_NOT_FOUND (and
/// v0–5 `Dead`, I142): `mk groups describe` says it does not exist, and `mk groups
/// reset-offsets` gives it its first offsets, as for a group that never ran. (kfake also
/// refuses OffsetFetch of an unknown group with GROUP_ID_NOT_FOUND, read as no offsets.)
#[test]
fn mk_groups_describe_and_reset_offsets_of_an_unknown_group() {
    let broker = GroupBroker::start();
    let addr = broker.addr().to_string();
    smol::block_on(broker.create_topic("fresh", 2));
    produce(&broker, "fresh", 2, 3, "x");
    let out = mk(&addr, &["groups", "describe", "nobody"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    ok(
        &mk(
            &addr,
            &[
                "groups",
                "reset-offsets",
                "newcomer",
                "--topic",
                "fresh",
                "--to-latest",
            ],
        ),
        "reset-offsets of a new group",
    );
    let described = ok(&mk(&addr, &["groups", "describe", "newcomer"]), "describe");
    let rows = describe_rows(&described);
    for p in 0..2 {
        assert_eq!(
            rows[&p],
            ("3".into(), "3".into(), "0".into()),
            "{described}"
        );
    }
}
