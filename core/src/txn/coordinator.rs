//! The coordinator of one `__transaction_state` partition: request handling, durable
//! application of records, marker writes, timers. See the module docs of [`super`] for the
//! contract.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::error_code::ErrorCode;
use crate::group::group_partition;

use super::messages::*;
use super::records::{RecordError, TopicPartitions, TxnLogKey, TxnLogValue};
use super::state::{decide, EndTxnVersion, Event, Outcome, TxnResult, TxnState};
use super::TxnConfig;

/// Milliseconds since the Unix epoch, as the caller's clock reads them.
pub type Millis = i64;

/// The internal topic AddOffsetsToTxn adds a partition of.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The last epoch a producer id may be bumped from before a new producer id is needed
/// (Kafka's `isProducerEpochExhausted`: epoch ≥ `i16::MAX − 1`).
const EXHAUSTED_EPOCH: i16 = i16::MAX - 1;

/// The caller's handle for one request; its answer comes back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub u64);

/// Names one [`Append`]; report its outcome with [`Coordinator::handle_appended`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppendId(pub u64);

/// Names one [`MarkerWrite`]; report it with [`Coordinator::handle_markers_written`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MarkerId(pub u64);

/// One record for (or from) `__transaction_state`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TxnRecord {
    /// Key bytes (TransactionLogKey).
    pub key: Vec<u8>,
    /// Value bytes (TransactionLogValue), `None` for a tombstone (an expired id).
    pub value: Option<Vec<u8>>,
}

/// A record to append to this coordinator's `__transaction_state` partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// Report this id to `handle_appended`.
    pub id: AppendId,
    /// The record.
    pub record: TxnRecord,
}

/// Why an append did not become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The partition cannot take writes now (offline, shutting down):
    /// COORDINATOR_NOT_AVAILABLE, the client retries.
    Unavailable,
    /// The record exceeds the partition's size limit: UNKNOWN_SERVER_ERROR, as Kafka.
    TooLarge,
    /// Any other storage failure: NOT_COORDINATOR, as Kafka answers a storage error of its
    /// transaction log, so the client finds the coordinator again and retries.
    Storage,
}

impl AppendError {
    /// The error code an answer that depended on the append gets.
    pub fn code(self) -> ErrorCode {
        match self {
            AppendError::Unavailable => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            AppendError::TooLarge => ErrorCode::UNKNOWN_SERVER_ERROR,
            AppendError::Storage => ErrorCode::NOT_COORDINATOR,
        }
    }
}

/// COMMIT or ABORT control batches to write, one per partition, for one transaction. Each
/// is a control batch of the producer id and epoch below with the coordinator epoch in its
/// record; the partition's writer applies it like Kafka's WriteTxnMarkers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerWrite {
    /// Report this id to `handle_markers_written`.
    pub id: MarkerId,
    /// The transactional id (for logs and metrics).
    pub transactional_id: String,
    /// The transaction's producer id.
    pub producer_id: i64,
    /// The epoch the Prepare record carries (bumped by a fence or by EndTxn v5+).
    pub producer_epoch: i16,
    /// This coordinator's epoch ([`Coordinator::new`]).
    pub coordinator_epoch: i32,
    /// COMMIT or ABORT (I36: the result of the durable Prepare record).
    pub result: TxnResult,
    /// The partitions, sorted.
    pub partitions: Vec<TopicPartition>,
}

/// Why [`Coordinator::poll_timeout`] wants to be woken.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeoutReason {
    /// Abort transactions that ran past their timeout
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    AbortTimedOut,
    /// Expire idle transactional ids
    /// (`transaction.remove.expired.transaction.cleanup.interval.ms`).
    ExpireIds,
    /// Write again the markers of these partitions that failed.
    MarkerRetry {
        /// The transactional id.
        transactional_id: String,
    },
    /// Append again the Complete record whose append failed.
    CompleteRetry {
        /// The transactional id.
        transactional_id: String,
    },
    /// Answer CONCURRENT_TRANSACTIONS to this id's requests held past their bound (I134).
    HoldExpired {
        /// The transactional id.
        transactional_id: String,
    },
}

/// Where fresh producer ids come from: the broker's durable allocator (ids reserved in
/// blocks before use, so they never repeat). `None` when no id is ready now (the caller is
/// reserving the next block): the request is answered COORDINATOR_LOAD_IN_PROGRESS, which
/// clients retry, as Kafka answers while its producer-id block is being fetched.
pub trait ProducerIdSource {
    /// A producer id never handed out before, or `None` if none is ready.
    fn next_producer_id(&mut self) -> Option<i64>;
}

impl<F: FnMut() -> Option<i64>> ProducerIdSource for F {
    fn next_producer_id(&mut self) -> Option<i64> {
        self()
    }
}

/// One transactional id's metadata.
#[derive(Clone, Debug)]
struct Entry {
    /// What the records say (I34); `None` while the id's first record is in flight.
    durable: Option<TxnLogValue>,
    /// The one append in flight for this id (I33).
    pending: Option<AppendId>,
    /// Kafka's `lastProducerEpoch`: the epoch before the last InitProducerId bump, so a
    /// retried KIP-360 InitProducerId gets the same answer. Not in the record (as in
    /// Kafka), so −1 after a restart.
    last_epoch: i16,
    /// Partitions whose markers failed and are written again at the retry timer.
    marker_retry: Option<Vec<TopicPartition>>,
    /// Requests of the next transaction waiting for this one to complete, in arrival order
    /// (I134).
    held: VecDeque<Held>,
}

impl Entry {
    fn new(durable: Option<TxnLogValue>) -> Entry {
        Entry {
            durable,
            pending: None,
            last_epoch: -1,
            marker_retry: None,
            held: VecDeque::new(),
        }
    }
}

/// An AddPartitionsToTxn (one transaction of it) or AddOffsetsToTxn held until the previous
/// transaction of its producer completes (I134), then handled again as if it had just come.
#[derive(Clone, Debug)]
struct Held {
    producer_id: i64,
    producer_epoch: i16,
    wanted: BTreeSet<TopicPartition>,
    /// `Completion::AddPartitions` or `Completion::AddOffsets`: whom to answer.
    completion: Completion,
    /// Answered CONCURRENT_TRANSACTIONS if still held at this time.
    deadline: Millis,
}

