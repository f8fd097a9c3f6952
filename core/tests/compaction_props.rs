//! Log compaction against a model (I1, I23).
//!
//! A log of segments (in memory, as the bytes the broker would write) takes keyed writes,
//! tombstones, segment rolls, the passing of time and cleanings driven by
//! `minikafka_core::compaction` exactly as the broker's cleaner drives it: choose the range,
//! build the key map within a budget (so several passes when the budget is small), filter
//! every batch below the pass end. The model is a list of `(offset, key, value, timestamp)`;
//! its cleaning up to a pass end keeps a record iff it is the latest of its key below the pass
//! end and not a tombstone past `delete.retention.ms`. After every step:
//! - the log read back (offsets, keys, values) equals the model: offsets preserved, order
//!   kept, superseded records and expired tombstones gone;
//! - every segment is valid stored bytes: each batch passes the stored validation rule and a
//!   sealed-segment recovery scan reads it to its end;
//! - the table (latest value per key, reading everything) equals the one of all writes.

use std::collections::BTreeMap;

use minikafka_core::compaction::choose::{choose, Due, SegmentFacts};
use minikafka_core::compaction::offset_map::{KeyOffsetMap, MapFull};
use minikafka_core::compaction::policy::CompactionConfig;
use minikafka_core::compaction::retain::{keep_record, TombstoneHorizon};
use minikafka_core::compaction::rewrite::{
    batch_records, filter_batch, FilterCounts, Filtered, UncompressedOnly,
};
use minikafka_core::record::{BatchBuilder, BatchIter, NewRecord, OffsetRule, ValidateOptions};
use minikafka_core::recovery::{scan_slice, ScanConfig, StopReason};
use minikafka_core::types::Offset;
use proptest::prelude::*;

const RETENTION_MS: i64 = 100;
const MAX_DECOMPRESSED: usize = 1 << 20;

#[derive(Clone, Debug)]
enum Op {
    /// One batch of `(key, value)` records; `None` values are tombstones.
    Write(Vec<(u8, Option<u8>)>),
    Roll,
    Advance(i64),
    Clean {
        budget_keys: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec((0u8..8, proptest::option::weighted(0.8, any::<u8>())), 1..5)
            .prop_map(Op::Write),
        2 => Just(Op::Roll),
        2 => (0i64..80).prop_map(Op::Advance),
        2 => (1usize..10).prop_map(|budget_keys| Op::Clean { budget_keys }),
    ]
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelRecord {
    offset: i64,
    key: u8,
    value: Option<u8>,
    timestamp_ms: i64,
}

struct Segment {
    base: Offset,
    next: Offset,
    batches: Vec<Vec<u8>>,
    max_timestamp_ms: i64,
}

struct Log {
    segments: Vec<Segment>,
    first_dirty: Offset,
    oldest_kept_tombstone_ms: Option<i64>,
}

impl Log {
    fn next_offset(&self) -> Offset {
        self.segments.last().expect("active").next
    }

    fn facts(&self) -> Vec<SegmentFacts> {
        let last = self.segments.len() - 1;
        self.segments
            .iter()
            .enumerate()
            .map(|(i, s)| SegmentFacts {
                base_offset: s.base,
                next_offset: s.next,
                size_bytes: s.batches.iter().map(|b| b.len() as u64).sum(),
                max_timestamp_ms: s.max_timestamp_ms,
                sealed: i < last,
            })
            .collect()
    }

