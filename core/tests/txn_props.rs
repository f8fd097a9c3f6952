//! Property tests of `core::txn::Coordinator`: random runs of three transactional producers
//! (InitProducerId with and without KIP-360 recovery, AddPartitionsToTxn, AddOffsetsToTxn,
//! verify-only checks, EndTxn v4 and v5 — some with stale epochs), appends and marker writes
//! that succeed, fail or are held, time jumps (timeout aborts, expiry), and crashes (appends
//! and markers in flight are lost; a new coordinator reloads the durable log). Checked:
//! - on every output, by the driver (`txn_common`): I31 (no marker before its Prepare record
//!   is durable), I36 (markers carry that record's producer id, epoch and result, so a
//!   committed transaction's markers are all COMMIT and an aborted one's all ABORT), I32 (the
//!   Complete record only after every marker), every request answered at most once;
//! - against a simple model of each producer (what it was told): a commit or abort answered
//!   NONE finds the durable Prepare record (or, for a retry, the Complete one) with exactly
//!   the partitions the producer was told it added;
//! - I35: along the durable log, each producer id's epoch never decreases, a producer id
//!   never moves to another transactional id, and a request whose epoch is behind the
//!   durable epoch is never answered NONE (except EndTxn v5's recognised retry);
//! - I134: an add sent while its transactional id was completing is answered NONE only
//!   after a Complete record of that id is durable (it was held, not refused);
//! - I34: after every step, a fresh coordinator fed the durable log has the same state;
//! - liveness: after the run, with every append and marker succeeding and the clock past
//!   every timeout, each request not lost to a crash is answered and no id is left prepared.

mod txn_common;

use std::collections::{BTreeMap, BTreeSet};

use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::records::{TxnLogKey, TxnLogValue};
use minikafka_core::txn::*;
use proptest::prelude::*;
use txn_common::*;

const IDS: [&str; 3] = ["t0", "t1", "t2"];
const TIMEOUT_MS: i32 = 20_000;

#[derive(Clone, Debug)]
enum Op {
    Init {
        id: usize,
        recover: bool,
    },
    Add {
        id: usize,
        parts: Vec<u8>,
        stale: bool,
    },
    AddOffsets {
        id: usize,
        group: u8,
    },
    Verify {
        id: usize,
        parts: Vec<u8>,
    },
    End {
        id: usize,
        commit: bool,
        v5: bool,
        stale: bool,
    },
    CompleteAppend {
        ok: bool,
    },
    CompleteMarkers {
        fail_first: bool,
    },
    Advance {
        ms: u32,
    },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    let parts = prop::collection::vec(0u8..6, 1..4);
    prop_oneof![
        3 => (id.clone(), any::<bool>()).prop_map(|(id, recover)| Op::Init { id, recover }),
        4 => (id.clone(), parts.clone(), prop::bool::weighted(0.15))
            .prop_map(|(id, parts, stale)| Op::Add { id, parts, stale }),
        1 => (id.clone(), 0u8..3).prop_map(|(id, group)| Op::AddOffsets { id, group }),
        1 => (id.clone(), parts).prop_map(|(id, parts)| Op::Verify { id, parts }),
        3 => (id, any::<bool>(), any::<bool>(), prop::bool::weighted(0.15))
            .prop_map(|(id, commit, v5, stale)| Op::End { id, commit, v5, stale }),
        6 => prop::bool::weighted(0.9).prop_map(|ok| Op::CompleteAppend { ok }),
        4 => prop::bool::weighted(0.2).prop_map(|fail_first| Op::CompleteMarkers { fail_first }),
        2 => (0u32..25_000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Crash),
    ]
}

fn partition(n: u8) -> TopicPartition {
    TopicPartition::new(
        if n.is_multiple_of(2) { "a" } else { "b" },
        i32::from(n / 2),
    )
}

