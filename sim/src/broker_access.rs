//! How the simulated clients reach the broker: its address, a connection (retried while the
//! broker starts), and the topics every run keeps. Shared by the workload and the group
//! members (`groups`), which both depend on it and not on each other's modules.

use std::net::SocketAddr;
use std::time::Duration;

use minikafka_backend_sim::{SimBackend, SimStream};
use minikafka_client::{Connection, ConnectionConfig};
use minikafka_core::backend::Backend;

use crate::model::TopicPartition;

/// A topic the workload keeps: name, partition count, configuration overrides.
pub type TopicSpec = (&'static str, i32, &'static [(&'static str, &'static str)]);

/// The topics every run keeps, with their partition counts and configuration overrides.
/// `logs` is under retention (small segments, few bytes kept): its old segments go.
pub const TOPICS: [TopicSpec; 3] = [
    ("events", 2, &[]),
    ("orders", 3, &[]),
    (
        RETAINED_TOPIC,
        2,
        &[("segment.bytes", "1024"), ("retention.bytes", "2048")],
    ),
];

/// The topic only transactional producers write (`txns`), created when a run has them
/// (`SimOptions::txn_producers`), so runs without them keep their schedules.
pub const TXN_TOPIC: TopicSpec = ("txns", 3, &[]);

/// The partitions of [`TXN_TOPIC`].
pub(crate) fn txn_partitions() -> Vec<TopicPartition> {
    (0..TXN_TOPIC.1)
        .map(|p| (TXN_TOPIC.0.to_string(), p))
        .collect()
}

/// The topic under retention.
pub const RETAINED_TOPIC: &str = "logs";

/// The address the simulated broker listens on.
fn broker_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9092))
}

/// A connection to the broker, retried for a while; `None` when it stays unreachable.
pub(crate) async fn connect(backend: &SimBackend) -> Option<Connection<SimStream>> {
    for _ in 0..50 {
        if let Ok(stream) = backend.connect(broker_addr()).await {
            let config = ConnectionConfig {
                client_id: "mk-sim".into(),
                ..ConnectionConfig::default()
            };
            if let Ok(conn) = Connection::connect(stream, config).await {
                return Some(conn);
            }
        }
        backend.sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Every partition of [`TOPICS`].
pub(crate) fn all_partitions() -> Vec<TopicPartition> {
    TOPICS
        .iter()
        .flat_map(|(t, n, _)| (0..*n).map(move |p| (t.to_string(), p)))
        .collect()
}

/// The partitions the groups divide among their members.
pub(crate) fn group_partitions() -> Vec<TopicPartition> {
    all_partitions()
}
