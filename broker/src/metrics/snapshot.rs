//! What one shard reports on a scrape: plain numbers and strings (`Send`), gathered from its
//! counters and its partition logs and handed to the scraping shard.

use super::histogram::HistogramSnapshot;

/// Traffic of one partition, counted on its owner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionTraffic {
    /// Records appended.
    pub records_in: u64,
    /// Bytes of record batches appended.
    pub bytes_in: u64,
    /// Records in the batches read for fetches (whole batches).
    pub records_out: u64,
    /// Bytes of record batches read for fetches.
    pub bytes_out: u64,
}

/// One partition as its owner sees it at the scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSnapshot {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Its traffic since startup.
    pub traffic: PartitionTraffic,
    /// Bytes of all its segments.
    pub size_bytes: u64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset (high watermark).
    pub log_end_offset: i64,
    /// Whether a failed sync took it offline for writes.
    pub offline: bool,
}

/// Requests of one API.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiSnapshot {
    /// The Kafka API key.
    pub api_key: i16,
    /// Handling time of each request (its count is the request count).
    pub latency: HistogramSnapshot,
    /// Error codes answered, with how often.
    pub errors: Vec<(i16, u64)>,
}

/// Fsync counts (one partition, or summed).
#[derive(Clone, Debug, PartialEq)]
pub struct SyncSnapshot {
    /// Duration of each sync (its count is the sync count).
    pub latency: HistogramSnapshot,
    /// Appends each sync covered (group commit).
    pub appends_per_sync: HistogramSnapshot,
    /// Syncs that failed (each takes its partition offline).
    pub failures: u64,
}

impl SyncSnapshot {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &SyncSnapshot) {
        self.latency.merge(&other.latency);
        self.appends_per_sync.merge(&other.appends_per_sync);
        self.failures += other.failures;
    }
}

/// A committed offset a group coordinator on this shard holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The group id.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset (the next record the group will read).
    pub offset: i64,
}

/// One shard's transaction coordinators' counts (all zero on a shard hosting none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnCounts {
    /// Transactions whose CompleteCommit record is durable, since startup.
    pub committed: u64,
    /// Transactions whose CompleteAbort record is durable (timed-out ones included).
    pub aborted: u64,
    /// Transactions the coordinator aborted because they ran past their timeout.
    pub timed_out: u64,
    /// Transactions open now (state Ongoing).
    pub ongoing: u64,
}

/// Everything one shard reports on a scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardSnapshot {
    /// The shard's index.
    pub shard: usize,
    /// The partitions it owns.
    pub partitions: Vec<PartitionSnapshot>,
    /// Requests received on its connections, by API.
    pub apis: Vec<ApiSnapshot>,
    /// Its partitions' fsyncs (including partitions since removed).
    pub syncs: SyncSnapshot,
    /// Connections it accepted.
    pub connections_accepted: u64,
    /// Connections it refused (`max.connections`).
    pub connections_refused: u64,
    /// Connections it closed for a reason, by reason label.
    pub connection_errors: Vec<(&'static str, u64)>,
    /// Partition operations from other shards waiting in its inbox.
    pub inbox_depth: usize,
    /// Requests being handled on its connections.
    pub requests_in_flight: usize,
    /// How long its startup recovery took (seconds), once done.
    pub recovery_seconds: Option<f64>,
    /// Committed offsets of the groups it coordinates.
    pub committed: Vec<CommittedOffset>,
    /// Its transaction coordinators' counts.
    pub transactions: TxnCounts,
}

/// What the whole broker reports beside its shards.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerSnapshot {
    /// Every shard's report, by shard index (a shard that did not answer in time is missing).
    pub shards: Vec<ShardSnapshot>,
    /// Shards that did not answer the scrape in time.
    pub shards_missing: usize,
    /// Open client connections, all shards together.
    pub connections_open: usize,
    /// Whether the previous run shut down cleanly (recovery was skipped).
    pub clean_shutdown: bool,
    /// Client quota throttling since startup, by kind (`produce`, `fetch`): throttle time in
    /// ms summed, and answers throttled.
    pub throttle_totals: Vec<(&'static str, u64, u64)>,
    /// The same, per quota entity now measured (user and client id as Kafka tags them; empty
    /// for a side the entity lacks), for those ever throttled.
    pub throttled_entities: Vec<ThrottledEntity>,
    /// Time charged to `request_percentage` quotas since startup, in seconds, by part
    /// (`handler`: decoding and handling; `network`: writing answers) (I179).
    pub request_quota_seconds: Vec<(&'static str, f64)>,
    /// The schema registry's counts; `None` when it is off (or not loaded yet).
    pub schema_registry: Option<super::registry_counters::RegistrySnapshot>,
}

/// One quota entity's throttling (see [`BrokerSnapshot::throttled_entities`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThrottledEntity {
    /// `produce` or `fetch`.
    pub kind: &'static str,
    /// The user tag (empty when the entity has no user side).
    pub user: String,
    /// The client id tag (empty when the entity has no client id side).
    pub client_id: String,
    /// Throttle time answered, in ms, summed.
    pub throttle_ms: u64,
    /// Answers throttled.
    pub throttled: u64,
}
