//! Each partition's next sequence number for one producer id and epoch (KIP-98), shared by the
//! idempotent and the transactional producer: both restart at 0 with a new id or epoch.

use std::collections::HashMap;

/// The next sequence number of each `(topic, partition)` this producer id has written to.
#[derive(Debug, Default)]
pub struct Sequences {
    next: HashMap<(String, i32), i32>,
}

impl Sequences {
    /// A new producer id or epoch: every partition starts again at 0.
    pub fn clear(&mut self) {
        self.next.clear();
    }

    /// Takes the next `count` sequence numbers of `topic`/`partition`, returning the first.
    pub fn take(&mut self, topic: &str, partition: i32, count: i32) -> i32 {
        let next = self.next.entry((topic.to_string(), partition)).or_insert(0);
        let base = *next;
        // Sequences wrap at i32::MAX like Kafka's.
        *next = next.wrapping_add(count) & i32::MAX;
        base
    }
}
