//! Transactional offsets (TxnOffsetCommit) in the group coordinator, on the broker side.
//!
//! - Through a real offsets-partition log (portable backend, real files): the coordinator's
//!   transactional append is written as a transactional batch carrying the producer id and
//!   epoch, its end as a control batch (a COMMIT or ABORT marker); after reopening the log,
//!   replay gives back exactly the live coordinator's durable state, pending offsets
//!   included, and the marker completes them (I73, I74, I21).
//! - Through the group host (its writer and timer tasks on a real shard, appending to a real
//!   log): a transactional commit, a plain commit and the transaction's end queued together
//!   are written as three batches — transactional, plain, control — in that order, and the
//!   log replays to the committed offsets (I74).
//! - Compaction of the offsets partition: a transactional record never shadows an earlier
//!   committed record of its key (the cleaner keeps the committed offset an aborted or
//!   still-pending TxnOffsetCommit would otherwise hide after a restart: I74, I23).
//! - Over TCP against the `minikafka` binary: TxnOffsetCommit v0–5 answers, the offsets stay
//!   invisible (OffsetFetch) and unstable (`require_stable`, I76) — also after `kill -9` and
//!   a restart, since they are durable (I74) — unknown partitions get
//!   UNKNOWN_TOPIC_OR_PARTITION, and v3+ is fenced by the group (I75). Ending the transaction
//!   needs the transaction coordinator (`groups::route::complete_txn_offsets`), which has no
//!   wire API of its own; the log test above drives that end.

mod common;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use minikafka_broker::config::BrokerConfig;
use minikafka_broker::server::groups::host::{GroupHosts, HostContext, OffsetsAppender};
use minikafka_broker::server::groups::offsets_log::encode_marker;
use minikafka_broker::server::handlers::served_versions;
use minikafka_broker::server::shared::Shared;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog};
use minikafka_broker::server::groups::offsets_log::{encode_appends, replay_log};
use minikafka_core::backend::Backend;
use minikafka_core::compaction::policy::CleanupPolicy;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{
    self as core_group, CommitPartition, CommitTopic, CompleteTxnRequest, Coordinator, GroupConfig,
    GroupRequest, GroupResponse, RequestToken, TxnResult,
};
use minikafka_core::record::{BatchIter, ValidateOptions};
use minikafka_core::types::Offset;
use minikafka_testkit::check::{assert_none_failed, run_on_one_shard};

use common::librdkafka::TEST_LIMIT;
use common::typed::TypedClient;
use common::{bounded, Broker};

const NOW: i64 = 1_700_000_000_000;

fn txn_request(pid: i64, group: &str, offset: i64) -> core_group::TxnOffsetCommitRequest {
    core_group::TxnOffsetCommitRequest {
        version: 3,
        transactional_id: format!("tx-{pid}"),
        group_id: group.into(),
        producer_id: pid,
        producer_epoch: 2,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![CommitTopic {
            name: "t".into(),
            partitions: vec![CommitPartition {
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
            }],
        }],
    }
}

/// Feeds `request` to `c` and writes every append it makes to `log`, one batch each.
async fn drive<B: Backend>(
    c: &mut Coordinator,
    log: &PartitionLog<B>,
    request: GroupRequest,
) -> Result<GroupResponse, String> {
    c.handle_request(RequestToken(1), request, NOW);
    while let Some(append) = c.poll_append() {
        let batch = encode_appends(std::slice::from_ref(&append), NOW);
        log.append_from_coordinator(batch, NOW)
            .await
            .map_err(|e| format!("append {:?}: {e}", append.kind))?;
        c.handle_appended(append.id, Ok(()), NOW);
    }
    c.poll_response()
        .map(|(_, r)| r)
        .ok_or_else(|| "no answer".to_string())
}

fn log_config() -> LogConfig {
    LogConfig {
        flush: FlushPolicy::None,
        cleanup_policy: CleanupPolicy::COMPACT,
        ..LogConfig::default()
    }
}

