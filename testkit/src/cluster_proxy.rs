//! A pretend Kafka cluster in front of one real broker, for testing clients that must follow
//! leaders and coordinators (there is no multi-broker Kafka here: no JVM, and kfake-runner is one
//! broker).
//!
//! Contract:
//! - [`ClusterProxy::start`] listens on `nodes` ports of 127.0.0.1, one per pretended broker
//!   (node id = index + 1), and forwards every request of every connection to `upstream` over a
//!   connection of its own, answers in request order.
//! - Metadata answers are rewritten: the brokers are the proxy's ports, and partition `p` of
//!   every topic is led by pretended broker `(p + shift) % nodes` (`shift` starts at
//!   `leader_shift` and grows by one at each move). FindCoordinator answers name
//!   pretended broker `txn_coordinator` for transactional ids and `group_coordinator` for
//!   groups.
//! - A request that reaches the wrong pretended broker is answered by the proxy, as a real
//!   follower or non-coordinator would, and is not forwarded: Produce for a partition this
//!   broker does not lead gets NOT_LEADER_OR_FOLLOWER; InitProducerId, AddPartitionsToTxn,
//!   AddOffsetsToTxn and EndTxn away from the transaction coordinator, and TxnOffsetCommit away
//!   from the group coordinator, get NOT_COORDINATOR; Fetch and ListOffsets for a partition this
//!   broker does not lead get NOT_LEADER_OR_FOLLOWER for each of their partitions; OffsetCommit
//!   and OffsetFetch away from the group coordinator get NOT_COORDINATOR. (The other group
//!   requests — membership, ListGroups, DescribeGroups — are forwarded from any port.)
//! - Connections are cut ([`ClusterProxy::cut_connections`], or at the
//!   `cut_connections_at`-th Produce, which is not forwarded). At the `lose_answers_at`-th
//!   Produce (and each `lose_answers_every`-th after it) only the connection carrying it is cut,
//!   after the broker answered it: the records are written but the client never hears so, the
//!   case an idempotent producer's re-send must not duplicate (I182). Its other requests still
//!   waiting are lost with it.
//! - Leaders move ([`ClusterProxy::move_leaders`], or at the `move_leaders_at`-th Produce) and
//!   coordinators move ([`ClusterProxy::move_coordinators`], or at the
//!   `move_coordinators_at`-th EndTxn); the next Metadata / FindCoordinator answers say so.
//! - Every request body is walked by the broker's bounded pre-check before `kafka-protocol`
//!   decodes it; a frame that fails it (or any undecodable frame) closes that connection.
//!   Responses come from the real broker and are decoded only for the APIs rewritten.
//! - Counters ([`Counters`]) say what was forwarded and what was refused, so a test can tell
//!   that the client routed (few refusals while nothing moved) and that moves happened.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use minikafka_broker::protocol::precheck;
use minikafka_broker::protocol::schema::schema_for;

/// NOT_LEADER_OR_FOLLOWER.
const NOT_LEADER: i16 = 6;
/// NOT_COORDINATOR.
const NOT_COORDINATOR: i16 = 16;
/// Largest frame the proxy reads (the broker's default `socket.request.max.bytes`).
const MAX_FRAME: usize = 100 * 1024 * 1024;

/// What the proxy pretends and when it changes.
#[derive(Clone, Debug)]
pub struct ProxyPlan {
    /// Pretended brokers (ports).
    pub nodes: usize,
    /// Partition `p` is led by broker `(p + leader_shift) % nodes` at the start.
    pub leader_shift: usize,
    /// Index of the transaction coordinator at the start.
    pub txn_coordinator: usize,
    /// Index of the group coordinator at the start.
    pub group_coordinator: usize,
    /// Every leader moves on at this Produce request (counted over all ports, from 1).
    pub move_leaders_at: Option<usize>,
    /// Both coordinators move on at this EndTxn request (counted from 1).
    pub move_coordinators_at: Option<usize>,
    /// Every proxied connection is cut at this Produce request (counted from 1).
    pub cut_connections_at: Option<usize>,
    /// This Produce request is forwarded, its answer read from the broker and dropped, and the
    /// client's connection that carried it cut (counted from 1).
    pub lose_answers_at: Option<usize>,
    /// With `lose_answers_at`: and again every this many Produce requests after it.
    pub lose_answers_every: Option<usize>,
}

