//! The mirror's progress and offset map (sans-IO): what is written to the target's progress
//! topic after each window of copied records, and how a source offset is translated into a
//! target offset from it.
//!
//! A window is the records of one partition copied and acknowledged together. Its record says:
//! - its exact runs: a source offset, the target offset it landed at, and how many records
//!   from there have consecutive offsets on both sides (`run`); inside a run the map is exact
//!   (I84), and a window has a new run after each gap in the source;
//! - `next_source`, where copying resumes after a restart, and `next_target`, the offset after
//!   the window's last record on the target: every source record at or after `next_source`
//!   lands at or after `next_target`.
//!
//! Offsets differ between source and target wherever the source has gaps (control records,
//! aborted transactions read with read_committed, compaction, a log start above zero) and
//! wherever a restart re-copied records (at-least-once). A translation never lands after a
//! record the consumer has not read: outside an exact run it falls back to the first target
//! offset after the run, so a consumer re-reads at most the records since that sync (I85).

use std::collections::BTreeMap;

use crate::consumer::TopicPartition;
use crate::error::{Error, Result};

/// Offset syncs kept in memory per partition; older ones are dropped (translations below the
/// oldest are refused, never guessed).
pub const MAX_SYNCS_PER_PARTITION: usize = 4096;
/// Format version at the head of every progress value.
const VERSION: &str = "1";

/// A pair of offsets known to correspond. With `run` > 0: the `run` source records from
/// `source` landed at the `run` target offsets from `target`, one offset apart on both sides.
/// With `run` == 0 (a window's end): every source record at or after `source` lands at or
/// after `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sync {
    /// Source offset.
    pub source: i64,
    /// Target offset of the same record.
    pub target: i64,
    /// Records of the exact run starting here (0 for a window's end).
    pub run: i64,
}

/// One progress record: a window of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The window's exact runs, in order (at most [`MAX_RUNS_PER_WINDOW`]; empty without records).
    pub runs: Vec<Sync>,
    /// Next source offset to copy.
    pub next_source: i64,
    /// Target offset after the window's last record (or the previous window's, without records).
    pub next_target: i64,
}

/// Runs kept per window: a source with more gaps in one window (a compacted topic) keeps the
/// first ones; translations inside the others fall back to the end of the run before (I85).
pub const MAX_RUNS_PER_WINDOW: usize = 32;

/// The key of a partition's progress record: `topic|partition` (`|` is not allowed in topic
/// names, so the split is unambiguous).
pub fn progress_key(tp: &TopicPartition) -> String {
    format!("{}|{}", tp.topic, tp.partition)
}

/// Parses a progress key; `None` for a key this mirror did not write.
pub fn parse_progress_key(key: &[u8]) -> Option<TopicPartition> {
    let text = std::str::from_utf8(key).ok()?;
    let (topic, partition) = text.rsplit_once('|')?;
    let partition: i32 = partition.parse().ok()?;
    if topic.is_empty() || partition < 0 {
        return None;
    }
    Some(TopicPartition::new(topic, partition))
}

impl Progress {
    /// The value written to the progress topic: `1 NEXT_S NEXT_T` then `SOURCE TARGET RUN` per
    /// run. Text: readable with `mk consume`.
    pub fn encode(&self) -> String {
        let mut out = format!("{VERSION} {} {}", self.next_source, self.next_target);
        for r in &self.runs {
            out.push_str(&format!(" {} {} {}", r.source, r.target, r.run));
        }
        out
    }

    /// Parses a value written by [`Progress::encode`]; anything else is an error (the topic is
    /// read from a broker: never trusted, never a panic, nothing sized by its content).
    pub fn decode(value: &[u8]) -> Result<Progress> {
        let bad = || {
            Error::Protocol(format!(
                "bad mirror progress value {:?}",
                String::from_utf8_lossy(&value[..value.len().min(200)])
            ))
        };
        let text = std::str::from_utf8(value).map_err(|_| bad())?;
        let mut fields = text.split_ascii_whitespace();
        if fields.next() != Some(VERSION) {
            return Err(bad());
        }
        let mut numbers = Vec::with_capacity(2 + 3 * MAX_RUNS_PER_WINDOW);
        for field in fields {
            if numbers.len() == 2 + 3 * MAX_RUNS_PER_WINDOW {
                return Err(bad());
            }
            numbers.push(
                field
                    .parse::<i64>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(bad)?,
            );
        }
        if numbers.len() < 2 || (numbers.len() - 2) % 3 != 0 {
            return Err(bad());
        }
        let progress = Progress {
            next_source: numbers[0],
            next_target: numbers[1],
            runs: numbers[2..]
                .chunks_exact(3)
                .map(|r| Sync {
                    source: r[0],
                    target: r[1],
                    run: r[2],
                })
                .collect(),
        };
        // Runs in order, each inside the window and before the next one.
        let mut floor = (0, 0);
        for r in &progress.runs {
            let (end_s, end_t) = (r.source.checked_add(r.run), r.target.checked_add(r.run));
            let (Some(end_s), Some(end_t)) = (end_s, end_t) else {
                return Err(bad());
            };
            if r.run < 1
                || r.source < floor.0
                || r.target < floor.1
                || end_s > progress.next_source
                || end_t > progress.next_target
            {
                return Err(bad());
            }
            floor = (end_s, end_t);
        }
        Ok(progress)
    }
}

