//! Kafka's default partitioner: murmur2 of the key for keyed records, sticky for keyless ones.
//!
//! Contract:
//! - Inputs: a key (or none), the topic's partition count, and for keyless records a source of
//!   randomness the caller seeds.
//! - Outputs: a partition in `0..partition_count`.
//! - Keyed records land exactly where the Java client puts them:
//!   `toPositive(Utils.murmur2(key)) % numPartitions` with Java's murmur2 (seed `0x9747b28c`,
//!   little-endian 4-byte words, signed 32-bit arithmetic). An empty key is a key (it hashes);
//!   only a null key is keyless.
//! - Keyless records stick to one partition until the batch for it is sealed, then move to
//!   another (KIP-480), so they fill batches instead of spraying one record per partition.
//! - Never: performs I/O or reads a clock.

use std::collections::HashMap;

/// Java's `Utils.murmur2`: the 32-bit murmur2 hash Kafka uses to partition keys.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // Java's switch with fall-through over the 1..3 trailing bytes.
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Java's `Utils.toPositive`: clears the sign bit (not `abs`, which overflows on `i32::MIN`).
pub fn to_positive(number: i32) -> i32 {
    number & 0x7fff_ffff
}

/// The partition Kafka's default partitioner picks for `key` among `partition_count`.
///
/// Panics if `partition_count` is not positive (a topic always has a partition).
pub fn partition_for_key(key: &[u8], partition_count: i32) -> i32 {
    assert!(partition_count > 0, "a topic has at least one partition");
    to_positive(murmur2(key)) % partition_count
}

/// Chooses partitions for records: murmur2 for keyed ones, sticky for keyless ones.
#[derive(Debug)]
pub struct Partitioner {
    sticky: HashMap<String, i32>,
    rng_state: u64,
}

impl Partitioner {
    /// A partitioner whose keyless choices are drawn from a generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Partitioner {
            sticky: HashMap::new(),
            // xorshift must not start at zero.
            rng_state: seed | 1,
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: plenty for spreading keyless records.
        let mut x = self.rng_state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng_state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The partition for a record of `topic` with `key`, among `partition_count` partitions.
    pub fn partition(&mut self, topic: &str, key: Option<&[u8]>, partition_count: i32) -> i32 {
        match key {
            Some(key) => partition_for_key(key, partition_count),
            None => {
                if let Some(&p) = self.sticky.get(topic) {
                    if p < partition_count {
                        return p;
                    }
                }
                let p = (self.next_random() % partition_count.max(1) as u64) as i32;
                self.sticky.insert(topic.to_string(), p);
                p
            }
        }
    }

    /// Tells the partitioner that the batch of `topic`/`partition` was sealed: if keyless
    /// records were sticking to it, the next keyless record moves to a different partition.
    pub fn on_batch_sealed(&mut self, topic: &str, partition: i32, partition_count: i32) {
        if self.sticky.get(topic) != Some(&partition) {
            return;
        }
        let next = if partition_count > 1 {
            let offset = 1 + (self.next_random() % (partition_count as u64 - 1)) as i32;
            (partition + offset) % partition_count
        } else {
            0
        };
        self.sticky.insert(topic.to_string(), next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from Kafka's `UtilsTest.testMurmur2` (clients/src/test/java/org/apache/kafka/
    /// common/utils/UtilsTest.java), the Java implementation's own test.
    #[test]
    fn murmur2_matches_java_utils_test_vectors() {
        let cases: [(&str, i32); 6] = [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            ("abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()), expected, "murmur2({input:?})");
        }
    }

    /// More vectors computed with Kafka's `Utils.murmur2` (quoted by Akka's Murmur2Spec, which
    /// checks its port against the Java implementation); they cover every tail length.
    #[test]
    fn murmur2_matches_java_for_every_tail_length() {
        let cases: [(&str, i32); 5] = [
            ("1", -1_993_445_489),
            ("12", 126_087_238),
            ("123", -267_702_483),
            ("1234", -1_614_185_708),
            ("12345", -1_188_365_604),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input.as_bytes()), expected, "murmur2({input:?})");
        }
    }

    /// The empty key: Java's loop and switch do nothing, leaving only the final mix of
    /// `seed ^ 0`. Computed independently here with the same steps written out.
    #[test]
    fn murmur2_of_empty_key_is_the_mixed_seed() {
        let m: u32 = 0x5bd1_e995;
        let mut h: u32 = 0x9747_b28c;
        h ^= h >> 13;
        h = h.wrapping_mul(m);
        h ^= h >> 15;
        assert_eq!(murmur2(b""), h as i32);
        assert_eq!(murmur2(b""), 275_646_681);
        // An empty key is still a key: it always lands on the same partition.
        assert_eq!(partition_for_key(b"", 7), 275_646_681 % 7);
    }

    #[test]
    fn to_positive_clears_the_sign_bit_like_java() {
        assert_eq!(to_positive(-1), i32::MAX);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(5), 5);
        // -973932308 & 0x7fffffff = 1173551340 (Java: Utils.toPositive).
        assert_eq!(to_positive(-973_932_308), 1_173_551_340);
        assert_eq!(partition_for_key(b"21", 10), 1_173_551_340 % 10);
    }

    #[test]
    fn keyed_records_ignore_stickiness() {
        let mut p = Partitioner::new(42);
        for _ in 0..3 {
            assert_eq!(
                p.partition("t", Some(b"foobar"), 6),
                partition_for_key(b"foobar", 6)
            );
        }
    }

    #[test]
    fn keyless_records_stick_until_the_batch_is_sealed() {
        let mut p = Partitioner::new(7);
        let first = p.partition("t", None, 4);
        assert!((0..4).contains(&first));
        for _ in 0..10 {
            assert_eq!(p.partition("t", None, 4), first);
        }
        // Sealing another partition's batch does not move the sticky partition.
        p.on_batch_sealed("t", (first + 1) % 4, 4);
        assert_eq!(p.partition("t", None, 4), first);
        p.on_batch_sealed("t", first, 4);
        let second = p.partition("t", None, 4);
        assert_ne!(second, first, "a sealed batch moves keyless records on");
        assert!((0..4).contains(&second));
        // One partition: always 0.
        p.on_batch_sealed("u", 0, 1);
        assert_eq!(p.partition("u", None, 1), 0);
        p.on_batch_sealed("u", 0, 1);
        assert_eq!(p.partition("u", None, 1), 0);
    }
}
