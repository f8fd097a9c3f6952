//! The schema ids the built-in registry knows, shared with every shard's produce path for
//! `confluent.{key,value}.schema.validation` (I124).
//!
//! Contract:
//! - One set per broker ([`crate::server::shared::Shared::schema_ids`]), written only by the
//!   registry host (after its replay at startup, before any shard accepts connections, and
//!   after each write whose records are durable, I125), read by every partition's
//!   [`super::produced_batch::validate_produced`] under one short read lock per batch: a
//!   produce never parses the registry's state or the topic's settings.
//! - An id is in the set exactly when `GET /schemas/ids/{id}` answers it (soft-deleted
//!   versions keep their id; a permanent delete of its last version drops it).
//! - With the registry off the set stays empty, so a validating topic refuses every framed
//!   record (and the broker logs why at startup).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

/// A handle on the broker's set of known schema ids (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct KnownSchemaIds(Arc<RwLock<HashSet<i32>>>);

impl KnownSchemaIds {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the set with `ids`.
    pub fn replace(&self, ids: impl IntoIterator<Item = i32>) {
        let fresh: HashSet<i32> = ids.into_iter().collect();
        *self
            .0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh;
    }

    /// How many ids are known.
    pub fn len(&self) -> usize {
        self.0
            .read()
            .map_or_else(|p| p.into_inner().len(), |s| s.len())
    }

    /// Whether no id is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `check` with a lookup of the set, under one read lock.
    pub fn with_lookup<R>(&self, check: impl FnOnce(&dyn Fn(i32) -> bool) -> R) -> R {
        let set = self
            .0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        check(&|id| set.contains(&id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_is_seen_by_every_handle() {
        let ids = KnownSchemaIds::new();
        let other = ids.clone();
        assert!(other.is_empty());
        ids.replace([1, 2, 5]);
        assert_eq!(other.len(), 3);
        assert!(other.with_lookup(|known| known(5) && !known(3)));
        ids.replace([]);
        assert!(!other.with_lookup(|known| known(5)));
    }
}