/// Reopens the log at `dir` and replays it into a fresh coordinator.
async fn reopened<B: Backend>(backend: &B, dir: &Path) -> Result<Coordinator, String> {
    let log = PartitionLog::open(backend.clone(), dir, log_config(), true, NOW)
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    let mut c = Coordinator::new(GroupConfig::default(), 9);
    replay_log(&log, &mut c, 0)
        .await
        .map_err(|e| format!("replay: {e}"))?;
    log.close().await.map_err(|e| format!("close: {e}"))?;
    Ok(c)
}

async fn round_trip<B: Backend>(backend: B, root: PathBuf) -> Vec<String> {
    match round_trip_checks(backend, root).await {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    }
}

async fn round_trip_checks<B: Backend>(backend: B, root: PathBuf) -> Result<(), String> {
    let dir = root.join("__consumer_offsets-0");
    let log = PartitionLog::open(backend.clone(), &dir, log_config(), false, NOW)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let mut c = Coordinator::new(GroupConfig::default(), 1);
    // Two producers' offsets pending in one group (I73).
    for (pid, offset) in [(7, 70), (8, 80)] {
        let r = drive(
            &mut c,
            &log,
            GroupRequest::TxnOffsetCommit(txn_request(pid, "g", offset)),
        )
        .await?;
        if !matches!(&r, GroupResponse::TxnOffsetCommit(x)
            if x.topics[0].partitions[0].error_code == ErrorCode::NONE)
        {
            return Err(format!("commit refused: {r:?}"));
        }
    }
    // The batches as Kafka writes them: transactional, with the producer (I74).
    let read = log
        .read(Offset(0), 1 << 20)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let headers: Vec<_> = BatchIter::new(&read.bytes)
        .with_options(ValidateOptions::stored())
        .map(|b| b.map(|b| b.header))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("batch: {e}"))?;
    if headers.len() != 2
        || headers
            .iter()
            .zip([7, 8])
            .any(|(h, pid)| !h.is_transactional() || h.is_control() || h.producer_id != pid)
    {
        return Err(format!("not transactional batches: {headers:?}"));
    }
    log.close().await.map_err(|e| format!("close: {e}"))?;

    let replayed = reopened(&backend, &dir).await?;
    if replayed.durable_state() != c.durable_state() {
        return Err(format!(
            "replay differs: {:?} vs {:?}",
            replayed.durable_state(),
            c.durable_state()
        ));
    }
    let pending = &c.durable_state()["g"].pending_txn;
    if pending.len() != 2 || !c.durable_state()["g"].offsets.is_empty() {
        return Err(format!("expected two producers pending: {pending:?}"));
    }

    // End them: 7 commits, 8 aborts; the markers are control batches.
    let log = PartitionLog::open(backend.clone(), &dir, log_config(), true, NOW)
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    for (pid, result) in [(7, TxnResult::Commit), (8, TxnResult::Abort)] {
        let r = drive(
            &mut c,
            &log,
            GroupRequest::CompleteTxn(CompleteTxnRequest {
                group_id: "g".into(),
                producer_id: pid,
                producer_epoch: 3,
                coordinator_epoch: 0,
                result,
            }),
        )
        .await?;
        if !matches!(&r, GroupResponse::CompleteTxn(x) if x.error_code == ErrorCode::NONE) {
            return Err(format!("completion refused: {r:?}"));
        }
    }
    let read = log
        .read(Offset(2), 1 << 20)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let markers: Vec<_> = BatchIter::new(&read.bytes)
        .with_options(ValidateOptions::stored())
        .filter_map(Result::ok)
        .map(|b| {
            (
                b.header.is_control(),
                b.header.producer_id,
                b.header.producer_epoch,
            )
        })
        .collect();
    if markers != vec![(true, 7, 3), (true, 8, 3)] {
        return Err(format!("markers: {markers:?}"));
    }
    log.close().await.map_err(|e| format!("close: {e}"))?;
    let state = c.durable_state();
    let committed = state["g"]
        .offsets
        .get(&("t".to_string(), 0))
        .map(|o| o.offset);
    if committed != Some(70) || !state["g"].pending_txn.is_empty() {
        return Err(format!("after the markers: {state:?}"));
    }
    let replayed = reopened(&backend, &dir).await?;
    if replayed.durable_state() != state {
        return Err(format!(
            "replay after the markers differs: {:?} vs {state:?}",
            replayed.durable_state()
        ));
    }
    Ok(())
}

