//! The built-in schema registry's counts for the metrics endpoint: its HTTP requests by
//! method, endpoint and status, and how many schemas and subjects it holds.
//!
//! Contract:
//! - One per broker (`Shared::schema_registry_metrics`), written by the registry's listener
//!   (one short lock per HTTP request, never on the Kafka path) and its host (the gauges,
//!   after the replay and after each write), read by a scrape ([`RegistryMetrics::snapshot`]).
//! - Bounded cardinality (I126): the endpoint is the route's template
//!   (`minikafka_schema::rest::endpoint_template`, never the raw path), the method one of the
//!   API's four or `other`, the status one the listener answers.
//! - Reported only once the registry is loaded (a broker without a registry has no lines).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Requests by `(method, endpoint, status)`.
pub type RequestCounts = BTreeMap<(&'static str, &'static str, u16), u64>;

/// What a scrape reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistrySnapshot {
    /// Requests answered, by `(method, endpoint, status)`.
    pub requests: RequestCounts,
    /// Schemas stored (each id once).
    pub schemas: u64,
    /// Subjects with a live version.
    pub subjects: u64,
}

/// The registry's counts (see the module documentation).
#[derive(Debug, Default)]
pub struct RegistryMetrics(Mutex<Option<RegistrySnapshot>>);

impl RegistryMetrics {
    fn with(&self, change: impl FnOnce(&mut RegistrySnapshot)) {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        change(guard.get_or_insert_with(RegistrySnapshot::default));
    }

    /// Counts one answered request.
    pub fn request(&self, method: &'static str, endpoint: &'static str, status: u16) {
        self.with(|s| *s.requests.entry((method, endpoint, status)).or_insert(0) += 1);
    }

    /// Sets the gauges (and marks the registry loaded).
    pub fn set_sizes(&self, schemas: usize, subjects: usize) {
        self.with(|s| {
            s.schemas = schemas as u64;
            s.subjects = subjects as u64;
        });
    }

    /// The counts now; `None` until the registry loaded.
    pub fn snapshot(&self) -> Option<RegistrySnapshot> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The method label: one of the API's methods, or `other` (bounded, I126).
pub fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accumulate_and_appear_once_loaded() {
        let metrics = RegistryMetrics::default();
        assert_eq!(metrics.snapshot(), None);
        metrics.set_sizes(3, 2);
        metrics.request("GET", "/subjects", 200);
        metrics.request("GET", "/subjects", 200);
        metrics.request(method_label("BREW"), "other", 404);
        let snapshot = metrics.snapshot().expect("loaded");
        assert_eq!((snapshot.schemas, snapshot.subjects), (3, 2));
        assert_eq!(snapshot.requests[&("GET", "/subjects", 200)], 2);
        assert_eq!(snapshot.requests[&("other", "other", 404)], 1);
    }
}
