//! Server-side assignors of the consumer protocol (KIP-848): given each member's subscribed
//! topics and the topics' partition counts, the target assignment of every member.
//!
//! - [`Assignor::Uniform`] (`uniform`, Kafka's default): every partition of a subscribed topic
//!   to exactly one subscribed member, sticky (a member keeps what it had in the previous
//!   target while that stays balanced), and balanced: when all members subscribe to the same
//!   topics their partition counts differ by at most one. With different subscriptions it moves
//!   partitions from the fullest member to the emptiest one that may take them until no such
//!   move narrows the gap by two or more.
//! - [`Assignor::Range`] (`range`): Kafka's `RangeAssignor`: per topic, its subscribed members
//!   sorted by member id each get a contiguous range of `partitions / members` partitions, the
//!   first `partitions % members` of them one more. Not sticky; co-partitioned topics land on
//!   the same members.
//!
//! Pure and deterministic: the same inputs give the same assignment (members and topics are
//! visited in sorted order), so a replayed group recomputes nothing differently.

use std::collections::{BTreeMap, BTreeSet};

use super::consumer_records::TopicId;

/// One member's target: topic → partitions.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// A server-side assignor (`group.consumer.assignors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Assignor {
    /// `uniform`: sticky and balanced.
    Uniform,
    /// `range`: contiguous ranges per topic, as Kafka's `RangeAssignor`.
    Range,
}

impl Assignor {
    /// The assignor a name selects (`uniform`, `range`), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    /// Its name on the wire and in configuration.
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// Computes the target of every member in `subscriptions` (member id → subscribed topic
    /// ids) over `topics` (topic id → partition count). `previous` is the last target, used for
    /// stickiness. Topics absent from `topics` are not assigned; every member gets an entry.
    pub fn assign(
        self,
        subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
        topics: &BTreeMap<TopicId, i32>,
        previous: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(subscriptions, topics, previous),
            Assignor::Range => range(subscriptions, topics),
        }
    }
}

fn range(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    topics: &BTreeMap<TopicId, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (&topic, &count) in topics {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, subs)| subs.contains(&topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() || count <= 0 {
            continue;
        }
        let n = members.len() as i32;
        let (per_member, extra) = (count / n, count % n);
        let mut start = 0;
        for (i, m) in members.iter().enumerate() {
            let len = per_member + i32::from((i as i32) < extra);
            if len > 0 {
                if let Some(a) = out.get_mut(*m) {
                    a.entry(topic).or_default().extend(start..start + len);
                }
            }
            start += len;
        }
    }
    out
}

fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    topics: &BTreeMap<TopicId, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let members: Vec<&String> = subscriptions.keys().collect();
    let mut owned: Vec<BTreeSet<(TopicId, i32)>> = vec![BTreeSet::new(); members.len()];
    let eligible = |m: usize, topic: &TopicId| subscriptions[members[m]].contains(topic);

    // 1. Keep what each member had, if it still subscribes and the partition still exists.
    let mut taken: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    for (i, m) in members.iter().enumerate() {
        if let Some(prev) = previous.get(*m) {
            for (topic, parts) in prev {
                let count = topics.get(topic).copied().unwrap_or(0);
                if !eligible(i, topic) {
                    continue;
                }
                for &p in parts {
                    if p >= 0 && p < count && taken.insert((*topic, p)) {
                        owned[i].insert((*topic, p));
                    }
                }
            }
        }
    }

    // 2. Give every free partition to the eligible member that owns the fewest.
    for (&topic, &count) in topics {
        for p in 0..count.max(0) {
            if taken.contains(&(topic, p)) {
                continue;
            }
            let best = (0..members.len())
                .filter(|&i| eligible(i, &topic))
                .min_by_key(|&i| owned[i].len());
            if let Some(i) = best {
                owned[i].insert((topic, p));
                taken.insert((topic, p));
            }
        }
    }

    // 3. Balance: move one partition from the fullest member to the emptiest member that may
    //    take it while that narrows a gap of two or more. Each move lowers the sum of squared
    //    sizes, so the loop ends; the bound is a belt over that argument.
    let max_moves = taken.len().saturating_mul(members.len().max(1));
    for _ in 0..max_moves {
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(owned[i].len()));
        let mut moved = false;
        'search: for &from in &order {
            for &to in order.iter().rev() {
                if owned[from].len() < owned[to].len() + 2 {
                    break;
                }
                let candidate = owned[from]
                    .iter()
                    .rev()
                    .find(|(topic, _)| eligible(to, topic))
                    .copied();
                if let Some(tp) = candidate {
                    owned[from].remove(&tp);
                    owned[to].insert(tp);
                    moved = true;
                    break 'search;
                }
            }
        }
        if !moved {
            break;
        }
    }

    members
        .iter()
        .zip(owned)
        .map(|(m, parts)| {
            let mut a = Assignment::new();
            for (topic, p) in parts {
                a.entry(topic).or_default().insert(p);
            }
            ((*m).clone(), a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(n: u8) -> TopicId {
        [n; 16]
    }

    fn subs(list: &[(&str, &[u8])]) -> BTreeMap<String, BTreeSet<TopicId>> {
        list.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|&t| tid(t)).collect()))
            .collect()
    }

    fn parts(a: &Assignment, t: u8) -> Vec<i32> {
        a.get(&tid(t))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    fn size(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn range_matches_kafka_range_assignor_example() {
        // Kafka's RangeAssignor documentation: C0 and C1, topics t0 and t1 with 3 partitions
        // each: C0 gets t0p0, t0p1, t1p0, t1p1; C1 gets t0p2, t1p2.
        let s = subs(&[("C0", &[0, 1]), ("C1", &[0, 1])]);
        let topics = BTreeMap::from([(tid(0), 3), (tid(1), 3)]);
        let out = Assignor::Range.assign(&s, &topics, &BTreeMap::new());
        assert_eq!(parts(&out["C0"], 0), vec![0, 1]);
        assert_eq!(parts(&out["C0"], 1), vec![0, 1]);
        assert_eq!(parts(&out["C1"], 0), vec![2]);
        assert_eq!(parts(&out["C1"], 1), vec![2]);
    }

    #[test]
    fn range_only_assigns_topics_to_their_subscribers() {
        let s = subs(&[("a", &[0]), ("b", &[0, 1]), ("c", &[1])]);
        let topics = BTreeMap::from([(tid(0), 5), (tid(1), 2)]);
        let out = Assignor::Range.assign(&s, &topics, &BTreeMap::new());
        assert_eq!(parts(&out["a"], 0), vec![0, 1, 2]);
        assert_eq!(parts(&out["b"], 0), vec![3, 4]);
        assert_eq!(parts(&out["b"], 1), vec![0]);
        assert_eq!(parts(&out["c"], 1), vec![1]);
        assert!(parts(&out["a"], 1).is_empty());
        assert!(parts(&out["c"], 0).is_empty());
    }

    #[test]
    fn range_with_more_members_than_partitions_leaves_the_last_empty() {
        let s = subs(&[("a", &[0]), ("b", &[0]), ("c", &[0])]);
        let topics = BTreeMap::from([(tid(0), 2)]);
        let out = Assignor::Range.assign(&s, &topics, &BTreeMap::new());
        assert_eq!(parts(&out["a"], 0), vec![0]);
        assert_eq!(parts(&out["b"], 0), vec![1]);
        assert!(out["c"].is_empty());
    }

    #[test]
    fn uniform_balances_homogeneous_subscriptions() {
        let s = subs(&[("a", &[0, 1]), ("b", &[0, 1]), ("c", &[0, 1])]);
        let topics = BTreeMap::from([(tid(0), 7), (tid(1), 3)]);
        let out = Assignor::Uniform.assign(&s, &topics, &BTreeMap::new());
        let sizes: Vec<usize> = out.values().map(size).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 10);
        assert!(sizes.iter().max().unwrap_or(&0) - sizes.iter().min().unwrap_or(&0) <= 1);
        let mut all = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(all.insert((*t, *p)), "partition assigned twice");
                }
            }
        }
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let two = subs(&[("a", &[0]), ("b", &[0])]);
        let topics = BTreeMap::from([(tid(0), 6)]);
        let before = Assignor::Uniform.assign(&two, &topics, &BTreeMap::new());
        let three = subs(&[("a", &[0]), ("b", &[0]), ("c", &[0])]);
        let after = Assignor::Uniform.assign(&three, &topics, &before);
        for m in ["a", "b"] {
            assert_eq!(size(&after[m]), 2);
            // Nothing moves between the two old members: each keeps a subset of what it had.
            assert!(parts(&after[m], 0)
                .iter()
                .all(|p| before[m][&tid(0)].contains(p)));
        }
        assert_eq!(size(&after["c"]), 2);
    }

    #[test]
    fn uniform_respects_heterogeneous_subscriptions() {
        // Only b may take topic 1; a and b share topic 0.
        let s = subs(&[("a", &[0]), ("b", &[0, 1])]);
        let topics = BTreeMap::from([(tid(0), 4), (tid(1), 4)]);
        let out = Assignor::Uniform.assign(&s, &topics, &BTreeMap::new());
        assert!(parts(&out["a"], 1).is_empty());
        assert_eq!(parts(&out["b"], 1), vec![0, 1, 2, 3]);
        assert_eq!(parts(&out["a"], 0), vec![0, 1, 2, 3]);
    }

    #[test]
    fn uniform_drops_partitions_of_unsubscribed_or_vanished_topics() {
        let s = subs(&[("a", &[0])]);
        let topics = BTreeMap::from([(tid(0), 2)]);
        let previous = BTreeMap::from([(
            "a".to_string(),
            BTreeMap::from([
                (tid(0), BTreeSet::from([0, 5])),
                (tid(1), BTreeSet::from([0])),
            ]),
        )]);
        let out = Assignor::Uniform.assign(&s, &topics, &previous);
        assert_eq!(parts(&out["a"], 0), vec![0, 1]);
        assert!(parts(&out["a"], 1).is_empty());
    }

    #[test]
    fn assignor_names_round_trip() {
        for a in [Assignor::Uniform, Assignor::Range] {
            assert_eq!(Assignor::from_name(a.name()), Some(a));
        }
        assert_eq!(Assignor::from_name("sticky"), None);
    }
}
