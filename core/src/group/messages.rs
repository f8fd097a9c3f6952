//! Decoded group requests and their answers, as the coordinator sees them.
//!
//! These are core's own types, not kafka-protocol's: the broker decodes a request (after the
//! bounded pre-check, I10), copies the fields below into one of these, and encodes the answer
//! at the request's version. Fields that exist only in some versions say so; the broker fills
//! the documented default for older versions. FindCoordinator is answered by the broker.

use super::codes::ErrorCode;
use super::consumer;

/// One decoded request for the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRequest {
    /// JoinGroup (API 11), v0–v9.
    JoinGroup(JoinGroupRequest),
    /// SyncGroup (API 14), v0–v5.
    SyncGroup(SyncGroupRequest),
    /// Heartbeat (API 12), v0–v4.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup (API 13), v0–v5 (one member before v3, a batch from v3).
    LeaveGroup(LeaveGroupRequest),
    /// OffsetCommit (API 8), v2–v9.
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch (API 9), v1–v9 (several groups from v8).
    OffsetFetch(OffsetFetchRequest),
    /// OffsetDelete (API 47).
    OffsetDelete(OffsetDeleteRequest),
    /// DeleteGroups (API 42), for the groups of this coordinator.
    DeleteGroups(DeleteGroupsRequest),
    /// ListGroups (API 16), v0–v5.
    ListGroups(ListGroupsRequest),
    /// DescribeGroups (API 15), v0–v5.
    DescribeGroups(DescribeGroupsRequest),
    /// ConsumerGroupHeartbeat (API 68), routed to the consumer-protocol group.
    ConsumerGroupHeartbeat(consumer::HeartbeatRequest),
    /// ConsumerGroupDescribe (API 69), routed to the consumer-protocol groups.
    ConsumerGroupDescribe(consumer::DescribeRequest),
    /// TxnOffsetCommit (API 28), v0–v5: offsets pending until their transaction ends (I73).
    TxnOffsetCommit(TxnOffsetCommitRequest),
    /// The end of a producer's transaction, from the transaction coordinator (what Kafka's
    /// WriteTxnMarkers to an offsets partition does): its pending offsets become visible or
    /// vanish, once the marker is durable (I74).
    CompleteTxn(CompleteTxnRequest),
}

/// The answer to one [`GroupRequest`], same variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupResponse {
    /// Answer to JoinGroup.
    JoinGroup(JoinGroupResponse),
    /// Answer to SyncGroup.
    SyncGroup(SyncGroupResponse),
    /// Answer to Heartbeat.
    Heartbeat(HeartbeatResponse),
    /// Answer to LeaveGroup.
    LeaveGroup(LeaveGroupResponse),
    /// Answer to OffsetCommit.
    OffsetCommit(OffsetCommitResponse),
    /// Answer to OffsetFetch.
    OffsetFetch(OffsetFetchResponse),
    /// Answer to OffsetDelete.
    OffsetDelete(OffsetDeleteResponse),
    /// Answer to DeleteGroups.
    DeleteGroups(DeleteGroupsResponse),
    /// Answer to ListGroups.
    ListGroups(ListGroupsResponse),
    /// Answer to DescribeGroups.
    DescribeGroups(DescribeGroupsResponse),
    /// Answer to ConsumerGroupHeartbeat.
    ConsumerGroupHeartbeat(consumer::HeartbeatResponse),
    /// Answer to ConsumerGroupDescribe.
    ConsumerGroupDescribe(consumer::DescribeResponse),
    /// Answer to TxnOffsetCommit: per-partition codes, in request order.
    TxnOffsetCommit(OffsetCommitResponse),
    /// Answer to CompleteTxn.
    CompleteTxn(CompleteTxnResponse),
}

/// One protocol a joining member supports (for consumers: an assignor name and its
/// subscription metadata), in the member's order of preference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinProtocol {
    /// Protocol name, e.g. `range`, `cooperative-sticky`.
    pub name: String,
    /// Opaque metadata (for consumers: the subscription).
    pub metadata: Vec<u8>,
}

