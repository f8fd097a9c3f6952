//! A driver for `core::txn::Coordinator` in tests: it plays the shard that owns the
//! `__transaction_state` partition (the log of durable records, appends held until the test
//! reports them) and the partitions' writers (markers held until reported), and checks on
//! every output what the coordinator promises about it:
//! - I31/I36: a polled marker write matches the latest *durable* record of its id, which is a
//!   Prepare record with the same producer id, epoch and result;
//! - I32: a Complete record is polled only after every partition of that Prepare record
//!   had its marker reported durable (since the Prepare record, or since the last load);
//! - every request is answered exactly once.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use minikafka_core::txn::records::{TxnLogKey, TxnLogValue};
use minikafka_core::txn::*;

/// One marker that reached a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenMarker {
    pub partition: TopicPartition,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TxnResult,
    pub coordinator_epoch: i32,
}

pub struct Driver {
    pub c: Coordinator,
    pub config: TxnConfig,
    pub now: Millis,
    pub coordinator_epoch: i32,
    /// Durable records, in log order.
    pub log: Vec<TxnRecord>,
    /// Appends polled and not yet reported, in poll order.
    pub held: VecDeque<(AppendId, TxnRecord)>,
    /// Marker writes polled and not yet reported.
    pub held_markers: VecDeque<MarkerWrite>,
    /// Every marker reported durable, in order.
    pub markers: Vec<WrittenMarker>,
    /// Per transactional id, the partitions whose markers are durable since its latest
    /// Prepare record became durable (or since the last load).
    pub marked_since_prepare: BTreeMap<String, BTreeSet<TopicPartition>>,
    pub answers: BTreeMap<u64, TxnResponse>,
    pub next_token: u64,
    pub next_producer_id: i64,
    /// When false the producer-id source has nothing ready.
    pub ids_ready: bool,
}

impl Driver {
    pub fn new(config: TxnConfig) -> Driver {
        let mut c = Coordinator::new(config.clone(), 1);
        c.handle_loaded(0);
        let mut d = Driver {
            c,
            config,
            now: 0,
            coordinator_epoch: 1,
            log: Vec::new(),
            held: VecDeque::new(),
            held_markers: VecDeque::new(),
            markers: Vec::new(),
            marked_since_prepare: BTreeMap::new(),
            answers: BTreeMap::new(),
            next_token: 0,
            next_producer_id: 1000,
            ids_ready: true,
        };
        d.drain();
        d
    }

    /// The latest durable value of `id` in the log (`None`: unknown or tombstoned).
    pub fn durable(&self, id: &str) -> Option<TxnLogValue> {
        let key = TxnLogKey {
            transactional_id: id.to_string(),
        }
        .encode();
        let record = self.log.iter().rev().find(|r| r.key == key)?;
        let value = record.value.as_ref()?;
        Some(TxnLogValue::decode(value).expect("own record decodes"))
    }

