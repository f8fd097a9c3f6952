//! A non-transactional idempotent producer's identity (Kafka's `enable.idempotence`, KIP-98
//! without transactions): a producer id and epoch, and each partition's next sequence number.
//!
//! Contract:
//! - Pure: no I/O. The driver asks InitProducerId (no transactional id: any broker answers it,
//!   so the bootstrap broker is asked) before the first record, and again after a batch failed.
//! - Every batch carries the id, epoch and its partition's next sequence (not the
//!   transactional bit). A batch a routed producer re-sends after a moved leader keeps them, so
//!   a broker that already wrote it answers with the first write's offset instead of writing it
//!   twice (I163).
//! - A batch that failed (not re-sent) leaves a gap in its partition's sequences: the next
//!   record asks for a new id, whose sequences start at 0. Batches sealed before that still
//!   carry the old id and may be refused (OUT_OF_ORDER_SEQUENCE), failing their records.

use super::sequences::Sequences;

/// Producer id, epoch and sequences of an idempotent, non-transactional producer.
#[derive(Debug)]
pub struct Idempotence {
    producer_id: i64,
    producer_epoch: i16,
    /// A batch failed: get a new producer id before the next record.
    renew: bool,
    next_sequence: Sequences,
}

impl Default for Idempotence {
    fn default() -> Self {
        Idempotence::new()
    }
}

impl Idempotence {
    /// No producer id yet.
    pub fn new() -> Self {
        Idempotence {
            producer_id: -1,
            producer_epoch: -1,
            renew: false,
            next_sequence: Sequences::default(),
        }
    }

    /// True when InitProducerId must run before the next record is accepted.
    pub fn needs_id(&self) -> bool {
        self.producer_id < 0 || self.renew
    }

    /// InitProducerId answered: a new id and epoch; sequences restart at 0.
    pub fn on_initialized(&mut self, producer_id: i64, producer_epoch: i16) {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.renew = false;
        self.next_sequence.clear();
    }

    /// A batch failed for good: its sequences are lost.
    pub fn on_batch_failed(&mut self) {
        self.renew = true;
    }

    /// Producer id and epoch (-1, -1 before initialisation).
    pub fn producer(&self) -> (i64, i16) {
        (self.producer_id, self.producer_epoch)
    }

    /// Takes the next `count` sequence numbers of `topic`/`partition`, returning the first.
    pub fn take_sequence(&mut self, topic: &str, partition: i32, count: i32) -> i32 {
        self.next_sequence.take(topic, partition, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_first_then_again_after_a_failed_batch_with_sequences_from_zero() {
        let mut m = Idempotence::new();
        assert!(m.needs_id());
        m.on_initialized(9, 0);
        assert!(!m.needs_id());
        assert_eq!(m.producer(), (9, 0));
        assert_eq!(m.take_sequence("a", 0, 3), 0);
        assert_eq!(m.take_sequence("a", 0, 2), 3);
        assert_eq!(m.take_sequence("a", 1, 1), 0);
        m.on_batch_failed();
        assert!(m.needs_id());
        m.on_initialized(10, 0);
        assert!(!m.needs_id());
        assert_eq!(m.take_sequence("a", 0, 1), 0);
    }
}
