//! Client-side partition assignors of the classic protocol: `range` and `cooperative-sticky`.
//!
//! Contract:
//! - Inputs: every member's id, subscribed topics and (for cooperative-sticky) the partitions
//!   it owns and the generation they belong to; the partition count of each subscribed topic.
//! - Output: the partitions of each member, every member present (possibly with none), each
//!   partition given to at most one member (within a generation a partition
//!   has at most one owner).
//! - `range` (Kafka's RangeAssignor): per topic, members subscribed to it sorted by id; each gets
//!   `count / members` consecutive partitions and the first `count % members` one more. Eager:
//!   members revoke everything before they rejoin.
//! - `cooperative-sticky`: a balanced assignment that keeps as many owned partitions where they
//!   are as balance allows, then the cooperative rule: a partition that moves from one member
//!   to another is given to nobody in this round, so its owner revokes it and rejoins, and the
//!   follow-up rebalance hands it over. Balanced (counts differ by at most one) when members
//!   share one subscription; with different subscriptions it gives each free partition to the
//!   least loaded member subscribed to it.
//! - Pure: no I/O, no clock, deterministic for a given input.

use std::collections::{BTreeMap, BTreeSet};

use crate::consumer::TopicPartition;

/// The assignor names Kafka clients use in JoinGroup.
pub const RANGE: &str = "range";
/// See [`RANGE`].
pub const COOPERATIVE_STICKY: &str = "cooperative-sticky";

/// A partition assignment strategy of the classic protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Assignor {
    /// Kafka's `range`: eager rebalancing.
    Range,
    /// Kafka's `cooperative-sticky`: incremental (cooperative) rebalancing.
    CooperativeSticky,
}

impl Assignor {
    /// The protocol name sent in JoinGroup.
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => RANGE,
            Assignor::CooperativeSticky => COOPERATIVE_STICKY,
        }
    }

    /// The assignor called `name`, if this client has it.
    pub fn from_name(name: &str) -> Option<Assignor> {
        match name {
            RANGE => Some(Assignor::Range),
            COOPERATIVE_STICKY => Some(Assignor::CooperativeSticky),
            _ => None,
        }
    }

    /// Whether members keep their partitions through a rebalance (revoking only what moves).
    pub fn is_cooperative(self) -> bool {
        matches!(self, Assignor::CooperativeSticky)
    }

    /// Runs this assignor.
    pub fn assign(
        self,
        members: &[MemberSubscription],
        partition_counts: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Vec<TopicPartition>> {
        match self {
            Assignor::Range => range(members, partition_counts),
            Assignor::CooperativeSticky => cooperative_sticky(members, partition_counts),
        }
    }
}

/// One member as the leader sees it in the JoinGroup response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSubscription {
    /// Member id.
    pub member_id: String,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Partitions it owns as it joins.
    pub owned: Vec<TopicPartition>,
    /// The generation of `owned` (-1 when unknown).
    pub generation_id: i32,
}