    /// Sends a request; returns its token.
    pub fn send(&mut self, request: TxnRequest) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        let ready = self.ids_ready;
        let mut next = self.next_producer_id;
        let mut ids = || {
            if ready {
                next += 1;
                Some(next - 1)
            } else {
                None
            }
        };
        self.c
            .handle_request(RequestToken(token), request, &mut ids, self.now);
        self.next_producer_id = next;
        self.drain();
        token
    }

    /// Sends a request and lets every append and marker succeed; returns its answer.
    pub fn call(&mut self, request: TxnRequest) -> TxnResponse {
        let token = self.send(request);
        self.settle();
        self.answers.get(&token).cloned().expect("answered")
    }

    /// Reports every held append and marker write as durable, until none is left.
    pub fn settle(&mut self) {
        for _ in 0..1000 {
            if self.held.is_empty() && self.held_markers.is_empty() {
                return;
            }
            while !self.held.is_empty() {
                self.complete_append(true);
            }
            while !self.held_markers.is_empty() {
                self.complete_markers(&[]);
            }
        }
        panic!("appends and markers never settle");
    }

    /// Reports the oldest held append.
    pub fn complete_append(&mut self, ok: bool) -> bool {
        let Some((id, record)) = self.held.pop_front() else {
            return false;
        };
        let result = if ok {
            self.log.push(record.clone());
            if let Some(value) = &record.value {
                let v = TxnLogValue::decode(value).expect("own record decodes");
                if v.state.is_prepare() {
                    let key = TxnLogKey::decode(&record.key).expect("key");
                    self.marked_since_prepare
                        .insert(key.transactional_id, BTreeSet::new());
                }
            }
            Ok(())
        } else {
            Err(AppendError::Storage)
        };
        self.c.handle_appended(id, result, self.now);
        self.drain();
        true
    }

    /// Reports the oldest held marker write; `fail` lists partitions that must be retried.
    pub fn complete_markers(&mut self, fail: &[TopicPartition]) -> bool {
        let Some(m) = self.held_markers.pop_front() else {
            return false;
        };
        for tp in &m.partitions {
            if fail.contains(tp) {
                continue;
            }
            self.markers.push(WrittenMarker {
                partition: tp.clone(),
                producer_id: m.producer_id,
                producer_epoch: m.producer_epoch,
                result: m.result,
                coordinator_epoch: m.coordinator_epoch,
            });
            self.marked_since_prepare
                .entry(m.transactional_id.clone())
                .or_default()
                .insert(tp.clone());
        }
        let retry: Vec<TopicPartition> = m
            .partitions
            .iter()
            .filter(|tp| fail.contains(tp))
            .cloned()
            .collect();
        self.c.handle_markers_written(m.id, retry, self.now);
        self.drain();
        true
    }

    /// Moves the clock and fires timers.
    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
        self.c.handle_timeout(self.now);
        self.drain();
    }

    /// A crash: appends and markers in flight are lost, answers pending are never sent; a new
    /// coordinator (next coordinator epoch) loads the durable log.
    pub fn crash(&mut self) {
        self.held.clear();
        self.held_markers.clear();
        self.coordinator_epoch += 1;
        self.c = self.reloaded(self.coordinator_epoch);
        // The new coordinator writes every prepared transaction's markers again.
        self.marked_since_prepare.clear();
        self.c.handle_loaded(self.now);
        self.drain();
    }

    /// A fresh coordinator that replayed the durable log (not yet `handle_loaded`).
    pub fn reloaded(&self, epoch: i32) -> Coordinator {
        let mut c = Coordinator::new(self.config.clone(), epoch);
        for r in &self.log {
            c.replay(&r.key, r.value.as_deref())
                .expect("own record replays");
        }
        c
    }

    /// Drains every output, checking the promises on each.
    pub fn drain(&mut self) {
        while let Some(a) = self.c.poll_append() {
            let key = TxnLogKey::decode(&a.record.key).expect("own key decodes");
            if let Some(value) = &a.record.value {
                let v = TxnLogValue::decode(value).expect("own value decodes");
                if matches!(v.state, TxnState::CompleteCommit | TxnState::CompleteAbort) {
                    // I32: Complete only after every marker of the durable Prepare record.
                    let prepare = self
                        .durable(&key.transactional_id)
                        .expect("a Complete record follows a durable Prepare record");
                    assert!(prepare.state.is_prepare(), "I32: {prepare:?}");
                    let owed = partitions_of(&prepare);
                    let marked = self
                        .marked_since_prepare
                        .get(&key.transactional_id)
                        .cloned()
                        .unwrap_or_default();
                    assert!(
                        owed.is_subset(&marked),
                        "I32: Complete before markers: owed {owed:?}, written {marked:?}"
                    );
                }
            }
            self.held.push_back((a.id, a.record));
        }
        while let Some(m) = self.c.poll_marker() {
            // I31, I36: the marker follows a durable Prepare record and carries its result.
            let prepare = self
                .durable(&m.transactional_id)
                .expect("I31: a marker without a durable record");
            let want = match prepare.state {
                TxnState::PrepareCommit => TxnResult::Commit,
                TxnState::PrepareAbort => TxnResult::Abort,
                other => panic!("I31: marker polled in durable state {other:?}"),
            };
            assert_eq!(m.result, want, "I36");
            assert_eq!(
                (m.producer_id, m.producer_epoch),
                (prepare.producer_id, prepare.producer_epoch),
                "I36"
            );
            assert_eq!(m.coordinator_epoch, self.coordinator_epoch);
            let owed = partitions_of(&prepare);
            assert!(m.partitions.iter().all(|tp| owed.contains(tp)));
            assert!(!m.partitions.is_empty());
            self.held_markers.push_back(m);
        }
        while let Some((token, response)) = self.c.poll_response() {
            let previous = self.answers.insert(token.0, response);
            assert!(previous.is_none(), "token {} answered twice", token.0);
        }
        if let Some((at, _)) = self.c.poll_timeout() {
            assert!(at > self.now, "a timer at or before now was left armed");
        }
    }

    /// I34: the coordinator's durable state equals the replay of the durable log.
    pub fn check_replay(&self) {
        let mut fresh = self.reloaded(self.coordinator_epoch);
        fresh.handle_loaded(self.now);
        assert_eq!(fresh.durable_state(), self.c.durable_state(), "I34");
    }
}