/// What to do once an append's outcome is known.
#[derive(Clone, Copy, Debug)]
enum Completion {
    /// Answer InitProducerId with the new id and epoch.
    Init(RequestToken),
    /// Answer InitProducerId CONCURRENT_TRANSACTIONS: the open transaction is being aborted.
    InitFence(RequestToken),
    /// One transaction of an AddPartitionsToTxn batch.
    AddPartitions { token: RequestToken, index: usize },
    /// Answer AddOffsetsToTxn.
    AddOffsets(RequestToken),
    /// Answer EndTxn with the producer id and epoch for the next transaction.
    EndTxn {
        token: RequestToken,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// The Complete record after the markers: retried if it fails.
    Complete,
    /// A timeout abort or an expiry: nothing to answer (the next scan retries).
    Background,
}

#[derive(Debug)]
struct PendingAppend {
    transactional_id: String,
    value: Option<TxnLogValue>,
    last_epoch: i16,
    completion: Completion,
}

/// An AddPartitionsToTxn batch whose transactions are not all answered yet.
#[derive(Debug)]
struct Batch {
    results: Vec<AddPartitionsTxnResult>,
    waiting: usize,
}

/// The coordinator of one `__transaction_state` partition.
#[derive(Debug)]
pub struct Coordinator {
    config: TxnConfig,
    coordinator_epoch: i32,
    loading: bool,
    entries: BTreeMap<String, Entry>,
    timers: BTreeSet<(Millis, TimeoutReason)>,
    appends: VecDeque<Append>,
    pending: BTreeMap<AppendId, PendingAppend>,
    markers: VecDeque<MarkerWrite>,
    markers_in_flight: BTreeMap<MarkerId, String>,
    responses: VecDeque<(RequestToken, TxnResponse)>,
    batches: BTreeMap<RequestToken, Batch>,
    /// Requests held over all ids (I134, bounded by `max_held_requests`).
    held_count: usize,
    next_append: u64,
    next_marker: u64,
}

impl Coordinator {
    /// A coordinator that is loading: replay the partition's records, then call
    /// [`Coordinator::handle_loaded`]. Until then every request is answered
    /// COORDINATOR_LOAD_IN_PROGRESS. `coordinator_epoch` goes into every marker (Kafka uses
    /// the `__transaction_state` partition's leader epoch; a single node passes a value that
    /// grows with every start, so markers of a newer coordinator win).
    pub fn new(config: TxnConfig, coordinator_epoch: i32) -> Coordinator {
        Coordinator {
            config: config.validated(),
            coordinator_epoch,
            loading: true,
            entries: BTreeMap::new(),
            timers: BTreeSet::new(),
            appends: VecDeque::new(),
            pending: BTreeMap::new(),
            markers: VecDeque::new(),
            markers_in_flight: BTreeMap::new(),
            responses: VecDeque::new(),
            batches: BTreeMap::new(),
            held_count: 0,
            next_append: 0,
            next_marker: 0,
        }
    }

    // ------------------------------------------------------------ getters

    /// The configuration.
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// Whether the coordinator is still loading.
    pub fn is_loading(&self) -> bool {
        self.loading
    }

    /// A transactional id's durable metadata (what its last durable record says).
    pub fn transaction(&self, transactional_id: &str) -> Option<&TxnLogValue> {
        self.entries.get(transactional_id)?.durable.as_ref()
    }

    /// Every transactional id with durable metadata, sorted.
    pub fn transactional_ids(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, e)| e.durable.is_some())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The durable state (I34): each id's last durable value. Equal to what a fresh
    /// coordinator has after replaying every record this one had made durable.
    pub fn durable_state(&self) -> BTreeMap<String, TxnLogValue> {
        self.entries
            .iter()
            .filter_map(|(id, e)| Some((id.clone(), e.durable.clone()?)))
            .collect()
    }

    // ------------------------------------------------------------ outputs

    /// The next record to append.
    pub fn poll_append(&mut self) -> Option<Append> {
        self.appends.pop_front()
    }

    /// The next marker write.
    pub fn poll_marker(&mut self) -> Option<MarkerWrite> {
        self.markers.pop_front()
    }

    /// The next answer to send.
    pub fn poll_response(&mut self) -> Option<(RequestToken, TxnResponse)> {
        self.responses.pop_front()
    }

    /// The earliest deadline and its reason.
    pub fn poll_timeout(&self) -> Option<(Millis, TimeoutReason)> {
        self.timers.first().cloned()
    }

    // ------------------------------------------------------------ mutators