impl ProxyPlan {
    /// `nodes` brokers, the transaction coordinator on the second (when there is one), the
    /// group coordinator on the last, nothing moving by itself.
    pub fn new(nodes: usize) -> ProxyPlan {
        ProxyPlan {
            nodes,
            leader_shift: 0,
            txn_coordinator: 1 % nodes,
            group_coordinator: nodes - 1,
            move_leaders_at: None,
            move_coordinators_at: None,
            cut_connections_at: None,
            lose_answers_at: None,
            lose_answers_every: None,
        }
    }
}

/// What the proxy saw and did.
#[derive(Debug, Default)]
pub struct Counters {
    /// Produce requests seen.
    pub produces: AtomicUsize,
    /// Produce requests forwarded, per pretended broker.
    pub produces_forwarded: Vec<AtomicUsize>,
    /// Produce requests answered NOT_LEADER_OR_FOLLOWER.
    pub not_leader: AtomicUsize,
    /// Of those, how many came before any leader moved (a routing mistake of the client).
    pub not_leader_before_move: AtomicUsize,
    /// Fetch and ListOffsets requests answered NOT_LEADER_OR_FOLLOWER.
    pub reads_not_leader: AtomicUsize,
    /// Of those, how many came before any leader moved (a routing mistake).
    pub reads_not_leader_before_move: AtomicUsize,
    /// Fetch and ListOffsets requests forwarded, per pretended broker.
    pub reads_forwarded: Vec<AtomicUsize>,
    /// Transactional requests (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn)
    /// forwarded, per pretended broker.
    pub txn_forwarded: Vec<AtomicUsize>,
    /// TxnOffsetCommit requests forwarded, per pretended broker.
    pub txn_offset_commits_forwarded: Vec<AtomicUsize>,
    /// OffsetCommit and OffsetFetch requests forwarded, per pretended broker.
    pub group_offsets_forwarded: Vec<AtomicUsize>,
    /// Requests answered NOT_COORDINATOR.
    pub not_coordinator: AtomicUsize,
    /// Of those, how many came before any coordinator moved (a routing mistake).
    pub not_coordinator_before_move: AtomicUsize,
    /// EndTxn requests forwarded.
    pub end_txns: AtomicUsize,
    /// Times the leaders moved.
    pub leader_moves: AtomicUsize,
    /// Times the coordinators moved.
    pub coordinator_moves: AtomicUsize,
    /// Times every connection was cut.
    pub cuts: AtomicUsize,
    /// Produce answers dropped, each with the connection that carried its request.
    pub lost_answers: AtomicUsize,
    /// Frames refused by the pre-check or the decoder (their connection was closed).
    pub refused_frames: AtomicUsize,
}

/// The shared state of every port's threads.
#[derive(Debug)]
struct Shared {
    upstream: String,
    ports: Vec<u16>,
    plan: ProxyPlan,
    shift: AtomicUsize,
    coordinator_shift: AtomicUsize,
    leaders_moved: AtomicBool,
    coordinators_moved: AtomicBool,
    counters: Counters,
    conns: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn nodes(&self) -> usize {
        self.ports.len()
    }

    fn leader(&self, partition: i32) -> usize {
        (partition.max(0) as usize + self.shift.load(SeqCst)) % self.nodes()
    }

    fn txn_coordinator(&self) -> usize {
        (self.plan.txn_coordinator + self.coordinator_shift.load(SeqCst)) % self.nodes()
    }

    fn group_coordinator(&self) -> usize {
        (self.plan.group_coordinator + self.coordinator_shift.load(SeqCst)) % self.nodes()
    }

    fn move_leaders(&self) {
        self.shift.fetch_add(1, SeqCst);
        self.leaders_moved.store(true, SeqCst);
        self.counters.leader_moves.fetch_add(1, SeqCst);
    }