pub fn partitions_of(v: &TxnLogValue) -> BTreeSet<TopicPartition> {
    v.partitions
        .iter()
        .flatten()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.topic.clone(), *p))
        })
        .collect()
}

pub fn init(id: &str, timeout_ms: i32, expected: Option<(i64, i16)>) -> TxnRequest {
    TxnRequest::InitProducerId(InitProducerIdRequest {
        transactional_id: id.into(),
        transaction_timeout_ms: timeout_ms,
        expected,
    })
}

pub fn add(id: &str, pid: i64, epoch: i16, partitions: &[(&str, i32)]) -> TxnRequest {
    TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsTxn {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            verify_only: false,
            partitions: partitions
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
        }],
    })
}

pub fn verify(id: &str, pid: i64, epoch: i16, partitions: &[(&str, i32)]) -> TxnRequest {
    let TxnRequest::AddPartitionsToTxn(mut r) = add(id, pid, epoch, partitions) else {
        unreachable!()
    };
    r.transactions[0].verify_only = true;
    TxnRequest::AddPartitionsToTxn(r)
}

pub fn add_offsets(id: &str, pid: i64, epoch: i16, group: &str) -> TxnRequest {
    TxnRequest::AddOffsetsToTxn(AddOffsetsToTxnRequest {
        transactional_id: id.into(),
        producer_id: pid,
        producer_epoch: epoch,
        group_id: group.into(),
    })
}

pub fn end(id: &str, pid: i64, epoch: i16, commit: bool, version: i16) -> TxnRequest {
    TxnRequest::EndTxn(EndTxnRequest {
        transactional_id: id.into(),
        producer_id: pid,
        producer_epoch: epoch,
        committed: commit,
        version,
    })
}

pub fn init_answer(r: &TxnResponse) -> &InitProducerIdResponse {
    match r {
        TxnResponse::InitProducerId(r) => r,
        other => panic!("not an InitProducerId answer: {other:?}"),
    }
}

pub fn add_codes(r: &TxnResponse) -> Vec<minikafka_core::error_code::ErrorCode> {
    match r {
        TxnResponse::AddPartitionsToTxn(r) => r
            .results
            .iter()
            .flat_map(|t| t.partitions.iter().map(|(_, c)| *c))
            .collect(),
        other => panic!("not an AddPartitionsToTxn answer: {other:?}"),
    }
}

pub fn end_answer(r: &TxnResponse) -> &EndTxnResponse {
    match r {
        TxnResponse::EndTxn(r) => r,
        other => panic!("not an EndTxn answer: {other:?}"),
    }
}