#[test]
fn transactional_offsets_and_markers_replay_from_a_real_offsets_log() {
    let dir = tempfile::tempdir().expect("scratch dir");
    let failures = run_on_one_shard::<minikafka_backend_portable::PortableBackend, _, _>(
        dir.path(),
        round_trip,
    );
    assert_none_failed("transactional offsets log", &failures);
}

/// Appends to one log as the shard's appender does (coordinator origin).
struct LogAppender<B: Backend> {
    log: Rc<PartitionLog<B>>,
}

impl<B: Backend> OffsetsAppender for LogAppender<B> {
    fn append(&self, _partition: i32, batch: Bytes) -> LocalBoxFuture<'_, Result<(), ErrorCode>> {
        Box::pin(async move {
            self.log
                .append_from_coordinator(batch, NOW)
                .await
                .map(|_| ())
                .map_err(|e| e.kafka_error_code())
        })
    }

    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        result: TxnResult,
    ) -> LocalBoxFuture<'_, Result<(), ErrorCode>> {
        let batch = encode_marker(producer_id, producer_epoch, coordinator_epoch, result, NOW);
        self.append(partition, batch.into())
    }
}

async fn through_the_host<B: Backend>(backend: B, root: PathBuf) -> Vec<String> {
    match through_the_host_checks(backend, root).await {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    }
}

async fn through_the_host_checks<B: Backend>(backend: B, root: PathBuf) -> Result<(), String> {
    let dir = root.join("__consumer_offsets-0");
    let log = Rc::new(
        PartitionLog::open(backend.clone(), &dir, log_config(), false, NOW)
            .await
            .map_err(|e| format!("open: {e}"))?,
    );
    let (stop, stopped) = async_channel::bounded::<()>(1);
    let shared = Arc::new(Shared::new(
        BrokerConfig::default(),
        served_versions(),
        "cluster".into(),
        true,
        Arc::new(AtomicBool::new(false)),
    ));
    let context = Rc::new(HostContext {
        backend: backend.clone(),
        shared,
        stop: stopped,
        appender: Rc::new(LogAppender {
            log: Rc::clone(&log),
        }),
    });
    let hosts = GroupHosts::new();
    hosts.load(context, vec![(0, Rc::clone(&log))]).await?;
    let host = hosts.get(0).ok_or("no host for partition 0")?;
    let mut plain = txn_request(0, "g", 5);
    plain.topics[0].partitions[0].partition = 1;
    let plain = GroupRequest::OffsetCommit(core_group::OffsetCommitRequest {
        version: 9,
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: plain.topics,
    });
    let (txn, plain, end) = futures::join!(
        host.submit(GroupRequest::TxnOffsetCommit(txn_request(7, "g", 70))),
        host.submit(plain),
        host.submit(GroupRequest::CompleteTxn(CompleteTxnRequest {
            group_id: "g".into(),
            producer_id: 7,
            producer_epoch: 2,
            coordinator_epoch: 0,
            result: TxnResult::Commit,
        })),
    );
    for answer in [&txn, &plain, &end] {
        let ok = match answer {
            Some(GroupResponse::TxnOffsetCommit(r)) | Some(GroupResponse::OffsetCommit(r)) => {
                r.topics[0].partitions[0].error_code == ErrorCode::NONE
            }
            Some(GroupResponse::CompleteTxn(r)) => r.error_code == ErrorCode::NONE,
            _ => false,
        };
        if !ok {
            return Err(format!("refused: {answer:?}"));
        }
    }
    drop(stop);
    let read = log
        .read(Offset(0), 1 << 20)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let kinds: Vec<_> = BatchIter::new(&read.bytes)
        .with_options(ValidateOptions::stored())
        .filter_map(Result::ok)
        .map(|b| {
            (
                b.header.is_transactional(),
                b.header.is_control(),
                b.header.producer_id,
            )
        })
        .collect();
    if kinds != vec![(true, false, 7), (false, false, -1), (true, true, 7)] {
        return Err(format!("batches written: {kinds:?}"));
    }
    log.close().await.map_err(|e| format!("close: {e}"))?;
    let replayed = reopened(&backend, &dir).await?;
    let offsets = &replayed.durable_state()["g"].offsets;
    let got: Vec<_> = offsets
        .iter()
        .map(|((t, p), o)| (t.as_str(), *p, o.offset))
        .collect();
    if got != vec![("t", 0, 70), ("t", 1, 5)] {
        return Err(format!("replayed offsets: {got:?}"));
    }
    Ok(())
}

