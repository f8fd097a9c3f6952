//! What the simulated clients were promised, and the checks a partition's contents must pass.
//!
//! The model only advances on what the broker acknowledged (or what a restart showed
//! survived): with `flush.policy=fsync`, acks=1 and acks=all both wait for the sync, so every
//! acknowledged record must be present, exactly once, at its acknowledged offset after any
//! crash (I8). Records a restart shows are on disk count as durable from then on.

use std::collections::{BTreeMap, BTreeSet};

/// A partition: topic and index.
pub type TopicPartition = (String, i32);

/// The clients' view of what the broker promised.
#[derive(Debug, Default)]
pub struct Model {
    /// Per partition, offset → value of every record acknowledged (or seen surviving).
    pub acked: BTreeMap<TopicPartition, BTreeMap<i64, String>>,
    /// The inverse of `acked`: value → (partition, offset), so a duplicate ack is found
    /// without scanning the log.
    acked_at: BTreeMap<String, (TopicPartition, i64)>,
    /// Every value any client sent (values are unique: a repeat in a log is a duplicate).
    pub attempted: BTreeSet<String>,
    /// Partitions where a bit flip hit a sealed segment: records there may be lost (never
    /// served wrong).
    pub damaged: BTreeSet<TopicPartition>,
    /// Partitions under retention: records below the first one a full read finds may be
    /// gone (deleted whole segments), never those above it.
    pub retained: BTreeSet<TopicPartition>,
    /// Partitions written by transactional producers: their COMMIT and ABORT markers take
    /// offsets no data record holds, so a read skips them (the offsets are still dense in the
    /// log; the client does not surface control batches).
    pub with_markers: BTreeSet<TopicPartition>,
    /// The transactions and what readers saw of them.
    pub txns: crate::txn_model::TxnModel,
    /// Per (group, partition): the last committed offset acknowledged.
    commits_acked: BTreeMap<(String, TopicPartition), i64>,
    /// Per (group, partition): every offset a member tried to commit.
    commits_attempted: BTreeMap<(String, TopicPartition), BTreeSet<i64>>,
    /// Per (incarnation, group, generation): which member owns each partition.
    owners: BTreeMap<(u32, String, i32), BTreeMap<TopicPartition, String>>,
    /// Per partition: the latest acknowledgement (virtual time, offset), for the long-poll
    /// wakeup check.
    pub last_ack: BTreeMap<TopicPartition, (std::time::Duration, i64)>,
    /// Whether the scratch topic exists, by its last acknowledged create or delete (`None`:
    /// unknown: an outcome was lost, or a create or delete is in flight, which a crash may
    /// apply or not).
    pub scratch_exists: Option<bool>,
    /// Records acknowledged so far.
    pub acks: u64,
    /// Offset commits acknowledged so far.
    pub commits: u64,
    /// The first failure found.
    pub failure: Option<String>,
}

impl Model {
    /// Records `value` acknowledged at `offset`; a failure if that contradicts the model.
    pub fn ack(&mut self, tp: &TopicPartition, offset: i64, value: &str) -> Result<(), String> {
        self.acks += 1;
        let log = self.acked.entry(tp.clone()).or_default();
        if let Some(other) = log.get(&offset) {
            if other != value {
                return Err(format!(
                    "{tp:?}: offset {offset} acknowledged for {value:?} but already held {other:?}"
                ));
            }
        }
        if let Some((other_tp, o)) = self.acked_at.get(value) {
            if (other_tp, *o) != (tp, offset) {
                return Err(format!(
                    "{tp:?}: {value:?} acknowledged at {offset} and at {other_tp:?} {o} (a duplicate)"
                ));
            }
        }
        log.insert(offset, value.to_string());
        self.acked_at
            .insert(value.to_string(), (tp.clone(), offset));
        Ok(())
    }