fn empty_result(members: &[MemberSubscription]) -> BTreeMap<String, Vec<TopicPartition>> {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

/// Kafka's RangeAssignor.
pub fn range(
    members: &[MemberSubscription],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut out = empty_result(members);
    for (topic, &count) in partition_counts {
        let mut subscribed: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.iter().any(|t| t == topic))
            .map(|m| m.member_id.as_str())
            .collect();
        subscribed.sort_unstable();
        subscribed.dedup();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        let n = subscribed.len() as i32;
        let (per_member, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in subscribed.iter().enumerate() {
            let take = per_member + i32::from((i as i32) < extra);
            let list = out.entry((*member).to_string()).or_default();
            for p in next..next + take {
                list.push(TopicPartition::new(topic.clone(), p));
            }
            next += take;
        }
    }
    out
}

/// The cooperative-sticky assignment (see the module docs).
pub fn cooperative_sticky(
    members: &[MemberSubscription],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let target = sticky_balanced(members, partition_counts);
    // Who owns what now; a partition claimed twice goes to the claim of the newer generation.
    let mut owner: BTreeMap<&TopicPartition, (&str, i32)> = BTreeMap::new();
    for m in members {
        for tp in &m.owned {
            let claim = (m.member_id.as_str(), m.generation_id);
            match owner.get(tp) {
                Some((_, generation)) if *generation >= m.generation_id => {}
                _ => {
                    owner.insert(tp, claim);
                }
            }
        }
    }
    target
        .into_iter()
        .map(|(member, partitions)| {
            let kept = partitions
                .into_iter()
                .filter(|tp| match owner.get(tp) {
                    Some((current, _)) => *current == member,
                    None => true,
                })
                .collect();
            (member, kept)
        })
        .collect()
}

/// The balanced, sticky target assignment, before the cooperative rule.
fn sticky_balanced(
    members: &[MemberSubscription],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut out = empty_result(members);
    if members.is_empty() {
        return out;
    }
    let subscribed = |m: &MemberSubscription, topic: &str| m.topics.iter().any(|t| t == topic);
    let mut all: BTreeSet<TopicPartition> = BTreeSet::new();
    for (topic, &count) in partition_counts {
        if members.iter().any(|m| subscribed(m, topic)) {
            for p in 0..count.max(0) {
                all.insert(TopicPartition::new(topic.clone(), p));
            }
        }
    }
    let total = all.len();
    let member_count = out.len();
    let min_quota = total / member_count;
    let mut max_quota_slots = total % member_count;

    // Keep owned partitions (newest generation first when two members claim one) up to quota.
    let mut order: Vec<&MemberSubscription> = members.iter().collect();
    order.sort_by(|a, b| {
        b.generation_id
            .cmp(&a.generation_id)
            .then(a.member_id.cmp(&b.member_id))
    });
    let mut free = all.clone();
    for m in &order {
        let mut owned: Vec<&TopicPartition> = m
            .owned
            .iter()
            .filter(|tp| subscribed(m, &tp.topic) && free.contains(*tp))
            .collect();
        owned.sort();
        owned.dedup();
        let list = out.entry(m.member_id.clone()).or_default();
        if !list.is_empty() {
            continue; // a duplicate member id: its first entry wins
        }
        let mut quota = min_quota;
        if owned.len() > min_quota && max_quota_slots > 0 {
            quota += 1;
            max_quota_slots -= 1;
        }
        for tp in owned.into_iter().take(quota) {
            free.remove(tp);
            list.push(tp.clone());
        }
    }
    // Hand out the rest, each to the least loaded member subscribed to its topic.
    for tp in free {
        let choice = members
            .iter()
            .filter(|m| subscribed(m, &tp.topic))
            .map(|m| m.member_id.as_str())
            .min_by_key(|id| (out.get(*id).map_or(0, Vec::len), *id));
        if let Some(id) = choice {
            let id = id.to_string();
            out.entry(id).or_default().push(tp);
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str], owned: &[(&str, i32)]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned: owned
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
            generation_id: 1,
        }
    }

    fn counts(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
        list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn partitions_of(out: &BTreeMap<String, Vec<TopicPartition>>, id: &str) -> Vec<i32> {
        out[id].iter().map(|tp| tp.partition).collect()
    }

    /// No partition has two owners, and (unless some are held back) all are assigned.
    fn owners_are_unique(out: &BTreeMap<String, Vec<TopicPartition>>) -> usize {
        let mut seen = BTreeSet::new();
        for list in out.values() {
            for tp in list {
                assert!(seen.insert(tp.clone()), "{tp} assigned twice: {out:?}");
            }
        }
        seen.len()
    }

    #[test]
    fn range_splits_each_topic_in_consecutive_blocks() {
        let members = [member("b", &["t", "u"], &[]), member("a", &["t"], &[])];
        let out = range(&members, &counts(&[("t", 7), ("u", 2)]));
        assert_eq!(partitions_of(&out, "a"), vec![0, 1, 2, 3]);
        assert_eq!(out["b"].len(), 5); // t 4..6 and u 0..1
        assert!(out["b"].contains(&TopicPartition::new("u", 1)));
        assert_eq!(owners_are_unique(&out), 9);
    }

    #[test]
    fn cooperative_sticky_balances_a_fresh_group() {
        let members = [member("a", &["t"], &[]), member("b", &["t"], &[])];
        let out = cooperative_sticky(&members, &counts(&[("t", 6)]));
        assert_eq!(out["a"].len(), 3);
        assert_eq!(out["b"].len(), 3);
        assert_eq!(owners_are_unique(&out), 6);
    }

    #[test]
    fn cooperative_sticky_keeps_unmoved_partitions_and_holds_back_moving_ones() {
        // a owns everything; b joins. a keeps three, the other three are held back this round.
        let all: Vec<(&str, i32)> = (0..6).map(|p| ("t", p)).collect();
        let members = [member("a", &["t"], &all), member("b", &["t"], &[])];
        let first = cooperative_sticky(&members, &counts(&[("t", 6)]));
        assert_eq!(partitions_of(&first, "a"), vec![0, 1, 2]);
        assert!(first["b"].is_empty(), "{first:?}");
        // a revoked 3..5 and rejoins; now b gets them and a keeps its three.
        let kept: Vec<(&str, i32)> = (0..3).map(|p| ("t", p)).collect();
        let members = [member("a", &["t"], &kept), member("b", &["t"], &[])];
        let second = cooperative_sticky(&members, &counts(&[("t", 6)]));
        assert_eq!(partitions_of(&second, "a"), vec![0, 1, 2]);
        assert_eq!(partitions_of(&second, "b"), vec![3, 4, 5]);
    }

    #[test]
    fn a_leaving_member_s_partitions_go_to_the_rest_at_once() {
        let members = [
            member("a", &["t"], &[("t", 0), ("t", 1)]),
            member("c", &["t"], &[("t", 4), ("t", 5)]),
        ];
        let out = cooperative_sticky(&members, &counts(&[("t", 6)]));
        assert_eq!(owners_are_unique(&out), 6);
        assert!(out["a"].contains(&TopicPartition::new("t", 0)));
        assert!(out["c"].contains(&TopicPartition::new("t", 5)));
    }

    #[test]
    fn double_claims_and_unsubscribed_topics_are_resolved() {
        let mut old = member("a", &["t"], &[("t", 0), ("x", 0)]);
        old.generation_id = 1;
        let mut new = member("b", &["t"], &[("t", 0)]);
        new.generation_id = 2;
        let out = cooperative_sticky(&[old, new], &counts(&[("t", 2), ("x", 1)]));
        // b's newer claim wins t-0; x is nobody's subscription.
        assert_eq!(partitions_of(&out, "b"), vec![0]);
        assert_eq!(partitions_of(&out, "a"), vec![1]);
    }

    /// Over many shapes: unique owners, balance within one, and stickiness.
    #[test]
    fn cooperative_sticky_invariants_over_many_shapes() {
        for partitions in 0..13 {
            for member_count in 1..5usize {
                let ids: Vec<String> = (0..member_count).map(|i| format!("m{i}")).collect();
                // Start: everything owned by m0, then iterate rebalances to a fixed point.
                let mut owned: BTreeMap<String, Vec<TopicPartition>> = BTreeMap::new();
                owned.insert(
                    "m0".into(),
                    (0..partitions)
                        .map(|p| TopicPartition::new("t", p))
                        .collect(),
                );
                for _round in 0..3 {
                    let members: Vec<MemberSubscription> = ids
                        .iter()
                        .map(|id| MemberSubscription {
                            member_id: id.clone(),
                            topics: vec!["t".into()],
                            owned: owned.get(id).cloned().unwrap_or_default(),
                            generation_id: 1,
                        })
                        .collect();
                    let out = cooperative_sticky(&members, &counts(&[("t", partitions)]));
                    owners_are_unique(&out);
                    for (id, list) in &out {
                        // Nothing is taken from an owner and given elsewhere in one round.
                        for tp in list {
                            for (other, had) in &owned {
                                assert!(other == id || !had.contains(tp), "{tp} moved at once");
                            }
                        }
                    }
                    owned = out;
                }
                let sizes: Vec<usize> = owned.values().map(Vec::len).collect();
                let total: usize = sizes.iter().sum();
                assert_eq!(total, partitions as usize, "all assigned after two rounds");
                let (min, max) = (sizes.iter().min(), sizes.iter().max());
                assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{sizes:?}");
            }
        }
    }
}