/// JoinGroup request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupRequest {
    /// Request version (0–9): v4+ requires a member id first (KIP-394), v5+ carries
    /// `group_instance_id`, v9 answers the static leader's rejoin with `skip_assignment`.
    pub version: i16,
    /// Group id.
    pub group_id: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout (v1+; the broker passes `session_timeout_ms` for v0).
    pub rebalance_timeout_ms: i32,
    /// Member id, empty for a first join.
    pub member_id: String,
    /// Static membership id (v5+), `None` for dynamic members.
    pub group_instance_id: Option<String>,
    /// Protocol type, `consumer` for consumers.
    pub protocol_type: String,
    /// Supported protocols in order of preference.
    pub protocols: Vec<JoinProtocol>,
    /// Client id from the request header (the member id is derived from it).
    pub client_id: String,
    /// Client host (the peer address), as DescribeGroups shows it.
    pub client_host: String,
}

/// One member in the leader's JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroupMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// The metadata of the member for the selected protocol.
    pub metadata: Vec<u8>,
}

/// JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JoinGroupResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// The new generation (−1 on error).
    pub generation_id: i32,
    /// The group's protocol type (v7+).
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// True when a static leader rejoined a stable group: it must not compute a new
    /// assignment (v9+).
    pub skip_assignment: bool,
    /// The member id of the requester (the new one on MEMBER_ID_REQUIRED).
    pub member_id: String,
    /// The members, for the leader only.
    pub members: Vec<JoinGroupMember>,
}

/// SyncGroup request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncGroupRequest {
    /// Request version (0–5); v5 carries protocol type and name, which must match.
    pub version: i16,
    /// Group id.
    pub group_id: String,
    /// Generation the member joined.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static membership id (v3+).
    pub group_instance_id: Option<String>,
    /// Protocol type (v5+).
    pub protocol_type: Option<String>,
    /// Protocol name (v5+).
    pub protocol_name: Option<String>,
    /// The leader's assignment (empty for followers): member id → assignment bytes.
    pub assignments: Vec<(String, Vec<u8>)>,
}

/// SyncGroup answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SyncGroupResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// The group's protocol type (v5+).
    pub protocol_type: Option<String>,
    /// The group's protocol (v5+).
    pub protocol_name: Option<String>,
    /// This member's assignment (empty on error).
    pub assignment: Vec<u8>,
}

/// Heartbeat request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatRequest {
    /// Group id.
    pub group_id: String,
    /// Generation the member belongs to.
    pub generation_id: i32,
    /// Member id.
    pub member_id: String,
    /// Static membership id (v3+).
    pub group_instance_id: Option<String>,
}

/// Heartbeat answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HeartbeatResponse {
    /// Error code.
    pub error_code: ErrorCode,
}

/// One member leaving.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeavingMember {
    /// Member id (may be empty for a static member identified by instance id, v3+).
    pub member_id: String,
    /// Static membership id (v3+).
    pub group_instance_id: Option<String>,
}

/// LeaveGroup request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    /// Group id.
    pub group_id: String,
    /// The members leaving: exactly one before v3 (the request's `member_id`), a batch from v3.
    pub members: Vec<LeavingMember>,
}

/// One member's LeaveGroup result (v3+).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftMember {
    /// Member id as requested.
    pub member_id: String,
    /// Static membership id as requested.
    pub group_instance_id: Option<String>,
    /// Error code for this member.
    pub error_code: ErrorCode,
}

/// LeaveGroup answer. Before v3 the broker sends `error_code`, set to the only member's
/// code when the group itself had no error.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LeaveGroupResponse {
    /// Group-level error code.
    pub error_code: ErrorCode,
    /// Per-member results.
    pub members: Vec<LeftMember>,
}

/// One partition's commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitPartition {
    /// Partition index.
    pub partition: i32,
    /// Committed offset.
    pub offset: i64,
    /// Leader epoch of the committed record (v6+, −1 unknown).
    pub leader_epoch: i32,
    /// Client metadata (`None` is stored as empty).
    pub metadata: Option<String>,
}

/// One topic's commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitTopic {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<CommitPartition>,
}