#[test]
fn the_group_host_writes_transactional_batches_and_markers_in_order() {
    let dir = tempfile::tempdir().expect("scratch dir");
    let failures = run_on_one_shard::<minikafka_backend_portable::PortableBackend, _, _>(
        dir.path(),
        through_the_host,
    );
    assert_none_failed("group host with transactional offsets", &failures);
}

async fn compacted<B: Backend>(backend: B, root: PathBuf) -> Vec<String> {
    match compacted_checks(backend, root).await {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    }
}

fn plain_commit(partition: i32, offset: i64) -> GroupRequest {
    let mut req = txn_request(0, "g", offset);
    req.topics[0].partitions[0].partition = partition;
    GroupRequest::OffsetCommit(core_group::OffsetCommitRequest {
        version: 9,
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: req.topics,
    })
}

async fn compacted_checks<B: Backend>(backend: B, root: PathBuf) -> Result<(), String> {
    let dir = root.join("__consumer_offsets-0");
    let config = minikafka_testkit::log::compaction::compacted_config();
    let log = PartitionLog::open(backend.clone(), &dir, config.clone(), false, NOW)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let mut c = Coordinator::new(GroupConfig::default(), 1);
    // t-0: committed 5, then a transactional 50 that aborts; t-1: committed 6, then (in the
    // next segment, so the pending transaction's LSO leaves the first segment cleanable:
    // the cleaner never cleans at or past the LSO, I71) a transactional 60 still pending.
    drive(&mut c, &log, plain_commit(0, 5)).await?;
    drive(&mut c, &log, plain_commit(1, 6)).await?;
    drive(
        &mut c,
        &log,
        GroupRequest::TxnOffsetCommit(txn_request(7, "g", 50)),
    )
    .await?;
    let abort = CompleteTxnRequest {
        group_id: "g".into(),
        producer_id: 7,
        producer_epoch: 2,
        coordinator_epoch: 0,
        result: TxnResult::Abort,
    };
    drive(&mut c, &log, GroupRequest::CompleteTxn(abort)).await?;
    log.roll_now(NOW).await.map_err(|e| format!("roll: {e}"))?;
    let mut pending = txn_request(8, "g", 60);
    pending.topics[0].partitions[0].partition = 1;
    drive(&mut c, &log, GroupRequest::TxnOffsetCommit(pending)).await?;
    drive(&mut c, &log, plain_commit(2, 7)).await?;
    let cleaned =
        minikafka_testkit::log::compaction::clean_once(&backend, &log, NOW + 10_000).await?;
    if cleaned.is_none() {
        return Err("nothing was cleaned".into());
    }
    log.close().await.map_err(|e| format!("close: {e}"))?;
    let log = PartitionLog::open(backend.clone(), &dir, config, true, NOW)
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    let mut replayed = Coordinator::new(GroupConfig::default(), 9);
    replay_log(&log, &mut replayed, 0)
        .await
        .map_err(|e| format!("replay: {e}"))?;
    log.close().await.map_err(|e| format!("close: {e}"))?;
    if replayed.durable_state() != c.durable_state() {
        return Err(format!(
            "after cleaning, replay differs: {:?} vs {:?}",
            replayed.durable_state(),
            c.durable_state()
        ));
    }
    Ok(())
}

#[test]
fn compaction_keeps_committed_offsets_a_transactional_record_would_shadow() {
    let dir = tempfile::tempdir().expect("scratch dir");
    let failures = run_on_one_shard::<minikafka_backend_portable::PortableBackend, _, _>(
        dir.path(),
        compacted,
    );
    assert_none_failed("compacted offsets partition", &failures);
}

