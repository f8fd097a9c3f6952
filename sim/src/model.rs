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
    /// Records acknowledged so far.
    pub acks: u64,
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

    /// Checks records read from a partition (in offset order, `complete` when they are the
    /// whole log from its start after a restart) and, when complete, makes them the model.
    pub fn check_partition(
        &mut self,
        tp: &TopicPartition,
        records: &[(i64, String)],
        complete: bool,
    ) -> Result<(), String> {
        for pair in records.windows(2) {
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
        let acked = self.acked.entry(tp.clone()).or_default();
        for (offset, value) in acked.iter() {
            match by_offset.get(offset) {
                Some(v) if v == value => {}
                Some(v) => {
                    return Err(format!(
                        "{tp:?}: offset {offset} acknowledged as {value:?} but holds {v:?}"
                    ))
                }
                None if !complete || damaged => {}
                None => {
                    return Err(format!(
                        "{tp:?}: acknowledged record {value:?} at offset {offset} is lost \
                         (log has {} records)",
                        records.len()
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
            m.check_partition(&tp(), &[rec(0, "a")], true).is_err(),
            "lost"
        );
        assert!(m
            .check_partition(&tp(), &[rec(0, "a"), rec(1, "b"), rec(2, "a")], true)
            .is_err());
        assert!(m
            .check_partition(&tp(), &[rec(0, "a"), rec(2, "b")], true)
            .is_err());
        assert!(m.check_partition(&tp(), &[rec(0, "x")], false).is_err());
        m.check_partition(&tp(), &[rec(0, "a"), rec(1, "b"), rec(2, "c")], true)
            .expect("all there");
        assert!(m.ack(&tp(), 5, "a").is_err(), "acked twice at two offsets");
    }
}