/// A window being copied: the records of one partition, in order, with their target offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    runs: Vec<Sync>,
    last: Option<(i64, i64)>,
}

impl Window {
    /// Notes that source record `source` landed at target `target` (in copy order).
    pub fn push(&mut self, source: i64, target: i64) {
        let extends = self
            .last
            .is_some_and(|(ls, lt)| source == ls + 1 && target == lt + 1);
        let full = self.runs.len() >= MAX_RUNS_PER_WINDOW;
        match self.runs.last_mut() {
            // Once runs are capped, later records may belong to a run that was not kept: only
            // the last kept run's own continuation grows it.
            Some(run) if extends && (!full || run.source + run.run == source) => run.run += 1,
            Some(_) if extends || full => {}
            _ => self.runs.push(Sync {
                source,
                target,
                run: 1,
            }),
        }
        self.last = Some((source, target));
    }

    /// The progress record of this window, resuming at `next_source` (the consumer's position,
    /// which may be past the last record: control records) after a previous `next_target`.
    pub fn progress(&self, next_source: i64, previous_next_target: i64) -> Progress {
        Progress {
            runs: self.runs.clone(),
            next_source,
            next_target: self
                .last
                .map(|(_, t)| t + 1)
                .unwrap_or(previous_next_target)
                .max(previous_next_target),
        }
    }

    /// True when no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// One partition's known syncs, sorted by source offset, and where copying resumes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionMap {
    syncs: Vec<Sync>,
    /// Next source offset to copy, from the last progress applied.
    pub next_source: Option<i64>,
    /// Target offset after the last copied record.
    pub next_target: i64,
}

impl PartitionMap {
    fn push(&mut self, sync: Sync) {
        // A later window starting at or below an older sync supersedes it (a restart re-copied
        // those records elsewhere on the target).
        let keep = self.syncs.partition_point(|s| s.source < sync.source);
        self.syncs.truncate(keep);
        self.syncs.push(sync);
        if self.syncs.len() > MAX_SYNCS_PER_PARTITION {
            let excess = self.syncs.len() - MAX_SYNCS_PER_PARTITION;
            self.syncs.drain(..excess);
        }
    }

    /// Applies one progress record, in the order the progress topic holds them.
    pub fn apply(&mut self, progress: &Progress) {
        for run in &progress.runs {
            self.push(*run);
        }
        self.push(Sync {
            source: progress.next_source,
            target: progress.next_target,
            run: 0,
        });
        self.next_source = Some(progress.next_source);
        self.next_target = progress.next_target;
    }

    /// The target offset at which a consumer that committed source offset `committed` (the
    /// next record it would read) resumes without losing a record; `None` when the map does
    /// not reach that far back.
    pub fn translate(&self, committed: i64) -> Option<i64> {
        let index = self.syncs.partition_point(|s| s.source <= committed);
        let sync = self.syncs.get(index.checked_sub(1)?)?;
        let past = committed - sync.source;
        // Inside the run, exact; past it, the first target offset after the run (a record at
        // or before the next one the consumer has to read).
        Some(sync.target + past.min(sync.run))
    }

    /// The syncs held, oldest first.
    pub fn syncs(&self) -> &[Sync] {
        &self.syncs
    }
}