/// What one producer was told.
#[derive(Clone, Debug, Default)]
struct Producer {
    /// Its producer id and epoch, from its last successful InitProducerId or EndTxn v5.
    ids: Option<(i64, i16)>,
    /// Partitions it was told are in its open transaction.
    added: BTreeSet<TopicPartition>,
}

/// What a request was, kept until its answer is checked.
#[derive(Clone, Debug)]
enum Sent {
    Init {
        id: usize,
    },
    Add {
        id: usize,
        epoch: i16,
        pid: i64,
        parts: Vec<TopicPartition>,
        /// The durable log's length when it was sent, and whether its transactional id was
        /// then completing (a Prepare record durable): such a request may be held (I134).
        sent_at: (usize, bool),
    },
    End {
        id: usize,
        epoch: i16,
        pid: i64,
        commit: bool,
        v5: bool,
    },
    Other,
}

struct Run {
    d: Driver,
    producers: Vec<Producer>,
    sent: BTreeMap<u64, Sent>,
    checked: BTreeSet<u64>,
    /// Tokens whose answers a crash lost.
    lost: BTreeSet<u64>,
    /// Per producer id: its transactional id and highest durable epoch (I35).
    durable_epochs: BTreeMap<i64, (String, i16)>,
    log_checked: usize,
}

impl Run {
    fn new() -> Run {
        let config = TxnConfig {
            max_transaction_timeout_ms: 60_000,
            abort_timed_out_interval_ms: 5_000,
            transactional_id_expiration_ms: 120_000,
            expiration_check_interval_ms: 30_000,
            retry_backoff_ms: 50,
            ..TxnConfig::default()
        };
        Run {
            d: Driver::new(config),
            producers: vec![Producer::default(); IDS.len()],
            sent: BTreeMap::new(),
            checked: BTreeSet::new(),
            lost: BTreeSet::new(),
            durable_epochs: BTreeMap::new(),
            log_checked: 0,
        }
    }

    /// The epoch a request uses: the producer's own, or (stale) one behind.
    fn ids_for(&self, id: usize, stale: bool) -> (i64, i16) {
        let (pid, epoch) = self.producers[id].ids.unwrap_or((999, 0));
        if stale {
            (pid, epoch.wrapping_sub(1))
        } else {
            (pid, epoch)
        }
    }

    /// The durable log's length now, and whether `id` is completing (I134).
    fn sent_at(&self, id: usize) -> (usize, bool) {
        let completing = self
            .d
            .durable(IDS[id])
            .is_some_and(|v| v.state.is_prepare());
        (self.d.log.len(), completing)
    }