    /// Loading: applies one record read back from the partition, in log order, with the
    /// same code that applies a durable append (I34). A record that does not decode, or
    /// holds a state that is never stored, is an error and changes nothing.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), RecordError> {
        let key = TxnLogKey::decode(key)?;
        let value = value.map(TxnLogValue::decode).transpose()?;
        if let Some(v) = &value {
            if matches!(v.state, TxnState::Dead | TxnState::PrepareEpochFence) {
                return Err(RecordError::UnexpectedState(v.state));
            }
        }
        self.apply(&key.transactional_id, value);
        Ok(())
    }

    // ------------------------------------------------------------ inputs

    /// Loading is over: every record was replayed. Transactions found prepared get their
    /// markers written (I32), and the abort and expiry scans are armed.
    pub fn handle_loaded(&mut self, now: Millis) {
        if !self.loading {
            return;
        }
        self.loading = false;
        let prepared: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.durable.as_ref().is_some_and(|v| v.state.is_prepare()))
            .map(|(id, _)| id.clone())
            .collect();
        for id in prepared {
            self.start_markers(&id, now);
        }
        let abort_at = now.saturating_add(self.config.abort_timed_out_interval_ms);
        let expire_at = now.saturating_add(self.config.expiration_check_interval_ms);
        self.timers.insert((abort_at, TimeoutReason::AbortTimedOut));
        self.timers.insert((expire_at, TimeoutReason::ExpireIds));
    }

    /// Handles one request. Its answer comes out of `poll_response` with `token`, at once or
    /// once the record it needs is durable (I37). `ids` hands out fresh producer ids.
    pub fn handle_request(
        &mut self,
        token: RequestToken,
        request: TxnRequest,
        ids: &mut dyn ProducerIdSource,
        now: Millis,
    ) {
        match request {
            TxnRequest::InitProducerId(r) => self.init_producer_id(token, r, ids, now),
            TxnRequest::AddPartitionsToTxn(r) => self.add_partitions(token, r, now),
            TxnRequest::AddOffsetsToTxn(r) => self.add_offsets(token, r, now),
            TxnRequest::EndTxn(r) => self.end_txn(token, r, ids, now),
            TxnRequest::DescribeTransactions(r) => {
                let resp = self.describe(&r);
                self.respond(token, TxnResponse::DescribeTransactions(resp));
            }
            TxnRequest::ListTransactions(r) => {
                let resp = self.list(&r, now);
                self.respond(token, TxnResponse::ListTransactions(resp));
            }
        }
    }

    /// The record of append `id` is durable (`Ok`) or not (`Err`). Report appends in the
    /// order they were polled (their log order). Unknown ids are ignored.
    pub fn handle_appended(&mut self, id: AppendId, result: Result<(), AppendError>, now: Millis) {
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        if let Some(entry) = self.entries.get_mut(&p.transactional_id) {
            debug_assert_eq!(entry.pending, Some(id), "I33: one append per id");
            entry.pending = None;
        }
        let txn_id = p.transactional_id;
        let txn_id_for_release = txn_id.clone();
        match result {
            Ok(()) => {
                let value = p.value;
                self.apply(&txn_id, value.clone());
                if let Some(entry) = self.entries.get_mut(&txn_id) {
                    entry.last_epoch = p.last_epoch;
                }
                match p.completion {
                    Completion::Init(token) => {
                        let (producer_id, producer_epoch) = value
                            .as_ref()
                            .map_or((-1, -1), |v| (v.producer_id, v.producer_epoch));
                        self.respond(
                            token,
                            TxnResponse::InitProducerId(InitProducerIdResponse {
                                error_code: ErrorCode::NONE,
                                producer_id,
                                producer_epoch,
                            }),
                        );
                    }
                    Completion::InitFence(token) => {
                        self.respond(token, init_error(ErrorCode::CONCURRENT_TRANSACTIONS))
                    }
                    Completion::AddPartitions { token, index } => {
                        self.batch_done(token, index, ErrorCode::NONE)
                    }
                    Completion::AddOffsets(token) => self.respond(
                        token,
                        TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse {
                            error_code: ErrorCode::NONE,
                        }),
                    ),
                    Completion::EndTxn {
                        token,
                        producer_id,
                        producer_epoch,
                    } => self.respond(
                        token,
                        TxnResponse::EndTxn(EndTxnResponse {
                            error_code: ErrorCode::NONE,
                            producer_id,
                            producer_epoch,
                        }),
                    ),
                    Completion::Complete | Completion::Background => {}
                }
                // I31: markers are written only once their Prepare record is durable.
                if value.as_ref().is_some_and(|v| v.state.is_prepare()) {
                    self.start_markers(&txn_id, now);
                }
            }
            Err(e) => {
                // Nothing durable changed; an id whose first record failed is forgotten.
                if self
                    .entries
                    .get(&txn_id)
                    .is_some_and(|entry| entry.durable.is_none())
                {
                    self.entries.remove(&txn_id);
                }
                let code = e.code();
                match p.completion {
                    Completion::Init(token) | Completion::InitFence(token) => {
                        self.respond(token, init_error(code))
                    }
                    Completion::AddPartitions { token, index } => {
                        self.batch_done(token, index, code)
                    }
                    Completion::AddOffsets(token) => self.respond(
                        token,
                        TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse { error_code: code }),
                    ),
                    Completion::EndTxn { token, .. } => self.respond(token, end_error(code)),
                    Completion::Complete => {
                        let at = now.saturating_add(self.config.retry_backoff_ms);
                        self.timers.insert((
                            at,
                            TimeoutReason::CompleteRetry {
                                transactional_id: txn_id,
                            },
                        ));
                    }
                    Completion::Background => {}
                }
            }
        }
        // I134: the transaction may have completed; held requests go on.
        self.release_held(&txn_id_for_release, now);
    }

    /// The markers of write `id` are durable on their partitions, except those in `retry`
    /// (a write that failed; they are written again after `retry_backoff_ms`). A partition
    /// that no longer exists counts as written (Kafka drops its markers too). Once every
    /// marker is written the Complete record is appended (I32). Unknown ids are ignored.
    pub fn handle_markers_written(
        &mut self,
        id: MarkerId,
        retry: Vec<TopicPartition>,
        now: Millis,
    ) {
        let Some(txn_id) = self.markers_in_flight.remove(&id) else {
            return;
        };
        let Some(entry) = self.entries.get_mut(&txn_id) else {
            return;
        };
        let Some(current) = entry.durable.as_ref().filter(|v| v.state.is_prepare()) else {
            return;
        };
        let owed = partition_set(current);
        let retry: BTreeSet<TopicPartition> =
            retry.into_iter().filter(|tp| owed.contains(tp)).collect();
        if retry.is_empty() {
            self.markers_done(&txn_id, now);
        } else {
            entry.marker_retry = Some(retry.into_iter().collect());
            let at = now.saturating_add(self.config.retry_backoff_ms);
            self.timers.insert((
                at,
                TimeoutReason::MarkerRetry {
                    transactional_id: txn_id,
                },
            ));
        }
    }

    /// Fires every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Millis) {
        // Bounded: the timers due now are taken first and each fires once; the timers they
        // arm are after `now` (every interval and backoff is at least 1 ms,
        // TxnConfig::validated) except where `now + interval` saturates at the end of time.
        let due: Vec<(Millis, TimeoutReason)> = self
            .timers
            .iter()
            .take_while(|(at, _)| *at <= now)
            .cloned()
            .collect();
        for timer in due {
            self.timers.remove(&timer);
            match timer.1 {
                TimeoutReason::AbortTimedOut => {
                    self.abort_timed_out(now);
                    let next = now.saturating_add(self.config.abort_timed_out_interval_ms);
                    self.timers.insert((next, TimeoutReason::AbortTimedOut));
                }
                TimeoutReason::ExpireIds => {
                    self.expire_ids(now);
                    let next = now.saturating_add(self.config.expiration_check_interval_ms);
                    self.timers.insert((next, TimeoutReason::ExpireIds));
                }
                TimeoutReason::MarkerRetry { transactional_id } => {
                    self.retry_markers(&transactional_id)
                }
                TimeoutReason::CompleteRetry { transactional_id } => {
                    self.markers_done(&transactional_id, now)
                }
                TimeoutReason::HoldExpired { transactional_id } => {
                    self.expire_held(&transactional_id, now)
                }
            }
        }
    }

    // ------------------------------------------------------------ requests

    fn init_producer_id(
        &mut self,
        token: RequestToken,
        r: InitProducerIdRequest,
        ids: &mut dyn ProducerIdSource,
        now: Millis,
    ) {
        let outcome = self.init_producer_id_checked(token, &r, ids, now);
        if let Err(code) = outcome {
            self.respond(token, init_error(code));
        }
    }

    fn init_producer_id_checked(
        &mut self,
        token: RequestToken,
        r: &InitProducerIdRequest,
        ids: &mut dyn ProducerIdSource,
        now: Millis,
    ) -> Result<(), ErrorCode> {
        let id = r.transactional_id.as_str();
        if !valid_transactional_id(id) {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if r.transaction_timeout_ms <= 0
            || r.transaction_timeout_ms > self.config.max_transaction_timeout_ms
        {
            return Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT);
        }
        if self.loading {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let Some(entry) = self.entries.get(id) else {
            // A new transactional id (I38: their number is bounded).
            if self.entries.len() >= self.config.max_transactional_ids {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            let producer_id = ids
                .next_producer_id()
                .ok_or(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)?;
            let value = TxnLogValue {
                producer_id,
                previous_producer_id: -1,
                next_producer_id: -1,
                producer_epoch: 0,
                timeout_ms: r.transaction_timeout_ms,
                state: TxnState::Empty,
                partitions: None,
                last_update_ms: now,
                start_ms: -1,
                client_transaction_version: 0,
            };
            self.entries.insert(id.to_string(), Entry::new(None));
            self.append(id, Some(value), -1, Completion::Init(token));
            return Ok(());
        };
        let (Some(current), None) = (entry.durable.clone(), entry.pending) else {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        };
        let entry_last_epoch = entry.last_epoch;
        if let Some((pid, epoch)) = r.expected {
            // KIP-360: the producer may recover only with the current id, or the previous
            // one at an exhausted epoch (a retry across a rotation).
            let valid = current.producer_epoch == -1
                || pid == current.producer_id
                || (pid == current.previous_producer_id && epoch >= EXHAUSTED_EPOCH);
            if !valid {
                return Err(ErrorCode::PRODUCER_FENCED);
            }
        }
        match decide(current.state, Event::InitProducerId) {
            Outcome::Reply(code) => Err(code),
            Outcome::FenceAndAbort => {
                self.fence_and_abort(id, now, Completion::InitFence(token));
                Ok(())
            }
            Outcome::Transition(TxnState::Empty) => {
                let mut next = current.clone();
                next.state = TxnState::Empty;
                next.partitions = None;
                next.timeout_ms = r.transaction_timeout_ms;
                next.last_update_ms = now;
                next.start_ms = -1;
                next.next_producer_id = -1;
                let expected_epoch = r.expected.map(|(_, e)| e);
                let last_epoch;
                if current.producer_epoch >= EXHAUSTED_EPOCH
                    && expected_epoch.is_none_or(|e| e == current.producer_epoch)
                {
                    // Epoch exhausted: a new producer id (I39).
                    next.producer_id = ids
                        .next_producer_id()
                        .ok_or(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)?;
                    next.previous_producer_id = current.producer_id;
                    next.producer_epoch = 0;
                    last_epoch = if expected_epoch.is_some() {
                        current.producer_epoch
                    } else {
                        -1
                    };
                } else {
                    match expected_epoch {
                        None => {
                            next.producer_epoch = current.producer_epoch + 1;
                            last_epoch = -1;
                        }
                        Some(e) if current.producer_epoch == -1 || e == current.producer_epoch => {
                            next.producer_epoch = current.producer_epoch + 1;
                            last_epoch = current.producer_epoch;
                        }
                        // A retry of an InitProducerId that already bumped: same answer.
                        Some(e) if e == entry_last_epoch => last_epoch = entry_last_epoch,
                        Some(_) => return Err(ErrorCode::PRODUCER_FENCED),
                    }
                }
                self.append(id, Some(next), last_epoch, Completion::Init(token));
                Ok(())
            }
            other => {
                debug_assert!(false, "InitProducerId outcome {other:?}");
                Err(ErrorCode::UNKNOWN_SERVER_ERROR)
            }
        }
    }

    fn add_partitions(&mut self, token: RequestToken, r: AddPartitionsToTxnRequest, now: Millis) {
        let mut results = Vec::with_capacity(r.transactions.len());
        let mut waiting = 0;
        for (index, txn) in r.transactions.into_iter().enumerate() {
            let code = if txn.verify_only {
                Err(self.verify_partitions(&txn))
            } else {
                let wanted: BTreeSet<TopicPartition> = txn.partitions.iter().cloned().collect();
                self.add_or_hold(
                    &txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    wanted,
                    Completion::AddPartitions { token, index },
                    now,
                )
                .map_err(|code| vec![code; txn.partitions.len()])
            };
            let codes = match code {
                Ok(()) => {
                    waiting += 1;
                    vec![ErrorCode::NONE; txn.partitions.len()]
                }
                Err(codes) => codes,
            };
            results.push(AddPartitionsTxnResult {
                transactional_id: txn.transactional_id,
                partitions: txn.partitions.into_iter().zip(codes).collect(),
            });
        }
        let batch = Batch { results, waiting };
        if batch.waiting == 0 {
            self.respond_batch(token, batch);
        } else {
            self.batches.insert(token, batch);
        }
    }

    /// KIP-890 part 1: is each partition in the transaction? (No pending check, as Kafka:
    /// partitions join the transaction only once their record is durable.)
    fn verify_partitions(&self, txn: &AddPartitionsTxn) -> Vec<ErrorCode> {
        let all = |code| vec![code; txn.partitions.len()];
        if !valid_transactional_id(&txn.transactional_id) {
            return all(ErrorCode::INVALID_REQUEST);
        }
        if self.loading {
            return all(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let Some(current) = self
            .entries
            .get(&txn.transactional_id)
            .and_then(|e| e.durable.as_ref())
        else {
            return all(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        if current.producer_id != txn.producer_id {
            return all(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if current.producer_epoch != txn.producer_epoch {
            return all(ErrorCode::PRODUCER_FENCED);
        }
        match decide(current.state, Event::VerifyPartitions) {
            Outcome::Verify => {
                let present = partition_set(current);
                txn.partitions
                    .iter()
                    .map(|tp| {
                        if present.contains(tp) {
                            ErrorCode::NONE
                        } else {
                            ErrorCode::TRANSACTION_ABORTABLE
                        }
                    })
                    .collect()
            }
            Outcome::Reply(code) => all(code),
            other => {
                debug_assert!(false, "verify outcome {other:?}");
                all(ErrorCode::UNKNOWN_SERVER_ERROR)
            }
        }
    }

    fn add_offsets(&mut self, token: RequestToken, r: AddOffsetsToTxnRequest, now: Millis) {
        let partition = group_partition(&r.group_id, self.config.offsets_topic_partitions);
        let wanted = BTreeSet::from([TopicPartition::new(CONSUMER_OFFSETS_TOPIC, partition)]);
        let result = self.add_or_hold(
            &r.transactional_id,
            r.producer_id,
            r.producer_epoch,
            wanted,
            Completion::AddOffsets(token),
            now,
        );
        if let Err(error_code) = result {
            self.respond(
                token,
                TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse { error_code }),
            );
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: `Ok` when a record was appended or the request
    /// is held (I134; the answer follows with `completion`), else the code to answer now.
    fn add_or_hold(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        wanted: BTreeSet<TopicPartition>,
        completion: Completion,
        now: Millis,
    ) -> Result<(), ErrorCode> {
        match self.add_to_transaction(id, producer_id, producer_epoch, &wanted, completion, now) {
            Err(ErrorCode::CONCURRENT_TRANSACTIONS)
                if self.may_hold(id, producer_id, producer_epoch) =>
            {
                let deadline = now.saturating_add(self.config.hold_while_completing_ms);
                let held = Held {
                    producer_id,
                    producer_epoch,
                    wanted,
                    completion,
                    deadline,
                };
                if let Some(entry) = self.entries.get_mut(id) {
                    entry.held.push_back(held);
                    self.held_count += 1;
                    self.timers.insert((
                        deadline,
                        TimeoutReason::HoldExpired {
                            transactional_id: id.to_string(),
                        },
                    ));
                }
                Ok(())
            }
            other => other,
        }
    }

    /// Whether a request refused CONCURRENT_TRANSACTIONS may wait instead (I134): its
    /// transaction is completing (a Prepare record is durable), or requests that came
    /// before it wait already (arrival order); it is the producer's (its id and epoch, or
    /// the id the completing transaction hands over to: a fenced producer never waits); and
    /// the bound on held requests leaves room.
    fn may_hold(&self, id: &str, producer_id: i64, producer_epoch: i16) -> bool {
        if self.config.hold_while_completing_ms == 0
            || self.held_count >= self.config.max_held_requests
        {
            return false;
        }
        let Some(entry) = self.entries.get(id) else {
            return false;
        };
        let Some(current) = entry.durable.as_ref() else {
            return false;
        };
        let completing = current.state.is_prepare();
        let ours = check_producer(current, producer_id, producer_epoch).is_ok()
            || (completing && current.next_producer_id == producer_id);
        ours && (completing || !entry.held.is_empty())
    }

    /// Handles again, in arrival order, the requests held for `id` (I134), once its
    /// transaction is complete and no record of it is in flight; stops at the first that
    /// appends a record (the next waits for that one).
    fn release_held(&mut self, id: &str, now: Millis) {
        loop {
            let Some(entry) = self.entries.get_mut(id) else {
                return;
            };
            let completing = entry.durable.as_ref().is_none_or(|v| v.state.is_prepare());
            if completing || entry.pending.is_some() {
                return;
            }
            let Some(held) = entry.held.pop_front() else {
                return;
            };
            self.held_count = self.held_count.saturating_sub(1);
            let result = self.add_to_transaction(
                id,
                held.producer_id,
                held.producer_epoch,
                &held.wanted,
                held.completion,
                now,
            );
            if let Err(code) = result {
                self.answer_completion(held.completion, code);
            }
        }
    }

    /// Answers CONCURRENT_TRANSACTIONS to `id`'s held requests whose bound has passed
    /// (I134: the client retries, as Kafka's would).
    fn expire_held(&mut self, id: &str, now: Millis) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        let (expired, kept): (VecDeque<Held>, VecDeque<Held>) =
            entry.held.drain(..).partition(|h| h.deadline <= now);
        entry.held = kept;
        for held in expired {
            self.held_count = self.held_count.saturating_sub(1);
            self.answer_completion(held.completion, ErrorCode::CONCURRENT_TRANSACTIONS);
        }
    }

    /// Answers an AddPartitionsToTxn transaction or an AddOffsetsToTxn with `code`.
    fn answer_completion(&mut self, completion: Completion, code: ErrorCode) {
        match completion {
            Completion::AddPartitions { token, index } => self.batch_done(token, index, code),
            Completion::AddOffsets(token) => self.respond(
                token,
                TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse { error_code: code }),
            ),
            other => debug_assert!(false, "only adds are held: {other:?}"),
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: `Ok` when a record was appended (the answer
    /// follows with `completion`), else the code to answer now.
    fn add_to_transaction(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        wanted: &BTreeSet<TopicPartition>,
        completion: Completion,
        now: Millis,
    ) -> Result<(), ErrorCode> {
        if !valid_transactional_id(id) {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if self.loading {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let Some(entry) = self.entries.get(id) else {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        let Some(current) = entry.durable.clone() else {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        check_producer(&current, producer_id, producer_epoch)?;
        if entry.pending.is_some() {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        let last_epoch = entry.last_epoch;
        let mut partitions = partition_set(&current);
        let before = partitions.len();
        partitions.extend(wanted.iter().cloned());
        let new_partitions = partitions.len() > before;
        match decide(current.state, Event::AddPartitions { new_partitions }) {
            Outcome::Reply(code) => Err(code),
            Outcome::Transition(TxnState::Ongoing) => {
                // I38: a transaction's partitions (its record and its memory) are bounded.
                if partitions.len() > self.config.max_partitions_per_transaction {
                    return Err(ErrorCode::INVALID_REQUEST);
                }
                let mut next = current.clone();
                if current.state != TxnState::Ongoing {
                    next.start_ms = now;
                }
                next.state = TxnState::Ongoing;
                next.partitions = Some(group_by_topic(&partitions));
                next.last_update_ms = now;
                next.next_producer_id = -1;
                self.append(id, Some(next), last_epoch, completion);
                Ok(())
            }
            other => {
                debug_assert!(false, "AddPartitions outcome {other:?}");
                Err(ErrorCode::UNKNOWN_SERVER_ERROR)
            }
        }
    }

    fn end_txn(
        &mut self,
        token: RequestToken,
        r: EndTxnRequest,
        ids: &mut dyn ProducerIdSource,
        now: Millis,
    ) {
        if let Err(code) = self.end_txn_checked(token, &r, ids, now) {
            self.respond(token, end_error(code));
        }
    }

    fn end_txn_checked(
        &mut self,
        token: RequestToken,
        r: &EndTxnRequest,
        ids: &mut dyn ProducerIdSource,
        now: Millis,
    ) -> Result<(), ErrorCode> {
        let id = r.transactional_id.as_str();
        if !valid_transactional_id(id) {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if self.loading {
            return Err(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let Some(entry) = self.entries.get(id) else {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        let Some(current) = entry.durable.clone() else {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        let (pending, entry_last_epoch) = (entry.pending.is_some(), entry.last_epoch);
        let result = if r.committed {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        };
        let version = if r.version < 5 {
            check_producer(&current, r.producer_id, r.producer_epoch)?;
            EndTxnVersion::V1
        } else {
            // KIP-890 part 2: every EndTxn bumps the epoch, so a retry carries the epoch
            // before the stored one (or the last epoch of the id before a rotation).
            let retry_on_overflow = current.previous_producer_id == r.producer_id
                && r.producer_epoch == EXHAUSTED_EPOCH
                && current.producer_epoch == 0;
            let retry_on_bump =
                i32::from(current.producer_epoch) == i32::from(r.producer_epoch) + 1;
            let same = r.producer_epoch == current.producer_epoch;
            let valid_epoch = match current.state {
                TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    retry_on_bump || retry_on_overflow || same
                }
                _ => same,
            };
            if current.producer_id != r.producer_id && !retry_on_overflow {
                return Err(wrong_producer_id(&current, r.producer_id));
            }
            if !valid_epoch {
                return Err(ErrorCode::PRODUCER_FENCED);
            }
            EndTxnVersion::V2 {
                retry: retry_on_bump || retry_on_overflow,
            }
        };
        if pending {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        match decide(current.state, Event::EndTxn { result, version }) {
            Outcome::Reply(ErrorCode::NONE) => {
                self.respond(
                    token,
                    TxnResponse::EndTxn(EndTxnResponse {
                        error_code: ErrorCode::NONE,
                        producer_id: current.producer_id,
                        producer_epoch: current.producer_epoch,
                    }),
                );
                Ok(())
            }
            Outcome::Reply(code) => Err(code),
            Outcome::Transition(state @ (TxnState::PrepareCommit | TxnState::PrepareAbort)) => {
                let mut next = current.clone();
                let mut last_epoch = entry_last_epoch;
                if current.state != TxnState::Ongoing {
                    // TV2's abort with no partitions: an empty transaction, no markers.
                    next.partitions = Some(Vec::new());
                    next.start_ms = now;
                }
                next.state = state;
                next.last_update_ms = now;
                next.next_producer_id = -1;
                if let EndTxnVersion::V2 { .. } = version {
                    next.client_transaction_version = 2;
                    next.producer_epoch = current.producer_epoch.saturating_add(1);
                    last_epoch = current.producer_epoch;
                    if current.producer_epoch >= EXHAUSTED_EPOCH {
                        // The next transaction needs a new producer id (I39).
                        next.next_producer_id = ids
                            .next_producer_id()
                            .ok_or(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)?;
                    }
                } else {
                    next.client_transaction_version = 0;
                }
                let (producer_id, producer_epoch) = if next.next_producer_id != -1 {
                    (next.next_producer_id, 0)
                } else {
                    (next.producer_id, next.producer_epoch)
                };
                let completion = Completion::EndTxn {
                    token,
                    producer_id,
                    producer_epoch,
                };
                self.append(id, Some(next), last_epoch, completion);
                Ok(())
            }
            other => {
                debug_assert!(false, "EndTxn outcome {other:?}");
                Err(ErrorCode::UNKNOWN_SERVER_ERROR)
            }
        }
    }

    fn describe(&self, r: &DescribeTransactionsRequest) -> DescribeTransactionsResponse {
        let transactions = r
            .transactional_ids
            .iter()
            .map(|id| {
                let mut d = DescribedTransaction {
                    error_code: ErrorCode::NONE,
                    transactional_id: id.clone(),
                    state: String::new(),
                    timeout_ms: 0,
                    start_ms: -1,
                    producer_id: -1,
                    producer_epoch: -1,
                    topics: Vec::new(),
                };
                if self.loading {
                    d.error_code = ErrorCode::COORDINATOR_LOAD_IN_PROGRESS;
                    return d;
                }
                let Some(v) = self.transaction(id) else {
                    d.error_code = ErrorCode::TRANSACTIONAL_ID_NOT_FOUND;
                    return d;
                };
                d.state = v.state.name().to_string();
                d.timeout_ms = v.timeout_ms;
                d.start_ms = v.start_ms;
                d.producer_id = v.producer_id;
                d.producer_epoch = v.producer_epoch;
                d.topics = group_by_topic(&partition_set(v))
                    .into_iter()
                    .map(|tp| (tp.topic, tp.partitions))
                    .collect();
                d
            })
            .collect();
        DescribeTransactionsResponse { transactions }
    }

    fn list(&self, r: &ListTransactionsRequest, now: Millis) -> ListTransactionsResponse {
        if self.loading {
            return ListTransactionsResponse {
                error_code: ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
                unknown_state_filters: Vec::new(),
                transactions: Vec::new(),
            };
        }
        let mut states = BTreeSet::new();
        let mut unknown_state_filters = Vec::new();
        for name in &r.state_filters {
            match TxnState::from_name(name) {
                Some(s) => {
                    states.insert(s);
                }
                None => unknown_state_filters.push(name.clone()),
            }
        }
        // Every filter named no state: nothing can match (Kafka answers an empty list).
        let none_can_match = !r.state_filters.is_empty() && states.is_empty();
        let pids: BTreeSet<i64> = r.producer_id_filters.iter().copied().collect();
        let transactions = self
            .entries
            .iter()
            .filter(|_| !none_can_match)
            .filter_map(|(id, e)| Some((id, e.durable.as_ref()?)))
            .filter(|(_, v)| states.is_empty() || states.contains(&v.state))
            .filter(|(_, v)| pids.is_empty() || pids.contains(&v.producer_id))
            .filter(|(_, v)| {
                // KIP-994: transactions running at least this long (only those started).
                r.duration_filter_ms < 0
                    || (v.start_ms >= 0 && now.saturating_sub(v.start_ms) >= r.duration_filter_ms)
            })
            .map(|(id, v)| ListedTransaction {
                transactional_id: id.clone(),
                producer_id: v.producer_id,
                state: v.state.name().to_string(),
            })
            .collect();
        ListTransactionsResponse {
            error_code: ErrorCode::NONE,
            unknown_state_filters,
            transactions,
        }
    }

    // ------------------------------------------------------------ transitions

    /// Fences the producer (epoch + 1) and aborts its open transaction in one record:
    /// PrepareEpochFence → PrepareAbort, as Kafka writes it (I35).
    fn fence_and_abort(&mut self, id: &str, now: Millis, completion: Completion) {
        let Some(current) = self.entries.get(id).and_then(|e| e.durable.as_ref()) else {
            return;
        };
        debug_assert!(current.state.can_transition_to(TxnState::PrepareEpochFence));
        let mut next = current.clone();
        next.producer_epoch = current.producer_epoch.saturating_add(1);
        next.state = TxnState::PrepareAbort;
        next.last_update_ms = now;
        next.next_producer_id = -1;
        self.append(id, Some(next), -1, completion);
    }

    /// Writes the markers of a durable Prepare record (I31, I36).
    fn start_markers(&mut self, id: &str, now: Millis) {
        let Some(current) = self.entries.get(id).and_then(|e| e.durable.as_ref()) else {
            return;
        };
        debug_assert!(
            current.state.is_prepare(),
            "I31: markers only after Prepare"
        );
        let partitions: Vec<TopicPartition> = partition_set(current).into_iter().collect();
        if partitions.is_empty() {
            self.markers_done(id, now);
            return;
        }
        self.emit_markers(id, partitions);
    }

    fn emit_markers(&mut self, id: &str, partitions: Vec<TopicPartition>) {
        let Some(current) = self.entries.get(id).and_then(|e| e.durable.as_ref()) else {
            return;
        };
        let result = match current.state {
            TxnState::PrepareCommit => TxnResult::Commit,
            TxnState::PrepareAbort => TxnResult::Abort,
            _ => return,
        };
        let marker_id = MarkerId(self.next_marker);
        self.next_marker += 1;
        self.markers.push_back(MarkerWrite {
            id: marker_id,
            transactional_id: id.to_string(),
            producer_id: current.producer_id,
            producer_epoch: current.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
            result,
            partitions,
        });
        self.markers_in_flight.insert(marker_id, id.to_string());
    }

    /// The broken variant [`crate::mutants::Mutant::MarkersBeforePrepareDurable`]: COMMIT
    /// markers emitted with the PrepareCommit record still in flight. Their id is not tracked,
    /// so their report is ignored and the correct path (markers again once the record is
    /// durable) carries on beside them.
    #[cfg(feature = "sim-mutants")]
    fn mutant_markers_before_prepare_durable(&mut self, id: &str, value: Option<&TxnLogValue>) {
        if !crate::mutants::active(crate::mutants::Mutant::MarkersBeforePrepareDurable) {
            return;
        }
        let Some(v) = value.filter(|v| v.state == TxnState::PrepareCommit) else {
            return;
        };
        let partitions: Vec<TopicPartition> = partition_set(v).into_iter().collect();
        if partitions.is_empty() {
            return;
        }
        let marker_id = MarkerId(self.next_marker);
        self.next_marker += 1;
        self.markers.push_back(MarkerWrite {
            id: marker_id,
            transactional_id: id.to_string(),
            producer_id: v.producer_id,
            producer_epoch: v.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
            result: TxnResult::Commit,
            partitions,
        });
    }

    fn retry_markers(&mut self, id: &str) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        if let Some(partitions) = entry.marker_retry.take() {
            self.emit_markers(id, partitions);
        }
    }

    /// Every marker is durable: append the Complete record (I32).
    fn markers_done(&mut self, id: &str, now: Millis) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        let Some(current) = entry.durable.clone() else {
            return;
        };
        if entry.pending.is_some() {
            return;
        }
        let Outcome::Transition(state) = decide(current.state, Event::MarkersWritten) else {
            return;
        };
        let mut next = current.clone();
        next.state = state;
        next.partitions = Some(Vec::new());
        next.last_update_ms = now;
        if current.next_producer_id != -1 {
            // The epoch ran out with this transaction: the next one uses the new id.
            next.previous_producer_id = current.producer_id;
            next.producer_id = current.next_producer_id;
            next.producer_epoch = 0;
            next.next_producer_id = -1;
        }
        let last_epoch = entry.last_epoch;
        self.append(id, Some(next), last_epoch, Completion::Complete);
    }

    fn abort_timed_out(&mut self, now: Millis) {
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.pending.is_none())
            .filter_map(|(id, e)| Some((id, e.durable.as_ref()?)))
            .filter(|(_, v)| {
                v.start_ms.saturating_add(i64::from(v.timeout_ms)) < now
                    && decide(v.state, Event::TimedOut) == Outcome::FenceAndAbort
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.fence_and_abort(&id, now, Completion::Background);
        }
    }

    fn expire_ids(&mut self, now: Millis) {
        let expiration = self.config.transactional_id_expiration_ms;
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| e.pending.is_none())
            .filter_map(|(id, e)| Some((id, e.durable.as_ref()?)))
            .filter(|(_, v)| {
                v.last_update_ms.saturating_add(expiration) <= now
                    && decide(v.state, Event::Expire) == Outcome::Transition(TxnState::Dead)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.append(&id, None, -1, Completion::Background);
        }
    }

    // ------------------------------------------------------------ plumbing

    /// Queues the record for `id`'s next transition (I33: at most one in flight per id).
    fn append(
        &mut self,
        id: &str,
        value: Option<TxnLogValue>,
        last_epoch: i16,
        completion: Completion,
    ) {
        let append_id = AppendId(self.next_append);
        self.next_append += 1;
        if let Some(entry) = self.entries.get_mut(id) {
            debug_assert!(entry.pending.is_none(), "I33: one append per id");
            entry.pending = Some(append_id);
        }
        if let (Some(v), Some(cur)) = (
            value.as_ref(),
            self.entries.get(id).and_then(|e| e.durable.as_ref()),
        ) {
            debug_assert!(
                cur.state.can_transition_to(v.state),
                "I30: {:?} → {:?}",
                cur.state,
                v.state
            );
        }
        let record = TxnRecord {
            key: TxnLogKey {
                transactional_id: id.to_string(),
            }
            .encode(),
            value: value.as_ref().map(TxnLogValue::encode),
        };
        self.appends.push_back(Append {
            id: append_id,
            record,
        });
        #[cfg(feature = "sim-mutants")]
        self.mutant_markers_before_prepare_durable(id, value.as_ref());
        self.pending.insert(
            append_id,
            PendingAppend {
                transactional_id: id.to_string(),
                value,
                last_epoch,
                completion,
            },
        );
    }

    /// The one place durable state changes (I34): at replay and when an append is durable.
    fn apply(&mut self, id: &str, value: Option<TxnLogValue>) {
        match value {
            None => {
                if let Some(entry) = self.entries.remove(id) {
                    // Never happens (an id is expired only with nothing held), but a held
                    // request is always answered.
                    for held in entry.held {
                        self.held_count = self.held_count.saturating_sub(1);
                        self.answer_completion(held.completion, ErrorCode::CONCURRENT_TRANSACTIONS);
                    }
                }
            }
            Some(v) => {
                let entry = self
                    .entries
                    .entry(id.to_string())
                    .or_insert_with(|| Entry::new(None));
                entry.durable = Some(v);
                entry.marker_retry = None;
            }
        }
    }

    fn batch_done(&mut self, token: RequestToken, index: usize, code: ErrorCode) {
        let Some(batch) = self.batches.get_mut(&token) else {
            return;
        };
        if let Some(result) = batch.results.get_mut(index) {
            for (_, c) in &mut result.partitions {
                *c = code;
            }
        }
        batch.waiting = batch.waiting.saturating_sub(1);
        if batch.waiting == 0 {
            if let Some(batch) = self.batches.remove(&token) {
                self.respond_batch(token, batch);
            }
        }
    }

    fn respond_batch(&mut self, token: RequestToken, batch: Batch) {
        self.respond(
            token,
            TxnResponse::AddPartitionsToTxn(AddPartitionsToTxnResponse {
                results: batch.results,
            }),
        );
    }

    fn respond(&mut self, token: RequestToken, response: TxnResponse) {
        self.responses.push_back((token, response));
    }
}

/// The producer id and epoch checks every request of an open transaction makes (I35).
fn check_producer(current: &TxnLogValue, producer_id: i64, epoch: i16) -> Result<(), ErrorCode> {
    if current.producer_id != producer_id {
        return Err(wrong_producer_id(current, producer_id));
    }
    if current.producer_epoch != epoch {
        return Err(ErrorCode::PRODUCER_FENCED);
    }
    Ok(())
}

/// A request with an unexpected producer id: the id the completing transaction hands over to
/// (after an epoch ran out) is told to retry; any other is not this id's producer.
fn wrong_producer_id(current: &TxnLogValue, producer_id: i64) -> ErrorCode {
    if current.state.is_prepare() && current.next_producer_id == producer_id {
        ErrorCode::CONCURRENT_TRANSACTIONS
    } else {
        ErrorCode::INVALID_PRODUCER_ID_MAPPING
    }
}

fn init_error(error_code: ErrorCode) -> TxnResponse {
    TxnResponse::InitProducerId(InitProducerIdResponse {
        error_code,
        producer_id: -1,
        producer_epoch: -1,
    })
}

fn end_error(error_code: ErrorCode) -> TxnResponse {
    TxnResponse::EndTxn(EndTxnResponse {
        error_code,
        producer_id: -1,
        producer_epoch: -1,
    })
}

/// The partitions of a stored value, as a set.
pub(super) fn partition_set(v: &TxnLogValue) -> BTreeSet<TopicPartition> {
    v.partitions
        .iter()
        .flatten()
        .flat_map(|tp| {
            tp.partitions
                .iter()
                .map(|p| TopicPartition::new(tp.topic.clone(), *p))
        })
        .collect()
}

/// A set of partitions as the record stores them: by topic, sorted.
fn group_by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for tp in partitions {
        match out.last_mut() {
            Some(last) if last.topic == tp.topic => last.partitions.push(tp.partition),
            _ => out.push(TopicPartitions {
                topic: tp.topic.clone(),
                partitions: vec![tp.partition],
            }),
        }
    }
    out
}

/// Whether `id` can be a transactional id: not empty, and short enough for the records'
/// string fields (at most `i16::MAX` bytes, Kafka's string bound), so that what is stored is
/// what replay reads back (I34).
fn valid_transactional_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= i16::MAX as usize
}