    /// One cleaning as the broker's cleaner does it; returns the pass end, if it cleaned.
    fn clean(
        &mut self,
        budget_bytes: usize,
        config: &CompactionConfig,
        now_ms: i64,
    ) -> Option<Offset> {
        let plan = choose(
            &self.facts(),
            self.first_dirty,
            self.oldest_kept_tombstone_ms,
            config,
            now_ms,
        )
        .ok()?;
        let mut map = KeyOffsetMap::new(budget_bytes, plan.first_dirty);
        'build: for segment in &self.segments {
            for bytes in &segment.batches {
                let view = stored_view(bytes);
                if view.header.base_offset < plan.first_dirty {
                    continue;
                }
                if view.header.next_offset() > plan.end {
                    break 'build;
                }
                let decoded =
                    batch_records(&view, &mut UncompressedOnly, MAX_DECOMPRESSED).expect("decodes");
                if map.add_batch(decoded.keyed(), view.header.next_offset()) == Err(MapFull) {
                    break 'build;
                }
            }
        }
        let pass_end = map.pass_end();
        assert!(
            pass_end > plan.first_dirty || plan.due == Due::TombstoneExpired,
            "every pass makes progress"
        );
        let mut counts = FilterCounts::default();
        let horizon = TombstoneHorizon::at(now_ms, config.delete_retention_ms);
        for segment in &mut self.segments {
            let mut out = Vec::new();
            for bytes in segment.batches.drain(..) {
                let view = stored_view(&bytes);
                if view.header.next_offset() > pass_end {
                    out.push(bytes.clone());
                    continue;
                }
                let (filtered, batch_counts) =
                    filter_batch(&view, &mut UncompressedOnly, MAX_DECOMPRESSED, |f| {
                        keep_record(f, &map, horizon)
                    })
                    .expect("filters");
                counts.add(batch_counts);
                match filtered {
                    Filtered::Unchanged => out.push(bytes.clone()),
                    Filtered::Removed => {}
                    Filtered::Rewritten(new) => out.push(new),
                }
            }
            segment.batches = out;
        }
        self.first_dirty = pass_end;
        self.oldest_kept_tombstone_ms = counts.oldest_kept_tombstone_ms;
        Some(pass_end)
    }

    fn read_back(&self) -> Vec<ModelRecord> {
        let mut out = Vec::new();
        for segment in &self.segments {
            for bytes in &segment.batches {
                let view = stored_view(bytes);
                for record in view.records() {
                    let record = record.expect("record");
                    out.push(ModelRecord {
                        offset: view.header.base_offset.0 + record.offset_delta,
                        key: record.key.expect("keyed")[0],
                        value: record.value.map(|v| v[0]),
                        timestamp_ms: view.header.base_timestamp + record.timestamp_delta,
                    });
                }
            }
        }
        out
    }
}

fn stored_view(bytes: &[u8]) -> minikafka_core::record::BatchView<'_> {
    BatchIter::new(bytes)
        .with_options(ValidateOptions::stored())
        .next()
        .expect("one batch")
        .expect("valid stored batch")
}

fn model_clean(model: &mut Vec<ModelRecord>, pass_end: Offset, horizon_ms: i64) {
    let mut latest: BTreeMap<u8, i64> = BTreeMap::new();
    for r in model.iter().filter(|r| r.offset < pass_end.0) {
        latest.insert(r.key, r.offset);
    }
    model.retain(|r| {
        r.offset >= pass_end.0
            || (latest[&r.key] == r.offset && !(r.value.is_none() && r.timestamp_ms <= horizon_ms))
    });
}