    fn step(&mut self, op: &Op) {
        match op {
            Op::Init { id, recover } => {
                let expected = if *recover {
                    self.producers[*id].ids
                } else {
                    None
                };
                let t = self.d.send(init(IDS[*id], TIMEOUT_MS, expected));
                self.sent.insert(t, Sent::Init { id: *id });
            }
            Op::Add { id, parts, stale } => {
                let (pid, epoch) = self.ids_for(*id, *stale);
                let parts: Vec<TopicPartition> = parts.iter().map(|n| partition(*n)).collect();
                let named: Vec<(&str, i32)> = parts
                    .iter()
                    .map(|tp| (tp.topic.as_str(), tp.partition))
                    .collect();
                let sent_at = self.sent_at(*id);
                let t = self.d.send(add(IDS[*id], pid, epoch, &named));
                self.sent.insert(
                    t,
                    Sent::Add {
                        id: *id,
                        epoch,
                        pid,
                        parts,
                        sent_at,
                    },
                );
            }
            Op::AddOffsets { id, group } => {
                let (pid, epoch) = self.ids_for(*id, false);
                let group = format!("g{group}");
                let tp = TopicPartition::new(
                    CONSUMER_OFFSETS_TOPIC,
                    minikafka_core::group::group_partition(&group, 50),
                );
                let sent_at = self.sent_at(*id);
                let t = self.d.send(add_offsets(IDS[*id], pid, epoch, &group));
                self.sent.insert(
                    t,
                    Sent::Add {
                        id: *id,
                        epoch,
                        pid,
                        parts: vec![tp],
                        sent_at,
                    },
                );
            }
            Op::Verify { id, parts } => {
                let (pid, epoch) = self.ids_for(*id, false);
                let named: Vec<(String, i32)> = parts
                    .iter()
                    .map(|n| partition(*n))
                    .map(|tp| (tp.topic, tp.partition))
                    .collect();
                let named: Vec<(&str, i32)> = named.iter().map(|(t, p)| (t.as_str(), *p)).collect();
                let t = self.d.send(verify(IDS[*id], pid, epoch, &named));
                self.sent.insert(t, Sent::Other);
            }
            Op::End {
                id,
                commit,
                v5,
                stale,
            } => {
                let (pid, epoch) = self.ids_for(*id, *stale);
                let version = if *v5 { 5 } else { 4 };
                let t = self.d.send(end(IDS[*id], pid, epoch, *commit, version));
                self.sent.insert(
                    t,
                    Sent::End {
                        id: *id,
                        epoch,
                        pid,
                        commit: *commit,
                        v5: *v5,
                    },
                );
            }
            Op::CompleteAppend { ok } => {
                self.d.complete_append(*ok);
            }
            Op::CompleteMarkers { fail_first } => {
                let fail: Vec<TopicPartition> = match (fail_first, self.d.held_markers.front()) {
                    (true, Some(m)) => m.partitions.iter().take(1).cloned().collect(),
                    _ => Vec::new(),
                };
                self.d.complete_markers(&fail);
            }
            Op::Advance { ms } => self.d.advance(i64::from(*ms)),
            Op::Crash => {
                let answered: BTreeSet<u64> = self.d.answers.keys().copied().collect();
                for t in self.sent.keys() {
                    if !answered.contains(t) {
                        self.lost.insert(*t);
                    }
                }
                self.d.crash();
            }
        }
        self.check_log();
        self.check_answers();
        self.d.check_replay();
    }

    /// I35 along the durable log.
    fn check_log(&mut self) {
        for record in &self.d.log[self.log_checked..] {
            let key = TxnLogKey::decode(&record.key).expect("key");
            let Some(value) = &record.value else {
                continue;
            };
            let v = TxnLogValue::decode(value).expect("value");
            let entry = self
                .durable_epochs
                .entry(v.producer_id)
                .or_insert((key.transactional_id.clone(), v.producer_epoch));
            assert_eq!(
                entry.0, key.transactional_id,
                "I35: producer id {} moved to another transactional id",
                v.producer_id
            );
            assert!(
                v.producer_epoch >= entry.1,
                "I35: epoch of {} went back from {} to {}",
                v.producer_id,
                entry.1,
                v.producer_epoch
            );
            entry.1 = v.producer_epoch;
        }
        self.log_checked = self.d.log.len();
    }