    /// Records that `member` was given `partitions` in `generation` of `group`; a failure if
    /// another member already owns one of them in that generation.
    pub fn own(
        &mut self,
        incarnation: u32,
        group: &str,
        generation: i32,
        member: &str,
        partitions: &[TopicPartition],
    ) -> Result<(), String> {
        let owners = self
            .owners
            .entry((incarnation, group.to_string(), generation))
            .or_default();
        for tp in partitions {
            if let Some(other) = owners.get(tp) {
                if other != member {
                    return Err(format!(
                        "group {group} generation {generation}: {tp:?} owned by {other} and {member}"
                    ));
                }
            }
            owners.insert(tp.clone(), member.to_string());
        }
        Ok(())
    }

    /// The lowest offset a member may commit for `tp` (the last acknowledged, so commits
    /// never go backwards on purpose).
    pub fn committed_floor(&self, group: &str, tp: &TopicPartition) -> i64 {
        self.commits_acked
            .get(&(group.to_string(), tp.clone()))
            .copied()
            .unwrap_or(0)
    }

    /// Notes a commit of `offset` was sent (its outcome may stay unknown).
    pub fn commit_attempted(&mut self, group: &str, tp: &TopicPartition, offset: i64) {
        self.commits_attempted
            .entry((group.to_string(), tp.clone()))
            .or_default()
            .insert(offset);
    }

    /// Notes the broker acknowledged a commit of `offset`.
    pub fn commit_acked(&mut self, group: &str, tp: &TopicPartition, offset: i64) {
        self.commits += 1;
        let slot = self
            .commits_acked
            .entry((group.to_string(), tp.clone()))
            .or_insert(offset);
        *slot = (*slot).max(offset);
    }

    /// Whether any commit of `group` was acknowledged.
    pub fn has_commits(&self, group: &str) -> bool {
        self.commits_acked.keys().any(|(g, _)| g == group)
    }

    /// Checks a group's committed offsets as fetched: every acknowledged commit is there, at
    /// or above its acknowledged offset (never regressed), at an offset someone sent.
    pub fn check_commits(
        &self,
        group: &str,
        fetched: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), String> {
        for ((g, tp), acked) in &self.commits_acked {
            if g != group {
                continue;
            }
            let Some(&now) = fetched.get(tp) else {
                return Err(format!(
                    "group {group}: the commit of {acked} for {tp:?} is lost"
                ));
            };
            if now < *acked {
                return Err(format!(
                    "group {group}: {tp:?} committed offset regressed from {acked} to {now}"
                ));
            }
            let sent = self
                .commits_attempted
                .get(&(g.clone(), tp.clone()))
                .is_some_and(|s| s.contains(&now));
            if !sent {
                return Err(format!(
                    "group {group}: {tp:?} committed offset {now} was never sent"
                ));
            }
        }
        Ok(())
    }