// ------------------------------------------------------------------ over TCP

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn tcp_txn_commit(
    group: &str,
    topic: &str,
    partitions: &[(i32, i64)],
    generation: i32,
    member: &str,
) -> TxnOffsetCommitRequest {
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = TransactionalId(s("tx"));
    r.group_id = GroupId(s(group));
    r.producer_id = ProducerId(1000);
    r.producer_epoch = 0;
    r.generation_id = generation;
    r.member_id = s(member);
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = partitions
        .iter()
        .map(|&(p, o)| {
            let mut x = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            x.partition_index = p;
            x.committed_offset = o;
            x.committed_leader_epoch = -1;
            x
        })
        .collect();
    r.topics = vec![t];
    r
}

fn codes(r: &TxnOffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// OffsetFetch v8 of `group`'s partitions 0 and 1 of `topic`: (offset, code) each.
fn fetch(
    client: &mut TypedClient,
    group: &str,
    topic: &str,
    require_stable: bool,
) -> Vec<(i64, i16)> {
    let mut req = OffsetFetchRequest::default();
    req.require_stable = require_stable;
    let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
    g.group_id = GroupId(s(group));
    let mut t = offset_fetch_request::OffsetFetchRequestTopics::default();
    t.name = TopicName(s(topic));
    t.partition_indexes = vec![0, 1];
    g.topics = Some(vec![t]);
    req.groups = vec![g];
    let resp: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 8, &req);
    resp.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect()
}

fn create_topic(client: &mut TypedClient, name: &str) {
    let mut req = CreateTopicsRequest::default();
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(s(name));
    t.num_partitions = 2;
    t.replication_factor = 1;
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 5, &req);
    assert_eq!(resp.topics[0].error_code, 0, "create {name}");
}

const UNSTABLE: i16 = ErrorCode::UNSTABLE_OFFSET_COMMIT.code();

#[test]
fn txn_offset_commit_stays_pending_durably_over_tcp() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::builder()
            .with("offsets.topic.num.partitions", "4")
            .with("num.shards", "2")
            .with("flush.policy", "fsync")
            .start();
        let mut client = TypedClient::connect(broker.addr());
        let versions: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        let listed = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::TxnOffsetCommit as i16)
            .map(|k| (k.min_version, k.max_version));
        assert_eq!(listed, Some((0, 5)));
        create_topic(&mut client, "in");
        for version in 0..=5 {
            let group = format!("g{version}");
            let r: TxnOffsetCommitResponse = client.call(
                ApiKey::TxnOffsetCommit,
                version,
                &tcp_txn_commit(&group, "in", &[(0, 10), (7, 1)], -1, ""),
            );
            assert_eq!(
                codes(&r),
                vec![0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()],
                "v{version}"
            );
            // I73, I76: not visible, and unstable for a reader that asks.
            assert_eq!(
                fetch(&mut client, &group, "in", false),
                vec![(-1, 0), (-1, 0)]
            );
            assert_eq!(
                fetch(&mut client, &group, "in", true),
                vec![(-1, UNSTABLE), (-1, 0)]
            );
        }
        // I75: v3+ carries the generation; a group that does not exist has none.
        let r: TxnOffsetCommitResponse = client.call(
            ApiKey::TxnOffsetCommit,
            3,
            &tcp_txn_commit("fresh", "in", &[(0, 1)], 4, "m-1"),
        );
        assert_eq!(codes(&r), vec![ErrorCode::ILLEGAL_GENERATION.code()]);
        // I74: pending state is durable: after kill -9 it is still pending.
        broker.kill9();
        broker.restart();
        let mut client = TypedClient::connect(broker.addr());
        for version in 0..=5 {
            let group = format!("g{version}");
            assert_eq!(
                fetch(&mut client, &group, "in", true),
                vec![(-1, UNSTABLE), (-1, 0)],
                "after the restart, v{version}'s offsets are still pending"
            );
        }
    });
}