    /// Checks each new answer against the model, and updates the model.
    fn check_answers(&mut self) {
        let new: Vec<(u64, TxnResponse)> = self
            .d
            .answers
            .iter()
            .filter(|(t, _)| !self.checked.contains(t))
            .map(|(t, r)| (*t, r.clone()))
            .collect();
        for (token, response) in new {
            self.checked.insert(token);
            let Some(sent) = self.sent.get(&token).cloned() else {
                continue;
            };
            match (sent, &response) {
                (Sent::Init { id }, TxnResponse::InitProducerId(r)) => {
                    if r.error_code == ErrorCode::NONE {
                        let v = self
                            .d
                            .durable(IDS[id])
                            .expect("I37: durable before answered");
                        assert_eq!(
                            (v.producer_id, v.producer_epoch),
                            (r.producer_id, r.producer_epoch)
                        );
                        assert_eq!(v.state, TxnState::Empty);
                        self.producers[id] = Producer {
                            ids: Some((r.producer_id, r.producer_epoch)),
                            added: BTreeSet::new(),
                        };
                    }
                }
                (
                    Sent::Add {
                        id,
                        epoch,
                        pid,
                        parts,
                        sent_at: (log_at_send, completing),
                    },
                    _,
                ) => {
                    let ok = match &response {
                        TxnResponse::AddPartitionsToTxn(_) => {
                            add_codes(&response).iter().all(|c| *c == ErrorCode::NONE)
                        }
                        TxnResponse::AddOffsetsToTxn(r) => r.error_code == ErrorCode::NONE,
                        other => panic!("answer {other:?}"),
                    };
                    if ok && completing {
                        // I134: sent while its id was completing, answered NONE only once
                        // a Complete record of that id is durable.
                        let completed = self.d.log[log_at_send..].iter().any(|r| {
                            TxnLogKey::decode(&r.key).expect("key").transactional_id == IDS[id]
                                && r.value.as_ref().is_some_and(|v| {
                                    let v = TxnLogValue::decode(v).expect("value");
                                    matches!(
                                        v.state,
                                        TxnState::CompleteCommit | TxnState::CompleteAbort
                                    )
                                })
                        });
                        assert!(completed, "I134: a held request answered before Complete");
                    }
                    if ok {
                        self.check_not_fenced(pid, epoch);
                        let v = self.d.durable(IDS[id]).expect("durable");
                        assert_eq!(v.state, TxnState::Ongoing);
                        assert!(parts.iter().all(|tp| partitions_of(&v).contains(tp)));
                        if self.producers[id].ids == Some((pid, epoch)) {
                            self.producers[id].added.extend(parts);
                        }
                    }
                }
                (
                    Sent::End {
                        id,
                        epoch,
                        pid,
                        commit,
                        v5,
                    },
                    TxnResponse::EndTxn(r),
                ) => {
                    if r.error_code != ErrorCode::NONE {
                        continue;
                    }
                    let v = self.d.durable(IDS[id]).expect("durable");
                    let current = self.producers[id].ids == Some((pid, epoch));
                    let want = matches!(
                        (commit, v.state),
                        (true, TxnState::PrepareCommit | TxnState::CompleteCommit)
                            | (false, TxnState::PrepareAbort | TxnState::CompleteAbort)
                    );
                    assert!(
                        want,
                        "EndTxn(commit={commit}) answered NONE in {:?}",
                        v.state
                    );
                    if v.state.is_prepare() && current {
                        // A first EndTxn: its Prepare record holds exactly what was added.
                        assert_eq!(partitions_of(&v), self.producers[id].added);
                    }
                    if !v5 {
                        self.check_not_fenced(pid, epoch);
                    } else {
                        let durable = self.durable_epochs.get(&pid).map_or(epoch, |e| e.1);
                        assert!(
                            i32::from(epoch) + 1 >= i32::from(durable)
                                || self
                                    .d
                                    .durable(IDS[id])
                                    .is_some_and(|v| v.previous_producer_id == pid),
                            "I35: EndTxn v5 with epoch {epoch} behind {durable}"
                        );
                        self.producers[id].ids = Some((r.producer_id, r.producer_epoch));
                    }
                    if current {
                        self.producers[id].added.clear();
                    }
                }
                (Sent::Other, _) => {}
                (sent, response) => panic!("{sent:?} answered with {response:?}"),
            }
        }
    }

    /// I35: a request answered NONE carried the producer's latest durable epoch.
    fn check_not_fenced(&self, pid: i64, epoch: i16) {
        if let Some((_, durable)) = self.durable_epochs.get(&pid) {
            assert_eq!(
                epoch, *durable,
                "I35: epoch {epoch} accepted behind {durable}"
            );
        }
    }