/// OffsetCommit request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// Request version (2–9).
    pub version: i16,
    /// Group id.
    pub group_id: String,
    /// Generation (−1 for a simple commit by a client outside any group).
    pub generation_id: i32,
    /// Member id (empty for a simple commit).
    pub member_id: String,
    /// Static membership id (v7+).
    pub group_instance_id: Option<String>,
    /// Retention (v2–v4; −1 = broker default). When set, the record carries an explicit
    /// expire timestamp (value version 1).
    pub retention_time_ms: i64,
    /// Topics.
    pub topics: Vec<CommitTopic>,
}

/// Per-partition result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionResult {
    /// Partition index.
    pub partition: i32,
    /// Error code.
    pub error_code: ErrorCode,
}

/// Per-topic results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicResults {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<PartitionResult>,
}

/// OffsetCommit answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OffsetCommitResponse {
    /// Per-topic, per-partition codes, in request order.
    pub topics: Vec<TopicResults>,
}

/// Topics and partitions asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicPartitions {
    /// Topic name.
    pub name: String,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

/// One group of an OffsetFetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchGroup {
    /// Group id.
    pub group_id: String,
    /// `None` = every committed partition of the group.
    pub topics: Option<Vec<TopicPartitions>>,
}

/// OffsetFetch request fields (before v8 the broker builds one group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    /// Groups.
    pub groups: Vec<OffsetFetchGroup>,
    /// `require_stable` (v7+, KIP-447): a partition with transactional offsets still pending
    /// answers UNSTABLE_OFFSET_COMMIT instead of its offset (I76).
    pub require_stable: bool,
}

/// TxnOffsetCommit request fields (v0–v5). Before v3 the generation is −1, the member id
/// empty and the instance id `None`: such a commit is not fenced by the group (I75).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOffsetCommitRequest {
    /// Request version (0–5).
    pub version: i16,
    /// The producer's transactional id (informational here).
    pub transactional_id: String,
    /// Group id.
    pub group_id: String,
    /// Producer id: the offsets stay pending under it until its transaction ends.
    pub producer_id: i64,
    /// Producer epoch, written in the transactional batch's header.
    pub producer_epoch: i16,
    /// Generation (v3+; −1 before).
    pub generation_id: i32,
    /// Member id (v3+; empty before).
    pub member_id: String,
    /// Static membership id (v3+).
    pub group_instance_id: Option<String>,
    /// Topics. `leader_epoch` is −1 before v2.
    pub topics: Vec<CommitTopic>,
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnResult {
    /// Its offsets become visible.
    Commit,
    /// Its offsets vanish.
    Abort,
}

/// The end of `producer_id`'s transaction, as far as this coordinator's groups are
/// concerned: like Kafka's marker on an offsets partition, it completes the producer's
/// pending offsets in every group of the partition (`group_id` only routes it here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompleteTxnRequest {
    /// A group of the transaction (routes the request to its coordinator).
    pub group_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch of the marker (the transaction coordinator's, possibly bumped).
    pub producer_epoch: i16,
    /// The transaction coordinator's epoch, which the marker carries (Kafka's
    /// `onTransactionCompleted` is handed it too).
    pub coordinator_epoch: i32,
    /// Commit or abort.
    pub result: TxnResult,
}

/// Answer to [`CompleteTxnRequest`]: NONE once the marker is durable (or when nothing was
/// pending), else the code of the failed append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompleteTxnResponse {
    /// Error code.
    pub error_code: ErrorCode,
}

/// One fetched partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedOffset {
    /// Partition index.
    pub partition: i32,
    /// Committed offset, −1 if none.
    pub offset: i64,
    /// Leader epoch, −1 if none.
    pub leader_epoch: i32,
    /// Metadata (`Some("")` when none was committed; `None` for an absent offset).
    pub metadata: Option<String>,
    /// Error code.
    pub error_code: ErrorCode,
}

/// One fetched topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedTopic {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<FetchedOffset>,
}

/// One group's fetch answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedGroup {
    /// Group id.
    pub group_id: String,
    /// Group-level error code.
    pub error_code: ErrorCode,
    /// Topics, sorted by name when all were asked for, else in request order.
    pub topics: Vec<FetchedTopic>,
}

/// OffsetFetch answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OffsetFetchResponse {
    /// Per group, in request order.
    pub groups: Vec<FetchedGroup>,
}