    fn cut_connections(&self) {
        self.counters.cuts.fetch_add(1, SeqCst);
        if let Ok(mut conns) = self.conns.lock() {
            for c in conns.drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }

    fn move_coordinators(&self) {
        self.coordinator_shift.fetch_add(1, SeqCst);
        self.coordinators_moved.store(true, SeqCst);
        self.counters.coordinator_moves.fetch_add(1, SeqCst);
    }
}

/// The running proxy; its threads live as long as the test process.
#[derive(Debug)]
pub struct ClusterProxy {
    /// `127.0.0.1:PORT` of each pretended broker (node id = index + 1).
    pub addrs: Vec<String>,
    shared: Arc<Shared>,
}

impl ClusterProxy {
    /// Starts the proxy in front of the broker at `upstream`.
    pub fn start(upstream: &str, plan: ProxyPlan) -> std::io::Result<ClusterProxy> {
        assert!(plan.nodes > 0, "a cluster has at least one broker");
        let listeners = (0..plan.nodes)
            .map(|_| TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<Vec<_>>>()?;
        let ports = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<std::io::Result<Vec<u16>>>()?;
        let counters = Counters {
            produces_forwarded: (0..plan.nodes).map(|_| AtomicUsize::new(0)).collect(),
            txn_forwarded: (0..plan.nodes).map(|_| AtomicUsize::new(0)).collect(),
            reads_forwarded: (0..plan.nodes).map(|_| AtomicUsize::new(0)).collect(),
            group_offsets_forwarded: (0..plan.nodes).map(|_| AtomicUsize::new(0)).collect(),
            txn_offset_commits_forwarded: (0..plan.nodes).map(|_| AtomicUsize::new(0)).collect(),
            ..Counters::default()
        };
        let leader_shift = plan.leader_shift;
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            ports: ports.clone(),
            plan,
            shift: AtomicUsize::new(leader_shift),
            coordinator_shift: AtomicUsize::new(0),
            leaders_moved: AtomicBool::new(false),
            coordinators_moved: AtomicBool::new(false),
            counters,
            conns: Mutex::new(Vec::new()),
        });
        for (node, listener) in listeners.into_iter().enumerate() {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for client in listener.incoming().flatten() {
                    let shared = Arc::clone(&shared);
                    std::thread::spawn(move || serve(node, client, &shared));
                }
            });
        }
        Ok(ClusterProxy {
            addrs: ports.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
            shared,
        })
    }

    /// What the proxy saw and did so far.
    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Every partition's leader moves to the next pretended broker.
    pub fn move_leaders(&self) {
        self.shared.move_leaders();
    }

    /// Both coordinators move to the next pretended broker.
    pub fn move_coordinators(&self) {
        self.shared.move_coordinators();
    }

    /// Index of the pretended broker leading `partition` now.
    pub fn leader(&self, partition: i32) -> usize {
        self.shared.leader(partition)
    }

    /// Cuts every proxied connection (clients see them closed).
    pub fn cut_connections(&self) {
        self.shared.cut_connections();
    }
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(usize::MAX);
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut frame = vec![0u8; len];
    s.read_exact(&mut frame)?;
    Ok(frame)
}

fn write_frame(s: &mut TcpStream, frame: &[u8]) -> std::io::Result<()> {
    let len = i32::try_from(frame.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too large"))?;
    s.write_all(&len.to_be_bytes())?;
    s.write_all(frame)
}

/// What the client gets next, in request order.
enum Reply {
    /// The real broker's answer to a forwarded request.
    Upstream {
        api_key: i16,
        version: i16,
        /// FindCoordinator's key type (0 group, 1 transactional id), from the request.
        key_type: i8,
    },
    /// The proxy's own answer.
    Own(Vec<u8>),
    /// The real broker's answer, read and dropped; the client connection is then cut.
    LoseUpstream,
}

/// A request decoded after its body passed the pre-check.
fn decode<R: Request + Decodable>(frame: &[u8]) -> Option<(RequestHeader, R)> {
    let version = i16::from_be_bytes([*frame.get(2)?, *frame.get(3)?]);
    let mut buf = Bytes::copy_from_slice(frame);
    let header = RequestHeader::decode(&mut buf, R::header_version(version)).ok()?;
    let schema = schema_for(ApiKey::try_from(R::KEY).ok()?)?;
    let report = precheck(schema, version, &buf).ok()?;
    let mut body = buf.slice(..report.body_bytes);
    let request = R::decode(&mut body, version).ok()?;
    Some((header, request))
}

fn encode<R: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &R) -> Vec<u8> {
    let mut out = BytesMut::new();
    // Encoding a response built from a decoded request cannot fail short of a bug here.
    let encoded = ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, R::header_version(version))
        .and_then(|()| body.encode(&mut out, version));
    match encoded {
        Ok(()) => out.to_vec(),
        Err(_) => Vec::new(),
    }
}