    /// Liveness: with everything succeeding and time moving past every timeout, all is
    /// answered and nothing stays prepared.
    fn finish(&mut self) {
        // Four rounds of 25 s: every open transaction passes its 20 s timeout and is aborted,
        // and (at 100 s) none has reached the 120 s expiration yet unless it was idle before.
        for _ in 0..4 {
            self.d.settle();
            self.d.advance(25_000);
            self.check_log();
            self.check_answers();
        }
        self.d.settle();
        self.check_log();
        self.check_answers();
        for t in self.sent.keys() {
            assert!(
                self.d.answers.contains_key(t) || self.lost.contains(t),
                "request {t} was never answered"
            );
        }
        for id in IDS {
            if let Some(v) = self.d.durable(id) {
                assert!(!v.state.is_prepare(), "{id} left in {:?}", v.state);
                assert_ne!(v.state, TxnState::Ongoing, "{id} never timed out");
            }
        }
        self.d.check_replay();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_runs_keep_the_coordinator_invariants(ops in prop::collection::vec(op(), 1..120)) {
        let mut run = Run::new();
        for op in &ops {
            run.step(op);
        }
        run.finish();
    }
}

/// A run that exercises every kind of step at least once, so the property above is not
/// vacuous: a transaction committed, one aborted by a fence, one by its timeout, markers
/// retried, a crash with a Prepare record durable, and expiry.
#[test]
fn a_run_through_every_path_keeps_the_invariants() {
    let mut run = Run::new();
    let ops = [
        Op::Init {
            id: 0,
            recover: false,
        },
        Op::CompleteAppend { ok: true },
        Op::Add {
            id: 0,
            parts: vec![0, 1, 2],
            stale: false,
        },
        Op::CompleteAppend { ok: true },
        Op::End {
            id: 0,
            commit: true,
            v5: true,
            stale: false,
        },
        Op::CompleteAppend { ok: true },
        Op::CompleteMarkers { fail_first: true },
        Op::Advance { ms: 100 },
        Op::CompleteMarkers { fail_first: false },
        Op::CompleteAppend { ok: true },
        Op::Init {
            id: 1,
            recover: false,
        },
        Op::CompleteAppend { ok: true },
        Op::Add {
            id: 1,
            parts: vec![3],
            stale: false,
        },
        Op::CompleteAppend { ok: true },
        Op::Init {
            id: 1,
            recover: true,
        },
        Op::CompleteAppend { ok: true },
        Op::Crash,
        Op::CompleteMarkers { fail_first: false },
        Op::CompleteAppend { ok: true },
        Op::Init {
            id: 2,
            recover: false,
        },
        Op::CompleteAppend { ok: true },
        Op::Add {
            id: 2,
            parts: vec![4],
            stale: false,
        },
        Op::CompleteAppend { ok: true },
        Op::Advance { ms: 25_000 },
        Op::CompleteAppend { ok: true },
        Op::Add {
            id: 0,
            parts: vec![5],
            stale: true,
        },
        Op::End {
            id: 2,
            commit: true,
            v5: false,
            stale: false,
        },
    ];
    for op in &ops {
        run.step(op);
    }
    let markers = run.d.markers.clone();
    assert!(markers.iter().any(|m| m.result == TxnResult::Commit));
    assert!(markers.iter().any(|m| m.result == TxnResult::Abort));
    let fenced = run.d.answers.values().filter(|r| match r {
        TxnResponse::AddPartitionsToTxn(_) => add_codes(r).contains(&ErrorCode::PRODUCER_FENCED),
        TxnResponse::EndTxn(r) => r.error_code == ErrorCode::PRODUCER_FENCED,
        _ => false,
    });
    assert!(
        fenced.count() >= 2,
        "the stale add and the timed-out commit are fenced"
    );
    run.finish();
    run.d.advance(200_000);
    run.d.settle();
    assert!(
        run.d.c.transactional_ids().is_empty(),
        "every idle id expired"
    );
}