fn table(records: &[ModelRecord]) -> BTreeMap<u8, u8> {
    let mut t = BTreeMap::new();
    for r in records {
        match r.value {
            Some(v) => t.insert(r.key, v),
            None => t.remove(&r.key),
        };
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn compacted_log_equals_the_model(
        ops in proptest::collection::vec(op(), 1..60),
        min_lag_ms in prop_oneof![Just(0i64), 0i64..60],
        ratio_ppm in prop_oneof![Just(0u32), 0u32..1_000_000],
    ) {
        let config = CompactionConfig {
            min_cleanable_dirty_ratio_ppm: ratio_ppm,
            min_compaction_lag_ms: min_lag_ms,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: RETENTION_MS,
        };
        let mut log = Log {
            segments: vec![Segment { base: Offset(0), next: Offset(0), batches: vec![], max_timestamp_ms: -1 }],
            first_dirty: Offset(0),
            oldest_kept_tombstone_ms: None,
        };
        let mut model: Vec<ModelRecord> = Vec::new();
        let mut all_writes: Vec<ModelRecord> = Vec::new();
        let mut now_ms = 1_000i64;
        for op in ops {
            match op {
                Op::Write(records) => {
                    let base = log.next_offset();
                    let keys: Vec<[u8; 1]> = records.iter().map(|(k, _)| [*k]).collect();
                    let values: Vec<Option<[u8; 1]>> = records.iter().map(|(_, v)| v.map(|v| [v])).collect();
                    let mut b = BatchBuilder::new();
                    for (i, key) in keys.iter().enumerate() {
                        b.push(&NewRecord {
                            key: Some(key),
                            value: values[i].as_ref().map(|v| &v[..]),
                            headers: vec![],
                            timestamp_ms: now_ms,
                        });
                        let r = ModelRecord { offset: base.0 + i as i64, key: key[0], value: values[i].map(|v| v[0]), timestamp_ms: now_ms };
                        model.push(r.clone());
                        all_writes.push(r);
                    }
                    let active = log.segments.last_mut().expect("active");
                    active.batches.push(b.build(base));
                    active.next = base.plus(records.len() as i64);
                    active.max_timestamp_ms = active.max_timestamp_ms.max(now_ms);
                }
                Op::Roll => {
                    let next = log.next_offset();
                    if log.segments.last().is_some_and(|s| s.next > s.base) {
                        log.segments.push(Segment { base: next, next, batches: vec![], max_timestamp_ms: -1 });
                    }
                }
                Op::Advance(ms) => now_ms += ms,
                Op::Clean { budget_keys } => {
                    // Keys are one byte: the budget holds `budget_keys` of them.
                    let budget = budget_keys * minikafka_core::compaction::offset_map::entry_cost_bytes(1);
                    if let Some(pass_end) = log.clean(budget, &config, now_ms) {
                        model_clean(&mut model, pass_end, now_ms - RETENTION_MS);
                    }
                }
            }
            prop_assert_eq!(log.read_back(), model.clone());
            prop_assert_eq!(table(&log.read_back()), table(&all_writes));
            // Every sealed segment reads back whole under the sealed-segment recovery rule.
            let sealed = log.segments.len() - 1;
            for segment in &log.segments[..sealed] {
                let bytes: Vec<u8> = segment.batches.concat();
                let out = scan_slice(ScanConfig {
                    base_offset: segment.base,
                    file_len_bytes: bytes.len() as u64,
                    index_interval_bytes: 64,
                    max_batch_bytes: 1 << 20,
                    expected_leader_epoch: 0,
                    window_bytes: 128,
                    offsets: OffsetRule::Compacted,
                }, &bytes);
                prop_assert_eq!(out.stop, StopReason::CleanEnd);
                prop_assert!(out.next_offset <= segment.next);
            }
        }
        // With time for every tombstone to expire and an ample budget, cleaning until idle
        // leaves at most one record per key in the sealed part, and no tombstone.
        now_ms += RETENTION_MS + 1 + min_lag_ms;
        let roll_base = log.next_offset();
        log.segments.push(Segment { base: roll_base, next: roll_base, batches: vec![], max_timestamp_ms: -1 });
        let eager = CompactionConfig { min_cleanable_dirty_ratio_ppm: 0, ..config };
        for _ in 0..100 {
            match log.clean(1 << 20, &eager, now_ms) {
                Some(pass_end) => model_clean(&mut model, pass_end, now_ms - RETENTION_MS),
                None => break,
            }
        }
        let back = log.read_back();
        prop_assert_eq!(&back, &model);
        let mut keys: Vec<u8> = back.iter().map(|r| r.key).collect();
        let count = keys.len();
        keys.dedup();
        keys.sort();
        keys.dedup();
        prop_assert_eq!(keys.len(), count, "one record per key");
        prop_assert!(back.iter().all(|r| r.value.is_some()), "tombstones gone");
        prop_assert_eq!(table(&back), table(&all_writes));
    }
}