/// What to do with one request.
enum Verdict {
    Forward,
    /// Forward, then drop the answer and cut the client's connection.
    ForwardAndLoseAnswer,
    /// The proxy's own answer (empty when it could not be encoded: the connection closes).
    Answer(Vec<u8>),
    /// Refused without an answer (an acks=0 Produce at a non-leader).
    Drop,
    Close,
}

/// Decides whether pretended broker `node` may take the request in `frame`.
fn judge(node: usize, frame: &[u8], shared: &Shared) -> Verdict {
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let c = &shared.counters;
    let refused = || {
        c.refused_frames.fetch_add(1, SeqCst);
        Verdict::Close
    };
    let not_coordinator = |answer: Vec<u8>| {
        c.not_coordinator.fetch_add(1, SeqCst);
        if !shared.coordinators_moved.load(SeqCst) {
            c.not_coordinator_before_move.fetch_add(1, SeqCst);
        }
        Verdict::Answer(answer)
    };
    let txn_here = node == shared.txn_coordinator();
    let read_not_leader = |answer: Vec<u8>| {
        c.reads_not_leader.fetch_add(1, SeqCst);
        if !shared.leaders_moved.load(SeqCst) {
            c.reads_not_leader_before_move.fetch_add(1, SeqCst);
        }
        Verdict::Answer(answer)
    };
    let group_here = node == shared.group_coordinator();
    match api_key {
        OffsetCommitRequest::KEY => {
            let Some((header, request)) = decode::<OffsetCommitRequest>(frame) else {
                return refused();
            };
            if group_here {
                c.group_offsets_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = OffsetCommitResponse::default().with_topics(
                request
                    .topics
                    .iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(NOT_COORDINATOR)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        OffsetFetchRequest::KEY => {
            let Some((header, request)) = decode::<OffsetFetchRequest>(frame) else {
                return refused();
            };
            if group_here {
                c.group_offsets_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            // v8+ answers per group; older versions carry one top-level error.
            let response = if version >= 8 {
                OffsetFetchResponse::default().with_groups(
                    request
                        .groups
                        .iter()
                        .map(|g| {
                            OffsetFetchResponseGroup::default()
                                .with_group_id(g.group_id.clone())
                                .with_error_code(NOT_COORDINATOR)
                        })
                        .collect(),
                )
            } else {
                OffsetFetchResponse::default().with_error_code(NOT_COORDINATOR)
            };
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        FetchRequest::KEY => {
            let Some((header, request)) = decode::<FetchRequest>(frame) else {
                return refused();
            };
            let wrong = request.topics.iter().any(|t| {
                t.partitions
                    .iter()
                    .any(|p| shared.leader(p.partition) != node)
            });
            if !wrong {
                c.reads_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = FetchResponse::default().with_responses(
                request
                    .topics
                    .iter()
                    .map(|t| {
                        FetchableTopicResponse::default()
                            .with_topic(t.topic.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        PartitionData::default()
                                            .with_partition_index(p.partition)
                                            .with_error_code(NOT_LEADER)
                                            .with_high_watermark(-1)
                                            .with_last_stable_offset(-1)
                                            .with_log_start_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            read_not_leader(encode(header.correlation_id, version, &response))
        }
        ListOffsetsRequest::KEY => {
            let Some((header, request)) = decode::<ListOffsetsRequest>(frame) else {
                return refused();
            };
            let wrong = request.topics.iter().any(|t| {
                t.partitions
                    .iter()
                    .any(|p| shared.leader(p.partition_index) != node)
            });
            if !wrong {
                c.reads_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = ListOffsetsResponse::default().with_topics(
                request
                    .topics
                    .iter()
                    .map(|t| {
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        ListOffsetsPartitionResponse::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(NOT_LEADER)
                                            .with_timestamp(-1)
                                            .with_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            read_not_leader(encode(header.correlation_id, version, &response))
        }
        ProduceRequest::KEY => {
            let Some((header, request)) = decode::<ProduceRequest>(frame) else {
                return refused();
            };
            let seen = c.produces.fetch_add(1, SeqCst) + 1;
            if shared.plan.move_leaders_at == Some(seen) {
                shared.move_leaders();
            }
            if shared.plan.cut_connections_at == Some(seen) {
                shared.cut_connections();
                return Verdict::Close;
            }
            let wrong = request.topic_data.iter().any(|t| {
                t.partition_data
                    .iter()
                    .any(|p| shared.leader(p.index) != node)
            });
            if !wrong {
                c.produces_forwarded[node].fetch_add(1, SeqCst);
                let lose = match (shared.plan.lose_answers_at, shared.plan.lose_answers_every) {
                    (Some(at), None) => seen == at,
                    (Some(at), Some(every)) => {
                        seen >= at && (seen - at).is_multiple_of(every.max(1))
                    }
                    (None, _) => false,
                };
                if lose && request.acks != 0 {
                    return Verdict::ForwardAndLoseAnswer;
                }
                return Verdict::Forward;
            }
            c.not_leader.fetch_add(1, SeqCst);
            if !shared.leaders_moved.load(SeqCst) {
                c.not_leader_before_move.fetch_add(1, SeqCst);
            }
            if request.acks == 0 {
                return Verdict::Drop;
            }
            let response = ProduceResponse::default().with_responses(
                request
                    .topic_data
                    .iter()
                    .map(|t| {
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_partition_responses(
                                t.partition_data
                                    .iter()
                                    .map(|p| {
                                        PartitionProduceResponse::default()
                                            .with_index(p.index)
                                            .with_error_code(NOT_LEADER)
                                            .with_base_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            Verdict::Answer(encode(header.correlation_id, version, &response))
        }
        InitProducerIdRequest::KEY => {
            let Some((header, request)) = decode::<InitProducerIdRequest>(frame) else {
                return refused();
            };
            // Idempotent (non-transactional) producers may ask any broker.
            if txn_here || request.transactional_id.is_none() {
                c.txn_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = InitProducerIdResponse::default()
                .with_error_code(NOT_COORDINATOR)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        AddPartitionsToTxnRequest::KEY => {
            let Some((header, request)) = decode::<AddPartitionsToTxnRequest>(frame) else {
                return refused();
            };
            if txn_here {
                c.txn_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = AddPartitionsToTxnResponse::default()
                .with_error_code(NOT_COORDINATOR)
                .with_results_by_topic_v3_and_below(
                    request
                        .v3_and_below_topics
                        .iter()
                        .map(|t| {
                            AddPartitionsToTxnTopicResult::default()
                                .with_name(t.name.clone())
                                .with_results_by_partition(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            AddPartitionsToTxnPartitionResult::default()
                                                .with_partition_index(*p)
                                                .with_partition_error_code(NOT_COORDINATOR)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        AddOffsetsToTxnRequest::KEY => {
            let Some((header, _)) = decode::<AddOffsetsToTxnRequest>(frame) else {
                return refused();
            };
            if txn_here {
                c.txn_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = AddOffsetsToTxnResponse::default().with_error_code(NOT_COORDINATOR);
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        EndTxnRequest::KEY => {
            let Some((header, _)) = decode::<EndTxnRequest>(frame) else {
                return refused();
            };
            if txn_here {
                c.txn_forwarded[node].fetch_add(1, SeqCst);
                let seen = c.end_txns.fetch_add(1, SeqCst) + 1;
                if shared.plan.move_coordinators_at == Some(seen) {
                    // Moves after this one is forwarded: the next request meets it.
                    shared.move_coordinators();
                }
                return Verdict::Forward;
            }
            let response = EndTxnResponse::default().with_error_code(NOT_COORDINATOR);
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        TxnOffsetCommitRequest::KEY => {
            let Some((header, request)) = decode::<TxnOffsetCommitRequest>(frame) else {
                return refused();
            };
            if node == shared.group_coordinator() {
                c.txn_offset_commits_forwarded[node].fetch_add(1, SeqCst);
                return Verdict::Forward;
            }
            let response = TxnOffsetCommitResponse::default().with_topics(
                request
                    .topics
                    .iter()
                    .map(|t| {
                        TxnOffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        TxnOffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(NOT_COORDINATOR)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
            not_coordinator(encode(header.correlation_id, version, &response))
        }
        _ => Verdict::Forward,
    }
}

fn serve(node: usize, client: TcpStream, shared: &Arc<Shared>) {
    let Ok(upstream) = TcpStream::connect(&shared.upstream) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (Ok(mut to_client), Ok(mut from_upstream)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    if let (Ok(mut conns), Ok(a), Ok(b)) = (
        shared.conns.lock(),
        client.try_clone(),
        upstream.try_clone(),
    ) {
        conns.push(a);
        conns.push(b);
    }
    let (tx, rx) = mpsc::channel::<Reply>();
    let writer_shared = Arc::clone(shared);
    std::thread::spawn(move || {
        for reply in rx {
            let frame = match reply {
                Reply::Own(frame) => frame,
                Reply::LoseUpstream => {
                    // The broker has answered (so it wrote the records); the client never
                    // hears it.
                    let _ = read_frame(&mut from_upstream);
                    writer_shared.counters.lost_answers.fetch_add(1, SeqCst);
                    break;
                }
                Reply::Upstream {
                    api_key,
                    version,
                    key_type,
                } => match read_frame(&mut from_upstream) {
                    Ok(frame) => rewrite(&writer_shared, api_key, version, key_type, frame),
                    Err(_) => break,
                },
            };
            if write_frame(&mut to_client, &frame).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(Shutdown::Both);
    });
    let (mut client, mut upstream) = (client, upstream);
    while let Ok(frame) = read_frame(&mut client) {
        if frame.len() < 8 {
            break;
        }
        let api_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let verdict = judge(node, &frame, shared);
        let lose_answer = matches!(verdict, Verdict::ForwardAndLoseAnswer);
        match verdict {
            Verdict::Close => break,
            Verdict::Drop => continue,
            Verdict::ForwardAndLoseAnswer => {}
            Verdict::Answer(answer) => {
                if answer.is_empty() || tx.send(Reply::Own(answer)).is_err() {
                    break;
                }
                continue;
            }
            Verdict::Forward => {}
        }
        if write_frame(&mut upstream, &frame).is_err() {
            break;
        }
        let acks_zero = api_key == ProduceRequest::KEY
            && decode::<ProduceRequest>(&frame).is_some_and(|(_, r)| r.acks == 0);
        let key_type = if api_key == FindCoordinatorRequest::KEY {
            match decode::<FindCoordinatorRequest>(&frame) {
                Some((_, r)) => r.key_type,
                None => break,
            }
        } else {
            0
        };
        let reply = if lose_answer {
            Reply::LoseUpstream
        } else {
            Reply::Upstream {
                api_key,
                version,
                key_type,
            }
        };
        if !acks_zero && tx.send(reply).is_err() {
            break;
        }
    }
    let _ = upstream.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
}

/// Metadata: the pretended brokers and leaders; FindCoordinator: the pretended coordinators.
/// Other answers pass unchanged (an undecodable one too: the client will say what is wrong).
fn rewrite(shared: &Shared, api_key: i16, version: i16, key_type: i8, frame: Vec<u8>) -> Vec<u8> {
    let node_id = |i: usize| BrokerId(i as i32 + 1);
    let host = StrBytes::from_static_str("127.0.0.1");
    if api_key == MetadataRequest::KEY {
        let mut buf = Bytes::from(frame.clone());
        let Ok(header) =
            ResponseHeader::decode(&mut buf, MetadataResponse::header_version(version))
        else {
            return frame;
        };
        let Ok(mut response) = MetadataResponse::decode(&mut buf, version) else {
            return frame;
        };
        response.brokers = shared
            .ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                metadata_response::MetadataResponseBroker::default()
                    .with_node_id(node_id(i))
                    .with_host(host.clone())
                    .with_port(i32::from(*port))
            })
            .collect();
        response.controller_id = node_id(0);
        for t in &mut response.topics {
            for p in &mut t.partitions {
                let leader = node_id(shared.leader(p.partition_index));
                p.leader_id = leader;
                p.replica_nodes = vec![leader];
                p.isr_nodes = vec![leader];
            }
        }
        return encode(header.correlation_id, version, &response);
    }
    if api_key == FindCoordinatorRequest::KEY {
        let mut buf = Bytes::from(frame.clone());
        let Ok(header) =
            ResponseHeader::decode(&mut buf, FindCoordinatorResponse::header_version(version))
        else {
            return frame;
        };
        let Ok(mut response) = FindCoordinatorResponse::decode(&mut buf, version) else {
            return frame;
        };
        let at = if key_type == 1 {
            shared.txn_coordinator()
        } else {
            shared.group_coordinator()
        };
        let port = i32::from(shared.ports[at]);
        if response.error_code == 0 && response.coordinators.is_empty() {
            response.node_id = node_id(at);
            response.host = host.clone();
            response.port = port;
        }
        for c in &mut response.coordinators {
            if c.error_code == 0 {
                c.node_id = node_id(at);
                c.host = host.clone();
                c.port = port;
            }
        }
        return encode(header.correlation_id, version, &response);
    }
    frame
}