/// OffsetDelete request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    /// Group id.
    pub group_id: String,
    /// Partitions whose committed offsets to delete.
    pub topics: Vec<TopicPartitions>,
}

/// OffsetDelete answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OffsetDeleteResponse {
    /// Group-level error code.
    pub error_code: ErrorCode,
    /// Per-partition codes.
    pub topics: Vec<TopicResults>,
}

/// DeleteGroups request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteGroupsRequest {
    /// Groups to delete.
    pub group_ids: Vec<String>,
}

/// DeleteGroups answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DeleteGroupsResponse {
    /// Per group, in request order.
    pub results: Vec<(String, ErrorCode)>,
}

/// ListGroups request fields.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ListGroupsRequest {
    /// State names to keep (v4+, case-insensitive); empty = all.
    pub states_filter: Vec<String>,
    /// Group types to keep (`classic`, `consumer`; v5+, case-insensitive); empty = all.
    pub types_filter: Vec<String>,
}

/// One listed group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub group_id: String,
    /// Protocol type (`consumer`, or empty for a group that only has offsets).
    pub protocol_type: String,
    /// State name as Kafka spells it (`Stable`, `Empty`, …).
    pub group_state: String,
    /// Group type (`classic` or `consumer`).
    pub group_type: String,
}

/// ListGroups answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ListGroupsResponse {
    /// Error code.
    pub error_code: ErrorCode,
    /// Groups, sorted by id.
    pub groups: Vec<ListedGroup>,
}

/// DescribeGroups request fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeGroupsRequest {
    /// Groups to describe.
    pub group_ids: Vec<String>,
}

/// One described member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id (v4+).
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Metadata for the group's protocol (empty unless Stable or CompletingRebalance).
    pub member_metadata: Vec<u8>,
    /// Current assignment (empty unless Stable).
    pub member_assignment: Vec<u8>,
}

/// One described group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedGroup {
    /// Error code (GROUP_ID_NOT_FOUND for an unknown group, v6 semantics; older versions
    /// answer `Dead` with no error, which the broker can map).
    pub error_code: ErrorCode,
    /// Group id.
    pub group_id: String,
    /// State name.
    pub group_state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// Selected protocol (empty unless Stable or CompletingRebalance).
    pub protocol_data: String,
    /// Members.
    pub members: Vec<DescribedMember>,
}

/// DescribeGroups answer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DescribeGroupsResponse {
    /// Per group, in request order.
    pub groups: Vec<DescribedGroup>,
}

impl GroupResponse {
    /// The same answer with every error field set to `code`: what a request gets when the
    /// records its answer depended on could not be made durable. Nothing else is changed.
    pub fn failed_with(mut self, code: ErrorCode) -> GroupResponse {
        match &mut self {
            GroupResponse::JoinGroup(r) => {
                r.error_code = code;
                r.generation_id = -1;
                r.members.clear();
            }
            GroupResponse::SyncGroup(r) => {
                r.error_code = code;
                r.assignment.clear();
            }
            GroupResponse::Heartbeat(r) => r.error_code = code,
            GroupResponse::LeaveGroup(r) => r.error_code = code,
            GroupResponse::OffsetCommit(r) | GroupResponse::TxnOffsetCommit(r) => {
                set_all(&mut r.topics, code)
            }
            GroupResponse::CompleteTxn(r) => r.error_code = code,
            GroupResponse::OffsetDelete(r) => {
                r.error_code = code;
                set_all(&mut r.topics, code);
            }
            GroupResponse::DeleteGroups(r) => {
                for (_, c) in &mut r.results {
                    if !c.is_error() {
                        *c = code;
                    }
                }
            }
            GroupResponse::OffsetFetch(_)
            | GroupResponse::ListGroups(_)
            | GroupResponse::DescribeGroups(_) => {}
            GroupResponse::ConsumerGroupHeartbeat(r) => r.error_code = code,
            GroupResponse::ConsumerGroupDescribe(_) => {}
        }
        self
    }
}

fn set_all(topics: &mut [TopicResults], code: ErrorCode) {
    for t in topics {
        for p in &mut t.partitions {
            if !p.error_code.is_error() {
                p.error_code = code;
            }
        }
    }
}