/// Every partition's map.
pub type OffsetMap = BTreeMap<TopicPartition, PartitionMap>;

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(map: &mut PartitionMap, pairs: &[(i64, i64)], next_source: i64) -> Progress {
        let mut w = Window::default();
        for &(s, t) in pairs {
            w.push(s, t);
        }
        let p = w.progress(next_source, map.next_target);
        map.apply(&p);
        p
    }

    #[test]
    fn progress_round_trips_and_garbage_is_refused() {
        let p = Progress {
            runs: vec![
                Sync {
                    source: 10,
                    target: 3,
                    run: 2,
                },
                Sync {
                    source: 14,
                    target: 5,
                    run: 4,
                },
            ],
            next_source: 20,
            next_target: 9,
        };
        assert_eq!(Progress::decode(p.encode().as_bytes()).expect("decode"), p);
        let empty = Progress {
            runs: Vec::new(),
            next_source: 5,
            next_target: 5,
        };
        assert_eq!(
            Progress::decode(empty.encode().as_bytes()).expect("decode"),
            empty
        );
        let too_many = format!("1 1000 1000{}", " 0 0 1".repeat(MAX_RUNS_PER_WINDOW + 1));
        for bad in [
            &b""[..],
            b"1",
            b"1 5",
            b"2 5 5",
            b"1 5 5 1",
            b"1 5 5 1 1",
            b"1 -1 5",
            b"1 6 6 0 0 0",
            b"1 6 6 0 0 9",
            b"1 6 6 5 5 2",
            b"1 6 6 2 2 1 1 1 1",
            b"1 6 6 x 1 1",
            b"1 99999999999999999999 1",
            b"1 9223372036854775807 9223372036854775807 9223372036854775807 1 1",
            b"\xff\xfe",
            too_many.as_bytes(),
        ] {
            assert!(Progress::decode(bad).is_err(), "{bad:?}");
        }
        let tp = TopicPartition::new("a.b-c", 7);
        assert_eq!(parse_progress_key(progress_key(&tp).as_bytes()), Some(tp));
        assert_eq!(parse_progress_key(b"nopartition"), None);
        assert_eq!(parse_progress_key(b"|3"), None);
        assert_eq!(parse_progress_key(b"t|-1"), None);
    }

    #[test]
    fn identical_offsets_translate_exactly() {
        let mut map = PartitionMap::default();
        copy(&mut map, &[(0, 0), (1, 1), (2, 2)], 3);
        copy(&mut map, &[(3, 3), (4, 4)], 5);
        for c in 0..=5 {
            assert_eq!(map.translate(c), Some(c), "I84: offset {c}");
        }
        // Past what was copied: the target's next offset (the consumer re-reads nothing it
        // read, loses nothing).
        assert_eq!(map.translate(9), Some(5));
    }

    #[test]
    fn gaps_never_translate_past_an_unread_record() {
        // Source 0..=2 then a gap (a commit marker at 3, an aborted record at 4), then 5, 6.
        let mut map = PartitionMap::default();
        copy(&mut map, &[(0, 0), (1, 1), (2, 2), (5, 3), (6, 4)], 8);
        assert_eq!(map.translate(0), Some(0));
        assert_eq!(map.translate(2), Some(2));
        // Committed 3 or 5 (next to read is 5, at target 3); committed 6 is inside the second
        // run: exact (I84).
        assert_eq!(map.translate(3), Some(3));
        assert_eq!(map.translate(5), Some(3));
        assert_eq!(map.translate(6), Some(4));
        assert_eq!(map.translate(7), Some(5));
        // The window's end is exact again.
        assert_eq!(map.translate(8), Some(5));
    }

    #[test]
    fn a_window_with_more_gaps_than_runs_stays_safe() {
        // Every other source offset is missing (a compacted topic): 100 records, 100 gaps.
        let pairs: Vec<(i64, i64)> = (0..100).map(|i| (2 * i, i)).collect();
        let mut map = PartitionMap::default();
        let p = copy(&mut map, &pairs, 200);
        assert_eq!(p.runs.len(), MAX_RUNS_PER_WINDOW);
        assert_eq!(Progress::decode(p.encode().as_bytes()).expect("decode"), p);
        for c in 0..=200 {
            let exact = (c + 1) / 2; // the target offset of the first source record >= c
            let t = map.translate(c).expect("inside the map");
            assert!(
                t <= exact,
                "committed {c}: {t} would skip records (exact {exact})"
            );
            if c < 2 * MAX_RUNS_PER_WINDOW as i64 - 1 || c == 200 {
                assert_eq!(t, exact, "committed {c}");
            }
        }
    }

    #[test]
    fn a_restart_that_recopied_records_supersedes_the_old_syncs() {
        let mut map = PartitionMap::default();
        copy(&mut map, &[(0, 0), (1, 1)], 2);
        // Records 2..=3 landed at 2..=3 but their progress was lost (kill -9); the restart
        // copies them again at 4..=5.
        copy(&mut map, &[(2, 4), (3, 5)], 4);
        assert_eq!(map.translate(1), Some(1));
        assert_eq!(map.translate(2), Some(4));
        assert_eq!(map.translate(3), Some(5));
        assert_eq!(map.translate(4), Some(6));
    }

    #[test]
    fn below_the_oldest_sync_nothing_is_guessed() {
        let mut map = PartitionMap::default();
        copy(&mut map, &[(100, 0)], 101);
        assert_eq!(map.translate(99), None);
        assert_eq!(map.translate(100), Some(0));
        let mut map = PartitionMap::default();
        for i in 0..(MAX_SYNCS_PER_PARTITION as i64) {
            copy(&mut map, &[(2 * i, i)], 2 * i + 1);
        }
        assert!(map.syncs().len() <= MAX_SYNCS_PER_PARTITION);
        assert_eq!(map.translate(0), None);
    }

    #[test]
    fn an_empty_window_keeps_the_target_end() {
        let mut map = PartitionMap::default();
        copy(&mut map, &[(0, 0)], 1);
        // Only a control record came (position 1 -> 2): records from 2 land at or after 1.
        let p = copy(&mut map, &[], 2);
        assert_eq!((p.runs.len(), p.next_source, p.next_target), (0, 2, 1));
        assert_eq!(map.translate(2), Some(1));
        assert_eq!(map.next_source, Some(2));
    }
}