    /// Checks records read from a partition (in offset order; `log_end` is `Some(end)` when
    /// they are the whole log from its start after a restart, `end` its high watermark) and,
    /// when complete, makes them the model.
    pub fn check_partition(
        &mut self,
        tp: &TopicPartition,
        records: &[(i64, String)],
        log_end: Option<i64>,
    ) -> Result<(), String> {
        let complete = log_end.is_some();
        let retained = self.retained.contains(tp);
        let with_markers = self.with_markers.contains(tp);
        // Under retention the log start may move while a read is under way: the reader then
        // jumps forward to the new start. Only a jump forward, and only there.
        let mut restarted_at = None;
        for pair in records.windows(2) {
            if retained && pair[1].0 > pair[0].0 + 1 {
                restarted_at = Some(pair[1].0);
                continue;
            }
            if with_markers && pair[1].0 > pair[0].0 {
                continue;
            }
            if pair[1].0 != pair[0].0 + 1 {
                return Err(format!(
                    "{tp:?}: offsets not dense: {} then {}",
                    pair[0].0, pair[1].0
                ));
            }
        }
        let mut seen: BTreeMap<&str, i64> = BTreeMap::new();
        for (offset, value) in records {
            if !self.attempted.contains(value) {
                return Err(format!(
                    "{tp:?}: offset {offset} holds {value:?}, never sent"
                ));
            }
            if let Some((other_tp, o)) = self.acked_at.get(value) {
                if (other_tp, *o) != (tp, *offset) {
                    return Err(format!(
                        "{tp:?}: offset {offset} holds {value:?}, acknowledged at {other_tp:?} {o}"
                    ));
                }
            }
            if let Some(first) = seen.insert(value, *offset) {
                return Err(format!(
                    "{tp:?}: {value:?} at {first} and again at {offset} (a duplicate)"
                ));
            }
        }
        let by_offset: BTreeMap<i64, &str> =
            records.iter().map(|(o, v)| (*o, v.as_str())).collect();
        let damaged = self.damaged.contains(tp);
        // Under retention, a complete read starts at the log start: what is below is gone.
        // An empty log starts at its end: retention never deletes the active segment, so an
        // acknowledged offset at or past the end is lost, never retained away (I8, I9).
        let log_start = match (restarted_at, records.first()) {
            _ if !retained => 0,
            (Some(o), _) => o,
            (None, Some((o, _))) => *o,
            (None, None) => log_end.unwrap_or(i64::MAX),
        };
        let acked = self.acked.entry(tp.clone()).or_default();
        for (offset, value) in acked.iter() {
            match by_offset.get(offset) {
                Some(v) if v == value => {}
                Some(v) => {
                    return Err(format!(
                        "{tp:?}: offset {offset} acknowledged as {value:?} but holds {v:?}"
                    ))
                }
                None if !complete || damaged || *offset < log_start => {}
                None => {
                    return Err(format!(
                        "{tp:?}: acknowledged record {value:?} at offset {offset} is lost \
                         (log has {} records, ends at {})",
                        records.len(),
                        log_end.unwrap_or(-1)
                    ))
                }
            }
        }
        if complete {
            // What survived is the model from now on (in a damaged partition, lost records
            // are forgotten and their offsets may be reused).
            for (offset, value) in acked.iter() {
                if by_offset.get(offset) != Some(&value.as_str()) {
                    self.acked_at.remove(value);
                }
            }
            *acked = records.iter().cloned().collect();
            for (offset, value) in records {
                self.acked_at.insert(value.clone(), (tp.clone(), *offset));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicPartition {
        ("t".to_string(), 0)
    }

    #[test]
    fn lost_duplicated_or_gapped_records_fail() {
        let mut m = Model::default();
        for v in ["a", "b", "c"] {
            m.attempted.insert(v.to_string());
        }
        m.ack(&tp(), 0, "a").expect("ack");
        m.ack(&tp(), 1, "b").expect("ack");
        let rec = |o: i64, v: &str| (o, v.to_string());
        assert!(
            m.check_partition(&tp(), &[rec(0, "a")], Some(1)).is_err(),
            "lost"
        );
        assert!(m
            .check_partition(&tp(), &[rec(0, "a"), rec(1, "b"), rec(2, "a")], Some(3))
            .is_err());
        assert!(m
            .check_partition(&tp(), &[rec(0, "a"), rec(2, "b")], Some(3))
            .is_err());
        assert!(m.check_partition(&tp(), &[rec(0, "x")], None).is_err());
        m.check_partition(&tp(), &[rec(0, "a"), rec(1, "b"), rec(2, "c")], Some(3))
            .expect("all there");
        assert!(m.ack(&tp(), 5, "a").is_err(), "acked twice at two offsets");
    }

    /// Under retention a complete read may start past acknowledged offsets (deleted
    /// segments), but an empty log ending at or below an acknowledged offset lost it.
    #[test]
    fn retained_partition_may_lose_a_prefix_never_its_tail() {
        let mut m = Model::default();
        m.retained.insert(tp());
        for v in ["a", "b", "c"] {
            m.attempted.insert(v.to_string());
        }
        for (o, v) in [(0, "a"), (1, "b"), (2, "c")] {
            m.ack(&tp(), o, v).expect("ack");
        }
        assert!(
            m.check_partition(&tp(), &[], Some(2)).is_err(),
            "an empty log ending at 2 lost offset 2"
        );
        m.check_partition(&tp(), &[(2, "c".to_string())], Some(3))
            .expect("a prefix retained away");
        m.check_partition(&tp(), &[], Some(3))
            .expect("everything below the end retained away");
    }
}
