//! Which shard owns a partition.
//!
//! Contract:
//! - Input: a topic name, a partition index and the shard count.
//! - Output: the owning shard, `fnv1a_64(topic bytes ++ partition as 4 big-endian bytes) mod
//!   num_shards`. The hash is fixed here (not `std`'s randomly keyed hasher), so the same
//!   partition lands on the same shard across restarts with the same `num.shards`. Nothing on
//!   disk depends on the assignment: a restart with another `num.shards` only moves partitions.
//! - Never: allocates, reads state or fails (`num_shards` of 0 is treated as 1).

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

use minikafka_core::backend::ShardId;

/// The shard (0-based) that owns `partition` of `topic` among `num_shards` shards.
pub fn owner_shard(topic: &str, partition: i32, num_shards: usize) -> ShardId {
    let mut hash = FNV_OFFSET_BASIS;
    for byte in topic.bytes().chain(partition.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    ShardId((hash % num_shards.max(1) as u64) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_is_stable_and_in_range() {
        // Fixed values: a change of hash would move partitions between shards on upgrade.
        assert_eq!(owner_shard("t", 0, 1), ShardId(0));
        let a = owner_shard("orders", 3, 4);
        assert_eq!(a, owner_shard("orders", 3, 4));
        for p in 0..64 {
            assert!(owner_shard("orders", p, 3).0 < 3);
        }
        assert_eq!(owner_shard("x", 1, 0), ShardId(0));
    }

    #[test]
    fn partitions_spread_over_shards() {
        let mut seen = [0usize; 2];
        for p in 0..32 {
            seen[owner_shard("spread", p, 2).0] += 1;
        }
        assert!(seen[0] > 4 && seen[1] > 4, "{seen:?}");
    }
}
